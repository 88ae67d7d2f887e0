//! `#cloud-config` user-data in its two forms: the strict `kubestrap:` mapping (the shorthand,
//! with kubeadm documents optionally embedded under `kubestrap.kubeadm`, and a notice for every
//! other top-level key, because then kubestrap runs none of them), or cloud-config that runs
//! `kubeadm init|join` from runcmd (see `cloud_init`).

use serde::Deserialize;
use serde_yaml::{Mapping, Value};

use super::cloud_init;
use super::decode::{private_key_line, refuse_private_keys};
use super::{Notices, Parsed, Shape};
use crate::config::{ConfigError, Documents, parse_documents};

/// The `kubestrap:` mapping of `#cloud-config` user-data. Unknown keys are errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct Shorthand {
    pub role: Option<String>,
    /// A Value so that a wrongly typed token is never echoed by a decode error.
    pub token: Option<Value>,
    pub control_plane_endpoint: Option<String>,
    #[serde(default)]
    pub ca_cert_hashes: Vec<String>,
    pub node_name: Option<String>,
    pub kubernetes_version: Option<String>,
    pub pod_subnet: Option<String>,
    pub service_subnet: Option<String>,
    #[serde(default, rename = "certSANs")]
    pub cert_sans: Vec<String>,
    pub advertise_address: Option<String>,
    /// Embedded kubeadm config: a string of YAML documents, one document, or a list of them.
    pub kubeadm: Option<Value>,
    #[serde(default)]
    pub allow_private_keys: bool,
    /// Control plane: the node that initializes; every other one joins it as a control plane.
    pub init_node: Option<String>,
    /// Control plane: seals the shared CAs and keys in kubeadm-certs (a Value, so a wrongly typed
    /// key is never echoed by a decode error).
    pub certificate_key: Option<Value>,
}

/// Parses `#cloud-config`: the kubestrap mapping (strict) with a notice for every other
/// top-level key (a [`Shape::Shorthand`]), or else a runcmd that runs kubeadm (a
/// [`Shape::Kubeadm`]).
pub(super) fn read(src: &str, text: &str, from_credential: bool, notices: &mut Notices) -> Result<Parsed, ConfigError> {
    let top: Value = serde_yaml::from_str(text).map_err(|e| ConfigError::file(src, format!("#cloud-config: {e}")))?;
    let top = match top {
        Value::Mapping(m) => m,
        Value::Null => Mapping::new(),
        _ => return Err(ConfigError::file(src, "#cloud-config is not a YAML mapping".into())),
    };
    let ks = top.get("kubestrap").cloned();
    if ks.is_none() {
        // What kubeadm would run: the keys sit in write_files because the user-data says to write
        // them there (Cluster API's CA and service-account keys).
        if let Some(parsed) = cloud_init::read(src, &top, notices)? {
            if !from_credential && private_key_line(text).is_some() {
                notices.push(format!(
                    "{src}: carries private keys for write_files (as Cluster API's user-data does); anything that can \
                     read the user-data can read them"
                ));
            }
            return Ok(parsed);
        }
    }
    // The opt-in is read leniently because the refusal comes before the strict decode: user-data
    // carrying a key is refused as such, whatever else is wrong with it.
    let allowed = ks.as_ref().and_then(|k| k.get("allowPrivateKeys")).and_then(Value::as_bool).unwrap_or(false);
    refuse_private_keys(src, text, from_credential, allowed)?;
    for k in top.keys() {
        match k.as_str() {
            Some("kubestrap") => {}
            Some(name) => {
                notices.push(format!("{src}: cloud-config key {name:?} ignored: kubestrap reads only kubestrap:"))
            }
            None => notices.push(format!("{src}: non-string cloud-config key ignored")),
        }
    }
    // `kubestrap:` with nothing after it is an empty mapping, so the error is about the role.
    let ks = match ks {
        Some(Value::Null) => Some(Value::Mapping(Mapping::new())),
        other => other,
    };
    let Some(ks) = ks else {
        return Err(ConfigError::file(
            src,
            "is #cloud-config without a kubestrap: key or a runcmd that runs kubeadm init/join; kubestrap needs one of them (see docs/user-data.md)".into(),
        ));
    };
    let sh: Shorthand = serde_path_to_error::deserialize(ks).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        ConfigError::doc(src, "kubestrap", &path, e.inner().to_string())
    })?;
    if sh.allow_private_keys && private_key_line(text).is_some() {
        notices.push(format!("{src}: carries a private key, accepted because kubestrap.allowPrivateKeys is true"));
    }
    let docs = match &sh.kubeadm {
        None => Documents::default(),
        Some(v) => {
            let embedded = embedded_text(src, v)?;
            parse_documents(&format!("{src}: kubestrap.kubeadm"), &embedded)?
        }
    };
    Ok(Parsed { docs, shape: Shape::Shorthand(sh) })
}

/// The embedded documents as one YAML text, so they go through the same strict loader (and give
/// the same errors) as a kubeadm config file.
fn embedded_text(src: &str, v: &Value) -> Result<String, ConfigError> {
    let ser =
        |d: &Value| serde_yaml::to_string(d).map_err(|e| ConfigError::doc(src, "kubestrap", "kubeadm", e.to_string()));
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Mapping(_) => ser(v),
        Value::Sequence(items) => Ok(items.iter().map(ser).collect::<Result<Vec<_>, _>>()?.join("---\n")),
        _ => Err(ConfigError::doc(
            src,
            "kubestrap",
            "kubeadm",
            "must be a string of kubeadm YAML documents, one document, or a list of documents".into(),
        )),
    }
}

/// A notice per shorthand key that was set but means nothing for this role (e.g. `podSubnet` on
/// a worker): ignoring it silently would hide a user-data mix-up.
pub(super) fn not_for(role: &str, what: &[(&str, bool)], src: &str, notices: &mut Notices) {
    for (key, set) in what {
        if *set {
            notices.push(format!("{src}: kubestrap.{key} ignored: it does not apply to a {role}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::userdata::plan_detailed;

    #[test]
    fn userdata_ignored_cloud_config_keys_are_listed() {
        let ud = format!("{}packages: [vim]\nruncmd: [ls]\nwrite_files: []\n", worker_cloud_config());
        let p = plan_detailed(&gathered(&ud)).unwrap();
        for k in ["packages", "runcmd", "write_files"] {
            assert!(p.notices.iter().any(|n| n.contains(&format!("{k:?} ignored"))), "{k}: {:?}", p.notices);
        }
        let ud = format!("{}  podSubnet: 10.1.0.0/16\n", worker_cloud_config());
        let p = plan_detailed(&gathered(&ud)).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("kubestrap.podSubnet ignored")), "{:?}", p.notices);
    }

    #[test]
    fn userdata_unknown_kubestrap_key_is_an_error_naming_it() {
        let ud = format!("{}  podCidr: 10.1.0.0/16\n", cp_cloud_config());
        let e = plan_detailed(&gathered(&ud)).unwrap_err();
        assert_eq!(e.source, "user-data (nocloud)");
        assert!(e.to_string().contains("podCidr"), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\nkubestrap:\n  role: master\n")).unwrap_err();
        assert!(e.to_string().contains("role") && e.to_string().contains("\"master\""), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\nkubestrap: {token: abc}\n")).unwrap_err();
        assert!(e.to_string().contains("role: is missing"), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\nkubestrap:\n")).unwrap_err();
        assert!(e.to_string().contains("role: is missing"), "{e}");
        let e = plan_detailed(&gathered("#cloud-config\npackages: [vim]\n")).unwrap_err();
        assert!(e.to_string().contains("without a kubestrap: key"), "{e}");
    }

    #[test]
    fn userdata_embedded_kubeadm_string_and_documents() {
        let ud = String::from(
            "#cloud-config\nkubestrap:\n  role: control-plane\n  podSubnet: 10.244.0.0/16\n  kubeadm: |\n    \
             apiVersion: kubeadm.k8s.io/v1beta4\n    kind: ClusterConfiguration\n    clusterName: prod\n",
        );
        let docs = init_docs(plan_detailed(&gathered(&ud)).unwrap());
        let c = docs.cluster.unwrap();
        assert_eq!((c.cluster_name.as_str(), c.networking.pod_subnet.as_str()), ("prod", "10.244.0.0/16"));

        let ud = format!(
            "#cloud-config\nkubestrap:\n  token: {TOKEN}\n  kubeadm:\n  - apiVersion: kubeadm.k8s.io/v1beta4\n    \
             kind: JoinConfiguration\n    discovery:\n      bootstrapToken:\n        apiServerEndpoint: cp:6443\n        \
             unsafeSkipCAVerification: true\n"
        );
        let bt = join_of(plan_detailed(&gathered(&ud)).unwrap()).discovery.bootstrap_token.unwrap();
        assert_eq!((bt.token.as_str(), bt.api_server_endpoint.as_str()), (TOKEN, "cp:6443"));

        let ud = String::from(
            "#cloud-config\nkubestrap:\n  role: control-plane\n  podSubnet: 10.1.0.0/16\n  kubeadm:\n    \
             apiVersion: kubeadm.k8s.io/v1beta4\n    kind: ClusterConfiguration\n    networking: {podSubnet: 10.2.0.0/16}\n",
        );
        let e = plan_detailed(&gathered(&ud)).unwrap_err().to_string();
        assert!(e.contains("podSubnet") && e.contains("disagrees"), "{e}");

        let ud = "#cloud-config\nkubestrap:\n  role: worker\n  kubeadm: {apiVersion: kubeadm.k8s.io/v1beta4, kind: InitConfiguration}\n";
        assert!(plan_detailed(&gathered(ud)).unwrap_err().to_string().contains("is worker but"));
    }
}
