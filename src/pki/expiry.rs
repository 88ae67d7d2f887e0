//! Which certificates kubeadm renews and when they expire: the inventory behind
//! `certs check-expiration`, `certs renew` and the every-boot renewal.
//!
//! The table is kubeadm's renewal manager's: the leaves of its certificate list (less the etcd
//! ones with external etcd) and the client certificates embedded in four kubeconfigs, sorted by
//! name; then the CAs, sorted by name. kubelet.conf is not in it (the kubelet rotates its own).

use std::time::Duration;

use time::OffsetDateTime;

use super::check::{CertFile, PkiError};
use crate::config::{InitConfig, KeyAlgorithm};
use crate::fsutil::NodeFs;
use crate::kubeconfig::{Kubeconfig, decode_b64};
use crate::paths;

type Result<T> = std::result::Result<T, PkiError>;

/// Where a renewable certificate lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// `<certificatesDir>/<base>.crt` and `.key`.
    Pki { base: &'static str },
    /// The client certificate embedded in `/etc/kubernetes/<file>`.
    Kubeconfig { file: &'static str },
}

/// One certificate kubeadm can renew.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// kubeadm's name for it (`certs renew <name>`, the CERTIFICATE column).
    pub name: &'static str,
    /// kubeadm's long name (`<long name> renewed`).
    pub long_name: &'static str,
    pub place: Place,
    /// The signing CA's name and file base name.
    pub ca_name: &'static str,
    pub ca_base: &'static str,
    /// Only with local (stacked) etcd.
    pub local_etcd_only: bool,
}

const fn pki(
    name: &'static str,
    long_name: &'static str,
    base: &'static str,
    ca: (&'static str, &'static str),
) -> Target {
    let etcd = matches!(ca.0.as_bytes(), b"etcd-ca");
    Target { name, long_name, place: Place::Pki { base }, ca_name: ca.0, ca_base: ca.1, local_etcd_only: etcd }
}

const fn conf(file: &'static str, long_name: &'static str) -> Target {
    Target {
        name: file,
        long_name,
        place: Place::Kubeconfig { file },
        ca_name: "ca",
        ca_base: "ca",
        local_etcd_only: false,
    }
}

const CA: (&str, &str) = ("ca", "ca");
const ETCD_CA: (&str, &str) = ("etcd-ca", "etcd/ca");
const FRONT_PROXY_CA: (&str, &str) = ("front-proxy-ca", "front-proxy-ca");

/// Every renewable certificate, in kubeadm's order (sorted by name).
pub const TARGETS: &[Target] = &[
    conf("admin.conf", "certificate embedded in the kubeconfig file for the admin to use and for kubeadm itself"),
    pki("apiserver", "certificate for serving the Kubernetes API", "apiserver", CA),
    pki("apiserver-etcd-client", "certificate the apiserver uses to access etcd", "apiserver-etcd-client", ETCD_CA),
    pki(
        "apiserver-kubelet-client",
        "certificate for the API server to connect to kubelet",
        "apiserver-kubelet-client",
        CA,
    ),
    conf("controller-manager.conf", "certificate embedded in the kubeconfig file for the controller manager to use"),
    pki(
        "etcd-healthcheck-client",
        "certificate for liveness probes to healthcheck etcd",
        "etcd/healthcheck-client",
        ETCD_CA,
    ),
    pki("etcd-peer", "certificate for etcd nodes to communicate with each other", "etcd/peer", ETCD_CA),
    pki("etcd-server", "certificate for serving etcd", "etcd/server", ETCD_CA),
    pki("front-proxy-client", "certificate for the front proxy client", "front-proxy-client", FRONT_PROXY_CA),
    conf("scheduler.conf", "certificate embedded in the kubeconfig file for the scheduler manager to use"),
    conf("super-admin.conf", "certificate embedded in the kubeconfig file for the super-admin"),
];

/// The CAs, in kubeadm's order: (name, file base name, local etcd only).
pub const CAS: &[(&str, &str, bool)] =
    &[("ca", "ca", false), ("etcd-ca", "etcd/ca", true), ("front-proxy-ca", "front-proxy-ca", false)];

/// A CA this close to its NotAfter is a warning (it is never renewed).
pub const CA_WARNING: Duration = Duration::from_secs(365 * 24 * 3600);

/// What renewal needs from the ClusterConfiguration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub certs_dir: String,
    pub key_algorithm: KeyAlgorithm,
    /// certificateValidityPeriod.
    pub validity: Duration,
    /// Stacked etcd (the etcd certificates and etcd-ca are part of the inventory).
    pub local_etcd: bool,
}

impl Settings {
    pub fn from_config(cfg: &InitConfig) -> Settings {
        Settings {
            certs_dir: cfg.certs_dir().to_string(),
            key_algorithm: cfg.key_algorithm,
            validity: cfg.cert_validity,
            local_etcd: cfg.external_etcd().is_none(),
        }
    }

    /// The renewable certificates for this cluster, in kubeadm's order.
    pub fn targets(&self) -> impl Iterator<Item = &'static Target> + '_ {
        TARGETS.iter().filter(|t| self.local_etcd || !t.local_etcd_only)
    }

    /// The CAs for this cluster: (name, file base name).
    pub fn cas(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        CAS.iter().filter(|c| self.local_etcd || !c.2).map(|c| (c.0, c.1))
    }

    /// The file holding a target's certificate.
    pub fn path(&self, t: &Target) -> paths::File {
        match t.place {
            Place::Pki { base } => paths::cert(&self.certs_dir, base),
            Place::Kubeconfig { file } => paths::kubeconfig(file),
        }
    }
}

/// A renewable certificate by kubeadm's name.
pub fn find(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// One row of the inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: &'static str,
    /// The certificate file (a kubeconfig for the embedded ones).
    pub path: String,
    /// `None` when the file is missing (kubeadm's `missing: true`).
    pub not_after: Option<OffsetDateTime>,
    /// NotBefore (`None` when missing): a clock before a CA's NotBefore is not to be trusted.
    pub not_before: Option<OffsetDateTime>,
    /// The signing CA's name; `None` for a CA.
    pub ca_name: Option<&'static str>,
    /// The signing CA's key is absent (for a CA: its own key), so kubeadm cannot renew it.
    pub externally_managed: bool,
}

impl Entry {
    /// Time left until NotAfter (negative once expired); `None` when missing.
    pub fn residual(&self, now: OffsetDateTime) -> Option<time::Duration> {
        self.not_after.map(|t| t - now)
    }
}

/// The certificates and CAs of a node, with warnings for CAs close to expiry.
#[derive(Debug, Clone)]
pub struct Inventory {
    pub certificates: Vec<Entry>,
    pub authorities: Vec<Entry>,
    /// One line per CA within [`CA_WARNING`] of expiry (or expired).
    pub warnings: Vec<String>,
}

/// Is the CA `ca_base` externally managed (certificate present, key absent)? A missing CA
/// certificate is an error, as in kubeadm.
pub fn externally_managed(fs: &NodeFs, s: &Settings, ca_base: &str) -> Result<bool> {
    let crt = paths::cert(&s.certs_dir, ca_base);
    if !fs.exists(&crt) {
        return Err(PkiError::MissingCa { crt: crt.to_string() });
    }
    Ok(!fs.exists(paths::key(&s.certs_dir, ca_base)))
}

/// The client certificate embedded in a kubeconfig (its current context's user).
pub fn kubeconfig_cert(path: &str, text: &[u8]) -> Result<CertFile> {
    let bad = |detail: String| PkiError::Kubeconfig { path: path.to_string(), detail };
    let kc = Kubeconfig::parse(text).map_err(|e| bad(e.to_string()))?;
    let (_, user) = kc.current().map_err(|e| bad(e.to_string()))?;
    let data = user.map(|u| u.client_certificate_data.as_str()).unwrap_or_default();
    if data.is_empty() {
        return Err(bad("does not have an embedded client certificate (client-certificate-data)".into()));
    }
    let pem = decode_b64(data).map_err(|e| bad(e.in_field("client-certificate-data").to_string()))?;
    CertFile::parse(&pem).map_err(|p| bad(format!("client-certificate-data {p}")))
}

/// Reads a target's current certificate; `None` if its file is missing.
pub fn read_current(fs: &NodeFs, s: &Settings, t: &Target) -> Result<Option<CertFile>> {
    let path = s.path(t);
    match t.place {
        Place::Pki { .. } => super::load_cert(fs, &path),
        Place::Kubeconfig { .. } => fs.read(&path)?.map(|b| kubeconfig_cert(path.as_str(), &b)).transpose(),
    }
}

/// (NotBefore, NotAfter).
fn validity(c: &CertFile, path: &str) -> Result<(OffsetDateTime, OffsetDateTime)> {
    let x = c.x509().map_err(|p| p.at(path))?;
    Ok((x.validity().not_before.to_datetime(), x.validity().not_after.to_datetime()))
}

fn missing(name: &'static str, path: String) -> Entry {
    Entry { name, path, not_after: None, not_before: None, ca_name: None, externally_managed: false }
}

/// Every renewable certificate and CA of the node, as `kubeadm certs check-expiration` reads
/// them; missing files are rows with `not_after: None`.
pub fn inventory(fs: &NodeFs, s: &Settings, now: OffsetDateTime) -> Result<Inventory> {
    let mut certificates = Vec::new();
    for t in s.targets() {
        let path = s.path(t).to_string();
        let row = match read_current(fs, s, t)? {
            None => missing(t.name, path),
            Some(c) => {
                let (start, end) = validity(&c, &path)?;
                Entry {
                    name: t.name,
                    path,
                    not_after: Some(end),
                    not_before: Some(start),
                    ca_name: Some(t.ca_name),
                    externally_managed: externally_managed(fs, s, t.ca_base)?,
                }
            }
        };
        certificates.push(row);
    }
    let mut authorities = Vec::new();
    let mut warnings = Vec::new();
    for (name, base) in s.cas() {
        let path = paths::cert(&s.certs_dir, base);
        let row = match super::load_cert(fs, &path)? {
            None => missing(name, path.to_string()),
            Some(c) => {
                let (start, end) = validity(&c, path.as_str())?;
                if end - now < CA_WARNING {
                    warnings.push(ca_warning(name, path.as_str(), end, now));
                }
                let external = !fs.exists(paths::key(&s.certs_dir, base));
                Entry {
                    name,
                    path: path.to_string(),
                    not_after: Some(end),
                    not_before: Some(start),
                    ca_name: None,
                    externally_managed: external,
                }
            }
        };
        authorities.push(row);
    }
    Ok(Inventory { certificates, authorities, warnings })
}

fn ca_warning(name: &str, path: &str, end: OffsetDateTime, now: OffsetDateTime) -> String {
    let when = super::check::rfc3339(end);
    if end <= now {
        format!("the {name} certificate authority ({path}) expired at {when}; kubestrap never renews a CA: replace it")
    } else {
        let days = (end - now).whole_days();
        format!(
            "the {name} certificate authority ({path}) expires at {when}, in {days} days; kubestrap never renews a CA: plan its replacement"
        )
    }
}
