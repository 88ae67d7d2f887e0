//! The kubelet's TLS bootstrap, done by kubestrap: a node key, a CSR the approver accepts, the
//! issued certificate written in the kubelet's own layout (timestamped PEM + absolute
//! `kubelet-client-current.pem` symlink), and kubelet.conf pointing at it.

use std::time::Duration;

use log::info;
use serde_json::Value;

use super::JoinContext;
use super::discover::Found;
use crate::clock::Clock;
use crate::config::KeyAlgorithm;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::kube::{Client, Created};
use crate::paths::{KUBELET_CLIENT_CURRENT as CURRENT, KUBELET_CLIENT_KEY_TMP as KEY_TMP, KUBELET_CONF};
use crate::timeouts::{CSR_REWATCH_BACKOFF, CSR_WATCH_WINDOW};

pub fn run(ctx: &JoinContext, client: &Client, found: &Found) -> Result<()> {
    let (fs, node_name) = (ctx.node.fs, ctx.args.node_name.as_str());
    let server = kubelet_server(ctx, found)?;
    if let Some(why) = existing_identity(fs, &found.ca_pem, node_name) {
        info!("[kubelet-start] {why}; keeping it");
        let kc = crate::objects::kubelet::kubelet_conf_for_rotation(&server, &found.ca_pem);
        fs.write(&KUBELET_CONF, kc.to_yaml()?.as_bytes())?;
        fs.commit()?;
        return Ok(fs.remove(&KEY_TMP)?);
    }
    let key = match fs.read(&KEY_TMP)? {
        Some(pem) => match crate::pki::keys::parse_pem(&pem) {
            Ok(k) => {
                info!("[kubelet-start] Reusing the key of an earlier, unfinished TLS bootstrap");
                k
            }
            Err(_) => new_key(fs)?,
        },
        None => new_key(fs)?,
    };
    let (pem, name) = crate::csr::node_csr(node_name, &key)?;
    let csr = crate::csr::csr_object(&name, &pem, crate::csr::kubelet_client_usages(&key));
    match ctx.bootstrap_call("kubelet-start", "sending the certificate signing request", || client.create(&csr))? {
        Created::New(_) => info!("[kubelet-start] Sent certificate signing request {name} for system:node:{node_name}"),
        Created::Exists => info!("[kubelet-start] Certificate signing request {name} already exists; waiting for it"),
    }
    let cert_pem = wait_for_certificate(client, &name, ctx.args.tls_bootstrap_timeout, ctx.node.clock)?;
    write_identity(fs, &server, &found.ca_pem, &cert_pem, &crate::pki::keys::to_pem(&key))
}

/// The server in kubelet.conf. A control plane's kubelet talks to its own API server
/// (`https://<advertiseAddress>:<bindPort>`, as kubeadm 1.35+ points bootstrap-kubelet.conf
/// there, KEP-4471), so it never depends on a load balancer or on an API server of another
/// version; a worker's uses the endpoint discovery verified. The CSR itself still goes through
/// that endpoint: the local API server does not run until etcd-join.
fn kubelet_server(ctx: &JoinContext, found: &Found) -> Result<String> {
    match &ctx.args.control_plane {
        Some(cp) => Ok(super::control_plane::node_config(ctx, cp)?.local_endpoint.url()),
        None => Ok(found.server.clone()),
    }
}

/// A finished kubelet-start, judged from disk alone (kubelet.conf, the identity, the CA at
/// caCertPath): for `join phase kubelet-start` run again after the join completed.
pub(crate) fn identity_from_disk(ctx: &JoinContext) -> Option<String> {
    let ca = ctx.node.fs.read(&ctx.args.ca_cert_path).ok()??;
    ctx.node.fs.exists(&KUBELET_CONF).then_some(())?;
    existing_identity(ctx.node.fs, &ca, &ctx.args.node_name)
}

/// A rerun after an interrupted join may find the identity already issued: a
/// kubelet-client-current.pem that chains to the cluster CA, names this node and is in date.
pub(super) fn existing_identity(fs: &NodeFs, ca_pem: &[u8], node_name: &str) -> Option<String> {
    let target = std::fs::read_link(fs.real(CURRENT.as_str())).ok()?;
    let bundle = fs.read(target.to_str()?).ok()??;
    let cert = crate::pki::check::CertFile::parse(&bundle).ok()?;
    let ca = crate::pki::check::CertFile::parse(ca_pem).ok()?;
    let key = crate::pki::keys::parse_pem(pem_block(&bundle, "PRIVATE KEY")?.as_bytes()).ok()?;
    let sans = crate::pki::spec::SanList::default();
    let spki = crate::pki::keys::spki(&key);
    let expect = crate::pki::check::Expect {
        usage: crate::pki::spec::Usage::Client,
        sans: &sans,
        ca: Some(&ca),
        key_spki: Some(&spki),
        now: time::OffsetDateTime::now_utc(),
    };
    crate::pki::check::check(&cert, &expect).ok()?;
    let cn = cert.x509().ok()?.subject().iter_common_name().next()?.as_str().ok()?.to_string();
    (cn == format!("system:node:{node_name}"))
        .then(|| format!("{} already holds a valid certificate for {cn}", target.display()))
}

/// The PEM block labelled `label` in a bundle (the key after the certificates).
fn pem_block(bundle: &[u8], label: &str) -> Option<String> {
    let text = String::from_utf8_lossy(bundle);
    let (begin, end) = (format!("-----BEGIN {label}-----"), format!("-----END {label}-----"));
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start + end.len();
    Some(text[start..stop].to_string())
}

fn new_key(fs: &NodeFs) -> Result<rcgen::KeyPair> {
    let key = crate::pki::keys::generate(KeyAlgorithm::EcdsaP256)?;
    fs.write(&KEY_TMP, crate::pki::keys::to_pem(&key).as_bytes())?;
    fs.commit()?;
    Ok(key)
}

/// Watches the CSR (bounded) until it carries a certificate, or is denied/failed.
fn wait_for_certificate(client: &Client, name: &str, timeout: Duration, clock: &dyn Clock) -> Result<String> {
    let path = format!("/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}");
    let deadline = clock.now() + timeout;
    let check = |obj: &Value| -> Option<std::result::Result<String, crate::csr::CsrError>> {
        match crate::csr::certificate_from_status(obj) {
            Ok(Some(pem)) => Some(Ok(pem)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    };
    let mut rejected: Option<String> = None;
    loop {
        // A GET first: the certificate may already be there (rerun, fast approver). A control
        // plane briefly unreachable is waited out within the deadline, as the kubelet would; so
        // is a 401 or 403: this token created the CSR moments ago, and an API server that
        // restarted since (under load) rejects bootstrap tokens until it has read their Secrets,
        // and answers 403 until its RBAC cache holds the bootstrap roles.
        match client.get(&path) {
            Ok(Some(obj)) => {
                rejected = None;
                if let Some(r) = check(&obj) {
                    return r.map_err(Error::from);
                }
            }
            Ok(None) => rejected = None,
            Err(e) if e.is_transient() => info!("[kubelet-start] reading {name}: {e}; retrying"),
            Err(e) if matches!(e.code(), Some(401 | 403)) => {
                info!(
                    "[kubelet-start] reading {name}: {e}; retrying (this bootstrap token created the request: an API server that has just restarted rejects it until it has read the token's Secret and the RBAC roles)"
                );
                rejected = Some(e.to_string());
            }
            Err(e) => return Err(e.into()),
        }
        let left = deadline.saturating_duration_since(clock.now());
        if left.is_zero() {
            if let Some(e) = rejected {
                return Err(Error::cluster(format!(
                    "reading certificate signing request {name}: still rejected after {timeout:?}: {e}"
                )));
            }
            return Err(Error::cluster(format!(
                "certificate signing request {name} was not approved and signed within {timeout:?}: check `kubectl get csr {name}`, the kubeadm:node-autoapprove-bootstrap binding and the controller-manager's signing flags"
            )));
        }
        info!("[kubelet-start] Waiting for the certificate of {name} (approval and signing)");
        let watched = client.watch(
            &format!("/apis/certificates.k8s.io/v1/certificatesigningrequests?fieldSelector=metadata.name%3D{name}"),
            left.min(CSR_WATCH_WINDOW),
            |_, obj| check(obj),
        );
        match watched {
            Ok(Some(r)) => return r.map_err(Error::from),
            Ok(None) => {}
            // A broken stream is not fatal: the GET above catches up.
            Err(e) => {
                let why = format!("watch ended: {e}");
                info!("[kubelet-start] {why}");
                clock.sleep(CSR_REWATCH_BACKOFF.delay(0).min(left), &why);
            }
        }
    }
}

/// The kubelet's layout: `kubelet-client-<ts>.pem` (chain, then key; 0600) and
/// `kubelet-client-current.pem` as an absolute symlink to it — the kubelet refuses to rotate a
/// plain file. kubelet.conf points both cert and key at the symlink.
fn write_identity(fs: &NodeFs, server: &str, ca_pem: &[u8], cert_pem: &str, key_pem: &str) -> Result<()> {
    let now = time::OffsetDateTime::now_utc();
    let ts = crate::pki::check::file_stamp(now);
    let file = crate::paths::kubelet_client_bundle(&ts);
    let mut bundle = cert_pem.trim_end().to_string();
    bundle.push('\n');
    bundle.push_str(key_pem);
    fs.write(&file, bundle.as_bytes())?;
    fs.symlink(&CURRENT, file.as_str())?;
    let kc = crate::objects::kubelet::kubelet_conf_for_rotation(server, ca_pem);
    fs.write(&KUBELET_CONF, kc.to_yaml()?.as_bytes())?;
    fs.commit()?;
    fs.remove(&KEY_TMP)?;
    info!("[kubelet-start] Wrote {file} and {CURRENT} -> it; {KUBELET_CONF} uses it");
    Ok(())
}
