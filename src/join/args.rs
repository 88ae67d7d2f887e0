//! What a join needs, resolved from flags and/or a JoinConfiguration (flags win, as with kubeadm).
//! The library takes plain values: the CLI parses its strings, `boot` passes what the user-data
//! planned, and neither builds the other's shapes.

use std::time::Duration;

use super::control_plane::ControlPlaneJoin;
use super::{Discovery, JoinArgs};
pub use crate::config::flags::JoinFlags;
use crate::config::types::JoinConfiguration;
use crate::config::values::{CertificateKey, is_dns1123_subdomain, parse_duration};
use crate::constants::DEFAULT_CRI_SOCKET;
use crate::discovery::{CaPin, Token};
use crate::error::{Error, Result};

fn token(flag: &str, s: &str) -> Result<Token> {
    Token::parse(s).map_err(|m| Error::bad_flag(format!("{flag}: {m}")))
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

pub fn resolve(f: &JoinFlags, jc: &JoinConfiguration) -> Result<JoinArgs> {
    let discovery = discovery(f, jc)?;
    let nr = &jc.node_registration;
    let hostname = crate::host::hostname();
    let node_name = f.node_name.clone().unwrap_or_else(|| node_name(jc));
    if !is_dns1123_subdomain(&node_name) {
        return Err(Error::bad_flag(format!(
            "node name {node_name:?} is not a valid RFC 1123 subdomain (lowercase a-z, 0-9, '-', '.')"
        )));
    }
    let timeouts = jc.timeouts.clone().unwrap_or_default();
    let discovery_timeout = match f.discovery_timeout {
        Some(d) => d,
        None => from_config("discovery", &timeouts.discovery, crate::timeouts::DISCOVERY)?,
    };
    let mut ignore = f.ignore_preflight_errors.clone();
    ignore.extend(nr.ignore_preflight_errors.iter().cloned());
    Ok(JoinArgs {
        control_plane: control_plane(f, jc)?,
        discovery,
        node_name,
        hostname,
        cri_socket: f.cri_socket.clone().or(non_empty(&nr.cri_socket)).unwrap_or_else(|| DEFAULT_CRI_SOCKET.into()),
        ca_cert_path: non_empty(&jc.ca_cert_path).unwrap_or_else(crate::paths::default_ca_cert),
        kubelet_extra_args: nr.kubelet_extra_args.clone(),
        taints: nr.taints.clone().unwrap_or_default(),
        discovery_timeout,
        tls_bootstrap_timeout: from_config("tlsBootstrap", &timeouts.tls_bootstrap, crate::timeouts::TLS_BOOTSTRAP)?,
        kubelet_health_timeout: from_config(
            "kubeletHealthCheck",
            &timeouts.kubelet_health_check,
            crate::timeouts::KUBELET_HEALTH_CHECK,
        )?,
        control_plane_health_timeout: from_config(
            "controlPlaneComponentHealthCheck",
            &timeouts.control_plane_component_health_check,
            crate::timeouts::CONTROL_PLANE_COMPONENT_HEALTH_CHECK,
        )?,
        timeouts: jc.timeouts.clone(),
        ignore_preflight: ignore,
        patches: f
            .patches
            .clone()
            .filter(|d| !d.is_empty())
            .or_else(|| jc.patches.as_ref().map(|p| p.directory.clone()).filter(|d| !d.is_empty())),
    })
}

/// The Node's name a JoinConfiguration gives (`nodeRegistration.name`, else the hostname), as
/// kubeadm defaults it when no `--node-name` flag is given.
pub(crate) fn node_name(jc: &JoinConfiguration) -> String {
    non_empty(&jc.node_registration.name).unwrap_or_else(crate::host::hostname)
}

/// JoinConfiguration timeouts.`field`, or `default` when it is not set.
fn from_config(field: &str, v: &Option<String>, default: Duration) -> Result<Duration> {
    v.as_deref().map_or(Ok(default), |s| {
        parse_duration(s).map_err(|m| Error::bad_config(format!("JoinConfiguration timeouts.{field}: {m}")))
    })
}

/// File or token discovery (flags win over the JoinConfiguration), or `None` when nothing says how.
fn discovery(f: &JoinFlags, jc: &JoinConfiguration) -> Result<Option<Discovery>> {
    let bt = jc.discovery.bootstrap_token.clone().unwrap_or_default();
    let tls_str = f.tls_bootstrap_token.clone().or(f.token.clone()).or(non_empty(&jc.discovery.tls_bootstrap_token));
    let tls_bootstrap_token = tls_str.as_deref().map(|t| token("--tls-bootstrap-token", t)).transpose()?;
    let file = f.discovery_file.clone().or(jc.discovery.file.as_ref().map(|f| f.kube_config_path.clone()));
    let token_given = f.token.is_some() || f.discovery_token.is_some() || !bt.token.is_empty();
    let endpoint = f.endpoint.clone().or(non_empty(&bt.api_server_endpoint));
    Ok(match file {
        Some(location) => Some(Discovery::File { location, tls_bootstrap_token }),
        // Nothing to discover with: fine for `join phase kubelet-start`, which reads what the
        // discovery phase left; the discovery phase itself says what is missing.
        None if endpoint.is_none() && !token_given => None,
        None => {
            let endpoint = endpoint.ok_or_else(|| {
                Error::bad_flag(
                    "give the API server endpoint (kubestrap join HOST:PORT --token ...) or --discovery-file",
                )
            })?;
            let t = f
                .discovery_token
                .clone()
                .or(f.token.clone())
                .or(non_empty(&bt.token))
                .ok_or_else(|| Error::bad_flag("token discovery needs --token (or --discovery-token)"))?;
            let hashes = if f.discovery_token_ca_cert_hash.is_empty() {
                &bt.ca_cert_hashes
            } else {
                &f.discovery_token_ca_cert_hash
            };
            let pins = hashes
                .iter()
                .map(|h| {
                    CaPin::parse(h).map_err(|m| Error::bad_flag(format!("--discovery-token-ca-cert-hash {h:?}: {m}")))
                })
                .collect::<Result<Vec<_>>>()?;
            let unsafe_skip_ca = f.discovery_token_unsafe_skip_ca_verification || bt.unsafe_skip_ca_verification;
            // kubeadm refuses this when it validates the configuration, before any phase writes.
            if pins.is_empty() && !unsafe_skip_ca {
                return Err(Error::bad_flag(
                    "token discovery needs --discovery-token-ca-cert-hash sha256:<hex> (from `kubestrap certs ca-hash` on a control-plane node), or --discovery-token-unsafe-skip-ca-verification",
                ));
            }
            Some(Discovery::Token { endpoint, token: token("--token", &t)?, pins, unsafe_skip_ca, tls_bootstrap_token })
        }
    })
}

/// `--control-plane` and its flags, or JoinConfiguration.controlPlane (flags win).
fn control_plane(f: &JoinFlags, jc: &JoinConfiguration) -> Result<Option<ControlPlaneJoin>> {
    let conf = jc.control_plane.as_ref();
    if !f.control_plane && conf.is_none() {
        // kubeadm warns about control-plane flags without --control-plane (the CLI does) and joins a worker.
        return Ok(None);
    }
    let bind_port = f.apiserver_bind_port.map(i64::from).or(conf.and_then(|c| c.local_api_endpoint.bind_port));
    let hex = f.certificate_key.clone().or(conf.and_then(|c| non_empty(&c.certificate_key)));
    // Parsed once here; the phases take the key.
    let certificate_key = hex
        .map(|k| CertificateKey::parse(&k).map_err(|e| Error::bad_flag(format!("--certificate-key: {e}"))))
        .transpose()?;
    Ok(Some(ControlPlaneJoin {
        advertise_address: f
            .apiserver_advertise_address
            .clone()
            .or(conf.map(|c| c.local_api_endpoint.advertise_address.clone()))
            .unwrap_or_default(),
        bind_port,
        certificate_key,
    }))
}
