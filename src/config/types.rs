//! kubeadm.k8s.io/v1beta4 documents, field for field with kubeadm's JSON names (checked against
//! kubeadm's `apis/kubeadm/v1beta4/types.go`). Fields kubeadm does not require decode when
//! absent; what a missing value means is decided in `resolve`. Unknown fields are errors (as
//! `kubeadm config validate`; `kubeadm init` only warns), so a typo never silently becomes a
//! default.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

fn is_false(b: &bool) -> bool {
    !*b
}

#[derive(Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InitConfiguration {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bootstrap_tokens: Vec<BootstrapToken>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
    #[serde(default)]
    pub node_registration: NodeRegistrationOptions,
    #[serde(default, rename = "localAPIEndpoint")]
    pub local_api_endpoint: ApiEndpoint,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub certificate_key: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_phases: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Patches>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Timeouts>,
}

#[derive(Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootstrapToken {
    /// Empty: generated at init (kubeadm's dynamic default).
    #[serde(default)]
    pub token: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usages: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeRegistrationOptions {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cri_socket: String,
    /// `None` means the default control-plane taint; `Some([])` means no taint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<Taint>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubelet_extra_args: Vec<Arg>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignore_preflight_errors: Vec<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_policy: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_serial: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Taint {
    #[serde(default)]
    pub key: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    #[serde(default)]
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiEndpoint {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub advertise_address: String,
    /// Signed and wide so that a bad value reaches validation instead of a type error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_port: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Patches {
    #[serde(default)]
    pub directory: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Timeouts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_component_health_check: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet_health_check: Option<String>,
    #[serde(default, rename = "kubernetesAPICall", skip_serializing_if = "Option::is_none")]
    pub kubernetes_api_call: Option<String>,
    #[serde(default, rename = "etcdAPICall", skip_serializing_if = "Option::is_none")]
    pub etcd_api_call: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_bootstrap: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovery: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_manifests: Option<String>,
}

impl Timeouts {
    /// (field name, value) pairs, for validation.
    pub fn fields(&self) -> [(&'static str, &Option<String>); 7] {
        [
            ("controlPlaneComponentHealthCheck", &self.control_plane_component_health_check),
            ("kubeletHealthCheck", &self.kubelet_health_check),
            ("kubernetesAPICall", &self.kubernetes_api_call),
            ("etcdAPICall", &self.etcd_api_call),
            ("tlsBootstrap", &self.tls_bootstrap),
            ("discovery", &self.discovery),
            ("upgradeManifests", &self.upgrade_manifests),
        ]
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterConfiguration {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub etcd: Etcd,
    #[serde(default)]
    pub networking: Networking,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kubernetes_version: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub control_plane_endpoint: String,
    #[serde(default, rename = "apiServer")]
    pub api_server: ApiServer,
    #[serde(default)]
    pub controller_manager: ControlPlaneComponent,
    #[serde(default)]
    pub scheduler: ControlPlaneComponent,
    #[serde(default)]
    pub dns: Dns,
    #[serde(default)]
    pub proxy: Proxy,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub certificates_dir: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_repository: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub feature_gates: BTreeMap<String, bool>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub encryption_algorithm: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_validity_period: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_certificate_validity_period: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Etcd {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<LocalEtcd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalEtcd>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LocalEtcd {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_repository: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_tag: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub data_dir: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<Arg>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_envs: Vec<EnvVar>,
    #[serde(default, rename = "serverCertSANs", skip_serializing_if = "Vec::is_empty")]
    pub server_cert_sans: Vec<String>,
    #[serde(default, rename = "peerCertSANs", skip_serializing_if = "Vec::is_empty")]
    pub peer_cert_sans: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ExternalEtcd {
    #[serde(default)]
    pub endpoints: Vec<String>,
    /// v1beta4 (kubeadm 1.35+): URLs for etcd's HTTP traffic (health, metrics), apart from gRPC.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http_endpoints: Vec<String>,
    #[serde(default, rename = "caFile")]
    pub ca_file: String,
    #[serde(default, rename = "certFile")]
    pub cert_file: String,
    #[serde(default, rename = "keyFile")]
    pub key_file: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Networking {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub service_subnet: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub pod_subnet: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub dns_domain: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ControlPlaneComponent {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<Arg>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_volumes: Vec<HostPathMount>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_envs: Vec<EnvVar>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiServer {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_args: Vec<Arg>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_volumes: Vec<HostPathMount>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extra_envs: Vec<EnvVar>,
    #[serde(default, rename = "certSANs", skip_serializing_if = "Vec::is_empty")]
    pub cert_sans: Vec<String>,
}

impl ApiServer {
    pub fn component(&self) -> ControlPlaneComponent {
        ControlPlaneComponent {
            extra_args: self.extra_args.clone(),
            extra_volumes: self.extra_volumes.clone(),
            extra_envs: self.extra_envs.clone(),
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Dns {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_repository: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_tag: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub disabled: bool,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Proxy {
    #[serde(default, skip_serializing_if = "is_false")]
    pub disabled: bool,
}

/// v1beta4 `Arg`: extra args are an ordered list and names may repeat.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq, Eq, PartialOrd, Ord)]
#[serde(deny_unknown_fields)]
pub struct Arg {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HostPathMount {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub host_path: String,
    #[serde(default)]
    pub mount_path: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub read_only: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path_type: String,
}

/// core/v1 EnvVar; `valueFrom` is passed through but for the default kubeadm's scheme gives it.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EnvVar {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "value_from")]
    pub value_from: Option<serde_json::Value>,
}

/// kubeadm decodes its config with core/v1's defaulting: a `fieldRef` without `apiVersion` gets
/// `v1` (SetDefaults_ObjectFieldSelector), in the manifests and the kubeadm-config ConfigMap.
fn value_from<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<serde_json::Value>, D::Error> {
    let mut v = Option::<serde_json::Value>::deserialize(d)?;
    if let Some(serde_json::Value::Object(f)) = v.as_mut().and_then(|v| v.get_mut("fieldRef"))
        && !f.contains_key("apiVersion")
    {
        f.insert("apiVersion".into(), "v1".into());
    }
    Ok(v)
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JoinConfiguration {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub dry_run: bool,
    #[serde(default)]
    pub node_registration: NodeRegistrationOptions,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub ca_cert_path: String,
    #[serde(default)]
    pub discovery: Discovery,
    /// A control-plane join; kubestrap joins workers only, so this must be absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<JoinControlPlane>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skip_phases: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Patches>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeouts: Option<Timeouts>,
}

#[derive(Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Discovery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_token: Option<BootstrapTokenDiscovery>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileDiscovery>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tls_bootstrap_token: String,
}

#[derive(Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BootstrapTokenDiscovery {
    #[serde(default)]
    pub token: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_server_endpoint: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ca_cert_hashes: Vec<String>,
    #[serde(default, rename = "unsafeSkipCAVerification", skip_serializing_if = "is_false")]
    pub unsafe_skip_ca_verification: bool,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FileDiscovery {
    #[serde(default)]
    pub kube_config_path: String,
}

#[derive(Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JoinControlPlane {
    #[serde(default, rename = "localAPIEndpoint")]
    pub local_api_endpoint: ApiEndpoint,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub certificate_key: String,
}

/// A secret field as Debug shows it: whether it is set, never its value.
pub(super) fn hidden(s: &str) -> &'static str {
    if s.is_empty() { "" } else { "<redacted>" }
}

impl fmt::Debug for InitConfiguration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InitConfiguration")
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("bootstrap_tokens", &self.bootstrap_tokens)
            .field("dry_run", &self.dry_run)
            .field("node_registration", &self.node_registration)
            .field("local_api_endpoint", &self.local_api_endpoint)
            .field("certificate_key", &hidden(&self.certificate_key))
            .field("skip_phases", &self.skip_phases)
            .field("patches", &self.patches)
            .field("timeouts", &self.timeouts)
            .finish()
    }
}

impl fmt::Debug for BootstrapToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BootstrapToken")
            .field("token", &hidden(&self.token))
            .field("description", &self.description)
            .field("ttl", &self.ttl)
            .field("expires", &self.expires)
            .field("usages", &self.usages)
            .field("groups", &self.groups)
            .finish()
    }
}

impl fmt::Debug for Discovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Discovery")
            .field("bootstrap_token", &self.bootstrap_token)
            .field("file", &self.file)
            .field("tls_bootstrap_token", &hidden(&self.tls_bootstrap_token))
            .finish()
    }
}

impl fmt::Debug for BootstrapTokenDiscovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BootstrapTokenDiscovery")
            .field("token", &hidden(&self.token))
            .field("api_server_endpoint", &self.api_server_endpoint)
            .field("ca_cert_hashes", &self.ca_cert_hashes)
            .field("unsafe_skip_ca_verification", &self.unsafe_skip_ca_verification)
            .finish()
    }
}

impl fmt::Debug for JoinControlPlane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinControlPlane")
            .field("local_api_endpoint", &self.local_api_endpoint)
            .field("certificate_key", &hidden(&self.certificate_key))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_tokens_and_certificate_keys() {
        let token = "abcdef.0123456789abcdef".to_string();
        let key = "e6".repeat(32);
        let init = InitConfiguration {
            bootstrap_tokens: vec![BootstrapToken { token: token.clone(), ..Default::default() }],
            certificate_key: key.clone(),
            ..Default::default()
        };
        let join = JoinConfiguration {
            discovery: Discovery {
                bootstrap_token: Some(BootstrapTokenDiscovery { token: token.clone(), ..Default::default() }),
                tls_bootstrap_token: token.clone(),
                ..Default::default()
            },
            control_plane: Some(JoinControlPlane { certificate_key: key.clone(), ..Default::default() }),
            ..Default::default()
        };
        for d in [format!("{init:?}"), format!("{join:?}")] {
            assert!(!d.contains("0123456789abcdef") && !d.contains("e6e6") && d.contains("<redacted>"), "{d}");
        }
    }
}
