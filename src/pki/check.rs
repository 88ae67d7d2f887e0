//! Validation of certificates found on disk, so valid state is reused and invalid state is
//! reported (never silently replaced).

use std::net::IpAddr;

use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

use super::spec::{SanList, Usage};

/// What is wrong with a certificate, phrased to follow its file name
/// (`/etc/kubernetes/pki/apiserver.crt expired at ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertProblem {
    #[error("holds no PEM block")]
    NoPem,
    #[error("is not valid PEM: {detail}")]
    BadPem { detail: String },
    #[error("holds a {label:?} PEM block, not a CERTIFICATE")]
    NotACertificate { label: String },
    #[error("is not a valid X.509 certificate: {detail}")]
    BadX509 { detail: String },
    #[error("does not match its private key (the key file belongs to another certificate)")]
    KeyMismatch,
    #[error("expired at {not_after}")]
    Expired { not_after: String },
    #[error("is not valid until {not_before} (is the clock right?)")]
    NotYetValid { not_before: String },
    #[error("is not a CA certificate (basicConstraints CA:TRUE missing)")]
    NotCa,
    #[error("is a CA certificate where a leaf is expected")]
    UnexpectedCa,
    #[error("is not signed by the CA {ca:?} it must chain to")]
    WrongIssuer { ca: String },
    #[error("lacks the extended key usage it needs (serverAuth/clientAuth)")]
    MissingUsage,
    #[error("lacks subject alternative names {missing:?}")]
    MissingSans { missing: Vec<String> },
}

impl CertProblem {
    /// The problem, attributed to the certificate file it was found in.
    pub fn at(self, path: impl Into<String>) -> PkiError {
        PkiError::Cert { path: path.into(), problem: self }
    }
}

/// The PKI layer's error: a problem with a named file, or a failure to make a key or certificate.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// A certificate on disk that is unusable as it is.
    #[error("{path} {problem}; fix or remove it")]
    Cert { path: String, problem: CertProblem },
    /// A private key on disk that cannot be loaded.
    #[error("{path}: {problem}; fix or remove it")]
    Key { path: String, problem: super::keys::KeyProblem },
    /// An existing certificate that does not satisfy what its spec asks for.
    #[error("{crt} {problem}; kubestrap will not overwrite it: fix it or remove {crt} and {key}")]
    Rejected { crt: String, key: String, problem: CertProblem },
    #[error("generating a {alg} key: {detail}")]
    Generate { alg: String, detail: String },
    #[error("a key generation thread panicked")]
    GeneratorPanicked,
    #[error("the system random generator failed")]
    Random,
    /// A CA a later phase needs was never written.
    #[error("{crt} is missing; run `kubestrap init phase certs` first")]
    MissingCa { crt: String },
    /// A leaf certificate whose key is gone: we cannot reuse it or make it anew.
    #[error("{crt} exists but {key} is missing; supply the key or remove both")]
    MissingKey { crt: String, key: String },
    /// A leaf to make under an external CA, which we cannot sign with.
    #[error(
        "{crt} is missing and its CA {ca} has no key (external CA mode): provide {crt} and {key} signed by that CA"
    )]
    ExternalCaLeaf { crt: String, key: String, ca: String },
    #[error("{public} exists without {key}; supply the key or remove {public}")]
    PublicWithoutKey { public: String, key: String },
    #[error("{public} does not match {key}; remove {public} to have it rewritten")]
    PublicMismatch { public: String, key: String },
    /// rcgen refused to build or sign a certificate; `what` says which step.
    #[error("{what}: {detail}")]
    Sign { what: String, detail: String },
    /// A certificate we just made does not parse back: a bug, not bad input.
    #[error("{0}")]
    Issued(CertProblem),
    /// A kubeconfig whose embedded client certificate cannot be read or replaced.
    #[error("{path} {detail}; fix it or write it anew (kubestrap init phase kubeconfig)")]
    Kubeconfig { path: String, detail: String },
    /// A certificate name `certs renew` does not know.
    #[error("{name} is not a valid certificate for this cluster; valid names: {valid}")]
    UnknownCertificate { name: String, valid: String },
    /// A certificate whose extended key usages kubeadm's renewal cannot reproduce.
    #[error("{path} has extended key usages {usages}; kubestrap renews only serverAuth/clientAuth certificates")]
    Usages { path: String, usages: String },
    #[error(transparent)]
    Fs(#[from] crate::fsutil::FsError),
}

/// A parsed certificate we keep the DER of (x509-parser borrows from it).
pub struct CertFile {
    pub pem: String,
    pub der: Vec<u8>,
}

impl CertFile {
    /// The first certificate of a PEM file.
    pub fn parse(bytes: &[u8]) -> Result<CertFile, CertProblem> {
        let pem = Pem::iter_from_buffer(bytes)
            .next()
            .ok_or(CertProblem::NoPem)?
            .map_err(|e| CertProblem::BadPem { detail: e.to_string() })?;
        if pem.label != "CERTIFICATE" {
            return Err(CertProblem::NotACertificate { label: pem.label });
        }
        let c = CertFile { pem: String::from_utf8_lossy(bytes).into_owned(), der: pem.contents };
        c.x509()?;
        Ok(c)
    }

    pub fn x509(&self) -> Result<X509Certificate<'_>, CertProblem> {
        x509_parser::parse_x509_certificate(&self.der)
            .map(|(_, c)| c)
            .map_err(|e| CertProblem::BadX509 { detail: e.to_string() })
    }

    /// DER SubjectPublicKeyInfo.
    pub fn spki(&self) -> Result<Vec<u8>, CertProblem> {
        Ok(self.x509()?.tbs_certificate.subject_pki.raw.to_vec())
    }
}

/// What a certificate on disk must satisfy to be reused.
pub struct Expect<'a> {
    pub usage: Usage,
    pub sans: &'a SanList,
    /// The signing CA; `None` when the certificate is a CA we take as given (self-signed or not).
    pub ca: Option<&'a CertFile>,
    /// The public key of the private key that sits next to the certificate.
    pub key_spki: Option<&'a [u8]>,
    pub now: OffsetDateTime,
}

pub fn check(cert: &CertFile, want: &Expect) -> Result<(), CertProblem> {
    let x = cert.x509()?;
    if let Some(k) = want.key_spki
        && x.tbs_certificate.subject_pki.raw != k
    {
        return Err(CertProblem::KeyMismatch);
    }
    let v = x.validity();
    let (nb, na) = (v.not_before.to_datetime(), v.not_after.to_datetime());
    if want.now > na {
        return Err(CertProblem::Expired { not_after: rfc3339(na) });
    }
    if want.now < nb {
        return Err(CertProblem::NotYetValid { not_before: rfc3339(nb) });
    }
    let is_ca = x.basic_constraints().ok().flatten().is_some_and(|b| b.value.ca);
    if want.usage == Usage::Ca {
        if !is_ca {
            return Err(CertProblem::NotCa);
        }
    } else if is_ca {
        return Err(CertProblem::UnexpectedCa);
    }
    if let Some(ca) = want.ca {
        let ca_x = ca.x509()?;
        if x.issuer() != ca_x.subject() || x.verify_signature(Some(ca_x.public_key())).is_err() {
            return Err(CertProblem::WrongIssuer { ca: ca_x.subject().to_string() });
        }
    }
    let eku = x.extended_key_usage().ok().flatten().map(|e| (e.value.server_auth, e.value.client_auth));
    let (server, client) = eku.unwrap_or((false, false));
    let need = match want.usage {
        Usage::Ca => (false, false),
        Usage::Server => (true, false),
        Usage::Client => (false, true),
        Usage::ServerAndClient => (true, true),
    };
    if (need.0 && !server) || (need.1 && !client) {
        return Err(CertProblem::MissingUsage);
    }
    let (have_dns, have_ips) = sans_of(&x);
    let missing: Vec<String> = want
        .sans
        .dns
        .iter()
        .filter(|d| !have_dns.contains(d))
        .cloned()
        .chain(want.sans.ips.iter().filter(|i| !have_ips.contains(i)).map(|i| i.to_string()))
        .collect();
    if !missing.is_empty() && want.usage != Usage::Ca {
        return Err(CertProblem::MissingSans { missing });
    }
    Ok(())
}

fn sans_of(x: &X509Certificate) -> (Vec<String>, Vec<IpAddr>) {
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    if let Ok(Some(san)) = x.subject_alternative_name() {
        for n in &san.value.general_names {
            match n {
                GeneralName::DNSName(d) => dns.push(d.to_string()),
                GeneralName::IPAddress(b) => {
                    if let Ok(v4) = <[u8; 4]>::try_from(*b) {
                        ips.push(IpAddr::from(v4));
                    } else if let Ok(v6) = <[u8; 16]>::try_from(*b) {
                        ips.push(IpAddr::from(v6));
                    }
                }
                _ => {}
            }
        }
    }
    (dns, ips)
}

/// `YYYY-MM-DD-hh-mm-ss` in UTC: the kubelet's name for its client bundles, and kubeadm's for
/// its backup directories.
pub fn file_stamp(t: OffsetDateTime) -> String {
    let t = t.to_offset(time::UtcOffset::UTC);
    format!(
        "{:04}-{:02}-{:02}-{:02}-{:02}-{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

pub fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file() {
        let e = CertFile::parse(b"hello").map(|_| ()).unwrap_err();
        assert_eq!(e, CertProblem::NoPem);
        let e = e.at("/etc/kubernetes/pki/ca.crt");
        assert_eq!(e.to_string(), "/etc/kubernetes/pki/ca.crt holds no PEM block; fix or remove it");
        let key = b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n";
        let e = CertFile::parse(key).map(|_| ()).unwrap_err();
        assert_eq!(e.to_string(), "holds a \"PRIVATE KEY\" PEM block, not a CERTIFICATE");
        let r = PkiError::Rejected {
            crt: "/pki/apiserver.crt".into(),
            key: "/pki/apiserver.key".into(),
            problem: CertProblem::Expired { not_after: "2020-01-01T00:00:00Z".into() },
        };
        assert_eq!(
            r.to_string(),
            "/pki/apiserver.crt expired at 2020-01-01T00:00:00Z; kubestrap will not overwrite it: fix it or remove \
             /pki/apiserver.crt and /pki/apiserver.key"
        );
        let g = PkiError::Generate { alg: "Rsa(2048)".into(), detail: "no entropy".into() };
        assert_eq!(g.to_string(), "generating a Rsa(2048) key: no entropy");
    }
}
