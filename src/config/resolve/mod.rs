//! Defaults (kubeadm's, except ECDSA-P256 keys) and validation of Init/ClusterConfiguration,
//! producing the values every phase works from. Only what kubeadm's `validation.go` refuses is
//! refused; what kubeadm lets through but the node would trip over later is a warning.

mod checks;
mod cluster_doc;
mod init_doc;

use std::net::IpAddr;
use std::time::Duration;

use super::ConfigError;
use super::load::Documents;
use super::types::{ClusterConfiguration, ExternalEtcd, InitConfiguration, LocalEtcd};
use super::values::{CertificateKey, Cidr, Version};
use crate::constants::KUBEADM_API_VERSION;

pub use crate::host::HostFacts;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyAlgorithm {
    Rsa(usize),
    EcdsaP256,
    EcdsaP384,
}

impl KeyAlgorithm {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "RSA-2048" => KeyAlgorithm::Rsa(2048),
            "RSA-3072" => KeyAlgorithm::Rsa(3072),
            "RSA-4096" => KeyAlgorithm::Rsa(4096),
            "ECDSA-P256" => KeyAlgorithm::EcdsaP256,
            "ECDSA-P384" => KeyAlgorithm::EcdsaP384,
            _ => return None,
        })
    }
}

/// `host:port` of the API server as clients reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl Endpoint {
    pub fn url(&self) -> String {
        if self.host.contains(':') {
            format!("https://[{}]:{}", self.host, self.port)
        } else {
            format!("https://{}:{}", self.host, self.port)
        }
    }
}

/// A validated control-plane node configuration with every default filled in.
#[derive(Debug, Clone)]
pub struct InitConfig {
    pub init: InitConfiguration,
    pub cluster: ClusterConfiguration,
    pub kubelet: Option<serde_yaml::Mapping>,
    pub kube_proxy: Option<serde_yaml::Mapping>,
    pub node_name: String,
    pub advertise_address: IpAddr,
    pub bind_port: u16,
    pub version: Version,
    pub service_subnets: Vec<Cidr>,
    pub pod_subnets: Vec<Cidr>,
    /// First address of the service subnet: the `kubernetes` Service.
    pub api_service_ip: IpAddr,
    /// Tenth address of the service subnet: `kube-dns`.
    pub dns_ip: IpAddr,
    pub key_algorithm: KeyAlgorithm,
    pub cert_validity: Duration,
    pub ca_validity: Duration,
    /// controlPlaneEndpoint if set, else advertiseAddress:bindPort.
    pub endpoint: Endpoint,
    /// This node's own API server (controller-manager/scheduler talk to it).
    pub local_endpoint: Endpoint,
    pub etcd_image_tag: String,
    /// `timeouts.controlPlaneComponentHealthCheck`: the API server wait.
    pub control_plane_health_timeout: Duration,
    /// `timeouts.kubeletHealthCheck`: the kubelet's healthz wait.
    pub kubelet_health_timeout: Duration,
    /// `timeouts.kubernetesAPICall`: how long one API write (a Node patch, a token) is retried.
    pub api_call_timeout: Duration,
    /// `timeouts.etcdAPICall`: how long one etcd call (member add, promote, sync) is retried.
    pub etcd_api_call_timeout: Duration,
    /// `certificateKey`, parsed: what upload-certs seals with when no flag gives one.
    pub certificate_key: Option<CertificateKey>,
    pub warnings: Vec<String>,
}

impl InitConfig {
    pub(crate) fn certs_dir(&self) -> &str {
        &self.cluster.certificates_dir
    }
    pub fn external_etcd(&self) -> Option<&ExternalEtcd> {
        self.cluster.etcd.external.as_ref()
    }
    pub fn local_etcd(&self) -> Option<&LocalEtcd> {
        self.cluster.etcd.local.as_ref()
    }
    pub fn image(&self, name: &str) -> String {
        format!("{}/{name}:{}", self.cluster.image_repository, self.version.image_tag())
    }
}

/// etcd image per Kubernetes minor, as kubeadm v1.37.2's EtcdSupportedVersion gives it: its
/// SupportedEtcdVersion map (34, 35, 36) holds 3.7.0-0 for each, and a minor outside the map
/// (1.37) takes the nearest entry. Overridable with etcd.local.imageTag.
pub(crate) fn etcd_version_for(minor: u32) -> &'static str {
    let (lo, hi) = (SUPPORTED_ETCD[0], SUPPORTED_ETCD[SUPPORTED_ETCD.len() - 1]);
    match SUPPORTED_ETCD.iter().find(|(m, _)| *m == minor) {
        Some((_, tag)) => tag,
        None if minor < lo.0 => lo.1,
        None => hi.1,
    }
}

/// kubeadm v1.37.2's SupportedEtcdVersion (constants.go), ascending by minor.
const SUPPORTED_ETCD: &[(u32, &str)] = &[(34, "3.7.0-0"), (35, "3.7.0-0"), (36, "3.7.0-0")];

struct Ctx<'a> {
    source: &'a str,
    doc: &'static str,
}

impl Ctx<'_> {
    fn err(&self, path: &str, message: String) -> ConfigError {
        ConfigError::doc(self.source, self.doc, path, message)
    }
}

/// Init/ClusterConfiguration → [`InitConfig`]: each section defaulted then validated (kubeadm's
/// SetDefaults/Validate), in the order kubeadm reports problems; the values the phases work
/// from are read off the defaulted documents.
/// kubeadm init's rule (cmd/init.go): a skipped `addon/coredns` or `addon/kube-proxy` phase (or
/// `addon`, `addon/all`) marks that add-on disabled in the ClusterConfiguration it stores, so an
/// upgrade leaves it out too (a kube-proxy-free CNI keeps its cluster free of kube-proxy).
pub fn disable_skipped_addons(cluster: &mut ClusterConfiguration, skip: &[String]) {
    let skipped = |sub: &str| {
        skip.iter().map(|s| s.trim().to_ascii_lowercase()).any(|s| s == "addon" || s == "addon/all" || s == sub)
    };
    if skipped("addon/coredns") {
        cluster.dns.disabled = true;
    }
    if skipped("addon/kube-proxy") {
        cluster.proxy.disabled = true;
    }
}

pub fn resolve_init(source: &str, docs: Documents, host: &HostFacts) -> Result<InitConfig, ConfigError> {
    let mut warnings = docs.warnings;
    if docs.join.is_some() {
        warnings.push(format!("{source}: JoinConfiguration ignored by init"));
    }
    let mut init = docs.init.unwrap_or_else(|| InitConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "InitConfiguration".into(),
        ..Default::default()
    });
    let mut cluster = docs.cluster.unwrap_or_else(|| ClusterConfiguration {
        api_version: KUBEADM_API_VERSION.into(),
        kind: "ClusterConfiguration".into(),
        ..Default::default()
    });
    let ic = Ctx { source, doc: "InitConfiguration" };
    let cc = Ctx { source, doc: "ClusterConfiguration" };
    let w = &mut warnings;

    for (i, t) in init.bootstrap_tokens.iter_mut().enumerate() {
        let path = format!("bootstrapTokens[{i}]");
        init_doc::default_token(t);
        init_doc::validate_token(&ic, &path, t)?;
    }
    init_doc::default_node_registration(&ic, &mut init.node_registration, host, w);
    init_doc::validate_node_registration(&ic, &init.node_registration, w)?;
    init_doc::default_api_endpoint(&ic, &mut init.local_api_endpoint, host)?;
    let (advertise_address, bind_port) = init_doc::validate_api_endpoint(&ic, &init.local_api_endpoint)?;
    let waits = init_doc::timeouts(&ic, init.timeouts.as_ref())?;
    let certificate_key = init_doc::certificate_key(&ic, &init.certificate_key)?;

    let version = cluster_doc::version(&cc, &mut cluster.kubernetes_version, w)?;
    cluster_doc::default_networking(&mut cluster.networking);
    let net = cluster_doc::validate_networking(&cc, &cluster.networking, &cluster.controller_manager.extra_args)?;
    cluster_doc::default_certificates(&mut cluster);
    let certs = cluster_doc::validate_certificates(&cc, &mut cluster, w)?;
    let local_endpoint = Endpoint { host: advertise_address.to_string(), port: bind_port };
    let endpoint = if cluster.control_plane_endpoint.is_empty() {
        local_endpoint.clone()
    } else {
        checks::parse_endpoint(&cc, &cluster.control_plane_endpoint, bind_port)?
    };
    cluster_doc::components(&cc, &mut cluster, w)?;
    let etcd_image_tag = cluster_doc::etcd(&cc, &mut cluster.etcd, &version, w)?;
    disable_skipped_addons(&mut cluster, &init.skip_phases);

    Ok(InitConfig {
        node_name: init.node_registration.name.clone(),
        init,
        cluster,
        kubelet: docs.kubelet,
        kube_proxy: docs.kube_proxy,
        advertise_address,
        bind_port,
        version,
        service_subnets: net.service_subnets,
        pod_subnets: net.pod_subnets,
        api_service_ip: net.api_service_ip,
        dns_ip: net.dns_ip,
        key_algorithm: certs.key_algorithm,
        cert_validity: certs.cert_validity,
        ca_validity: certs.ca_validity,
        endpoint,
        local_endpoint,
        etcd_image_tag,
        control_plane_health_timeout: waits.health,
        kubelet_health_timeout: waits.kubelet,
        api_call_timeout: waits.api_call,
        etcd_api_call_timeout: waits.etcd_api_call,
        certificate_key,
        warnings,
    })
}

#[cfg(test)]
mod addon_tests {
    use super::*;

    #[test]
    fn a_skipped_addon_is_stored_disabled_as_kubeadms_init_does() {
        let run = |skip: &[&str]| {
            let mut c = ClusterConfiguration::default();
            disable_skipped_addons(&mut c, &skip.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            (c.dns.disabled, c.proxy.disabled)
        };
        assert_eq!(run(&[]), (false, false));
        assert_eq!(run(&["addon/kube-proxy"]), (false, true));
        assert_eq!(run(&["Addon/CoreDNS"]), (true, false));
        assert_eq!(run(&["addon"]), (true, true));
        assert_eq!(run(&["addon/all", "preflight"]), (true, true));
        assert_eq!(run(&["preflight"]), (false, false));
    }
}
