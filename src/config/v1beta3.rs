//! kubeadm.k8s.io/v1beta3 documents and their conversion to v1beta4, as kubeadm 1.31–1.35 convert
//! them (`apis/kubeadm/v1beta3/conversion.go`): extra-argument maps become `{name, value}` lists
//! sorted by name, `imagePullSerial` is true, the ClusterConfiguration gets `RSA-2048` and the
//! default validity periods (fields v1beta3 lacks), `apiServer.timeoutForControlPlane` becomes
//! `timeouts.controlPlaneComponentHealthCheck` and `discovery.timeout` becomes
//! `timeouts.discovery`. Types v1beta3 shares with v1beta4 are reused from [`super::types`].

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use super::types::{
    self as v4, ApiEndpoint, Arg, BootstrapToken, BootstrapTokenDiscovery, ExternalEtcd, FileDiscovery, HostPathMount,
    JoinControlPlane, Networking, Patches, Taint, hidden,
};
use crate::constants::KUBEADM_API_VERSION;

pub(crate) const API_VERSION: &str = "kubeadm.k8s.io/v1beta3";

#[derive(Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InitConfiguration {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub bootstrap_tokens: Vec<BootstrapToken>,
    #[serde(default)]
    pub node_registration: NodeRegistrationOptions,
    #[serde(default, rename = "localAPIEndpoint")]
    pub local_api_endpoint: ApiEndpoint,
    #[serde(default)]
    pub certificate_key: String,
    #[serde(default)]
    pub skip_phases: Vec<String>,
    #[serde(default)]
    pub patches: Option<Patches>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct NodeRegistrationOptions {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub cri_socket: String,
    #[serde(default)]
    pub taints: Option<Vec<Taint>>,
    #[serde(default)]
    pub kubelet_extra_args: BTreeMap<String, String>,
    #[serde(default)]
    pub ignore_preflight_errors: Vec<String>,
    #[serde(default)]
    pub image_pull_policy: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ClusterConfiguration {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub etcd: Etcd,
    #[serde(default)]
    pub networking: Networking,
    #[serde(default)]
    pub kubernetes_version: String,
    #[serde(default)]
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
    pub certificates_dir: String,
    #[serde(default)]
    pub image_repository: String,
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    #[serde(default)]
    pub cluster_name: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ControlPlaneComponent {
    #[serde(default)]
    pub extra_args: BTreeMap<String, String>,
    #[serde(default)]
    pub extra_volumes: Vec<HostPathMount>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiServer {
    #[serde(default)]
    pub extra_args: BTreeMap<String, String>,
    #[serde(default)]
    pub extra_volumes: Vec<HostPathMount>,
    #[serde(default, rename = "certSANs")]
    pub cert_sans: Vec<String>,
    #[serde(default)]
    pub timeout_for_control_plane: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Dns {
    #[serde(default)]
    pub image_repository: String,
    #[serde(default)]
    pub image_tag: String,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Etcd {
    #[serde(default)]
    pub local: Option<LocalEtcd>,
    #[serde(default)]
    pub external: Option<ExternalEtcd>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LocalEtcd {
    #[serde(default)]
    pub image_repository: String,
    #[serde(default)]
    pub image_tag: String,
    #[serde(default)]
    pub data_dir: String,
    #[serde(default)]
    pub extra_args: BTreeMap<String, String>,
    #[serde(default, rename = "serverCertSANs")]
    pub server_cert_sans: Vec<String>,
    #[serde(default, rename = "peerCertSANs")]
    pub peer_cert_sans: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct JoinConfiguration {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub node_registration: NodeRegistrationOptions,
    #[serde(default)]
    pub ca_cert_path: String,
    #[serde(default)]
    pub discovery: Discovery,
    #[serde(default)]
    pub control_plane: Option<JoinControlPlane>,
    #[serde(default)]
    pub skip_phases: Vec<String>,
    #[serde(default)]
    pub patches: Option<Patches>,
}

#[derive(Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Discovery {
    #[serde(default)]
    pub bootstrap_token: Option<BootstrapTokenDiscovery>,
    #[serde(default)]
    pub file: Option<FileDiscovery>,
    #[serde(default)]
    pub tls_bootstrap_token: String,
    #[serde(default)]
    pub timeout: Option<String>,
}

/// kubeadm's convertToArgs: a map becomes a list sorted by name (a map has no duplicates, so
/// the value never decides the order).
fn args(m: BTreeMap<String, String>) -> Vec<Arg> {
    m.into_iter().map(|(name, value)| Arg { name, value }).collect()
}

fn node_registration(n: NodeRegistrationOptions) -> v4::NodeRegistrationOptions {
    v4::NodeRegistrationOptions {
        name: n.name,
        cri_socket: n.cri_socket,
        taints: n.taints,
        kubelet_extra_args: args(n.kubelet_extra_args),
        ignore_preflight_errors: n.ignore_preflight_errors,
        image_pull_policy: n.image_pull_policy,
        image_pull_serial: Some(true),
    }
}

/// A zero duration means "unset" in kubeadm's conversion.
fn non_zero(d: Option<String>) -> Option<String> {
    d.filter(|s| super::values::parse_duration(s).map_or(true, |d| !d.is_zero()))
}

impl InitConfiguration {
    pub(crate) fn into_v1beta4(self) -> v4::InitConfiguration {
        v4::InitConfiguration {
            api_version: KUBEADM_API_VERSION.into(),
            kind: self.kind,
            bootstrap_tokens: self.bootstrap_tokens,
            dry_run: false,
            node_registration: node_registration(self.node_registration),
            local_api_endpoint: self.local_api_endpoint,
            certificate_key: self.certificate_key,
            skip_phases: self.skip_phases,
            patches: self.patches,
            timeouts: None,
        }
    }
}

impl ClusterConfiguration {
    /// The v1beta4 document, and `apiServer.timeoutForControlPlane` when set: it moves to the
    /// InitConfiguration's `timeouts.controlPlaneComponentHealthCheck`.
    pub(crate) fn into_v1beta4(self) -> (v4::ClusterConfiguration, Option<String>) {
        // kubeadm ≤ 1.30 chose ECDSA keys with this gate; v1beta4 says it with encryptionAlgorithm.
        let ecdsa = self.feature_gates.get("PublicKeysECDSA") == Some(&true);
        let component = |c: ControlPlaneComponent| v4::ControlPlaneComponent {
            extra_args: args(c.extra_args),
            extra_volumes: c.extra_volumes,
            extra_envs: Vec::new(),
        };
        let etcd = v4::Etcd {
            local: self.etcd.local.map(|l| v4::LocalEtcd {
                image_repository: l.image_repository,
                image_tag: l.image_tag,
                data_dir: l.data_dir,
                extra_args: args(l.extra_args),
                extra_envs: Vec::new(),
                server_cert_sans: l.server_cert_sans,
                peer_cert_sans: l.peer_cert_sans,
            }),
            external: self.etcd.external,
        };
        let cluster = v4::ClusterConfiguration {
            api_version: KUBEADM_API_VERSION.into(),
            kind: self.kind,
            etcd,
            networking: self.networking,
            kubernetes_version: self.kubernetes_version,
            control_plane_endpoint: self.control_plane_endpoint,
            api_server: v4::ApiServer {
                extra_args: args(self.api_server.extra_args),
                extra_volumes: self.api_server.extra_volumes,
                extra_envs: Vec::new(),
                cert_sans: self.api_server.cert_sans,
            },
            controller_manager: component(self.controller_manager),
            scheduler: component(self.scheduler),
            dns: v4::Dns {
                image_repository: self.dns.image_repository,
                image_tag: self.dns.image_tag,
                disabled: false,
            },
            proxy: v4::Proxy::default(),
            certificates_dir: self.certificates_dir,
            image_repository: self.image_repository,
            // The gate became encryptionAlgorithm (above); kubeadm 1.37 no longer knows it.
            feature_gates: self.feature_gates.into_iter().filter(|(k, _)| k != "PublicKeysECDSA").collect(),
            cluster_name: self.cluster_name,
            encryption_algorithm: if ecdsa { "ECDSA-P256" } else { "RSA-2048" }.into(),
            certificate_validity_period: Some("8760h0m0s".into()),
            ca_certificate_validity_period: Some("87600h0m0s".into()),
        };
        (cluster, non_zero(self.api_server.timeout_for_control_plane))
    }
}

impl JoinConfiguration {
    pub(crate) fn into_v1beta4(self) -> v4::JoinConfiguration {
        let timeouts =
            non_zero(self.discovery.timeout).map(|d| v4::Timeouts { discovery: Some(d), ..Default::default() });
        v4::JoinConfiguration {
            api_version: KUBEADM_API_VERSION.into(),
            kind: self.kind,
            dry_run: false,
            node_registration: node_registration(self.node_registration),
            ca_cert_path: self.ca_cert_path,
            discovery: v4::Discovery {
                bootstrap_token: self.discovery.bootstrap_token,
                file: self.discovery.file,
                tls_bootstrap_token: self.discovery.tls_bootstrap_token,
            },
            control_plane: self.control_plane,
            skip_phases: self.skip_phases,
            patches: self.patches,
            timeouts,
        }
    }
}

impl fmt::Debug for InitConfiguration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InitConfiguration")
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("bootstrap_tokens", &self.bootstrap_tokens)
            .field("node_registration", &self.node_registration)
            .field("local_api_endpoint", &self.local_api_endpoint)
            .field("certificate_key", &hidden(&self.certificate_key))
            .field("skip_phases", &self.skip_phases)
            .field("patches", &self.patches)
            .finish()
    }
}

impl fmt::Debug for Discovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Discovery")
            .field("bootstrap_token", &self.bootstrap_token)
            .field("file", &self.file)
            .field("tls_bootstrap_token", &hidden(&self.tls_bootstrap_token))
            .field("timeout", &self.timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extra_args_become_sorted_lists_and_timeouts_move() {
        let c: ClusterConfiguration = serde_yaml::from_str(
            "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    \
             z-flag: \"1\"\n    authorization-mode: Node,RBAC\n  timeoutForControlPlane: 2m0s\n",
        )
        .unwrap();
        let (v4, timeout) = c.into_v1beta4();
        let names: Vec<&str> = v4.api_server.extra_args.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["authorization-mode", "z-flag"]);
        assert_eq!(v4.api_version, "kubeadm.k8s.io/v1beta4");
        assert_eq!(v4.encryption_algorithm, "RSA-2048");
        assert_eq!(timeout.as_deref(), Some("2m0s"));

        let j: JoinConfiguration = serde_yaml::from_str(
            "apiVersion: kubeadm.k8s.io/v1beta3\nkind: JoinConfiguration\ndiscovery:\n  timeout: 0s\n",
        )
        .unwrap();
        assert_eq!(j.into_v1beta4().timeouts, None, "a zero timeout means unset");
    }

    #[test]
    fn v1beta4_only_fields_are_unknown_in_v1beta3() {
        let e = serde_yaml::from_str::<InitConfiguration>(
            "apiVersion: kubeadm.k8s.io/v1beta3\nkind: InitConfiguration\ntimeouts: {}\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("unknown field `timeouts`"), "{e}");
    }
}
