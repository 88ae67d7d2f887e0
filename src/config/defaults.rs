//! What `kubestrap config print init-defaults|join-defaults` and `config migrate` write: kubeadm
//! documents as kubeadm marshals them (keys sorted, `---` between documents).

use serde::Serialize;

use super::ConfigError;
use super::load::parse_documents;
use super::types::{
    ApiEndpoint, BootstrapToken, BootstrapTokenDiscovery, ClusterConfiguration, Discovery, Etcd, InitConfiguration,
    JoinConfiguration, LocalEtcd, Networking, NodeRegistrationOptions, Timeouts,
};
use crate::constants::*;

/// kubestrap's key algorithm (kubeadm's is RSA-2048): ECDSA keys are generated in microseconds,
/// which matters at first boot.
pub(crate) const DEFAULT_ENCRYPTION_ALGORITHM: &str = "ECDSA-P256";

/// kubeadm's PlaceholderToken: printed defaults must validate without creating a real secret.
pub(crate) const PLACEHOLDER_TOKEN: &str = "abcdef.0123456789abcdef";

/// kubeadm's SetDefaults_Timeouts.
pub(crate) fn default_timeouts() -> Timeouts {
    Timeouts {
        control_plane_component_health_check: Some("4m0s".into()),
        kubelet_health_check: Some("4m0s".into()),
        kubernetes_api_call: Some("1m0s".into()),
        etcd_api_call: Some("2m0s".into()),
        tls_bootstrap: Some("5m0s".into()),
        discovery: Some("5m0s".into()),
        upgrade_manifests: Some("5m0s".into()),
    }
}

fn node_registration(name: &str) -> NodeRegistrationOptions {
    NodeRegistrationOptions {
        name: name.into(),
        cri_socket: DEFAULT_CRI_SOCKET.into(),
        image_pull_policy: "IfNotPresent".into(),
        image_pull_serial: Some(true),
        ..Default::default()
    }
}

/// kubeadm's DefaultedStaticInitConfiguration (node `node` on 1.2.3.4, the placeholder token),
/// with kubestrap's default version and key algorithm.
pub(crate) fn init_defaults() -> (InitConfiguration, ClusterConfiguration) {
    let init = InitConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "InitConfiguration".into(),
        bootstrap_tokens: vec![BootstrapToken {
            token: PLACEHOLDER_TOKEN.into(),
            ttl: Some("24h0m0s".into()),
            usages: vec!["signing".into(), "authentication".into()],
            groups: vec!["system:bootstrappers:kubeadm:default-node-token".into()],
            ..Default::default()
        }],
        node_registration: node_registration("node"),
        local_api_endpoint: ApiEndpoint {
            advertise_address: "1.2.3.4".into(),
            bind_port: Some(i64::from(DEFAULT_API_PORT)),
        },
        timeouts: Some(default_timeouts()),
        ..Default::default()
    };
    let cluster = ClusterConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "ClusterConfiguration".into(),
        etcd: Etcd { local: Some(LocalEtcd { data_dir: ETCD_DATA_DIR.into(), ..Default::default() }), external: None },
        networking: Networking {
            service_subnet: DEFAULT_SERVICE_SUBNET.into(),
            pod_subnet: String::new(),
            dns_domain: DEFAULT_DNS_DOMAIN.into(),
        },
        // kubeadm prints its own version without the "v".
        kubernetes_version: DEFAULT_KUBERNETES_VERSION.trim_start_matches('v').into(),
        certificates_dir: DEFAULT_CERTS_DIR.into(),
        image_repository: DEFAULT_IMAGE_REPOSITORY.into(),
        cluster_name: DEFAULT_CLUSTER_NAME.into(),
        encryption_algorithm: DEFAULT_ENCRYPTION_ALGORITHM.into(),
        certificate_validity_period: Some("8760h0m0s".into()),
        ca_certificate_validity_period: Some("87600h0m0s".into()),
        ..Default::default()
    };
    (init, cluster)
}

/// kubeadm's `config print join-defaults`: token discovery of `kube-apiserver:6443` with the
/// placeholder token and no CA pin, node name = this machine's.
pub(crate) fn join_defaults(node_name: &str) -> JoinConfiguration {
    JoinConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "JoinConfiguration".into(),
        node_registration: node_registration(node_name),
        ca_cert_path: crate::paths::default_ca_cert(),
        discovery: Discovery {
            bootstrap_token: Some(BootstrapTokenDiscovery {
                token: PLACEHOLDER_TOKEN.into(),
                api_server_endpoint: "kube-apiserver:6443".into(),
                ca_cert_hashes: Vec::new(),
                unsafe_skip_ca_verification: true,
            }),
            file: None,
            tls_bootstrap_token: PLACEHOLDER_TOKEN.into(),
        },
        timeouts: Some(default_timeouts()),
        ..Default::default()
    }
}

/// One document as kubeadm marshals it: JSON field names, keys sorted.
pub fn to_yaml(doc: &impl Serialize) -> Result<String, ConfigError> {
    let bad = |e: String| ConfigError::file("output", format!("could not be encoded: {e}"));
    // serde_json's map is ordered by key, which is kubeadm's (sigs.k8s.io/yaml) order.
    let mut value = serde_json::to_value(doc).map_err(|e| bad(e.to_string()))?;
    // kubeadm's nodeRegistration.taints has no omitempty: unset is written `taints: null`.
    if let Some(nr) = value.get_mut("nodeRegistration").and_then(serde_json::Value::as_object_mut) {
        nr.entry("taints").or_insert(serde_json::Value::Null);
    }
    serde_yaml::to_string(&value).map_err(|e| bad(e.to_string()))
}

/// Documents joined with kubeadm's separator.
pub fn join_documents(docs: &[String]) -> String {
    docs.join("---\n")
}

/// `config migrate`: the file's documents in v1beta4, in kubeadm's order (Init, Cluster, Join),
/// then component configs unchanged. Only what the file says, converted; no machine-specific
/// defaults, so the result reads the same on every node.
pub fn migrate(source: &str, text: &str) -> Result<(String, Vec<String>), ConfigError> {
    let docs = parse_documents(source, text)?;
    let mut out = Vec::new();
    if let Some(i) = &docs.init {
        out.push(to_yaml(i)?);
    }
    if let Some(c) = &docs.cluster {
        out.push(to_yaml(c)?);
    }
    if let Some(j) = &docs.join {
        out.push(to_yaml(j)?);
    }
    for m in [&docs.kubelet, &docs.kube_proxy].into_iter().flatten() {
        out.push(to_yaml(m)?);
    }
    if out.is_empty() {
        return Err(ConfigError::file(
            source,
            "has no kubeadm InitConfiguration, ClusterConfiguration or JoinConfiguration".into(),
        ));
    }
    Ok((join_documents(&out), docs.warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_defaults_print_as_kubeadm_prints_them() {
        let (i, c) = init_defaults();
        let text = to_yaml(&i).unwrap();
        // kubeadm's spellings and its `taints: null`.
        for want in ["kubernetesAPICall: 1m0s", "etcdAPICall: 2m0s", "  taints: null", "bindPort: 6443"] {
            assert!(text.contains(want), "{want} missing:\n{text}");
        }
        assert!(text.starts_with("apiVersion: kubeadm.k8s.io/v1beta4\nbootstrapTokens:\n"), "{text}");
        let text = to_yaml(&c).unwrap();
        assert!(text.starts_with("apiServer: {}\napiVersion: kubeadm.k8s.io/v1beta4\n"), "{text}");
        assert!(text.contains("\nproxy: {}\nscheduler: {}\n"), "{text}");
    }
}
