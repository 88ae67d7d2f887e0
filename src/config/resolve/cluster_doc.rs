//! ClusterConfiguration, section by section: kubeadm's SetDefaults_* then its Validate* for
//! each, in the order kubeadm reports problems.

use std::net::IpAddr;
use std::time::Duration;

use super::checks::{absolute, check_args, check_external_etcd, check_pod_subnets, check_sans, offline_version};
use super::{Ctx, KeyAlgorithm, etcd_version_for};
use crate::config::ConfigError;
use crate::config::types::{Arg, ClusterConfiguration, Etcd, LocalEtcd, Networking};
use crate::config::values::{Cidr, Version, is_dns1123_subdomain, parse_cidr_list, parse_duration};
use crate::constants::*;

/// kubernetesVersion: defaulted, release labels resolved offline, then checked as supported.
pub(super) fn version(c: &Ctx, v: &mut String, warnings: &mut Vec<String>) -> Result<Version, ConfigError> {
    if v.is_empty() {
        *v = DEFAULT_KUBERNETES_VERSION.into();
    }
    if let Some(offline) = offline_version(v) {
        if offline == DEFAULT_KUBERNETES_VERSION {
            warnings.push(format!(
                "{}: ClusterConfiguration: kubernetesVersion: could not fetch a Kubernetes version for {v:?} from the internet (kubestrap never does); falling back to kubestrap's version {offline}",
                c.source
            ));
        }
        *v = offline;
    }
    let version = Version::parse(v).map_err(|m| c.err("kubernetesVersion", m.to_string()))?;
    if version.major != 1 || !(MIN_MINOR..=MAX_MINOR).contains(&version.minor) {
        return Err(c.err(
            "kubernetesVersion",
            format!("{version} is not supported; kubestrap supports v1.{MIN_MINOR} to v1.{MAX_MINOR}"),
        ));
    }
    *v = version.to_string();
    Ok(version)
}

/// The subnets and the two service addresses every phase needs.
pub(super) struct Network {
    pub service_subnets: Vec<Cidr>,
    pub pod_subnets: Vec<Cidr>,
    pub api_service_ip: IpAddr,
    pub dns_ip: IpAddr,
}

/// kubeadm's SetDefaults_Networking.
pub(super) fn default_networking(net: &mut Networking) {
    if net.service_subnet.is_empty() {
        net.service_subnet = DEFAULT_SERVICE_SUBNET.into();
    }
    if net.dns_domain.is_empty() {
        net.dns_domain = DEFAULT_DNS_DOMAIN.into();
    }
}

/// kubeadm's ValidateNetworking, with the node-mask check against the controller-manager's args.
pub(super) fn validate_networking(c: &Ctx, net: &Networking, cm_args: &[Arg]) -> Result<Network, ConfigError> {
    let service_subnets = parse_cidr_list(&net.service_subnet)
        .map_err(|m| c.err("networking.serviceSubnet", format!("{:?}: {m}", net.service_subnet)))?;
    for s in &service_subnets {
        let bits = s.host_bits();
        if bits < 128 && (1u128 << bits) < MIN_SERVICE_ADDRESSES {
            return Err(c.err(
                "networking.serviceSubnet",
                format!("{s} is too small: it holds {} addresses and a service subnet needs at least {MIN_SERVICE_ADDRESSES}", 1u128 << bits),
            ));
        }
        if bits > MAX_SERVICE_SUBNET_BITS {
            return Err(c.err(
                "networking.serviceSubnet",
                format!(
                    "{s} is too large: at most {MAX_SERVICE_SUBNET_BITS} host bits (e.g. /12 for IPv4, /108 for IPv6)"
                ),
            ));
        }
    }
    let pod_subnets = if net.pod_subnet.is_empty() {
        Vec::new()
    } else {
        parse_cidr_list(&net.pod_subnet)
            .map_err(|m| c.err("networking.podSubnet", format!("{:?}: {m}", net.pod_subnet)))?
    };
    check_pod_subnets(c, &pod_subnets, cm_args)?;
    if !is_dns1123_subdomain(&net.dns_domain) {
        return Err(c.err("networking.dnsDomain", format!("{:?} is not a DNS domain", net.dns_domain)));
    }
    // parse_cidr_list returns at least one entry and the size check guarantees >= 10 addresses;
    // still an error, not a panic.
    let first = service_subnets.first().ok_or_else(|| c.err("networking.serviceSubnet", "is empty".into()))?;
    let api_service_ip =
        first.nth(1).ok_or_else(|| c.err("networking.serviceSubnet", "has no first address".into()))?;
    let dns_ip = first.nth(10).ok_or_else(|| c.err("networking.serviceSubnet", "has no tenth address".into()))?;
    Ok(Network { service_subnets, pod_subnets, api_service_ip, dns_ip })
}

/// kubeadm's SetDefaults_ClusterConfiguration for the names, paths and certificate settings.
pub(super) fn default_certificates(cluster: &mut ClusterConfiguration) {
    if cluster.cluster_name.is_empty() {
        cluster.cluster_name = DEFAULT_CLUSTER_NAME.into();
    }
    if cluster.certificates_dir.is_empty() {
        cluster.certificates_dir = DEFAULT_CERTS_DIR.into();
    }
    if cluster.image_repository.is_empty() {
        cluster.image_repository = DEFAULT_IMAGE_REPOSITORY.into();
    }
    if cluster.encryption_algorithm.is_empty() {
        cluster.encryption_algorithm = crate::config::defaults::DEFAULT_ENCRYPTION_ALGORITHM.into();
    }
    cluster.certificate_validity_period.get_or_insert_with(|| "8760h0m0s".into());
    cluster.ca_certificate_validity_period.get_or_insert_with(|| "87600h0m0s".into());
}

/// What the certificate settings resolve to: (key algorithm, leaf validity, CA validity).
pub(super) struct Certificates {
    pub key_algorithm: KeyAlgorithm,
    pub cert_validity: Duration,
    pub ca_validity: Duration,
}

/// certificatesDir, encryptionAlgorithm and the validity periods; short or inverted periods
/// are warnings (kubeadm lets them through).
pub(super) fn validate_certificates(
    c: &Ctx,
    cluster: &mut ClusterConfiguration,
    warnings: &mut Vec<String>,
) -> Result<Certificates, ConfigError> {
    absolute(c, "certificatesDir", &cluster.certificates_dir)?;
    cluster.certificates_dir = cluster.certificates_dir.trim_end_matches('/').to_string();
    let key_algorithm = KeyAlgorithm::parse(&cluster.encryption_algorithm).ok_or_else(|| {
        c.err(
            "encryptionAlgorithm",
            format!(
                "{:?} must be one of RSA-2048, RSA-3072, RSA-4096, ECDSA-P256, ECDSA-P384",
                cluster.encryption_algorithm
            ),
        )
    })?;
    let validity = |path: &str, v: &Option<String>| {
        parse_duration(v.as_deref().unwrap_or_default()).map_err(|m| c.err(path, m.to_string()))
    };
    let cert_validity = validity("certificateValidityPeriod", &cluster.certificate_validity_period)?;
    let ca_validity = validity("caCertificateValidityPeriod", &cluster.ca_certificate_validity_period)?;
    for (path, d) in [("certificateValidityPeriod", cert_validity), ("caCertificateValidityPeriod", ca_validity)] {
        if d < Duration::from_secs(3600) {
            warnings.push(format!("{}: ClusterConfiguration: {path}: is shorter than one hour", c.source));
        }
    }
    if cert_validity > ca_validity {
        warnings.push(format!(
            "{}: certificateValidityPeriod is longer than caCertificateValidityPeriod; leaves will outlive their CA",
            c.source
        ));
    }
    Ok(Certificates { key_algorithm, cert_validity, ca_validity })
}

/// The control-plane components' args, volumes and env, and the API server's SANs (which
/// kubeadm lowercases: load balancer names often have capitals).
pub(super) fn components(
    c: &Ctx,
    cluster: &mut ClusterConfiguration,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    use super::checks::check_component;
    check_component(c, "apiServer", &cluster.api_server.component(), warnings)?;
    check_component(c, "controllerManager", &cluster.controller_manager, warnings)?;
    check_component(c, "scheduler", &cluster.scheduler, warnings)?;
    for san in &mut cluster.api_server.cert_sans {
        *san = san.to_lowercase();
    }
    check_sans(c, "apiServer.certSANs", &cluster.api_server.cert_sans)
}

/// kubeadm's SetDefaults_Etcd and ValidateEtcd; the etcd image tag for local etcd (empty for
/// external).
pub(super) fn etcd(
    c: &Ctx,
    etcd: &mut Etcd,
    version: &Version,
    warnings: &mut Vec<String>,
) -> Result<String, ConfigError> {
    match (&mut etcd.local, &mut etcd.external) {
        (Some(_), Some(_)) => Err(c.err("etcd", "set either local or external, not both".into())),
        (_, Some(ext)) => {
            // v1beta4 SetDefaults_ExternalEtcd: HTTP traffic (health, metrics) goes to the gRPC
            // endpoints unless httpEndpoints says otherwise; the uploaded config carries the copy.
            if ext.http_endpoints.is_empty() {
                ext.http_endpoints = ext.endpoints.clone();
            }
            check_external_etcd(c, ext, warnings)?;
            Ok(String::new())
        }
        (local, None) => {
            let l = local.get_or_insert_with(LocalEtcd::default);
            if l.data_dir.is_empty() {
                l.data_dir = ETCD_DATA_DIR.into();
            }
            absolute(c, "etcd.local.dataDir", &l.data_dir)?;
            check_args(c, "etcd.local.extraArgs", &l.extra_args, warnings)?;
            check_sans(c, "etcd.local.serverCertSANs", &l.server_cert_sans)?;
            check_sans(c, "etcd.local.peerCertSANs", &l.peer_cert_sans)?;
            Ok(if l.image_tag.is_empty() { etcd_version_for(version.minor).to_string() } else { l.image_tag.clone() })
        }
    }
}
