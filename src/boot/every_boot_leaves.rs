//! The every-boot pass's leaves: kubeadm's `certs renew` set, renewed when within the window.

use std::time::Duration;

use log::info;
use time::OffsetDateTime;
use x509_parser::public_key::PublicKey;

use super::every_boot::{CertRow, Env, not_after, not_before, row};
use crate::config::KeyAlgorithm;
use crate::error::Result;
use crate::fsutil::NodeFs;
use crate::pki::check::{CertFile, rfc3339};
use crate::pki::expiry::{self, Settings};
use crate::pki::renew::{Backup, Outcome, renew};

/// Renew within this of the end (k3s renews at 90 days, RKE2 at 120)...
pub(crate) const WINDOW: time::Duration = time::Duration::days(120);
/// ...or within a third of the lifetime, for certificates shorter than a year.
const WINDOW_SHARE: i32 = 3;
const YEAR: Duration = Duration::from_secs(365 * 86_400);

/// The renewal window for a certificateValidityPeriod.
pub(crate) fn window(validity: Duration) -> time::Duration {
    let share = time::Duration::try_from(validity).unwrap_or(WINDOW) / WINDOW_SHARE;
    share.min(WINDOW)
}

/// Renews what is due; a row per certificate present. Nothing on a worker (no leaves there).
pub(crate) fn renew_due(fs: &NodeFs, ca_path: &str, now: OffsetDateTime, env: &Env) -> Result<Vec<CertRow>> {
    let certs_dir = ca_path.rsplit_once('/').map_or("/", |(d, _)| d).to_string();
    let apiserver = crate::pki::load_cert(fs, crate::paths::cert(&certs_dir, "apiserver"))?;
    let Some(apiserver) = apiserver else { return Ok(Vec::new()) };
    let settings = settings(fs, &certs_dir, &apiserver, env)?;
    let due = window(settings.validity);
    let inv = expiry::inventory(fs, &settings, now)?;
    let backup = Backup::at(now);
    let mut rows = Vec::new();
    for e in &inv.certificates {
        let Some(end) = e.not_after else { continue };
        if e.externally_managed {
            rows.push(row(e.name, &e.path, end, now, "skipped: its CA's key is not on this node (external CA)"));
            continue;
        }
        if end - now > due {
            rows.push(row(e.name, &e.path, end, now, "ok"));
            continue;
        }
        let action = match renew(fs, e.name, env.clock, &settings, &backup)? {
            Outcome::Renewed { not_after } => {
                info!("[certs] {} ended {}: renewed until {}", e.name, rfc3339(end), rfc3339(not_after));
                rows.push(row(e.name, &e.path, not_after, now, "renewed"));
                continue;
            }
            Outcome::Missing => "skipped: missing",
            Outcome::ExternalCa => "skipped: its CA's key is not on this node (external CA)",
        };
        rows.push(row(e.name, &e.path, end, now, action));
    }
    if rows.iter().any(|r| r.action == "renewed") {
        info!(
            "[certs] the replaced files are kept in {}; the static Pods start on the new ones with the kubelet",
            backup.dir()
        );
    }
    Ok(rows)
}

/// The ClusterConfiguration's answers when the boot plan has it (this node made the cluster),
/// else what the node's own certificates say: the API server certificate's key type and
/// lifetime, and a local etcd when its CA is here.
fn settings(fs: &NodeFs, certs_dir: &str, apiserver: &CertFile, env: &Env) -> Result<Settings> {
    if let Some(cfg) = &env.config {
        return Ok(Settings::from_config(cfg));
    }
    let path = crate::paths::cert(certs_dir, "apiserver");
    let backdate = time::Duration::seconds(crate::constants::CERT_BACKDATE_SECS);
    let life = not_after(apiserver, path.as_str())? - not_before(apiserver, path.as_str())? - backdate;
    let validity = Duration::try_from(life).ok().filter(|d| *d >= Duration::from_secs(3600)).unwrap_or(YEAR);
    let key_algorithm = algorithm_of(apiserver).unwrap_or(KeyAlgorithm::Rsa(2048));
    let local_etcd = fs.exists(crate::paths::cert(certs_dir, "etcd/ca").as_str());
    Ok(Settings { certs_dir: certs_dir.to_string(), key_algorithm, validity, local_etcd })
}

/// The key type of a certificate, as kubeadm's encryptionAlgorithm names them.
fn algorithm_of(cert: &CertFile) -> Option<KeyAlgorithm> {
    let x = cert.x509().ok()?;
    match x.public_key().parsed().ok()? {
        PublicKey::RSA(r) => Some(KeyAlgorithm::Rsa(r.key_size())),
        PublicKey::EC(ec) => match ec.key_size() {
            256 => Some(KeyAlgorithm::EcdsaP256),
            384 => Some(KeyAlgorithm::EcdsaP384),
            _ => None,
        },
        _ => None,
    }
}
