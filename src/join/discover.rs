//! Finding and trusting the cluster, exactly as kubeadm's token discovery (unverified fetch, JWS
//! for our token id, CA pin, pinned re-fetch, byte-identical comparison), or from a kubeconfig
//! file/HTTPS URL. Workers often boot before the control plane: keep trying until the deadline,
//! and say why on every attempt.

use std::time::Duration;

use log::info;
use serde_json::Value;

use super::JoinContext;
use crate::clock::Clock;
use crate::discovery::{self, CLUSTER_INFO, CaPin, ClusterInfo, DiscoveryProblem, Token};
use crate::error::{Error, Result};
use crate::kube::{ApiError, Auth, Client, Recorder, Trust};
use crate::kubeconfig::{Kubeconfig, KubeconfigError};
use crate::paths::{self, BOOTSTRAP_KUBELET_CONF};
use crate::retry::{Attempt, Retry};
use crate::timeouts::{DISCOVERY_BACKOFF, REQUEST as REQUEST_TIMEOUT};

pub enum Discovery {
    Token {
        endpoint: String,
        token: Token,
        pins: Vec<CaPin>,
        unsafe_skip_ca: bool,
        tls_bootstrap_token: Option<Token>,
    },
    /// A kubeconfig at a path or an https:// URL (read with the system CA roots).
    File {
        location: String,
        tls_bootstrap_token: Option<Token>,
    },
}

impl Discovery {
    /// The API server host, for the proxy and forwarding checks.
    pub(crate) fn endpoint_host(&self) -> Option<String> {
        match self {
            Discovery::Token { endpoint, .. } => Some(
                endpoint.rsplit_once(':').map_or(endpoint.as_str(), |(h, _)| h).trim_matches(['[', ']']).to_string(),
            ),
            Discovery::File { .. } => None,
        }
    }
}

/// A verified cluster: where it is, its CA, and the token the TLS bootstrap uses.
pub struct Found {
    pub server: String,
    pub ca_pem: Vec<u8>,
    pub ca_pin: String,
    pub tls_token: String,
}

impl Found {
    /// Reads what the discovery phase left: bootstrap-kubelet.conf. `None` if it is absent.
    pub fn load(fs: &crate::fsutil::NodeFs) -> Result<Option<Found>> {
        let Some(bytes) = fs.read(&BOOTSTRAP_KUBELET_CONF)? else { return Ok(None) };
        let bad = |m: String| {
            Error::bad_file(format!(
                "{BOOTSTRAP_KUBELET_CONF} {m}; remove it and run `kubestrap join phase discovery` again"
            ))
        };
        let (server, ca_pem, token) = bootstrap_parts(&bytes).map_err(|e| bad(e.to_string()))?;
        let token = token.ok_or_else(|| bad("holds no token".into()))?;
        Ok(Some(found(server, ca_pem, token)))
    }

    /// A client for the verified cluster with the bootstrap token (a dry run's recorder in front).
    pub(super) fn client(&self, ctx: &JoinContext) -> Result<Client> {
        let c = Client::new(
            &self.server,
            Trust::Ca(self.ca_pem.clone()),
            Auth::Token(self.tls_token.clone()),
            REQUEST_TIMEOUT,
        )?;
        Ok(ctx.api(c))
    }

    /// The discovery phase's product: a kubeconfig the kubelet could bootstrap with.
    fn save(&self, fs: &crate::fsutil::NodeFs, ca_cert_path: &str) -> Result<()> {
        let conf = crate::objects::kubelet::bootstrap_kubelet_conf(&self.server, &self.ca_pem, &self.tls_token);
        fs.write(&BOOTSTRAP_KUBELET_CONF, conf.to_yaml()?.as_bytes())?;
        if !fs.exists(ca_cert_path) {
            fs.write(&paths::ca_cert_at(ca_cert_path), &self.ca_pem)?;
        }
        Ok(fs.commit()?)
    }
}

/// The `discovery` phase: finds and verifies the cluster, or reuses what an interrupted run of
/// this same join found (same token, CA matching the pins).
/// `check` judges the verified cluster before discovery's files are written.
pub fn phase(ctx: &JoinContext, check: &dyn Fn(&Found) -> Result<()>) -> Result<()> {
    let a = ctx.args;
    let d = a.discovery.as_ref().ok_or_else(|| {
        Error::bad_flag("discovery needs the API server endpoint and --token (kubestrap join HOST:PORT --token ...), or --discovery-file")
    })?;
    if let Some(prev) = Found::load(ctx.node.fs)?
        && still_valid(&prev, d)
    {
        info!(
            "[discovery] Using the cluster an earlier, interrupted join verified: {} (CA {}), from {BOOTSTRAP_KUBELET_CONF}",
            prev.server, prev.ca_pin
        );
        return check(&prev);
    }
    let found = discover(d, a.discovery_timeout, ctx.node.clock, ctx.dry_run_api.as_ref())?;
    info!("[discovery] Cluster {} verified (CA {})", found.server, found.ca_pin);
    check(&found)?;
    found.save(ctx.node.fs, &a.ca_cert_path)
}

/// May an earlier run's result stand in for a new discovery? Only for token discovery with the
/// same bootstrap token and a CA that one of the given pins matches (a file is re-read: cheap).
fn still_valid(prev: &Found, d: &Discovery) -> bool {
    let Discovery::Token { token, pins, unsafe_skip_ca, tls_bootstrap_token, .. } = d else { return false };
    let tls = tls_bootstrap_token.as_ref().unwrap_or(token);
    let pinned = pins.iter().any(|p| p.to_string() == prev.ca_pin) || (pins.is_empty() && *unsafe_skip_ca);
    pinned && prev.tls_token == tls.bearer()
}

/// `record`: a dry run's recorder, which answers every request instead of the cluster.
pub(crate) fn discover(
    d: &Discovery,
    timeout: Duration,
    clock: &dyn Clock,
    record: Option<&Recorder>,
) -> Result<Found> {
    let retry = |what| Retry { what, tag: "discovery", timeout, backoff: &DISCOVERY_BACKOFF, clock };
    match d {
        Discovery::Token { endpoint, token, pins, unsafe_skip_ca, tls_bootstrap_token } => {
            // Pins or the explicit skip: checked by args::resolve before any phase ran.
            let base = format!("https://{endpoint}");
            info!(
                "[discovery] Fetching cluster-info from {base} (token id {}), retrying until {timeout:?} have passed",
                token.id()
            );
            // The first fetch's verified answer, kept while only the CA-verified fetch fails.
            let mut first = None;
            let info = retry("discovering the cluster")
                .run(|| token_attempt(&base, token, pins, *unsafe_skip_ca, record, &mut first))?;
            let tls = tls_bootstrap_token.as_ref().unwrap_or(token);
            Ok(found(info.server, info.ca_pem, tls.bearer()))
        }
        Discovery::File { location, tls_bootstrap_token } => {
            let text = retry("reading the discovery file").run(|| read_location(location, record))?;
            let (server, ca_pem, token) = bootstrap_parts(text.as_bytes())
                .map_err(|e| Error::bad_config(naming(&format!("discovery file {location}"), &e)))?;
            let tls = match (tls_bootstrap_token, token) {
                (Some(t), _) => t.bearer(),
                (None, Some(t)) => t,
                (None, None) => {
                    return Err(Error::bad_config(format!(
                        "discovery file {location} holds no token for the TLS bootstrap; add a user token or pass --tls-bootstrap-token"
                    )));
                }
            };
            Ok(found(server, ca_pem, tls))
        }
    }
}

/// The server, CA and (non-empty) user token of a bootstrap kubeconfig: a discovery file, or
/// the bootstrap-kubelet.conf the discovery phase wrote.
fn bootstrap_parts(bytes: &[u8]) -> std::result::Result<(String, Vec<u8>, Option<String>), KubeconfigError> {
    let kc = Kubeconfig::parse(bytes)?;
    let (cluster, user) = kc.current()?;
    let ca_pem = crate::kubeconfig::decode_b64(&cluster.certificate_authority_data)
        .map_err(|e| e.in_field("certificate-authority-data"))?;
    let token = user.map(|u| u.token.clone()).filter(|t| !t.is_empty());
    Ok((cluster.server.clone(), ca_pem, token))
}

/// "<file> is not a kubeconfig: …", or "<file>: certificate-authority-data: bad base64: …".
fn naming(file: &str, e: &KubeconfigError) -> String {
    let sep = if matches!(e, KubeconfigError::Base64 { .. }) { ": " } else { " " };
    format!("{file}{sep}{e}")
}

fn found(server: String, ca_pem: Vec<u8>, tls_token: String) -> Found {
    let ca_pin = crate::pki::ca_hash(&ca_pem).unwrap_or_else(|_| "(unreadable CA)".into());
    Found { server, ca_pem, ca_pin, tls_token }
}

fn client(base: &str, trust: Trust, auth: Auth, record: Option<&Recorder>) -> std::result::Result<Client, ApiError> {
    let c = Client::new(base, trust, auth, REQUEST_TIMEOUT)?;
    Ok(match record {
        Some(r) => c.recording(r.clone()),
        None => c,
    })
}

/// One discovery attempt: each way it can fall short becomes a reason to wait, with the words an
/// operator needs. `first` keeps the first fetch's verified answer (signature and pin checked)
/// across attempts whose CA-verified fetch failed on the way, so a lossy network repeats only
/// that fetch; an answer that changed between the two starts again from the first.
fn token_attempt(
    base: &str,
    token: &Token,
    pins: &[CaPin],
    skip_ca: bool,
    record: Option<&Recorder>,
    first: &mut Option<ClusterInfo>,
) -> Attempt<ClusterInfo, Error> {
    let info = match first.take() {
        Some(info) => info,
        None => match first_fetch(base, token, pins, skip_ca, record) {
            Ok(info) => info,
            Err(attempt) => return attempt,
        },
    };
    if pins.is_empty() {
        // Explicitly unsafe: nothing to re-check the answer against.
        return Attempt::Done(info);
    }
    let pinned = match client(base, Trust::Ca(info.ca_pem.clone()), Auth::Anonymous, record) {
        Ok(c) => c,
        Err(e) => return Attempt::Fail(e.into()),
    };
    match fetch(&pinned) {
        Ok(second) => match discovery::same_kubeconfig(&info, &second) {
            Ok(()) => Attempt::Done(info),
            Err(p) => Attempt::Wait(p.to_string()),
        },
        Err((reason, broken)) => {
            *first = Some(info);
            wait(format!("the CA-verified fetch failed: {reason}"), broken)
        }
    }
}

/// The unverified fetch of cluster-info, its signature and the CA pins checked.
fn first_fetch(
    base: &str,
    token: &Token,
    pins: &[CaPin],
    skip_ca: bool,
    record: Option<&Recorder>,
) -> std::result::Result<ClusterInfo, Attempt<ClusterInfo, Error>> {
    let insecure =
        client(base, Trust::InsecureForDiscovery, Auth::Anonymous, record).map_err(|e| Attempt::Fail(e.into()))?;
    let cm = match fetch(&insecure) {
        Ok(cm) => cm,
        Err((reason, broken)) => return Err(wait(reason.to_string(), broken)),
    };
    match discovery::validate_cluster_info(&cm, token, pins, skip_ca) {
        Ok(i) => Ok(i),
        Err(DiscoveryProblem::NotSignedYet { token_id }) => Err(Attempt::Wait(format!(
            "{}{}",
            DiscoveryProblem::NotSignedYet { token_id },
            token_verdict(base, token, record)
        ))),
        // Waiting cannot fix a wrong secret or a forged ConfigMap: stop now, loudly.
        Err(p @ DiscoveryProblem::BadSignature { .. }) => Err(Attempt::Fail(Error::cluster(p.to_string()))),
        Err(p) => Err(Attempt::Wait(p.to_string())),
    }
}

/// Waits out `reason`: at once when the exchange broke mid-way (`Attempt::Broken`).
fn wait(reason: String, broken: bool) -> Attempt<ClusterInfo, Error> {
    if broken { Attempt::Broken(reason) } else { Attempt::Wait(reason) }
}

/// cluster-info, or why not and whether the exchange broke after the server took it.
fn fetch(c: &Client) -> std::result::Result<Value, (DiscoveryProblem, bool)> {
    match c.get(CLUSTER_INFO) {
        Ok(Some(cm)) => Ok(cm),
        Ok(None) => Err((DiscoveryProblem::NoClusterInfo, false)),
        Err(ApiError::Status { code: 403, .. }) => Err((DiscoveryProblem::NoClusterInfo, false)),
        Err(e) => Err((DiscoveryProblem::Transport(e.to_string()), e.is_broken())),
    }
}

/// Asks the API server whether it accepts the token at all: an unknown or expired token is
/// rejected (401), which tells "token problem" from "signer not run yet".
fn token_verdict(base: &str, token: &Token, record: Option<&Recorder>) -> String {
    let Ok(c) = client(base, Trust::InsecureForDiscovery, Auth::Token(token.bearer()), record) else {
        return String::new();
    };
    match c.get("/version") {
        Err(ApiError::Status { code: 401, message, .. }) => {
            format!(" — the API server rejects this token (unknown or expired){}", if message.is_empty() { String::new() } else { format!(": {message}") })
        }
        Ok(_) => " — the API server accepts the token, so the signer has not signed cluster-info for it yet (is the token allowed to sign?)".into(),
        Err(_) => String::new(),
    }
}

fn read_location(location: &str, record: Option<&Recorder>) -> Attempt<String, Error> {
    let path = location.strip_prefix("file://").unwrap_or(location);
    if let Some(rest) = path.strip_prefix("https://") {
        let (host, p) = rest.split_once('/').map_or((rest, String::new()), |(h, p)| (h, format!("/{p}")));
        let c = match client(&format!("https://{host}"), Trust::SystemRoots, Auth::Anonymous, record) {
            Ok(c) => c,
            Err(e) => return Attempt::Fail(e.into()),
        };
        return match c.request("GET", &p, None) {
            Ok((200, Value::String(s))) => Attempt::Done(s),
            Ok((200, v)) => Attempt::Done(v.to_string()),
            Ok((code, _)) => Attempt::Wait(format!("{location}: HTTP {code}")),
            Err(e) => Attempt::Wait(e.to_string()),
        };
    }
    if path.starts_with("http://") {
        return Attempt::Fail(Error::bad_flag(format!(
            "--discovery-file {location}: plain http is not trusted; use https:// or a local path"
        )));
    }
    match std::fs::read_to_string(path) {
        Ok(s) => Attempt::Done(s),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Attempt::Wait(format!("{path} does not exist yet")),
        Err(e) => Attempt::Fail(Error::bad_config(format!("reading discovery file {path}: {e}"))),
    }
}
