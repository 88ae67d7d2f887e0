//! Worker: the shorthand and the overrides merged into a JoinConfiguration, then checked for what
//! a worker cannot join without (token, endpoint, CA pin), naming each field the way the user
//! wrote it: the shorthand key or the kubeadm path.

use super::cloud_config::not_for;
use super::overrides::{node_name, set_field};
use super::{NodePlan, Notices, PlanInput, PlanRequest};
use crate::config::ConfigError;
use crate::config::types::{BootstrapTokenDiscovery, Discovery, JoinConfiguration};
use crate::config::values::{CertificateKey, TOKEN_FORMAT_HIDDEN, Token};
use crate::constants::KUBEADM_API_VERSION;
use crate::datasource::CRED_CA_CERT_HASH;

/// The plan of a joining machine: a worker, or a control plane when the JoinConfiguration has
/// `controlPlane`.
pub(super) fn join_plan(req: PlanRequest, notices: &mut Notices) -> Result<NodePlan, ConfigError> {
    Ok(NodePlan::Join { join: join_configuration(req, notices)? })
}

/// [`join_plan`]'s JoinConfiguration; a control-plane join's too (see `control_plane`).
pub(super) fn join_configuration(req: PlanRequest, notices: &mut Notices) -> Result<JoinConfiguration, ConfigError> {
    let PlanRequest { input: inp, mut docs } = req;
    let PlanInput { src, sh, ov, machine, shorthand, .. } = inp;
    let mut join = docs.join.take().unwrap_or_else(|| JoinConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "JoinConfiguration".into(),
        ..Default::default()
    });
    if docs.kubelet.is_some() || docs.kube_proxy.is_some() {
        notices.push(format!(
            "{src}: KubeletConfiguration/KubeProxyConfiguration ignored on a joining node: it takes the cluster's kubelet-config"
        ));
    }
    // On a control plane joining from shared user-data, the cluster keys are the init node's.
    let worker = join.control_plane.is_none();
    not_for(
        "worker",
        &[
            ("kubernetesVersion", sh.kubernetes_version.is_some()),
            ("podSubnet", sh.pod_subnet.is_some()),
            ("serviceSubnet", sh.service_subnet.is_some()),
            ("certSANs", !sh.cert_sans.is_empty()),
            ("advertiseAddress", sh.advertise_address.is_some()),
        ]
        .map(|(k, set)| (k, set && worker)),
        src,
        notices,
    );
    set_field(src, "nodeName", &sh.node_name, &mut join.node_registration.name, "nodeRegistration.name")?;
    let d = &mut join.discovery;
    let shorthand_discovery = sh.control_plane_endpoint.is_some() || !sh.ca_cert_hashes.is_empty();
    if d.file.is_none() && (d.bootstrap_token.is_some() || ov.token.is_some() || shorthand_discovery) {
        merge_token_discovery(inp, d, notices)?;
    } else if let Some(t) = &ov.token {
        // File discovery: the token is the TLS bootstrap token.
        d.tls_bootstrap_token = t.clone();
        if ov.ca_hashes.is_some() {
            notices.push(format!("credential {CRED_CA_CERT_HASH} ignored: discovery is by file"));
        }
    }
    node_name(src, &mut join.node_registration.name, machine, "JoinConfiguration")?;
    validate_join(src, &join, shorthand)?;
    Ok(join)
}

/// Token discovery: the shorthand's endpoint and CA hashes, then the credentials' hashes and
/// token, merged into discovery.bootstrapToken.
fn merge_token_discovery(inp: PlanInput, d: &mut Discovery, notices: &mut Notices) -> Result<(), ConfigError> {
    let PlanInput { src, sh, ov, .. } = inp;
    let bt = d.bootstrap_token.get_or_insert_with(BootstrapTokenDiscovery::default);
    set_field(
        src,
        "controlPlaneEndpoint",
        &sh.control_plane_endpoint,
        &mut bt.api_server_endpoint,
        "discovery.bootstrapToken.apiServerEndpoint",
    )?;
    if !sh.ca_cert_hashes.is_empty() {
        if !bt.ca_cert_hashes.is_empty() && bt.ca_cert_hashes != sh.ca_cert_hashes {
            return Err(ConfigError::doc(
                src,
                "kubestrap",
                "caCertHashes",
                "disagrees with discovery.bootstrapToken.caCertHashes in kubestrap.kubeadm; set it in one place".into(),
            ));
        }
        bt.ca_cert_hashes = sh.ca_cert_hashes.clone();
    }
    if let Some(h) = &ov.ca_hashes {
        if !bt.ca_cert_hashes.is_empty() && bt.ca_cert_hashes != *h {
            notices.push(format!("credential {CRED_CA_CERT_HASH} replaces the caCertHashes from the user-data"));
        }
        bt.ca_cert_hashes = h.clone();
    }
    if let Some(t) = &ov.token {
        if !bt.token.is_empty() && bt.token != *t {
            if !ov.token_from_credential {
                return Err(ConfigError::doc(
                    src,
                    "kubestrap",
                    "token",
                    "disagrees with discovery.bootstrapToken.token in kubestrap.kubeadm (values hidden); set it in one place"
                        .into(),
                ));
            }
            notices.push(format!("{}: replaces discovery.bootstrapToken.token", ov.token_origin));
        }
        bt.token = t.clone();
        if !d.tls_bootstrap_token.is_empty() {
            d.tls_bootstrap_token = t.clone();
        }
    }
    Ok(())
}

/// Refuses what the join phases could not run with, here at gather time, where the error can
/// still name the user-data field rather than a join phase.
fn validate_join(src: &str, join: &JoinConfiguration, shorthand: bool) -> Result<(), ConfigError> {
    let d = &join.discovery;
    let doc = if shorthand { "kubestrap" } else { "JoinConfiguration" };
    // Name the field the way the user wrote it: the shorthand key or the kubeadm path.
    let hint = |short: &str, long: &str| if shorthand { short.to_string() } else { long.to_string() };
    if let Some(cp) = &join.control_plane
        && !cp.certificate_key.is_empty()
    {
        CertificateKey::parse(&cp.certificate_key).map_err(|e| {
            ConfigError::doc(src, doc, &hint("certificateKey", "controlPlane.certificateKey"), e.to_string())
        })?;
    }
    match (&d.bootstrap_token, &d.file) {
        (None, None) => Err(ConfigError::doc(
            src,
            doc,
            &hint("token", "discovery"),
            "is missing: a worker needs a bootstrap token and the control plane's endpoint and CA hash \
             (or file discovery); the token may also come as the kubestrap.token credential"
                .into(),
        )),
        (Some(_), Some(_)) => {
            Err(ConfigError::doc(src, doc, "discovery", "set either bootstrapToken or file, not both".into()))
        }
        (None, Some(_)) => Ok(()),
        (Some(bt), None) => {
            if bt.token.is_empty() {
                return Err(ConfigError::doc(
                    src,
                    doc,
                    &hint("token", "discovery.bootstrapToken.token"),
                    "is missing; pass it in the user-data or as the kubestrap.token credential".into(),
                ));
            }
            if Token::parse(&bt.token).is_err() {
                return Err(ConfigError::doc(
                    src,
                    doc,
                    &hint("token", "discovery.bootstrapToken.token"),
                    TOKEN_FORMAT_HIDDEN.into(),
                ));
            }
            if bt.api_server_endpoint.is_empty() {
                return Err(ConfigError::doc(
                    src,
                    doc,
                    &hint("controlPlaneEndpoint", "discovery.bootstrapToken.apiServerEndpoint"),
                    "is missing: the worker needs the API server's host:port".into(),
                ));
            }
            if bt.ca_cert_hashes.is_empty() && !bt.unsafe_skip_ca_verification {
                return Err(ConfigError::doc(
                    src,
                    doc,
                    &hint("caCertHashes", "discovery.bootstrapToken.caCertHashes"),
                    "is empty: pin the cluster CA (`kubestrap certs ca-hash` on the control plane prints it), \
                     here or as the kubestrap.ca-cert-hash credential"
                        .into(),
                ));
            }
            for (i, h) in bt.ca_cert_hashes.iter().enumerate() {
                crate::discovery::CaPin::parse(h).map_err(|m| {
                    ConfigError::doc(
                        src,
                        doc,
                        &format!("{}[{i}]", hint("caCertHashes", "discovery.bootstrapToken.caCertHashes")),
                        m.to_string(),
                    )
                })?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use crate::constants::KUBEADM_API_VERSION;
    use crate::userdata::plan_detailed;

    #[test]
    fn userdata_kubeadm_join_document_is_join() {
        let j = join_of(plan_detailed(&gathered(&kubeadm_join())).unwrap());
        let bt = j.discovery.bootstrap_token.unwrap();
        assert_eq!((bt.token.as_str(), bt.api_server_endpoint.as_str()), (TOKEN, "10.0.0.10:6443"));
        assert_eq!(bt.ca_cert_hashes, vec![HASH.to_string()]);
    }

    #[test]
    fn userdata_cloud_config_worker_builds_join_configuration() {
        let mut g = gathered(&worker_cloud_config());
        g.meta.local_hostname = Some("Worker-1.Example.internal".into());
        let j = join_of(plan_detailed(&g).unwrap());
        assert_eq!(j.api_version, KUBEADM_API_VERSION);
        assert_eq!(j.kind, "JoinConfiguration");
        assert_eq!(j.node_registration.name, "worker-1.example.internal");
        let bt = j.discovery.bootstrap_token.unwrap();
        assert_eq!(bt.token, TOKEN);
        assert_eq!(bt.api_server_endpoint, "10.0.0.10:6443");
        assert_eq!(bt.ca_cert_hashes, vec![HASH.to_string()]);
    }

    #[test]
    fn userdata_worker_needs_token_and_ca_pin() {
        let ud =
            format!("#cloud-config\nkubestrap:\n  role: worker\n  token: {TOKEN}\n  controlPlaneEndpoint: cp:6443\n");
        let e = plan_detailed(&gathered(&ud)).unwrap_err().to_string();
        assert!(e.contains("caCertHashes: is empty"), "{e}");
        let ud =
            "#cloud-config\nkubestrap:\n  role: worker\n  controlPlaneEndpoint: cp:6443\n  caCertHashes: [sha256:00]\n";
        let e = plan_detailed(&gathered(ud)).unwrap_err().to_string();
        assert!(e.contains("token: is missing"), "{e}");
    }
}
