//! `kubestrap join`: flags and/or a JoinConfiguration → `join::JoinArgs`.

use std::time::Duration;

use crate::cli;
use crate::config::types::JoinConfiguration;
use crate::config::values::{is_dns1123_subdomain, parse_duration};
use crate::constants::DEFAULT_CRI_SOCKET;
use crate::discovery::{CaPin, Token};
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::join::{Discovery, JoinArgs};

/// kubeadm's defaults: 5m discovery, 5m TLS bootstrap.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(300);
const TLS_BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(300);

fn token(flag: &str, s: &str) -> Result<Token> {
    Token::parse(s).map_err(|m| Error::usage(format!("{flag}: {m}")))
}

pub fn run(j: cli::Join) -> Result<()> {
    let jc = match &j.config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| Error::config(format!("reading config {}: {e}", p.display())))?;
            let docs = crate::config::parse_documents(&p.display().to_string(), &text)?;
            Some(docs.join.ok_or_else(|| Error::config(format!("{}: no JoinConfiguration document", p.display())))?)
        }
        None => None,
    };
    let args = resolve(j, jc.unwrap_or_default())?;
    let fs = NodeFs::new(&args.1);
    let _lock = fs.lock()?;
    crate::join::run(&fs, &args.0, None)
}

/// Flags win over the file, as with kubeadm.
pub fn resolve(j: cli::Join, jc: JoinConfiguration) -> Result<(JoinArgs, std::path::PathBuf)> {
    if jc.control_plane.is_some() {
        return Err(Error::config("JoinConfiguration.controlPlane is set: kubestrap joins worker nodes only"));
    }
    let bt = jc.discovery.bootstrap_token.clone().unwrap_or_default();
    let tls_str = j
        .tls_bootstrap_token
        .clone()
        .or(j.token.clone())
        .or((!jc.discovery.tls_bootstrap_token.is_empty()).then(|| jc.discovery.tls_bootstrap_token.clone()));
    let tls_bootstrap_token = tls_str.as_deref().map(|t| token("--tls-bootstrap-token", t)).transpose()?;
    let file = j.discovery_file.clone().or(jc.discovery.file.as_ref().map(|f| f.kube_config_path.clone()));
    let discovery = match file {
        Some(location) => Discovery::File { location, tls_bootstrap_token },
        None => {
            let endpoint = j
                .endpoint
                .clone()
                .or((!bt.api_server_endpoint.is_empty()).then(|| bt.api_server_endpoint.clone()))
                .ok_or_else(|| {
                    Error::usage(
                        "give the API server endpoint (kubestrap join HOST:PORT --token ...) or --discovery-file",
                    )
                })?;
            let t = j
                .discovery_token
                .clone()
                .or(j.token.clone())
                .or((!bt.token.is_empty()).then(|| bt.token.clone()))
                .ok_or_else(|| Error::usage("token discovery needs --token (or --discovery-token)"))?;
            let hashes = if j.discovery_token_ca_cert_hash.is_empty() {
                bt.ca_cert_hashes.clone()
            } else {
                j.discovery_token_ca_cert_hash.clone()
            };
            let pins = hashes
                .iter()
                .map(|h| {
                    CaPin::parse(h).map_err(|m| Error::usage(format!("--discovery-token-ca-cert-hash {h:?}: {m}")))
                })
                .collect::<Result<Vec<_>>>()?;
            Discovery::Token {
                endpoint,
                token: token("--token", &t)?,
                pins,
                unsafe_skip_ca: j.discovery_token_unsafe_skip_ca_verification || bt.unsafe_skip_ca_verification,
                tls_bootstrap_token,
            }
        }
    };
    let nr = &jc.node_registration;
    let hostname = crate::host::hostname();
    let node_name =
        j.node_name.clone().or((!nr.name.is_empty()).then(|| nr.name.clone())).unwrap_or_else(|| hostname.clone());
    if !is_dns1123_subdomain(&node_name) {
        return Err(Error::usage(format!(
            "node name {node_name:?} is not a valid RFC 1123 subdomain (lowercase a-z, 0-9, '-', '.')"
        )));
    }
    let timeouts = jc.timeouts.clone().unwrap_or_default();
    let duration = |flag: Option<&String>, conf: &Option<String>, default: Duration| -> Result<Duration> {
        match flag.or(conf.as_ref()) {
            Some(s) => parse_duration(s).map_err(|m| Error::usage(format!("timeout: {m}"))),
            None => Ok(default),
        }
    };
    let mut ignore = cli::split_list(j.ignore_preflight_errors.as_deref());
    ignore.extend(nr.ignore_preflight_errors.iter().cloned());
    let args = JoinArgs {
        discovery,
        node_name,
        hostname,
        cri_socket: j
            .cri_socket
            .clone()
            .or((!nr.cri_socket.is_empty()).then(|| nr.cri_socket.clone()))
            .unwrap_or_else(|| DEFAULT_CRI_SOCKET.into()),
        ca_cert_path: if jc.ca_cert_path.is_empty() {
            format!("{}/ca.crt", crate::constants::DEFAULT_CERTS_DIR)
        } else {
            jc.ca_cert_path.clone()
        },
        kubelet_extra_args: nr.kubelet_extra_args.clone(),
        taints: nr.taints.clone().unwrap_or_default(),
        discovery_timeout: duration(j.discovery_timeout.as_ref(), &timeouts.discovery, DISCOVERY_TIMEOUT)?,
        tls_bootstrap_timeout: duration(None, &timeouts.tls_bootstrap, TLS_BOOTSTRAP_TIMEOUT)?,
        ignore_preflight: ignore,
    };
    Ok((args, j.root))
}

/// A `join` with no flags set, for callers that have a JoinConfiguration (boot).
pub fn defaults(root: &std::path::Path) -> cli::Join {
    cli::Join {
        endpoint: None,
        token: None,
        discovery_token: None,
        tls_bootstrap_token: None,
        discovery_token_ca_cert_hash: Vec::new(),
        discovery_token_unsafe_skip_ca_verification: false,
        discovery_file: None,
        discovery_timeout: None,
        config: None,
        node_name: None,
        cri_socket: None,
        root: root.to_path_buf(),
        ignore_preflight_errors: None,
    }
}
