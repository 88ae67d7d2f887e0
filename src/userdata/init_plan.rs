//! Control plane: the shorthand and the overrides merged into kubeadm's InitConfiguration and
//! ClusterConfiguration. The result is the typed documents `resolve_init` takes, exactly what
//! `kubestrap init --config` would have loaded from the equivalent file; defaults and validation
//! are left to `resolve_init`, so both paths apply the same rules.

use super::overrides::{node_name, set_field};
use super::{Notices, PlanInput, PlanRequest};
use crate::config::types::{BootstrapToken, ClusterConfiguration, InitConfiguration};
use crate::config::{ConfigError, Documents};
use crate::constants::KUBEADM_API_VERSION;

/// The init documents: the request's, with the shorthand and overrides merged in.
pub(super) fn init_plan(req: PlanRequest, notices: &mut Notices) -> Result<Documents, ConfigError> {
    let PlanRequest { input: inp, mut docs } = req;
    let PlanInput { src, sh, machine, .. } = inp;
    let mut init = docs.init.take().unwrap_or_else(|| InitConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "InitConfiguration".into(),
        ..Default::default()
    });
    let wants_cluster = sh.kubernetes_version.is_some()
        || sh.control_plane_endpoint.is_some()
        || sh.pod_subnet.is_some()
        || sh.service_subnet.is_some()
        || !sh.cert_sans.is_empty();
    let mut cluster = docs.cluster.take();
    if wants_cluster && cluster.is_none() {
        cluster = Some(ClusterConfiguration {
            api_version: KUBEADM_API_VERSION.into(),
            kind: "ClusterConfiguration".into(),
            ..Default::default()
        });
    }
    set_field(src, "nodeName", &sh.node_name, &mut init.node_registration.name, "nodeRegistration.name")?;
    set_field(
        src,
        "advertiseAddress",
        &sh.advertise_address,
        &mut init.local_api_endpoint.advertise_address,
        "localAPIEndpoint.advertiseAddress",
    )?;
    if let Some(c) = cluster.as_mut() {
        set_cluster_fields(inp, c)?;
    }
    merge_token(inp, &mut init, notices)?;
    node_name(src, &mut init.node_registration.name, machine, "InitConfiguration")?;

    // Built afresh so the plan holds only what init reads: no JoinConfiguration (the caller has
    // refused one), no warnings (already handed to the operator as notices).
    let docs = Documents {
        init: Some(init),
        cluster,
        kubelet: docs.kubelet,
        kube_proxy: docs.kube_proxy,
        join: None,
        upgrade: None,
        warnings: Vec::new(),
        ignored_kinds: Vec::new(),
    };
    Ok(docs)
}

/// The shorthand's cluster keys, set in the ClusterConfiguration.
fn set_cluster_fields(inp: PlanInput, c: &mut ClusterConfiguration) -> Result<(), ConfigError> {
    let PlanInput { src, sh, .. } = inp;
    set_field(src, "kubernetesVersion", &sh.kubernetes_version, &mut c.kubernetes_version, "kubernetesVersion")?;
    set_field(
        src,
        "controlPlaneEndpoint",
        &sh.control_plane_endpoint,
        &mut c.control_plane_endpoint,
        "controlPlaneEndpoint",
    )?;
    set_field(src, "podSubnet", &sh.pod_subnet, &mut c.networking.pod_subnet, "networking.podSubnet")?;
    set_field(src, "serviceSubnet", &sh.service_subnet, &mut c.networking.service_subnet, "networking.serviceSubnet")?;
    for san in &sh.cert_sans {
        if !c.api_server.cert_sans.contains(san) {
            c.api_server.cert_sans.push(san.clone());
        }
    }
    Ok(())
}

/// The effective token (credential over user-data) becomes the first bootstrap token.
fn merge_token(inp: PlanInput, init: &mut InitConfiguration, notices: &mut Notices) -> Result<(), ConfigError> {
    let PlanInput { src, ov, .. } = inp;
    let Some(t) = &ov.token else { return Ok(()) };
    match init.bootstrap_tokens.first_mut() {
        None => init.bootstrap_tokens.push(BootstrapToken { token: t.clone(), ..Default::default() }),
        Some(first) if first.token == *t => {}
        Some(_) if !ov.token_from_credential => {
            return Err(ConfigError::doc(
                src,
                "kubestrap",
                "token",
                "disagrees with bootstrapTokens[0].token in kubestrap.kubeadm (values hidden); set it in one place"
                    .into(),
            ));
        }
        Some(first) => {
            first.token = t.clone();
            notices.push(format!("{}: replaces bootstrapTokens[0].token", ov.token_origin));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_yaml::Value;

    use super::super::test_support::*;
    use crate::config::resolve_init;
    use crate::userdata::plan_detailed;

    #[test]
    fn userdata_kubeadm_init_documents_load_and_resolve() {
        let docs = init_docs(plan_detailed(&gathered(KUBEADM_INIT)).unwrap());
        assert_eq!(docs.cluster.as_ref().unwrap().networking.pod_subnet, "10.244.0.0/16");
        assert_eq!(docs.kubelet.as_ref().unwrap().get("maxPods").and_then(Value::as_u64), Some(50));
        let cfg = resolve_init("t", docs, &host()).unwrap();
        assert_eq!(cfg.advertise_address.to_string(), "10.0.0.10");
        assert_eq!(cfg.node_name, "fallback");
    }

    #[test]
    fn userdata_cloud_config_control_plane_generates_loadable_documents() {
        let p = plan_detailed(&gathered(&cp_cloud_config())).unwrap();
        assert!(p.notices.is_empty(), "{:?}", p.notices);
        let docs = init_docs(p);
        let init = docs.init.as_ref().unwrap();
        assert_eq!(init.bootstrap_tokens[0].token, TOKEN);
        assert_eq!(init.local_api_endpoint.advertise_address, "10.0.0.10");
        let c = docs.cluster.as_ref().unwrap();
        assert_eq!(c.kubernetes_version, "v1.36.2");
        assert_eq!(c.control_plane_endpoint, "api.example.com:6443");
        assert_eq!(c.networking.service_subnet, "10.96.0.0/12");
        assert_eq!(c.api_server.cert_sans, vec!["api.example.com".to_string()]);
        let cfg = resolve_init("t", docs, &host()).unwrap();
        assert_eq!(cfg.endpoint.host, "api.example.com");
        assert_eq!(cfg.version.image_tag(), "v1.36.2");
    }

    #[test]
    fn userdata_init_plan_keeps_only_what_init_reads() {
        // An ignored document's warning is a notice once, not again when the plan is resolved.
        let ud = format!("{KUBEADM_INIT}---\napiVersion: example.com/v1\nkind: Other\n");
        let p = plan_detailed(&gathered(&ud)).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("Kind=Other")), "{:?}", p.notices);
        let docs = init_docs(p);
        assert!(docs.warnings.is_empty() && docs.join.is_none(), "{docs:?}");
    }
}
