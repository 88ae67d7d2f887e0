//! Validation of certificates found on disk, so valid state is reused and invalid state is
//! reported (never silently replaced).

use std::net::IpAddr;

use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::pem::Pem;

use super::spec::{SanList, Usage};

/// A parsed certificate we keep the DER of (x509-parser borrows from it).
pub struct CertFile {
    pub pem: String,
    pub der: Vec<u8>,
}

impl CertFile {
    /// The first certificate of a PEM file.
    pub fn parse(bytes: &[u8]) -> Result<CertFile, String> {
        let pem = Pem::iter_from_buffer(bytes)
            .next()
            .ok_or("holds no PEM block")?
            .map_err(|e| format!("is not valid PEM: {e}"))?;
        if pem.label != "CERTIFICATE" {
            return Err(format!("holds a {:?} PEM block, not a CERTIFICATE", pem.label));
        }
        let c = CertFile { pem: String::from_utf8_lossy(bytes).into_owned(), der: pem.contents };
        c.x509()?;
        Ok(c)
    }

    pub fn x509(&self) -> Result<X509Certificate<'_>, String> {
        x509_parser::parse_x509_certificate(&self.der)
            .map(|(_, c)| c)
            .map_err(|e| format!("is not a valid X.509 certificate: {e}"))
    }

    /// DER SubjectPublicKeyInfo.
    pub fn spki(&self) -> Result<Vec<u8>, String> {
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

pub fn check(cert: &CertFile, want: &Expect) -> Result<(), String> {
    let x = cert.x509()?;
    if let Some(k) = want.key_spki
        && x.tbs_certificate.subject_pki.raw != k
    {
        return Err("does not match its private key (the key file belongs to another certificate)".into());
    }
    let v = x.validity();
    let (nb, na) = (v.not_before.to_datetime(), v.not_after.to_datetime());
    if want.now > na {
        return Err(format!("expired at {}", rfc3339(na)));
    }
    if want.now < nb {
        return Err(format!("is not valid until {} (is the clock right?)", rfc3339(nb)));
    }
    let is_ca = x.basic_constraints().ok().flatten().is_some_and(|b| b.value.ca);
    if want.usage == Usage::Ca {
        if !is_ca {
            return Err("is not a CA certificate (basicConstraints CA:TRUE missing)".into());
        }
    } else if is_ca {
        return Err("is a CA certificate where a leaf is expected".into());
    }
    if let Some(ca) = want.ca {
        let ca_x = ca.x509()?;
        if x.issuer() != ca_x.subject() || x.verify_signature(Some(ca_x.public_key())).is_err() {
            return Err(format!("is not signed by the CA {:?} it must chain to", ca_x.subject().to_string()));
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
        return Err("lacks the extended key usage it needs (serverAuth/clientAuth)".into());
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
        return Err(format!("lacks subject alternative names {missing:?}"));
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
                GeneralName::IPAddress(b) => match b.len() {
                    4 => ips.push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap_or_default())),
                    16 => ips.push(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap_or_default())),
                    _ => {}
                },
                _ => {}
            }
        }
    }
    (dns, ips)
}

pub fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339).unwrap_or_else(|_| t.to_string())
}
