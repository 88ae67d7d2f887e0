//! InitConfiguration, section by section: kubeadm's SetDefaults_* then its Validate* for each,
//! in the order kubeadm reports problems.

use std::net::IpAddr;
use std::time::Duration;

use super::checks::{check_args, parse_ip, port};
use super::{Ctx, HostFacts};
use crate::config::ConfigError;
use crate::config::types::{ApiEndpoint, BootstrapToken, NodeRegistrationOptions, Timeouts};
use crate::config::values::{CertificateKey, TOKEN_FORMAT_HIDDEN, Token, is_dns1123_subdomain, parse_duration};
use crate::constants::{DEFAULT_API_PORT, DEFAULT_CRI_SOCKET};

/// kubeadm's SetDefaults_BootstrapToken. An entry without a token stays without one here:
/// kubeadm's SetBootstrapTokensDynamicDefaults gives it a random one on every run, but a rerun
/// of init (after a kill, or of a finished one) would then store another live token each time.
/// Init's bootstrap-token phase generates it once and keeps it (`init::api::tokens`).
pub(super) fn default_token(t: &mut BootstrapToken) {
    if t.ttl.is_none() && t.expires.is_none() {
        t.ttl = Some("24h0m0s".into());
    }
    if t.usages.is_empty() {
        t.usages = vec!["signing".into(), "authentication".into()];
    }
    if t.groups.is_empty() {
        t.groups = vec!["system:bootstrappers:kubeadm:default-node-token".into()];
    }
}

/// kubeadm's ValidateBootstrapTokens, for one (defaulted) entry; an empty token is generated
/// at init.
pub(super) fn validate_token(c: &Ctx, path: &str, t: &BootstrapToken) -> Result<(), ConfigError> {
    // Never echo the value: it carries the token secret.
    if !t.token.is_empty() {
        Token::parse(&t.token).map_err(|_| {
            c.err(&format!("{path}.token"), format!("{TOKEN_FORMAT_HIDDEN}, e.g. from `kubestrap token generate`"))
        })?;
    }
    if t.ttl.is_some() && t.expires.is_some() {
        return Err(c.err(path, "ttl and expires are mutually exclusive".into()));
    }
    if let Some(ttl) = &t.ttl {
        parse_duration(ttl).map_err(|m| c.err(&format!("{path}.ttl"), m.to_string()))?;
    }
    if let Some(exp) = &t.expires {
        time::OffsetDateTime::parse(exp, &time::format_description::well_known::Rfc3339).map_err(|_| {
            c.err(&format!("{path}.expires"), format!("{exp:?} is not an RFC 3339 time (e.g. 2030-01-02T03:04:05Z)"))
        })?;
    }
    for (i, u) in t.usages.iter().enumerate() {
        if u != "signing" && u != "authentication" {
            return Err(c.err(&format!("{path}.usages[{i}]"), format!("{u:?} must be signing or authentication")));
        }
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

/// kubeadm's SetDefaults_NodeRegistration (and GetHostname for the name).
pub(super) fn default_node_registration(
    c: &Ctx,
    nr: &mut NodeRegistrationOptions,
    host: &HostFacts,
    warnings: &mut Vec<String>,
) {
    // The given name or the hostname, trimmed and lowercased.
    nr.name = if nr.name.trim().is_empty() { &host.hostname } else { &nr.name }.trim().to_lowercase();
    if nr.cri_socket.is_empty() {
        nr.cri_socket = DEFAULT_CRI_SOCKET.into();
    }
    if let Some(w) = crate::config::load::prefix_cri_socket(&mut nr.cri_socket) {
        warnings.push(format!("{}: InitConfiguration: nodeRegistration.criSocket: {w}", c.source));
    }
    if nr.image_pull_policy.is_empty() {
        nr.image_pull_policy = "IfNotPresent".into();
    }
    nr.image_pull_serial.get_or_insert(true);
}

/// kubeadm's ValidateNodeRegistrationOptions; taints kubeadm leaves to the API server are warnings.
pub(super) fn validate_node_registration(
    c: &Ctx,
    nr: &NodeRegistrationOptions,
    warnings: &mut Vec<String>,
) -> Result<(), ConfigError> {
    if !is_dns1123_subdomain(&nr.name) {
        return Err(c.err(
            "nodeRegistration.name",
            format!("{:?} is not a valid node name (lowercase RFC 1123 subdomain: a-z, 0-9, '-', '.')", nr.name),
        ));
    }
    if !nr.cri_socket.starts_with("unix://") {
        let scheme = nr.cri_socket.split("://").next().unwrap_or_default();
        return Err(c.err(
            "nodeRegistration.criSocket",
            format!("{:?}: only the URL scheme \"unix\" is supported, got {scheme:?}", nr.cri_socket),
        ));
    }
    if !["Always", "IfNotPresent", "Never"].contains(&nr.image_pull_policy.as_str()) {
        return Err(c.err(
            "nodeRegistration.imagePullPolicy",
            format!("{:?} must be Always, IfNotPresent or Never", nr.image_pull_policy),
        ));
    }
    // The API server refuses these when the node is marked.
    for (i, t) in nr.taints.iter().flatten().enumerate() {
        if !["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&t.effect.as_str()) {
            warnings.push(format!(
                "{}: InitConfiguration: nodeRegistration.taints[{i}].effect: {:?} is not NoSchedule, PreferNoSchedule or NoExecute; the API server will refuse it",
                c.source, t.effect
            ));
        }
        if t.key.is_empty() {
            warnings.push(format!(
                "{}: InitConfiguration: nodeRegistration.taints[{i}].key: is empty; the API server will refuse it",
                c.source
            ));
        }
    }
    check_args(c, "nodeRegistration.kubeletExtraArgs", &nr.kubelet_extra_args, warnings)
}

/// kubeadm's SetDefaults_APIEndpoint and ChooseAPIServerBindAddress: an unspecified address
/// means this machine's default one, port 0 (or unset) the default port.
pub(super) fn default_api_endpoint(c: &Ctx, ep: &mut ApiEndpoint, host: &HostFacts) -> Result<(), ConfigError> {
    if ep.advertise_address.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified()) {
        ep.advertise_address.clear();
    }
    if ep.advertise_address.is_empty() {
        let ip = host.default_address.ok_or_else(|| {
            c.err(
                "localAPIEndpoint.advertiseAddress",
                "is not set and this machine has no default route to take it from; set it".into(),
            )
        })?;
        ep.advertise_address = ip.to_string();
    }
    if ep.bind_port.is_none_or(|p| p == 0) {
        ep.bind_port = Some(i64::from(DEFAULT_API_PORT));
    }
    Ok(())
}

/// kubeadm's ValidateAPIEndpoint: the (defaulted) address and port.
pub(super) fn validate_api_endpoint(c: &Ctx, ep: &ApiEndpoint) -> Result<(IpAddr, u16), ConfigError> {
    let address = parse_ip(c, "localAPIEndpoint.advertiseAddress", &ep.advertise_address)?;
    let bind_port = port(c, "localAPIEndpoint.bindPort", ep.bind_port.unwrap_or(i64::from(DEFAULT_API_PORT)))?;
    Ok((address, bind_port))
}

/// The waits `timeouts` sets for init (and a control-plane join's init phases).
pub(super) struct Waits {
    pub health: Duration,
    pub kubelet: Duration,
    pub api_call: Duration,
    pub etcd_api_call: Duration,
}

pub(super) fn timeouts(c: &Ctx, t: Option<&Timeouts>) -> Result<Waits, ConfigError> {
    use crate::timeouts as defaults;
    let mut w = Waits {
        health: defaults::CONTROL_PLANE_COMPONENT_HEALTH_CHECK,
        kubelet: defaults::KUBELET_HEALTH_CHECK,
        api_call: defaults::KUBERNETES_API_CALL,
        etcd_api_call: defaults::ETCD_API_CALL,
    };
    for (name, v) in t.map(Timeouts::fields).into_iter().flatten() {
        let Some(v) = v else { continue };
        let d = parse_duration(v).map_err(|m| c.err(&format!("timeouts.{name}"), m.to_string()))?;
        match name {
            "controlPlaneComponentHealthCheck" => w.health = d,
            "kubeletHealthCheck" => w.kubelet = d,
            "kubernetesAPICall" => w.api_call = d,
            "etcdAPICall" => w.etcd_api_call = d,
            _ => {}
        }
    }
    Ok(w)
}

/// kubeadm's ValidateCertificateKey: empty (`None`), or the hex of a 32-byte AES key.
pub(super) fn certificate_key(c: &Ctx, key: &str) -> Result<Option<CertificateKey>, ConfigError> {
    const PATH: &str = "certificateKey";
    if key.is_empty() {
        return Ok(None);
    }
    // Never echo the key: it decrypts the uploaded CA keys.
    CertificateKey::parse_exact(key).map(Some).map_err(|e| match e {
        crate::config::values::BadCertificateKey::NotHex => {
            c.err(PATH, "is not hex (value hidden); `kubeadm certs certificate-key` prints a valid key".into())
        }
        size => c.err(PATH, size.to_string()),
    })
}
