//! Renewing a leaf certificate as kubeadm's `certs renew` does: a new key of the cluster's
//! algorithm, the subject (CN, O), SANs and extended key usages of the certificate on disk,
//! signed by the CA key on disk, valid from now for certificateValidityPeriod. Never a CA,
//! never sa.key/sa.pub.
//!
//! Crash safety: the files to be replaced are first copied (and synced) into a backup
//! directory under `/etc/kubernetes/tmp/`; then the new key and certificate are written
//! atomically (temp + fsync + rename, key first). A power cut leaves every file old or new; a
//! key renamed before its certificate is repaired by running the renewal again (it copies the
//! old certificate's fields and writes both files anew). A kubeconfig is one file: only its
//! `client-certificate-data` and `client-key-data` values change, every other byte stays.

use std::net::IpAddr;

use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::{GeneralName, ParsedExtension};

use super::check::{CertFile, PkiError};
use super::expiry::{self, Place, Settings};
use super::issue;
use super::keys;
use super::spec::{SanList, Usage};
use crate::clock::Clock;
use crate::fsutil::NodeFs;
use crate::kubeconfig::Kubeconfig;
use crate::paths::{self, Dir};

type Result<T> = std::result::Result<T, PkiError>;

/// What `renew` did, in kubeadm's three cases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// New key and certificate written; the old ones are in the backup directory.
    Renewed { not_after: OffsetDateTime },
    /// The certificate's file does not exist (kubeadm: `MISSING! <long name>`).
    Missing,
    /// Its CA's key is absent (kubeadm: `Detected external <ca>, <long name> can't be renewed`).
    ExternalCa,
}

/// The backup directory of one renewal run: created on first use, never overwriting a file it
/// already holds (a rerun after a crash keeps the original).
pub struct Backup {
    dir: Dir,
}

impl Backup {
    /// `/etc/kubernetes/tmp/kubeadm-backup-certs-<YYYY-MM-DD-hh-mm-ss>` for the time `now`.
    pub fn at(now: OffsetDateTime) -> Backup {
        Backup { dir: paths::renewal_backup_dir(&super::check::file_stamp(now)) }
    }

    /// The directory (a host path).
    pub fn dir(&self) -> &str {
        &self.dir.path
    }

    /// Stages a copy of `host_path` (if it exists) in the backup.
    fn save(&self, fs: &NodeFs, host_path: &str) -> Result<()> {
        let Some(data) = fs.read(host_path)? else { return Ok(()) };
        let file = paths::renewal_backup_file(&self.dir, host_path);
        if fs.exists(&file) {
            return Ok(());
        }
        fs.mkdir(&paths::Dir {
            path: paths::KUBERNETES_TMP_DIR.into(),
            mode: paths::dir_mode(paths::KUBERNETES_TMP_DIR),
        })?;
        fs.mkdir(&self.dir)?;
        Ok(fs.write(&file, &data)?)
    }
}

/// Renews the certificate kubeadm calls `name` (see [`expiry::TARGETS`]), unconditionally, as
/// `kubeadm certs renew <name>`: the time comes from `clock`, the key algorithm and validity
/// from `settings`, copies of the replaced files go to `backup`. Everything is committed
/// (durable) when it returns `Renewed`.
pub fn renew(fs: &NodeFs, name: &str, clock: &dyn Clock, settings: &Settings, backup: &Backup) -> Result<Outcome> {
    let target = expiry::find(name).filter(|t| settings.targets().any(|x| x.name == t.name)).ok_or_else(|| {
        PkiError::UnknownCertificate {
            name: name.to_string(),
            valid: settings.targets().map(|t| t.name).collect::<Vec<_>>().join(", "),
        }
    })?;
    let Some(current) = expiry::read_current(fs, settings, target)? else { return Ok(Outcome::Missing) };
    if expiry::externally_managed(fs, settings, target.ca_base)? {
        return Ok(Outcome::ExternalCa);
    }
    let ca = super::load_ca(fs, &settings.certs_dir, target.ca_base)?;
    let ca_key = ca.key.as_ref().ok_or_else(|| PkiError::MissingKey {
        crt: paths::cert(&settings.certs_dir, target.ca_base).to_string(),
        key: paths::key(&settings.certs_dir, target.ca_base).to_string(),
    })?;
    let path = settings.path(target);
    // Whole seconds, as a certificate holds them: the returned NotAfter is the certificate's.
    let now = clock.wall();
    let now = now.replace_nanosecond(0).unwrap_or(now);
    let req = request_from(&current, path.as_str(), now, settings)?;
    let key = keys::generate(settings.key_algorithm)?;
    let cert_pem = issue::signed(&req, &key, &ca.cert.pem, ca_key)?;
    let key_pem = keys::to_pem(&key);
    let not_after = req.start + req.validity;
    match target.place {
        Place::Pki { base } => {
            let key_file = paths::key(&settings.certs_dir, base);
            backup.save(fs, key_file.as_str())?;
            backup.save(fs, path.as_str())?;
            fs.commit()?;
            // Key first: see the module doc.
            fs.write(&key_file, key_pem.as_bytes())?;
            fs.write(&path, cert_pem.as_bytes())?;
        }
        Place::Kubeconfig { .. } => {
            let old = fs.read(&path)?.ok_or_else(|| kc_error(&path, "disappeared while being renewed".into()))?;
            let new = replace_client_data(path.as_str(), &old, &cert_pem, &key_pem)?;
            backup.save(fs, path.as_str())?;
            fs.commit()?;
            fs.write(&path, &new)?;
        }
    }
    fs.commit()?;
    log::debug!("[certs] renewed {} ({}), valid until {}", target.name, path, super::check::rfc3339(not_after));
    Ok(Outcome::Renewed { not_after })
}

fn kc_error(path: &paths::File, detail: String) -> PkiError {
    PkiError::Kubeconfig { path: path.to_string(), detail }
}

/// kubeadm's certToConfig: CN, O, DNS names, IPs and extended key usages of the old certificate.
fn request_from(cert: &CertFile, path: &str, now: OffsetDateTime, s: &Settings) -> Result<issue::Request> {
    let x = cert.x509().map_err(|p| p.at(path))?;
    let subject = x.subject();
    let cn = subject.iter_common_name().next().and_then(|a| a.as_str().ok()).unwrap_or_default().to_string();
    let orgs = subject.iter_organization().filter_map(|a| a.as_str().ok()).map(str::to_string).collect();
    Ok(issue::Request { cn, orgs, usage: usage_of(&x, path)?, sans: sans_of(&x), validity: s.validity, start: now })
}

fn usage_of(x: &X509Certificate, path: &str) -> Result<Usage> {
    let eku = x.extended_key_usage().ok().flatten().map(|e| e.value.clone());
    let bad = |what: String| PkiError::Usages { path: path.to_string(), usages: what };
    let Some(eku) = eku else { return Err(bad("(none)".into())) };
    if eku.any
        || eku.code_signing
        || eku.email_protection
        || eku.time_stamping
        || eku.ocsp_signing
        || !eku.other.is_empty()
    {
        return Err(bad(format!("{eku:?}")));
    }
    match (eku.server_auth, eku.client_auth) {
        (true, true) => Ok(Usage::ServerAndClient),
        (true, false) => Ok(Usage::Server),
        (false, true) => Ok(Usage::Client),
        (false, false) => Err(bad("(none)".into())),
    }
}

/// DNS names and IPs, in the certificate's order.
fn sans_of(x: &X509Certificate) -> SanList {
    let mut l = SanList::default();
    for ext in x.extensions() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext.parsed_extension() {
            for n in &san.general_names {
                match n {
                    GeneralName::DNSName(d) => l.dns.push(d.to_string()),
                    GeneralName::IPAddress(b) => {
                        if let Ok(v4) = <[u8; 4]>::try_from(*b) {
                            l.ips.push(IpAddr::from(v4));
                        } else if let Ok(v6) = <[u8; 16]>::try_from(*b) {
                            l.ips.push(IpAddr::from(v6));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    l
}

/// The kubeconfig text with the current user's two embedded values replaced in place, every
/// other byte unchanged. Each old value must occur exactly once in the file.
pub fn replace_client_data(path: &str, text: &[u8], cert_pem: &str, key_pem: &str) -> Result<Vec<u8>> {
    let bad = |detail: String| PkiError::Kubeconfig { path: path.to_string(), detail };
    let kc = Kubeconfig::parse(text).map_err(|e| bad(e.to_string()))?;
    let user = kc.current().map_err(|e| bad(e.to_string()))?.1.cloned().unwrap_or_default();
    let s = std::str::from_utf8(text).map_err(|_| bad("is not UTF-8 text".into()))?;
    let b64 = |p: &str| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, p.as_bytes());
    let (new_cert, new_key) = (b64(cert_pem), b64(key_pem));
    let mut out = s.to_string();
    for (field, old, new) in [
        ("client-certificate-data", &user.client_certificate_data, &new_cert),
        ("client-key-data", &user.client_key_data, &new_key),
    ] {
        if old.is_empty() {
            return Err(bad(format!("has no embedded {field} for its current user")));
        }
        if out.matches(old.as_str()).count() != 1 {
            return Err(bad(format!(
                "holds its {field} value more than once or not verbatim; kubestrap replaces it only in place"
            )));
        }
        out = out.replacen(old.as_str(), new, 1);
    }
    // The result must read back with exactly the new values.
    let check = Kubeconfig::parse(out.as_bytes()).map_err(|e| bad(format!("after replacing the client data: {e}")))?;
    let got = check.current().map_err(|e| bad(e.to_string()))?.1.cloned().unwrap_or_default();
    if got.client_certificate_data != new_cert || got.client_key_data != new_key {
        return Err(bad("did not take the new client data in place".into()));
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
#[path = "renew_tests.rs"]
mod tests;
