//! The every-boot pass: on every boot after the first completed, before the kubelet starts, keep
//! the node's credentials alive (kubeadm renews only on `upgrade` or `certs renew`, so a control
//! plane left off for a year never comes back). No API needed: everything is on the node.
//!
//! 1. The clock first: expiry is not judged on a clock that reads earlier than the CA was made
//!    (no RTC, time sync not yet done); we wait a bounded time for it, then skip the pass.
//! 2. Leaves (kubeadm's `certs renew` set) within the renewal window are renewed from the CA keys
//!    on the node; a CA near its end is a loud warning, never a rotation.
//! 3. The kubelet's client certificate, if expired: re-issued from `ca.key` on a control plane;
//!    on a worker re-bootstrapped from a `kubestrap.token` credential, or the pass fails saying
//!    why. An expired self-signed `kubelet.crt` is removed so the kubelet makes a new one.

use std::time::Duration;

use log::{info, warn};
use time::OffsetDateTime;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::paths::{self, BOOTSTRAP_KUBELET_CONF, KUBELET_CLIENT_CURRENT, KUBELET_CONF};
use crate::pki::check::{CertFile, rfc3339};
pub use crate::status::CertRow;

/// How long the pass waits for a clock that reads earlier than the CA's NotBefore.
pub(crate) const CLOCK_WAIT: Duration = Duration::from_secs(60);
const CLOCK_POLL: Duration = Duration::from_secs(2);
/// A kubelet client certificate this close to its end is treated as expired: the kubelet
/// could not rotate it before it ran out (rotation needs the API this boot brings up).
const KUBELET_MARGIN: time::Duration = time::Duration::hours(1);
/// A CA this close to its end is warned about at every boot.
const CA_WARNING: time::Duration = time::Duration::days(365);
const KUBELET_SERVING_CRT: &str = "/var/lib/kubelet/pki/kubelet.crt";
const KUBELET_SERVING_KEY: &str = "/var/lib/kubelet/pki/kubelet.key";

/// What the pass needs from outside: the clock (wall time and waits; tests move it) and the
/// systemd credentials (a worker's fresh bootstrap token).
pub(crate) struct Env<'a> {
    pub clock: &'a dyn Clock,
    pub credentials_dir: std::path::PathBuf,
    /// The boot plan's ClusterConfiguration, when this node made the cluster (its
    /// certificateValidityPeriod and encryptionAlgorithm).
    pub config: Option<crate::config::InitConfig>,
}

/// Runs the pass; the rows are for the status file. An error is a node that cannot come back
/// by itself (a worker whose credential ran out and no token to re-bootstrap).
pub(crate) fn run(fs: &NodeFs, env: &Env) -> Result<Vec<CertRow>> {
    let ca_path = client_ca_path(fs)?;
    let Some(ca) = crate::pki::load_cert(fs, &ca_path)? else {
        info!("[certs] no {ca_path}: nothing to check");
        return Ok(Vec::new());
    };
    let Some(now) = sane_now(&ca, &ca_path, env)? else { return Ok(Vec::new()) };
    let mut rows = Vec::new();
    rows.extend(ca_rows(fs, &ca_path, now)?);
    rows.extend(super::every_boot_leaves::renew_due(fs, &ca_path, now, env)?);
    rows.extend(kubelet_client(fs, &ca_path, now, env)?);
    rows.extend(embedded_kubelet_identity(fs, &ca_path, now)?);
    rows.extend(kubelet_serving(fs, now)?);
    Ok(rows)
}

pub(super) fn bad_cert(path: &str) -> impl Fn(crate::pki::check::CertProblem) -> Error + '_ {
    move |p| Error::from(p.at(path))
}

pub(super) fn not_after(c: &CertFile, path: &str) -> Result<OffsetDateTime> {
    Ok(c.x509().map_err(bad_cert(path))?.validity().not_after.to_datetime())
}

pub(super) fn not_before(c: &CertFile, path: &str) -> Result<OffsetDateTime> {
    Ok(c.x509().map_err(bad_cert(path))?.validity().not_before.to_datetime())
}

pub(super) fn row(name: &str, path: &str, end: OffsetDateTime, now: OffsetDateTime, action: &str) -> CertRow {
    CertRow {
        name: name.into(),
        path: path.into(),
        not_after: rfc3339(end),
        residual_days: (end - now).whole_days(),
        action: action.into(),
    }
}

/// The kubelet's client CA (its config's `authentication.x509.clientCAFile`): the cluster CA on
/// every kubeadm node, control plane or worker, wherever certificatesDir put it.
fn client_ca_path(fs: &NodeFs) -> Result<String> {
    let default = paths::default_ca_cert();
    let Some(bytes) = fs.read(paths::KUBELET_CONFIG.as_str())? else { return Ok(default) };
    let v: serde_yaml::Value = serde_yaml::from_slice(&bytes).map_err(|e| {
        Error::bad_file(format!("{}: not YAML ({e}); the kubelet cannot start with it either", paths::KUBELET_CONFIG))
    })?;
    Ok(v["authentication"]["x509"]["clientCAFile"].as_str().map_or(default, str::to_string))
}

/// Now, once the clock reads at least the CA's NotBefore; `None` (said loudly) when it still
/// does not after [`CLOCK_WAIT`].
fn sane_now(ca: &CertFile, ca_path: &str, env: &Env) -> Result<Option<OffsetDateTime>> {
    let made = not_before(ca, ca_path)?;
    let deadline = env.clock.now() + CLOCK_WAIT;
    loop {
        let now = env.clock.wall();
        if now >= made {
            return Ok(Some(now));
        }
        if env.clock.now() >= deadline {
            warn!(
                "[certs] the clock reads {} but {ca_path} was made at {}: not judging certificate expiry this boot \
                 (no time sync yet?); nothing renewed",
                rfc3339(now),
                rfc3339(made)
            );
            return Ok(None);
        }
        env.clock.sleep(CLOCK_POLL, "the clock reads earlier than the cluster CA was made; waiting for time sync");
    }
}

/// The CAs next to the cluster CA: a warning each when within a year of the end.
fn ca_rows(fs: &NodeFs, ca_path: &str, now: OffsetDateTime) -> Result<Vec<CertRow>> {
    let dir = ca_path.rsplit_once('/').map_or("", |(d, _)| d);
    let mut rows = Vec::new();
    for (name, path) in [
        ("ca", ca_path.to_string()),
        ("etcd-ca", format!("{dir}/etcd/ca.crt")),
        ("front-proxy-ca", format!("{dir}/front-proxy-ca.crt")),
    ] {
        let Some(c) = crate::pki::load_cert(fs, &path)? else { continue };
        let end = not_after(&c, &path)?;
        let action = if end - now < CA_WARNING {
            let w = format!(
                "warning: the CA {path} ends at {} ({} days); it is never rotated by kubestrap: plan a CA rotation",
                rfc3339(end),
                (end - now).whole_days()
            );
            warn!("[certs] {w}");
            w
        } else {
            "ok".into()
        };
        rows.push(row(name, &path, end, now, &action));
    }
    Ok(rows)
}

/// The kubelet's client identity (`kubelet-client-current.pem`).
fn kubelet_client(fs: &NodeFs, ca_path: &str, now: OffsetDateTime, env: &Env) -> Result<Vec<CertRow>> {
    let current = KUBELET_CLIENT_CURRENT;
    let path = current.as_str();
    let Some(bytes) = fs.read_following_link(path)? else { return Ok(Vec::new()) };
    let cert = CertFile::parse(&bytes).map_err(bad_cert(path))?;
    let end = not_after(&cert, path)?;
    if end - now > KUBELET_MARGIN {
        return Ok(vec![row("kubelet-client", path, end, now, "ok")]);
    }
    let node = node_name(&cert, path)?;
    if let Some(new_end) = reissue_like(fs, &cert, path, ca_path, now)? {
        info!(
            "[certs] the kubelet's client certificate ended {}: re-issued from {}",
            rfc3339(end),
            ca_key_path(ca_path)
        );
        return Ok(vec![row(
            "kubelet-client",
            path,
            new_end,
            now,
            &format!("renewed (was expired at {})", rfc3339(end)),
        )]);
    }
    let token = read_token_credential(env)?;
    let Some(token) = token else {
        return Err(Error::bad_file(format!(
            "the node credential {path} (system:node:{node}) expired at {} and this node holds no CA key to \
                 renew it: give the node a new bootstrap token as the kubestrap.token credential (the kubelet then \
                 bootstraps again), or reset and re-join it",
            rfc3339(end)
        )));
    };
    let kc = read_kubelet_conf(fs)?.ok_or_else(|| {
        Error::bad_file(format!("{KUBELET_CONF} is missing: cannot tell which API server to re-bootstrap against"))
    })?;
    let (cluster, _) = kc.current().map_err(bad_kubelet_conf)?;
    let ca_pem = crate::kubeconfig::decode_b64(&cluster.certificate_authority_data).map_err(bad_kubelet_conf)?;
    let boot = crate::objects::kubelet::bootstrap_kubelet_conf(&cluster.server, &ca_pem, &token.bearer());
    let yaml = boot.to_yaml().map_err(|e| Error::internal(e.to_string()))?;
    fs.write(&BOOTSTRAP_KUBELET_CONF, yaml.as_bytes())?;
    fs.commit()?;
    info!(
        "[certs] the kubelet's client certificate ended {}: wrote {BOOTSTRAP_KUBELET_CONF} from the kubestrap.token \
         credential (token {}); the kubelet bootstraps again",
        rfc3339(end),
        token.id()
    );
    Ok(vec![row(
        "kubelet-client",
        path,
        end,
        now,
        "re-bootstrap (bootstrap-kubelet.conf from the kubestrap.token credential)",
    )])
}

/// A control plane's kubelet.conf as init writes it embeds a client certificate, and the kubelet
/// judges that one before its rotating pair: an expired one sends it to a bootstrap it has no
/// credential for. When the embedded one is due, kubelet.conf is pointed at
/// `kubelet-client-current.pem` instead (made from `ca.key` if missing or ended), as kubeadm's
/// kubelet-finalize phase and its expired-kubelet.conf runbook do.
fn embedded_kubelet_identity(fs: &NodeFs, ca_path: &str, now: OffsetDateTime) -> Result<Vec<CertRow>> {
    let state = bad_kubelet_conf;
    let Some(kc) = read_kubelet_conf(fs)? else { return Ok(Vec::new()) };
    let (cluster, user) = kc.current().map_err(state)?;
    let Some(data) = user.map(|u| u.client_certificate_data.as_str()).filter(|d| !d.is_empty()) else {
        return Ok(Vec::new());
    };
    let conf = KUBELET_CONF;
    let path = conf.as_str();
    let cert = CertFile::parse(&crate::kubeconfig::decode_b64(data).map_err(state)?).map_err(bad_cert(path))?;
    let end = not_after(&cert, path)?;
    if end - now > super::every_boot_leaves::WINDOW {
        return Ok(vec![row("kubelet.conf", path, end, now, "ok")]);
    }
    let current = KUBELET_CLIENT_CURRENT;
    let usable = match fs.read_following_link(current.as_str())? {
        Some(b) => CertFile::parse(&b)
            .ok()
            .map(|c| not_after(&c, current.as_str()))
            .transpose()?
            .is_some_and(|t| t - now > KUBELET_MARGIN),
        None => false,
    };
    if !usable && reissue_like(fs, &cert, path, ca_path, now)?.is_none() {
        return Ok(vec![row(
            "kubelet.conf",
            path,
            end,
            now,
            "warning: its embedded client certificate is due and no CA key is here to replace it",
        )]);
    }
    let ca_pem = crate::kubeconfig::decode_b64(&cluster.certificate_authority_data).map_err(state)?;
    let rotating = crate::objects::kubelet::kubelet_conf_for_rotation(&cluster.server, &ca_pem);
    let yaml = rotating.to_yaml().map_err(|e| Error::internal(e.to_string()))?;
    fs.write(&KUBELET_CONF, yaml.as_bytes())?;
    fs.commit()?;
    info!(
        "[certs] {path}'s embedded client certificate ends {}: it now uses {current} (kubeadm's kubelet-finalize)",
        rfc3339(end)
    );
    Ok(vec![row("kubelet.conf", path, end, now, "now uses kubelet-client-current.pem (as kubeadm's kubelet-finalize)")])
}

fn read_token_credential(env: &Env) -> Result<Option<crate::token::Token>> {
    let creds = crate::datasource::credentials::read(&env.credentials_dir).map_err(Error::from)?;
    let Some(raw) = creds.get(crate::datasource::CRED_TOKEN) else { return Ok(None) };
    let t = crate::token::Token::parse(String::from_utf8_lossy(raw).trim())
        .map_err(|e| Error::bad_config(format!("the {} credential: {e}", crate::datasource::CRED_TOKEN)))?;
    Ok(Some(t))
}

fn read_kubelet_conf(fs: &NodeFs) -> Result<Option<crate::kubeconfig::Kubeconfig>> {
    let Some(bytes) = fs.read(KUBELET_CONF.as_str())? else { return Ok(None) };
    Ok(Some(crate::kubeconfig::Kubeconfig::parse(&bytes).map_err(bad_kubelet_conf)?))
}

fn bad_kubelet_conf(e: crate::kubeconfig::KubeconfigError) -> Error {
    Error::bad_file(format!("{KUBELET_CONF}: {e}"))
}

/// The node a kubelet client certificate names (`system:node:<name>`).
fn node_name(cert: &CertFile, path: &str) -> Result<String> {
    let x = cert.x509().map_err(bad_cert(path))?;
    let cn = x.subject().iter_common_name().next().and_then(|a| a.as_str().ok()).unwrap_or_default();
    match cn.strip_prefix("system:node:").filter(|n| !n.is_empty()) {
        Some(node) => Ok(node.to_string()),
        None => Err(Error::bad_file(format!("{path}: its subject CN is {cn:?}, not system:node:<name>"))),
    }
}

fn ca_key_path(ca_path: &str) -> String {
    format!("{}.key", ca_path.trim_end_matches(".crt"))
}

/// Re-issues the kubelet identity `old` names, for `old`'s lifetime, from the CA key on this
/// node; the new NotAfter, or `None` when the CA key is not here.
fn reissue_like(
    fs: &NodeFs,
    old: &CertFile,
    path: &str,
    ca_path: &str,
    now: OffsetDateTime,
) -> Result<Option<OffsetDateTime>> {
    let (Some(ca_key), Some(ca)) =
        (crate::pki::load_key(fs, ca_key_path(ca_path))?, crate::pki::load_cert(fs, ca_path)?)
    else {
        return Ok(None);
    };
    let node = node_name(old, path)?;
    // The old lifetime; issuers (ours, the CSR signer) backdate NotBefore by 5 minutes.
    let backdate = time::Duration::seconds(crate::constants::CERT_BACKDATE_SECS);
    let lifetime = (not_after(old, path)? - not_before(old, path)? - backdate).max(KUBELET_MARGIN);
    reissue_kubelet_client(fs, &node, &ca.pem, &ca_key, lifetime, now)?;
    Ok(Some(now + lifetime))
}

/// A fresh `system:node:<name>` client certificate (ECDSA P-256, as the kubelet makes its own)
/// in the kubelet's rotating layout: a new timestamped bundle, then the symlink moved to it.
fn reissue_kubelet_client(
    fs: &NodeFs,
    node: &str,
    ca_pem: &str,
    ca_key: &rcgen::KeyPair,
    lifetime: time::Duration,
    now: OffsetDateTime,
) -> Result<()> {
    let key = crate::pki::keys::generate(crate::config::KeyAlgorithm::EcdsaP256)?;
    let req = crate::pki::issue::Request {
        cn: format!("system:node:{node}"),
        orgs: vec!["system:nodes".into()],
        usage: crate::pki::spec::Usage::Client,
        sans: Default::default(),
        validity: Duration::from_secs(lifetime.whole_seconds().max(0).unsigned_abs()),
        start: now,
    };
    let cert = crate::pki::issue::signed(&req, &key, ca_pem, ca_key)?;
    let ts = crate::pki::check::file_stamp(now);
    let file = paths::kubelet_client_bundle(&ts);
    let bundle = format!("{}\n{}", cert.trim_end(), crate::pki::keys::to_pem(&key));
    fs.write(&file, bundle.as_bytes())?;
    fs.symlink(&KUBELET_CLIENT_CURRENT, file.as_str())?;
    fs.commit()?;
    Ok(())
}

/// The kubelet's self-signed serving certificate: removed when expired, so the kubelet makes a
/// new one at start (it never renews it itself).
fn kubelet_serving(fs: &NodeFs, now: OffsetDateTime) -> Result<Vec<CertRow>> {
    let Some(bytes) = fs.read(KUBELET_SERVING_CRT)? else { return Ok(Vec::new()) };
    let cert = CertFile::parse(&bytes).map_err(bad_cert(KUBELET_SERVING_CRT))?;
    let end = not_after(&cert, KUBELET_SERVING_CRT)?;
    if end > now {
        return Ok(vec![row("kubelet-serving", KUBELET_SERVING_CRT, end, now, "ok")]);
    }
    fs.remove(KUBELET_SERVING_CRT)?;
    fs.remove(KUBELET_SERVING_KEY)?;
    info!("[certs] {KUBELET_SERVING_CRT} ended {}: removed (with its key); the kubelet makes a new one", rfc3339(end));
    Ok(vec![row("kubelet-serving", KUBELET_SERVING_CRT, end, now, "removed (the kubelet makes a new one)")])
}

#[cfg(test)]
mod tests;
