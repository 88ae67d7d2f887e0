//! Defaults (kubeadm's, except ECDSA-P256 keys) and validation of Init/ClusterConfiguration,
//! producing the values every phase works from. Only what kubeadm's `validation.go` refuses is
//! refused; what kubeadm lets through but the node would trip over later is a warning.

use std::net::IpAddr;
use std::time::Duration;

use super::ConfigError;
use super::load::Documents;
use super::types::{
    Arg, BootstrapToken, ClusterConfiguration, ControlPlaneComponent, ExternalEtcd, InitConfiguration, LocalEtcd,
};
use super::values::{
    BadCertificateKey, CertificateKey, Cidr, TOKEN_FORMAT_HIDDEN, Token, Version, is_dns_san, is_dns1123_subdomain,
    parse_cidr_list, parse_duration,
};
use crate::constants::*;

/// kubeadm's MinimumAddressesInPodSubnet.
const MIN_POD_ADDRESSES: u128 = 14;
/// kubeadm's PodSubnetNodeMaskMaxDiff.
const MAX_POD_NODE_MASK_DIFF: u8 = 16;

/// What the config needs to know about the machine it runs on.
#[derive(Debug, Clone, Default)]
pub struct HostFacts {
    pub hostname: String,
    /// The address of the interface that holds the default route, when there is one.
    pub default_address: Option<IpAddr>,
}

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
    pub warnings: Vec<String>,
}

impl InitConfig {
    pub fn certs_dir(&self) -> &str {
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

    // --- InitConfiguration ---
    for (i, t) in init.bootstrap_tokens.iter_mut().enumerate() {
        validate_token(&ic, &format!("bootstrapTokens[{i}]"), t)?;
    }
    let nr = &mut init.node_registration;
    // kubeadm's GetHostname: the given name or the hostname, trimmed and lowercased.
    nr.name = if nr.name.trim().is_empty() { &host.hostname } else { &nr.name }.trim().to_lowercase();
    if !is_dns1123_subdomain(&nr.name) {
        return Err(ic.err(
            "nodeRegistration.name",
            format!("{:?} is not a valid node name (lowercase RFC 1123 subdomain: a-z, 0-9, '-', '.')", nr.name),
        ));
    }
    if nr.cri_socket.is_empty() {
        nr.cri_socket = DEFAULT_CRI_SOCKET.into();
    }
    if let Some(w) = super::load::prefix_cri_socket(&mut nr.cri_socket) {
        warnings.push(format!("{source}: InitConfiguration: nodeRegistration.criSocket: {w}"));
    }
    if !nr.cri_socket.starts_with("unix://") {
        let scheme = nr.cri_socket.split("://").next().unwrap_or_default();
        return Err(ic.err(
            "nodeRegistration.criSocket",
            format!("{:?}: only the URL scheme \"unix\" is supported, got {scheme:?}", nr.cri_socket),
        ));
    }
    if nr.image_pull_policy.is_empty() {
        nr.image_pull_policy = "IfNotPresent".into();
    }
    if !["Always", "IfNotPresent", "Never"].contains(&nr.image_pull_policy.as_str()) {
        return Err(ic.err(
            "nodeRegistration.imagePullPolicy",
            format!("{:?} must be Always, IfNotPresent or Never", nr.image_pull_policy),
        ));
    }
    nr.image_pull_serial.get_or_insert(true);
    // kubeadm leaves taints to the API server, which refuses these when the node is marked.
    for (i, t) in nr.taints.iter().flatten().enumerate() {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&t.effect.as_str()) {
            warnings.push(format!(
                "{source}: InitConfiguration: nodeRegistration.taints[{i}].effect: {:?} is not NoSchedule, PreferNoSchedule or NoExecute; the API server will refuse it",
                t.effect
            ));
        }
        if t.key.is_empty() {
            warnings.push(format!(
                "{source}: InitConfiguration: nodeRegistration.taints[{i}].key: is empty; the API server will refuse it"
            ));
        }
    }
    check_args(&ic, "nodeRegistration.kubeletExtraArgs", &nr.kubelet_extra_args, &mut warnings)?;
    let node_name = nr.name.clone();

    let ep = &mut init.local_api_endpoint;
    // kubeadm's ChooseAPIServerBindAddress: an unspecified address means "this machine's".
    if ep.advertise_address.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified()) {
        ep.advertise_address.clear();
    }
    let advertise_address = if ep.advertise_address.is_empty() {
        let ip = host.default_address.ok_or_else(|| {
            ic.err(
                "localAPIEndpoint.advertiseAddress",
                "is not set and this machine has no default route to take it from; set it".into(),
            )
        })?;
        ep.advertise_address = ip.to_string();
        ip
    } else {
        parse_ip(&ic, "localAPIEndpoint.advertiseAddress", &ep.advertise_address)?
    };
    // kubeadm's SetDefaults_APIEndpoint: 0 (or unset) is the default port.
    if ep.bind_port.is_none_or(|p| p == 0) {
        ep.bind_port = Some(i64::from(DEFAULT_API_PORT));
    }
    let bind_port = port(&ic, "localAPIEndpoint.bindPort", ep.bind_port.unwrap_or(i64::from(DEFAULT_API_PORT)))?;
    let mut health_timeout = crate::timeouts::CONTROL_PLANE_COMPONENT_HEALTH_CHECK;
    let mut kubelet_timeout = crate::timeouts::KUBELET_HEALTH_CHECK;
    if let Some(t) = &init.timeouts {
        for (name, v) in t.fields() {
            if let Some(v) = v {
                let d = parse_duration(v).map_err(|m| ic.err(&format!("timeouts.{name}"), m.to_string()))?;
                match name {
                    "controlPlaneComponentHealthCheck" => health_timeout = d,
                    "kubeletHealthCheck" => kubelet_timeout = d,
                    _ => {}
                }
            }
        }
    }
    check_certificate_key(&ic, "certificateKey", &init.certificate_key)?;

    // --- ClusterConfiguration ---
    if cluster.kubernetes_version.is_empty() {
        cluster.kubernetes_version = DEFAULT_KUBERNETES_VERSION.into();
    }
    if let Some(v) = offline_version(&cluster.kubernetes_version) {
        if v == DEFAULT_KUBERNETES_VERSION {
            warnings.push(format!(
                "{source}: ClusterConfiguration: kubernetesVersion: could not fetch a Kubernetes version for {:?} from the internet (kubestrap never does); falling back to kubestrap's version {v}",
                cluster.kubernetes_version
            ));
        }
        cluster.kubernetes_version = v;
    }
    let version =
        Version::parse(&cluster.kubernetes_version).map_err(|m| cc.err("kubernetesVersion", m.to_string()))?;
    if version.major != 1 || !(MIN_MINOR..=MAX_MINOR).contains(&version.minor) {
        return Err(cc.err(
            "kubernetesVersion",
            format!("{version} is not supported; kubestrap supports v1.{MIN_MINOR} to v1.{MAX_MINOR}"),
        ));
    }
    cluster.kubernetes_version = version.to_string();

    let net = &mut cluster.networking;
    if net.service_subnet.is_empty() {
        net.service_subnet = DEFAULT_SERVICE_SUBNET.into();
    }
    let service_subnets = parse_cidr_list(&net.service_subnet)
        .map_err(|m| cc.err("networking.serviceSubnet", format!("{:?}: {m}", net.service_subnet)))?;
    for s in &service_subnets {
        let bits = s.host_bits();
        if bits < 128 && (1u128 << bits) < MIN_SERVICE_ADDRESSES {
            return Err(cc.err(
                "networking.serviceSubnet",
                format!("{s} is too small: it holds {} addresses and a service subnet needs at least {MIN_SERVICE_ADDRESSES}", 1u128 << bits),
            ));
        }
        if bits > MAX_SERVICE_SUBNET_BITS {
            return Err(cc.err(
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
            .map_err(|m| cc.err("networking.podSubnet", format!("{:?}: {m}", net.pod_subnet)))?
    };
    check_pod_subnets(&cc, &pod_subnets, &cluster.controller_manager.extra_args)?;
    if net.dns_domain.is_empty() {
        net.dns_domain = DEFAULT_DNS_DOMAIN.into();
    }
    if !is_dns1123_subdomain(&net.dns_domain) {
        return Err(cc.err("networking.dnsDomain", format!("{:?} is not a DNS domain", net.dns_domain)));
    }
    // Invariant: parse_cidr_list returns at least one entry and the size check guarantees >= 10.
    let first = service_subnets[0];
    let api_service_ip =
        first.nth(1).ok_or_else(|| cc.err("networking.serviceSubnet", "has no first address".into()))?;
    let dns_ip = first.nth(10).ok_or_else(|| cc.err("networking.serviceSubnet", "has no tenth address".into()))?;

    if cluster.cluster_name.is_empty() {
        cluster.cluster_name = DEFAULT_CLUSTER_NAME.into();
    }
    if cluster.certificates_dir.is_empty() {
        cluster.certificates_dir = DEFAULT_CERTS_DIR.into();
    }
    absolute(&cc, "certificatesDir", &cluster.certificates_dir)?;
    cluster.certificates_dir = cluster.certificates_dir.trim_end_matches('/').to_string();
    if cluster.image_repository.is_empty() {
        cluster.image_repository = DEFAULT_IMAGE_REPOSITORY.into();
    }
    if cluster.encryption_algorithm.is_empty() {
        cluster.encryption_algorithm = super::defaults::DEFAULT_ENCRYPTION_ALGORITHM.into();
    }
    let key_algorithm = KeyAlgorithm::parse(&cluster.encryption_algorithm).ok_or_else(|| {
        cc.err(
            "encryptionAlgorithm",
            format!(
                "{:?} must be one of RSA-2048, RSA-3072, RSA-4096, ECDSA-P256, ECDSA-P384",
                cluster.encryption_algorithm
            ),
        )
    })?;
    let cert_validity =
        validity(&cc, "certificateValidityPeriod", &mut cluster.certificate_validity_period, "8760h0m0s")?;
    let ca_validity =
        validity(&cc, "caCertificateValidityPeriod", &mut cluster.ca_certificate_validity_period, "87600h0m0s")?;
    for (path, d) in [("certificateValidityPeriod", cert_validity), ("caCertificateValidityPeriod", ca_validity)] {
        if d < Duration::from_secs(3600) {
            warnings.push(format!("{source}: ClusterConfiguration: {path}: is shorter than one hour"));
        }
    }
    if cert_validity > ca_validity {
        warnings.push(format!("{source}: certificateValidityPeriod is longer than caCertificateValidityPeriod; leaves will outlive their CA"));
    }

    let endpoint = if cluster.control_plane_endpoint.is_empty() {
        Endpoint { host: advertise_address.to_string(), port: bind_port }
    } else {
        parse_endpoint(&cc, &cluster.control_plane_endpoint, bind_port)?
    };
    let local_endpoint = Endpoint { host: advertise_address.to_string(), port: bind_port };

    check_component(&cc, "apiServer", &cluster.api_server.component(), &mut warnings)?;
    check_component(&cc, "controllerManager", &cluster.controller_manager, &mut warnings)?;
    check_component(&cc, "scheduler", &cluster.scheduler, &mut warnings)?;
    // kubeadm lowercases the API server's SANs (load balancer names often have capitals).
    for san in &mut cluster.api_server.cert_sans {
        *san = san.to_lowercase();
    }
    check_sans(&cc, "apiServer.certSANs", &cluster.api_server.cert_sans)?;

    let etcd = &mut cluster.etcd;
    let mut etcd_image_tag = String::new();
    match (&mut etcd.local, &mut etcd.external) {
        (Some(_), Some(_)) => {
            return Err(cc.err("etcd", "set either local or external, not both".into()));
        }
        (_, Some(ext)) => {
            // v1beta4 SetDefaults_ExternalEtcd: HTTP traffic (health, metrics) goes to the gRPC
            // endpoints unless httpEndpoints says otherwise; the uploaded config carries the copy.
            if ext.http_endpoints.is_empty() {
                ext.http_endpoints = ext.endpoints.clone();
            }
            check_external_etcd(&cc, ext, &mut warnings)?
        }
        (local, None) => {
            let l = local.get_or_insert_with(LocalEtcd::default);
            if l.data_dir.is_empty() {
                l.data_dir = ETCD_DATA_DIR.into();
            }
            absolute(&cc, "etcd.local.dataDir", &l.data_dir)?;
            check_args(&cc, "etcd.local.extraArgs", &l.extra_args, &mut warnings)?;
            check_sans(&cc, "etcd.local.serverCertSANs", &l.server_cert_sans)?;
            check_sans(&cc, "etcd.local.peerCertSANs", &l.peer_cert_sans)?;
            etcd_image_tag =
                if l.image_tag.is_empty() { etcd_version_for(version.minor).to_string() } else { l.image_tag.clone() };
        }
    }

    Ok(InitConfig {
        init,
        cluster,
        kubelet: docs.kubelet,
        kube_proxy: docs.kube_proxy,
        node_name,
        advertise_address,
        bind_port,
        version,
        service_subnets,
        pod_subnets,
        api_service_ip,
        dns_ip,
        key_algorithm,
        cert_validity,
        ca_validity,
        endpoint,
        local_endpoint,
        etcd_image_tag,
        control_plane_health_timeout: health_timeout,
        kubelet_health_timeout: kubelet_timeout,
        warnings,
    })
}

fn validate_token(c: &Ctx, path: &str, t: &mut BootstrapToken) -> Result<(), ConfigError> {
    // kubeadm's SetBootstrapTokensDynamicDefaults: an entry without a token gets a random one.
    if t.token.is_empty() {
        t.token = crate::token::generate()
            .map_err(|e| c.err(&format!("{path}.token"), format!("could not generate a token: {e}")))?;
    }
    // Never echo the value: it carries the token secret.
    if Token::parse(&t.token).is_err() {
        return Err(
            c.err(&format!("{path}.token"), format!("{TOKEN_FORMAT_HIDDEN}, e.g. from `kubestrap token generate`"))
        );
    }
    if t.ttl.is_some() && t.expires.is_some() {
        return Err(c.err(path, "ttl and expires are mutually exclusive".into()));
    }
    if let Some(ttl) = &t.ttl {
        parse_duration(ttl).map_err(|m| c.err(&format!("{path}.ttl"), m.to_string()))?;
    } else if t.expires.is_none() {
        t.ttl = Some("24h0m0s".into());
    }
    if let Some(exp) = &t.expires {
        time::OffsetDateTime::parse(exp, &time::format_description::well_known::Rfc3339).map_err(|_| {
            c.err(&format!("{path}.expires"), format!("{exp:?} is not an RFC 3339 time (e.g. 2030-01-02T03:04:05Z)"))
        })?;
    }
    if t.usages.is_empty() {
        t.usages = vec!["signing".into(), "authentication".into()];
    }
    for (i, u) in t.usages.iter().enumerate() {
        if u != "signing" && u != "authentication" {
            return Err(c.err(&format!("{path}.usages[{i}]"), format!("{u:?} must be signing or authentication")));
        }
    }
    if t.groups.is_empty() {
        t.groups = vec!["system:bootstrappers:kubeadm:default-node-token".into()];
    }
    if !t.usages.iter().any(|u| u == "authentication") {
        return Err(c.err(
            &format!("{path}.groups"),
            "token groups cannot be specified unless usages includes \"authentication\" (the default group is added when groups is empty)".into(),
        ));
    }
    for (i, g) in t.groups.iter().enumerate() {
        if !crate::token::is_valid_extra_group(g) {
            return Err(c.err(
                &format!("{path}.groups[{i}]"),
                format!("{g:?} must match system:bootstrappers:[a-z0-9:-]{{0,255}}[a-z0-9]"),
            ));
        }
    }
    Ok(())
}

fn parse_ip(c: &Ctx, path: &str, s: &str) -> Result<IpAddr, ConfigError> {
    s.parse().map_err(|_| c.err(path, format!("{s:?} is not an IP address")))
}

fn port(c: &Ctx, path: &str, p: i64) -> Result<u16, ConfigError> {
    u16::try_from(p).ok().filter(|p| *p != 0).ok_or_else(|| c.err(path, format!("{p} is not a port (1-65535)")))
}

fn absolute(c: &Ctx, path: &str, v: &str) -> Result<(), ConfigError> {
    if v.starts_with('/') { Ok(()) } else { Err(c.err(path, format!("{v:?} must be an absolute path"))) }
}

fn validity(c: &Ctx, path: &str, v: &mut Option<String>, default: &str) -> Result<Duration, ConfigError> {
    let s = v.get_or_insert_with(|| default.to_string());
    parse_duration(s).map_err(|m| c.err(path, m.to_string()))
}

fn parse_endpoint(c: &Ctx, s: &str, default_port: u16) -> Result<Endpoint, ConfigError> {
    let path = "controlPlaneEndpoint";
    let bad =
        |why: &str| c.err(path, format!("{s:?} {why} (expected HOST or HOST:PORT, IPv6 in brackets with a port)"));
    let (host, port_str) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(|| bad("has an unclosed ["))?;
        (h.to_string(), after.strip_prefix(':').map(str::to_string))
    } else if s.parse::<std::net::Ipv6Addr>().is_ok() {
        (s.to_string(), None)
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.to_string())),
            None => (s.to_string(), None),
        }
    };
    let port_num = match port_str {
        Some(p) => p.parse::<i64>().map_err(|_| bad("has a bad port")).and_then(|p| port(c, path, p))?,
        None => default_port,
    };
    if host.parse::<IpAddr>().is_err() && !is_dns1123_subdomain(&host) {
        return Err(bad("has a host that is neither an IP address nor a DNS name"));
    }
    Ok(Endpoint { host, port: port_num })
}

/// kubeadm's ValidateExtraArgs refuses only a missing name; a name with dashes or `=` is
/// passed on as kubeadm passes it (`----v=4`), with a warning.
fn check_args(c: &Ctx, path: &str, args: &[Arg], warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    for (i, a) in args.iter().enumerate() {
        if a.name.is_empty() {
            return Err(c.err(&format!("{path}[{i}].name"), "argument has no name".into()));
        }
        if a.name.starts_with('-') || a.name.contains('=') {
            warnings.push(format!(
                "{}: {}: {path}[{i}].name: {:?} is written as --{}=...; give the flag name without dashes or '='",
                c.source, c.doc, a.name, a.name
            ));
        }
    }
    Ok(())
}

/// kubeadm checks only the extra args; volumes and env vars it does not check are warnings here,
/// naming what the kubelet will refuse.
fn check_component(
    c: &Ctx,
    path: &str,
    comp: &ControlPlaneComponent,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    check_args(c, &format!("{path}.extraArgs"), &comp.extra_args, warnings)?;
    const PATH_TYPES: [&str; 8] =
        ["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"];
    let mut warn = |field: String, why: String| warnings.push(format!("{}: {}: {field}: {why}", c.source, c.doc));
    for (i, v) in comp.extra_volumes.iter().enumerate() {
        let p = format!("{path}.extraVolumes[{i}]");
        if !is_dns1123_subdomain(&v.name) || v.name.contains('.') {
            warn(format!("{p}.name"), format!("{:?} is not a DNS label; the kubelet will refuse the Pod", v.name));
        }
        for (f, val) in [("hostPath", &v.host_path), ("mountPath", &v.mount_path)] {
            if !val.starts_with('/') {
                warn(format!("{p}.{f}"), format!("{val:?} is not an absolute path; the kubelet will refuse the Pod"));
            }
        }
        if !PATH_TYPES.contains(&v.path_type.as_str()) {
            warn(format!("{p}.pathType"), format!("{:?} is not a hostPath type", v.path_type));
        }
    }
    for (i, e) in comp.extra_envs.iter().enumerate() {
        if e.name.is_empty() {
            warn(format!("{path}.extraEnvs[{i}].name"), "is empty; the kubelet will refuse the Pod".into());
        }
    }
    Ok(())
}

/// kubeadm's ValidateCertSANs: each SAN is an IP, a DNS name or a wildcard DNS name.
fn check_sans(c: &Ctx, path: &str, sans: &[String]) -> Result<(), ConfigError> {
    for (i, s) in sans.iter().enumerate() {
        if s.parse::<IpAddr>().is_err() && !is_dns_san(s) {
            return Err(c.err(
                &format!("{path}[{i}]"),
                format!("{s:?} is not a valid IP address, DNS name or wildcard DNS name (*.example.com)"),
            ));
        }
    }
    Ok(())
}

/// kubeadm's ValidateCertificateKey: empty, or the hex of a 32-byte AES key.
fn check_certificate_key(c: &Ctx, path: &str, key: &str) -> Result<(), ConfigError> {
    if key.is_empty() {
        return Ok(());
    }
    // Never echo the key: it decrypts the uploaded CA keys.
    CertificateKey::parse_exact(key).map(|_| ()).map_err(|e| match e {
        BadCertificateKey::NotHex => {
            c.err(path, "is not hex (value hidden); `kubeadm certs certificate-key` prints a valid key".into())
        }
        size => c.err(path, size.to_string()),
    })
}

/// kubeadm's ValidateIPNetFromString (at least 14 addresses) and ValidatePodSubnetNodeMask: each
/// node's range (`node-cidr-mask-size-ipv4/6`, default /24 and /64) must fit in the pod subnet,
/// at most 16 bits smaller, unless the controller-manager does not allocate node CIDRs.
fn check_pod_subnets(c: &Ctx, subnets: &[Cidr], cm_args: &[Arg]) -> Result<(), ConfigError> {
    let path = "networking.podSubnet";
    let arg = |name: &str| cm_args.iter().rev().find(|a| a.name == name).map(|a| a.value.as_str());
    for p in subnets {
        let bits = p.host_bits();
        if bits < 128 && (1u128 << bits) < MIN_POD_ADDRESSES {
            return Err(c.err(
                path,
                format!(
                    "{p}: subnet with {} address(es) is too small, the minimum is {MIN_POD_ADDRESSES}",
                    1u128 << bits
                ),
            ));
        }
        if arg("allocate-node-cidrs") == Some("false") {
            continue;
        }
        let (flag, default) =
            if p.addr.is_ipv4() { ("node-cidr-mask-size-ipv4", 24) } else { ("node-cidr-mask-size-ipv6", 64) };
        let node_mask: u8 = match arg(flag) {
            Some(v) => v.parse().map_err(|_| {
                c.err(
                    path,
                    format!(
                        "could not parse the value of the kube-controller-manager flag {flag} ({v:?}) as an integer"
                    ),
                )
            })?,
            None => default,
        };
        if p.prefix > node_mask {
            return Err(c.err(
                path,
                format!("{p}: the size of pod subnet with mask {} is smaller than the size of node subnet with mask {node_mask}", p.prefix),
            ));
        }
        if node_mask - p.prefix > MAX_POD_NODE_MASK_DIFF {
            return Err(c.err(
                path,
                format!(
                    "{p}: pod subnet mask ({}) and node-mask ({node_mask}) difference is greater than {MAX_POD_NODE_MASK_DIFF}",
                    p.prefix
                ),
            ));
        }
    }
    Ok(())
}

/// kubeadm's ValidateEtcd for an external cluster: cert and key come together and need the CA;
/// with any of them the endpoints must be https.
fn check_external_etcd(c: &Ctx, ext: &ExternalEtcd, warnings: &mut Vec<String>) -> Result<(), ConfigError> {
    let (ca, cert, key) = (&ext.ca_file, &ext.cert_file, &ext.key_file);
    if cert.is_empty() != key.is_empty() {
        return Err(c.err("etcd.external", "either both or none of certFile and keyFile must be set".into()));
    }
    if !cert.is_empty() && ca.is_empty() {
        return Err(c.err("etcd.external", "setting certFile and keyFile requires caFile".into()));
    }
    let tls = !(ca.is_empty() && cert.is_empty() && key.is_empty());
    if ext.endpoints.is_empty() {
        warnings.push(format!(
            "{}: {}: etcd.external.endpoints: is empty; the API server has no etcd to talk to",
            c.source, c.doc
        ));
    }
    for (i, e) in ext.endpoints.iter().enumerate() {
        let p = format!("etcd.external.endpoints[{i}]");
        let Some((scheme, _)) = e.split_once("://") else {
            return Err(c.err(&p, format!("{e:?}: the URL without scheme is not allowed")));
        };
        if tls && scheme != "https" {
            return Err(c.err(&p, format!("{e:?}: the URL must be using the HTTPS scheme (TLS files are set)")));
        }
    }
    for (f, v) in [("caFile", ca), ("certFile", cert), ("keyFile", key)] {
        if !v.is_empty() {
            absolute(c, &format!("etcd.external.{f}"), v)?;
        }
    }
    Ok(())
}

/// kubeadm's release labels (`stable`, `stable-1`, `latest-1.36`, optionally `release/`, `ci/` or
/// `ci-cross/` in front) resolve over the internet; offline kubeadm falls back to its own version,
/// and so does kubestrap, always. A bucket prefix before an exact version is dropped. `None`:
/// not a label, parse it as a version.
fn offline_version(v: &str) -> Option<String> {
    let label = ["release/", "ci/", "ci-cross/"].iter().find_map(|p| v.strip_prefix(p)).unwrap_or(v);
    if Version::parse(label).is_ok() {
        return (label != v).then(|| label.to_string());
    }
    let rest = label.strip_prefix("stable").or_else(|| label.strip_prefix("latest"))?;
    let ok = match rest.strip_prefix('-') {
        None => rest.is_empty(),
        Some(tail) => {
            let (major, minor) = tail.split_once('.').unwrap_or((tail, ""));
            let digit_1_9 = |s: &str| s.len() == 1 && s.bytes().all(|b| (b'1'..=b'9').contains(&b));
            digit_1_9(major)
                && (minor.is_empty() && !tail.contains('.')
                    || (1..=2).contains(&minor.len())
                        && minor.bytes().all(|b| b.is_ascii_digit())
                        && !minor.starts_with('0'))
        }
    };
    ok.then(|| DEFAULT_KUBERNETES_VERSION.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_labels_fall_back_offline() {
        for l in ["stable", "stable-1", "latest", "latest-1.36", "stable-1.9", "ci/latest", "release/stable-1"] {
            assert_eq!(offline_version(l).as_deref(), Some(DEFAULT_KUBERNETES_VERSION), "{l}");
        }
        assert_eq!(offline_version("ci/v1.36.1").as_deref(), Some("v1.36.1"));
        for not_label in ["v1.36.0", "1.36.0", "stable-0", "stable-1.x", "stablest", "latest-1.036", "beta"] {
            assert_eq!(offline_version(not_label), None, "{not_label}");
        }
    }
}
