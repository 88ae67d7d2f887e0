//! The cluster PKI on disk: CAs, leaves, the service-account key pair, and the CA pin.
//! Existing valid files are reused; invalid ones are errors that name the file.

pub mod check;
pub mod copycerts;
pub mod expiry;
pub mod issue;
pub mod keys;
pub mod renew;
pub mod rsa_key;
pub mod spec;

use std::collections::HashMap;

use log::info;
use rcgen::KeyPair;
use time::OffsetDateTime;

use crate::config::InitConfig;
use crate::fsutil::NodeFs;
use crate::paths;
use check::{CertFile, Expect, PkiError};
use spec::{CERTS, CertSpec, SanList, Usage};

type Result<T> = std::result::Result<T, PkiError>;

/// A CA as loaded from disk or just made; `key` is `None` for an external CA.
pub struct Ca {
    pub cert: CertFile,
    pub key: Option<KeyPair>,
}

/// `sha256:<hex>` of a certificate's SubjectPublicKeyInfo (kubeadm's CA pin).
pub fn ca_hash(pem: &[u8]) -> std::result::Result<String, check::CertProblem> {
    let c = CertFile::parse(pem)?;
    Ok(crate::discovery::CaPin::of_spki(&c.spki()?).to_string())
}

/// Loads a certificate file; `None` if absent.
pub(crate) fn load_cert(fs: &NodeFs, path: impl AsRef<str>) -> Result<Option<CertFile>> {
    let path = path.as_ref();
    fs.read(path)?.map(|b| CertFile::parse(&b).map_err(|m| m.at(path))).transpose()
}

/// Loads a private key file; `None` if absent.
pub(crate) fn load_key(fs: &NodeFs, path: impl AsRef<str>) -> Result<Option<KeyPair>> {
    let path = path.as_ref();
    fs.read(path)?.map(|b| keys::parse_pem(&b).map_err(|m| m.at(path))).transpose()
}

/// Loads a CA pair that must exist (for phases after `certs`).
pub(crate) fn load_ca(fs: &NodeFs, dir: &str, name: &str) -> Result<Ca> {
    let crt = paths::cert(dir, name);
    let cert = load_cert(fs, &crt)?.ok_or_else(|| PkiError::MissingCa { crt: crt.to_string() })?;
    let key = load_key(fs, paths::key(dir, name))?;
    Ok(Ca { cert, key })
}

fn request(spec: &CertSpec, cfg: &InitConfig, start: OffsetDateTime) -> issue::Request {
    issue::Request {
        cn: spec.common_name(cfg),
        orgs: spec.orgs.iter().map(|s| s.to_string()).collect(),
        usage: spec.usage,
        sans: spec.sans(cfg),
        validity: if spec.is_ca() { cfg.ca_validity } else { cfg.cert_validity },
        start,
    }
}

fn describe_sans(s: &SanList) -> String {
    let ips: Vec<String> = s.ips.iter().map(|i| i.to_string()).collect();
    format!("DNS names [{}] and IPs [{}]", s.dns.join(" "), ips.join(" "))
}

/// Does the cluster CA sit on disk without its key (kubeadm's "external CA" mode)?
pub(crate) fn is_external_ca(fs: &NodeFs, cfg: &InitConfig) -> bool {
    let dir = cfg.certs_dir();
    fs.exists(paths::cert(dir, "ca")) && !fs.exists(paths::key(dir, "ca"))
}

fn wanted_certs(cfg: &InitConfig) -> Vec<&'static CertSpec> {
    CERTS.iter().filter(|c| !(c.local_etcd_only && cfg.external_etcd().is_some())).collect()
}

/// How many new keys the `certs` phase will make: certificates with neither file, plus sa.key.
pub(crate) fn keys_needed(fs: &NodeFs, cfg: &InitConfig) -> usize {
    let dir = cfg.certs_dir();
    wanted_certs(cfg)
        .iter()
        .filter(|c| !fs.exists(paths::cert(dir, c.name)) && !fs.exists(paths::key(dir, c.name)))
        .count()
        + usize::from(!fs.exists(paths::key(dir, "sa")))
}

/// The `certs` phase: every certificate in the table plus sa.key/sa.pub; new keys come from
/// `fresh` (see [`keys::KeyPool`]).
pub(crate) fn ensure_certs(fs: &NodeFs, cfg: &InitConfig, start: OffsetDateTime, fresh: &keys::KeyPool) -> Result<()> {
    let dir = cfg.certs_dir();
    let wanted = wanted_certs(cfg);
    fresh.reserve(keys_needed(fs, cfg));
    let mut cas: HashMap<&str, Ca> = HashMap::new();
    for spec in wanted {
        let slot = Slot {
            spec,
            crt: paths::cert(dir, spec.name),
            key_file: paths::key(dir, spec.name),
            want: request(spec, cfg, start),
            ca: spec.ca.and_then(|n| cas.get(n)),
        };
        let existing_cert = load_cert(fs, &slot.crt)?;
        let existing_key = load_key(fs, &slot.key_file)?;
        let made = match (existing_cert, existing_key) {
            (Some(cert), key) => use_existing(&slot, cert, key, start)?,
            (None, key) => issue_new(fs, &slot, key, fresh)?,
        };
        if spec.is_ca() {
            cas.insert(spec.name, made);
        }
    }
    ensure_sa(fs, dir, fresh)
}

/// One certificate of the table: where it lives, what it must say and the CA that signs it.
struct Slot<'a> {
    spec: &'static CertSpec,
    crt: paths::File,
    key_file: paths::File,
    want: issue::Request,
    ca: Option<&'a Ca>,
}

/// A certificate already on disk, checked against what the table wants; its key may be missing
/// only for a CA (external CA mode).
fn use_existing(slot: &Slot, cert: CertFile, key: Option<KeyPair>, start: OffsetDateTime) -> Result<Ca> {
    let Slot { spec, crt, key_file, want, ca } = slot;
    let spki = key.as_ref().map(keys::spki);
    let expect =
        Expect { usage: spec.usage, sans: &want.sans, ca: ca.map(|c| &c.cert), key_spki: spki.as_deref(), now: start };
    check::check(&cert, &expect).map_err(|problem| PkiError::Rejected {
        crt: crt.to_string(),
        key: key_file.to_string(),
        problem,
    })?;
    match (&key, spec.is_ca()) {
        (None, true) => {
            info!("[certs] Using existing {} certificate authority without its key (external CA mode)", spec.name)
        }
        (None, false) => {
            return Err(PkiError::MissingKey { crt: crt.to_string(), key: key_file.to_string() });
        }
        (Some(_), true) => {
            info!("[certs] Using existing {} certificate authority", spec.name)
        }
        (Some(_), false) => info!("[certs] Using existing {} certificate and key on disk", spec.name),
    }
    Ok(Ca { cert, key })
}

/// A certificate not on disk: issued with the key left by an earlier cut, or a fresh one.
fn issue_new(fs: &NodeFs, slot: &Slot, key: Option<KeyPair>, fresh: &keys::KeyPool) -> Result<Ca> {
    let Slot { spec, crt, key_file, want, ca } = slot;
    if let Some(ca) = ca
        && ca.key.is_none()
    {
        return Err(PkiError::ExternalCaLeaf {
            crt: crt.to_string(),
            key: key_file.to_string(),
            ca: spec.ca.unwrap_or_default().to_string(),
        });
    }
    let key = match key {
        Some(k) => {
            info!("[certs] Reusing the existing key {key_file} (its certificate was never written)");
            k
        }
        None => fresh.take()?,
    };
    info!("[certs] Generating {:?} certificate and key", spec.name);
    if matches!(spec.usage, Usage::Server | Usage::ServerAndClient) {
        info!("[certs] {} serving cert is signed for {}", spec.name, describe_sans(&want.sans));
    }
    let pem = match ca {
        None => issue::self_signed(want, &key)?,
        Some(Ca { cert, key: Some(ca_key) }) => issue::signed(want, &key, &cert.pem, ca_key)?,
        Some(Ca { key: None, .. }) => unreachable!("checked above"),
    };
    // Key first: a crash before the cert leaves a key we reuse, never a cert without its key.
    fs.write(key_file, keys::to_pem(&key).as_bytes())?;
    fs.write(crt, pem.as_bytes())?;
    let cert = CertFile::parse(pem.as_bytes()).map_err(PkiError::Issued)?;
    Ok(Ca { cert, key: Some(key) })
}

fn ensure_sa(fs: &NodeFs, dir: &str, fresh: &keys::KeyPool) -> Result<()> {
    let key_file = paths::key(dir, "sa");
    let pub_file = paths::sa_pub(dir);
    let key = match load_key(fs, &key_file)? {
        Some(k) => {
            info!("[certs] Using the existing \"sa\" key");
            k
        }
        None => {
            if fs.exists(&pub_file) {
                return Err(PkiError::PublicWithoutKey { public: pub_file.to_string(), key: key_file.to_string() });
            }
            info!("[certs] Generating \"sa\" key and public key");
            let k = fresh.take()?;
            fs.write(&key_file, keys::to_pem(&k).as_bytes())?;
            k
        }
    };
    let public = keys::public_pem(&key);
    match fs.read(&pub_file)? {
        Some(existing) => {
            let same =
                x509_parser::pem::parse_x509_pem(&existing).ok().map(|(_, p)| p.contents) == Some(keys::spki(&key));
            if !same {
                return Err(PkiError::PublicMismatch { public: pub_file.to_string(), key: key_file.to_string() });
            }
        }
        None => fs.write(&pub_file, public.as_bytes())?,
    }
    Ok(())
}
