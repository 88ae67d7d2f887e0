//! The kubelet's TLS bootstrap, done by kubestrap: a node key, a CSR the approver accepts, the
//! issued certificate written in the kubelet's own layout (timestamped PEM + absolute
//! `kubelet-client-current.pem` symlink), and kubelet.conf pointing at it.

use std::time::{Duration, Instant};

use log::info;
use serde_json::Value;

use super::discover::Found;
use crate::config::KeyAlgorithm;
use crate::error::{Error, Result};
use crate::fsutil::NodeFs;
use crate::kube::{Client, Created};

pub const PKI_DIR: &str = "/var/lib/kubelet/pki";
/// Where the kubelet keeps the key of a pending request; reusing it makes a rerun find the
/// same CSR (its name is a digest of the key) instead of piling up new ones.
pub const KEY_TMP: &str = "/var/lib/kubelet/pki/kubelet-client.key.tmp";
pub const CURRENT: &str = "/var/lib/kubelet/pki/kubelet-client-current.pem";
pub const KUBELET_CONF: &str = "/etc/kubernetes/kubelet.conf";

pub fn run(fs: &NodeFs, client: &Client, found: &Found, node_name: &str, timeout: Duration) -> Result<()> {
    if let Some(why) = existing_identity(fs, found, node_name) {
        info!("[kubelet-start] {why}; keeping it");
        let kc = crate::objects::kubelet::kubelet_conf_for_rotation(&found.server, &found.ca_pem);
        fs.write(KUBELET_CONF, kc.to_yaml()?.as_bytes(), 0o600, 0o755)?;
        fs.commit()?;
        return fs.remove(KEY_TMP);
    }
    let key = match fs.read(KEY_TMP)? {
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
    let csr = crate::csr::csr_object(&name, &pem, &crate::csr::KUBELET_CLIENT_USAGES);
    match client.create(&csr)? {
        Created::New(_) => info!("[kubelet-start] Sent certificate signing request {name} for system:node:{node_name}"),
        Created::Exists => info!("[kubelet-start] Certificate signing request {name} already exists; waiting for it"),
    }
    let cert_pem = wait_for_certificate(client, &name, timeout)?;
    write_identity(fs, found, &cert_pem, &crate::pki::keys::to_pem(&key))
}

/// A rerun after an interrupted join may find the identity already issued: a
/// kubelet-client-current.pem that chains to the cluster CA, names this node and is in date.
fn existing_identity(fs: &NodeFs, found: &Found, node_name: &str) -> Option<String> {
    let target = std::fs::read_link(fs.real(CURRENT)).ok()?;
    let bundle = fs.read(target.to_str()?).ok()??;
    let cert = crate::pki::check::CertFile::parse(&bundle).ok()?;
    let ca = crate::pki::check::CertFile::parse(&found.ca_pem).ok()?;
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
    fs.write(KEY_TMP, crate::pki::keys::to_pem(&key).as_bytes(), 0o600, 0o755)?;
    fs.commit()?;
    Ok(key)
}

/// Watches the CSR (bounded) until it carries a certificate, or is denied/failed.
fn wait_for_certificate(client: &Client, name: &str, timeout: Duration) -> Result<String> {
    let path = format!("/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}");
    let deadline = Instant::now() + timeout;
    let check = |obj: &Value| -> Option<std::result::Result<String, crate::csr::CsrError>> {
        match crate::csr::certificate_from_status(obj) {
            Ok(Some(pem)) => Some(Ok(pem)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    };
    loop {
        // A GET first: the certificate may already be there (rerun, fast approver).
        if let Some(obj) = client.get(&path)?
            && let Some(r) = check(&obj)
        {
            return r.map_err(Error::from);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Error::runtime(format!(
                "certificate signing request {name} was not approved and signed within {timeout:?}: check `kubectl get csr {name}`, the kubeadm:node-autoapprove-bootstrap binding and the controller-manager's signing flags"
            )));
        }
        info!("[kubelet-start] Waiting for the certificate of {name} (approval and signing)");
        let watched = client.watch(
            &format!("/apis/certificates.k8s.io/v1/certificatesigningrequests?fieldSelector=metadata.name%3D{name}"),
            left.min(Duration::from_secs(60)),
            |_, obj| check(obj),
        );
        match watched {
            Ok(Some(r)) => return r.map_err(Error::from),
            Ok(None) => {}
            // A broken stream is not fatal: the GET above catches up.
            Err(e) => {
                info!("[kubelet-start] watch ended: {e}");
                std::thread::sleep(Duration::from_millis(500).min(left));
            }
        }
    }
}

/// The kubelet's layout: `kubelet-client-<ts>.pem` (chain, then key; 0600) and
/// `kubelet-client-current.pem` as an absolute symlink to it — the kubelet refuses to rotate a
/// plain file. kubelet.conf points both cert and key at the symlink.
fn write_identity(fs: &NodeFs, found: &Found, cert_pem: &str, key_pem: &str) -> Result<()> {
    let now = time::OffsetDateTime::now_utc();
    let ts = format!(
        "{:04}-{:02}-{:02}-{:02}-{:02}-{:02}",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let file = format!("{PKI_DIR}/kubelet-client-{ts}.pem");
    let mut bundle = cert_pem.trim_end().to_string();
    bundle.push('\n');
    bundle.push_str(key_pem);
    fs.write(&file, bundle.as_bytes(), 0o600, 0o755)?;
    fs.symlink(CURRENT, &file)?;
    let kc = crate::objects::kubelet::kubelet_conf_for_rotation(&found.server, &found.ca_pem);
    fs.write(KUBELET_CONF, kc.to_yaml()?.as_bytes(), 0o600, 0o755)?;
    fs.commit()?;
    fs.remove(KEY_TMP)?;
    info!("[kubelet-start] Wrote {file} and {CURRENT} -> it; {KUBELET_CONF} uses it");
    Ok(())
}
