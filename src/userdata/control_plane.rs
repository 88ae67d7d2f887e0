//! One user-data for every control-plane machine: `kubestrap.initNode` names the node that
//! initializes (matched against this node's name); every other one joins it as a control plane,
//! downloading the shared CAs with `certificateKey`. The init node's plan also carries the same
//! control-plane join, so that boot can join instead when a cluster already answers at the
//! endpoint (never two clusters).

use super::init_plan::init_plan;
use super::join_plan::join_configuration;
use super::overrides::{Overrides, node_name};
use super::{NodePlan, Notices, PlanInput, PlanRequest};
use crate::config::types::{BootstrapTokenDiscovery, InitConfiguration, JoinConfiguration, JoinControlPlane};
use crate::config::values::is_dns1123_subdomain;
use crate::config::{ConfigError, Documents};
use crate::constants::KUBEADM_API_VERSION;

/// The plan of a machine whose role is control-plane: init, or (with `initNode` naming another
/// node) a control-plane join.
pub(super) fn plan(req: PlanRequest, notices: &mut Notices) -> Result<NodePlan, ConfigError> {
    let PlanRequest { input: inp, mut docs } = req;
    let PlanInput { src, sh, ov, upload_certs, .. } = inp;
    let key = certificate_key(src, &mut docs, ov)?;
    let join = match &sh.init_node {
        None => {
            if docs.join.as_ref().is_some_and(|j| j.control_plane.is_none()) {
                return Err(ConfigError::file(
                    src,
                    "holds both InitConfiguration/ClusterConfiguration and JoinConfiguration; a node either inits or \
                     joins: keep one, or set kubestrap.initNode to say which node inits"
                        .into(),
                ));
            }
            // Every machine given this user-data inits; the never-two-clusters check at boot joins
            // a cluster found at the endpoint instead, when the user-data says how (token, pins, key).
            // Only a try: its errors and notices are not this node's.
            join_config(inp, &docs, key.as_deref(), &mut Notices::default()).ok()
        }
        Some(init_node) => {
            if !is_dns1123_subdomain(init_node) {
                return Err(ConfigError::doc(
                    src,
                    "kubestrap",
                    "initNode",
                    format!("{init_node:?} is not a node name (lowercase RFC 1123 subdomain)"),
                ));
            }
            let join = join_config(inp, &docs, key.as_deref(), notices)?;
            if this_node(inp, &docs)? != *init_node {
                return Ok(NodePlan::Join { join });
            }
            Some(join)
        }
    };
    docs.join = None;
    let docs = init_plan(PlanRequest { input: inp, docs }, notices)?;
    // The certificate key given, the init node uploads the shared certificates sealed with it.
    let plan = NodePlan::Init { docs, upload_certs: upload_certs || key.is_some(), join_existing: join.map(Box::new) };
    Ok(plan)
}

/// The certificate key: the shorthand's or credential's (put into the InitConfiguration, which
/// must not say otherwise), else the InitConfiguration's own.
fn certificate_key(src: &str, docs: &mut Documents, ov: &Overrides) -> Result<Option<String>, ConfigError> {
    let init = docs.init.get_or_insert_with(|| InitConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "InitConfiguration".into(),
        ..Default::default()
    });
    match &ov.certificate_key {
        None => Ok(Some(init.certificate_key.clone()).filter(|k| !k.is_empty())),
        Some(k) if init.certificate_key.is_empty() || init.certificate_key == *k => {
            init.certificate_key = k.clone();
            Ok(Some(k.clone()))
        }
        Some(_) => Err(ConfigError::doc(
            src,
            "kubestrap",
            "certificateKey",
            "disagrees with InitConfiguration.certificateKey in kubestrap.kubeadm (values hidden); set it in one place"
                .into(),
        )),
    }
}

/// This node's name as init would resolve it: the shorthand or InitConfiguration, else
/// meta-data's local-hostname, else the machine's hostname as gathered (lowercased).
fn this_node(inp: PlanInput, docs: &Documents) -> Result<String, ConfigError> {
    let PlanInput { src, sh, machine, .. } = inp;
    let mut name = sh
        .node_name
        .clone()
        .or_else(|| docs.init.as_ref().map(|i| i.node_registration.name.clone()))
        .unwrap_or_default();
    node_name(src, &mut name, machine, "InitConfiguration")?;
    if name.is_empty() {
        name = machine.hostname.to_lowercase();
    }
    Ok(name)
}

/// The control-plane JoinConfiguration every non-init machine runs: discovery at the
/// controlPlaneEndpoint with the shared token and pins, `controlPlane.certificateKey`, and the
/// InitConfiguration's node registration and bind port (the advertise address in shared
/// user-data is the init node's, so a joining node uses its own).
fn join_config(
    inp: PlanInput,
    docs: &Documents,
    key: Option<&str>,
    notices: &mut Notices,
) -> Result<JoinConfiguration, ConfigError> {
    let PlanInput { src, sh, .. } = inp;
    let mut join = docs.join.clone().unwrap_or_else(|| JoinConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "JoinConfiguration".into(),
        ..Default::default()
    });
    let init = docs.init.clone().unwrap_or_default();
    if docs.join.is_none() {
        join.node_registration = init.node_registration.clone();
        join.node_registration.name.clear();
    }
    let cp = join.control_plane.get_or_insert_with(JoinControlPlane::default);
    if cp.local_api_endpoint.bind_port.is_none() {
        cp.local_api_endpoint.bind_port = init.local_api_endpoint.bind_port;
    }
    if let Some(k) = key {
        cp.certificate_key = k.to_string();
    }
    if cp.certificate_key.is_empty() {
        return Err(ConfigError::doc(
            src,
            "kubestrap",
            "certificateKey",
            "is missing: the other control planes download the shared CAs and keys with it \
             (`kubestrap certs certificate-key` makes one; or pass the kubestrap.certificate-key credential)"
                .into(),
        ));
    }
    if join.discovery.file.is_none() {
        let endpoint = sh
            .control_plane_endpoint
            .clone()
            .or_else(|| docs.cluster.as_ref().map(|c| c.control_plane_endpoint.clone()))
            .filter(|e| !e.is_empty());
        let bt = join.discovery.bootstrap_token.get_or_insert_with(BootstrapTokenDiscovery::default);
        if bt.api_server_endpoint.is_empty() {
            bt.api_server_endpoint = endpoint.ok_or_else(|| {
                ConfigError::doc(
                    src,
                    "kubestrap",
                    "controlPlaneEndpoint",
                    "is missing: every control plane finds the cluster there (a load balancer or DNS name for all \
                     control-plane nodes)"
                        .into(),
                )
            })?;
        }
        if bt.token.is_empty()
            && let Some(t) = init.bootstrap_tokens.first().map(|t| t.token.clone()).filter(|t| !t.is_empty())
        {
            bt.token = t;
        }
    }
    // The shorthand's token, pins and node name are merged (and checked) as for a worker.
    let docs = Documents { join: Some(join), ..Documents::default() };
    join_configuration(PlanRequest { input: PlanInput { shorthand: true, ..inp }, docs }, notices)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{NodePlan, plan_detailed};

    fn key() -> String {
        "0f".repeat(32)
    }

    /// The same user-data for every control-plane machine.
    fn shared(extra: &str) -> String {
        format!(
            "#cloud-config\nkubestrap:\n  role: control-plane\n  initNode: cp-1\n  token: {TOKEN}\n  \
             controlPlaneEndpoint: lb.example:6443\n  caCertHashes: [{HASH}]\n  certificateKey: '{}'\n  \
             podSubnet: 10.244.0.0/16\n{extra}",
            key()
        )
    }

    fn on(node: &str, ud: &str) -> super::super::Planned {
        let mut g = gathered(ud);
        g.meta.local_hostname = Some(node.into());
        plan_detailed(&g).unwrap()
    }

    #[test]
    fn init_node_inits_and_uploads_the_others_join_as_control_planes() {
        let p = on("cp-1", &shared(""));
        let NodePlan::Init { docs, upload_certs, join_existing } = p.plan else { panic!("cp-1 inits: {:?}", p.plan) };
        assert!(upload_certs);
        assert_eq!(docs.init.as_ref().unwrap().certificate_key, key());
        assert_eq!(docs.cluster.as_ref().unwrap().networking.pod_subnet, "10.244.0.0/16");
        // What it would join, were a cluster already there: what the others join, under its name.
        let mut existing = *join_existing.unwrap();
        assert_eq!(existing.node_registration.name, "cp-1");

        for node in ["cp-2", "cp-3"] {
            let p = on(node, &shared(""));
            assert!(p.notices.is_empty(), "the cluster keys are the init node's, not ignored: {:?}", p.notices);
            let NodePlan::Join { join } = p.plan else { panic!("{node} joins") };
            assert_eq!(join.node_registration.name, node);
            let cp = join.control_plane.unwrap();
            assert_eq!(
                (cp.certificate_key.as_str(), cp.local_api_endpoint.advertise_address.as_str()),
                (key().as_str(), "")
            );
            let bt = join.discovery.bootstrap_token.unwrap();
            assert_eq!(
                (bt.token.as_str(), bt.api_server_endpoint.as_str(), bt.ca_cert_hashes.as_slice()),
                (TOKEN, "lb.example:6443", [HASH.to_string()].as_slice())
            );
            existing.node_registration.name = node.into();
            let NodePlan::Join { join } = on(node, &shared("")).plan else { unreachable!() };
            assert_eq!(join, existing);
        }
    }

    #[test]
    fn shared_user_data_needs_key_endpoint_and_a_valid_init_node() {
        let no_key = shared("").replace(&format!("  certificateKey: '{}'\n", key()), "");
        let mut g = gathered(&no_key);
        g.meta.local_hostname = Some("cp-2".into());
        let e = plan_detailed(&g).unwrap_err().to_string();
        assert!(e.contains("certificateKey: is missing"), "{e}");
        g.meta.local_hostname = Some("cp-1".into());
        assert!(plan_detailed(&g).unwrap_err().to_string().contains("certificateKey: is missing"));

        let no_ep = shared("").replace("  controlPlaneEndpoint: lb.example:6443\n", "");
        let e = plan_detailed(&gathered(&no_ep)).unwrap_err().to_string();
        assert!(e.contains("controlPlaneEndpoint: is missing"), "{e}");

        let e = plan_detailed(&gathered(&shared("").replace("initNode: cp-1", "initNode: CP_1"))).unwrap_err();
        assert!(e.to_string().contains("initNode") && e.to_string().contains("CP_1"), "{e}");
        let e = plan_detailed(&gathered(&shared("").replace(&key(), "abc"))).unwrap_err().to_string();
        assert!(e.contains("certificateKey") && !e.contains("abc"), "{e}");
        let e = plan_detailed(&gathered(&shared("").replace("role: control-plane", "role: worker"))).unwrap_err();
        assert!(e.to_string().contains("is worker but"), "{e}");
    }

    #[test]
    fn the_credential_key_wins_and_embedded_documents_carry_over() {
        let ud = shared(
            "  kubeadm:\n  - apiVersion: kubeadm.k8s.io/v1beta4\n    kind: InitConfiguration\n    \
             localAPIEndpoint: {advertiseAddress: 10.0.0.11, bindPort: 6444}\n    \
             nodeRegistration: {criSocket: 'unix:///run/crio/crio.sock'}\n",
        );
        let mut g = gathered(&ud);
        g.meta.local_hostname = Some("cp-2".into());
        let other = "1e".repeat(32);
        g.credentials.insert(crate::datasource::CRED_CERTIFICATE_KEY.into(), other.clone().into_bytes());
        let p = plan_detailed(&g).unwrap();
        assert!(p.notices.iter().any(|n| n.contains("overrides kubestrap.certificateKey")), "{:?}", p.notices);
        let NodePlan::Join { join } = p.plan else { panic!("cp-2 joins") };
        assert_eq!(join.node_registration.cri_socket, "unix:///run/crio/crio.sock");
        let cp = join.control_plane.unwrap();
        // The init node's bind port carries over; its address does not (each node has its own).
        assert_eq!((cp.certificate_key, cp.local_api_endpoint.bind_port), (other, Some(6444)));
        assert_eq!(cp.local_api_endpoint.advertise_address, "");
    }

    /// A slow fleet's timeouts, given once for each role in the shared user-data (the VM suite's
    /// ha-control-plane does this under TCG), reach the init node and the joining ones.
    #[test]
    fn timeouts_embedded_for_both_roles_reach_the_init_and_the_joins() {
        let t = "{controlPlaneComponentHealthCheck: 10m0s, kubernetesAPICall: 5m0s}";
        let ud = shared(&format!(
            "  kubeadm: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: InitConfiguration\n    timeouts: {t}\n    \
             ---\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: JoinConfiguration\n    timeouts: {t}\n"
        ));
        let NodePlan::Init { docs, .. } = on("cp-1", &ud).plan else { panic!("cp-1 inits") };
        let ti = docs.init.unwrap().timeouts.unwrap();
        assert_eq!(ti.control_plane_component_health_check.as_deref(), Some("10m0s"));
        let NodePlan::Join { join } = on("cp-2", &ud).plan else { panic!("cp-2 joins") };
        let tj = join.timeouts.unwrap();
        assert_eq!(
            (tj.control_plane_component_health_check.as_deref(), tj.kubernetes_api_call.as_deref()),
            (Some("10m0s"), Some("5m0s"))
        );
    }

    #[test]
    fn without_init_node_every_machine_inits_and_knows_how_to_join_instead() {
        let ud = shared("").replace("  initNode: cp-1\n", "");
        let NodePlan::Init { join_existing, upload_certs, .. } = on("cp-2", &ud).plan else { panic!("inits") };
        assert!(upload_certs && join_existing.is_some());
        // Without a key there is nothing to join with: boot will refuse a live cluster instead.
        let ud = ud.replace(&format!("  certificateKey: '{}'\n", key()), "");
        let NodePlan::Init { join_existing, upload_certs, .. } = on("cp-2", &ud).plan else { panic!("inits") };
        assert!(!upload_certs && join_existing.is_none());
    }

    #[test]
    fn notices_from_the_join_and_init_steps_reach_the_operator() {
        use crate::datasource::{CRED_CA_CERT_HASH, CRED_TOKEN};
        let ud = shared(&format!(
            "  kubeadm:\n  - apiVersion: kubeadm.k8s.io/v1beta4\n    kind: InitConfiguration\n    \
             bootstrapTokens: [{{token: {TOKEN}}}]\n"
        ));
        let notices = |node: &str| {
            let mut g = gathered(&ud);
            g.meta.local_hostname = Some(node.into());
            g.credentials.insert(CRED_CA_CERT_HASH.into(), HASH2.as_bytes().to_vec());
            g.credentials.insert(CRED_TOKEN.into(), TOKEN2.as_bytes().to_vec());
            plan_detailed(&g).unwrap().notices
        };
        // Both machines plan the control-plane join; only the init node plans init too.
        for node in ["cp-1", "cp-2"] {
            let n = notices(node);
            assert!(n.iter().any(|n| n.contains("replaces the caCertHashes")), "{node}: {n:?}");
            assert!(n.iter().any(|n| n.contains("replaces discovery.bootstrapToken.token")), "{node}: {n:?}");
            let init = n.iter().any(|n| n.contains("replaces bootstrapTokens[0].token"));
            assert_eq!(init, node == "cp-1", "{node}: {n:?}");
        }
    }

    #[test]
    fn the_plan_file_keeps_the_decision_inputs() {
        let p = on("cp-1", &shared("")).plan;
        let text = p.to_yaml().unwrap();
        assert!(text.contains("upload_certs: true") && text.contains("join_existing:"), "{text}");
        assert_eq!(NodePlan::from_yaml(text.as_bytes()).unwrap(), p);
    }
}
