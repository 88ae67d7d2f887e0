//! Building and signing certificates with rcgen, with kubeadm's extensions and validity rules.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, CustomExtension, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};
use ring::rand::{SecureRandom, SystemRandom};
use time::OffsetDateTime;

use super::check::PkiError;
use super::spec::{SanList, Usage};
use crate::constants::CERT_BACKDATE_SECS;

type Result<T> = std::result::Result<T, PkiError>;

/// `map_err(sign("signing x"))`: an rcgen failure at a named step.
fn sign(what: impl std::fmt::Display) -> impl FnOnce(rcgen::Error) -> PkiError {
    let what = what.to_string();
    move |e| PkiError::Sign { what, detail: e.to_string() }
}

/// What to put in a certificate.
#[derive(Debug, Clone)]
pub struct Request {
    pub cn: String,
    pub orgs: Vec<String>,
    pub usage: Usage,
    pub sans: SanList,
    pub validity: Duration,
    pub start: OffsetDateTime,
}

/// A random serial in [1, 2^63-1), like kubeadm.
fn serial() -> Result<SerialNumber> {
    let rng = SystemRandom::new();
    loop {
        let mut b = [0u8; 8];
        rng.fill(&mut b).map_err(|_| PkiError::Random)?;
        b[0] &= 0x7f;
        let v = u64::from_be_bytes(b);
        if v != 0 && v != u64::MAX >> 1 {
            return Ok(SerialNumber::from_slice(&b));
        }
    }
}

fn params(req: &Request) -> Result<CertificateParams> {
    let mut p = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    // Go writes O before CN; keep the same subject order so tools print the same string.
    for o in &req.orgs {
        dn.push(DnType::OrganizationName, o.as_str());
    }
    dn.push(DnType::CommonName, req.cn.as_str());
    p.distinguished_name = dn;
    p.serial_number = Some(serial()?);
    p.not_before = req.start - time::Duration::seconds(CERT_BACKDATE_SECS);
    p.not_after = req.start + req.validity;
    for d in &req.sans.dns {
        let name = rcgen::string::Ia5String::try_from(d.as_str()).map_err(sign(format_args!("DNS name {d:?}")))?;
        p.subject_alt_names.push(SanType::DnsName(name));
    }
    for ip in &req.sans.ips {
        p.subject_alt_names.push(SanType::IpAddress(*ip));
    }
    p.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    match req.usage {
        Usage::Ca => {
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.key_usages.push(KeyUsagePurpose::KeyCertSign);
        }
        Usage::Server => p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth],
        Usage::Client => p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth],
        Usage::ServerAndClient => {
            p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth]
        }
    }
    if req.usage != Usage::Ca {
        // kubeadm's NewSignedCert sets BasicConstraintsValid with IsCA false and no SubjectKeyId, so Go
        // writes a critical, empty basicConstraints, no subjectKeyIdentifier (Go only makes one up for
        // CAs), and an authorityKeyIdentifier copied from the CA's subjectKeyIdentifier. rcgen's
        // `ExplicitNoCa` would add a subjectKeyIdentifier, so write basicConstraints ourselves.
        p.is_ca = IsCa::NoCa;
        p.custom_extensions.push(basic_constraints_not_ca());
        p.use_authority_key_identifier_extension = true;
    }
    Ok(p)
}

/// OID 2.5.29.19, basicConstraints.
const OID_BASIC_CONSTRAINTS: &[u64] = &[2, 5, 29, 19];

/// A critical basicConstraints with cA absent (false): an empty SEQUENCE, as Go marshals it.
fn basic_constraints_not_ca() -> CustomExtension {
    let mut ext = CustomExtension::from_oid_content(OID_BASIC_CONSTRAINTS, vec![0x30, 0x00]);
    ext.set_criticality(true);
    ext
}

/// A self-signed CA certificate (PEM) for `key`.
pub fn self_signed(req: &Request, key: &KeyPair) -> Result<String> {
    Ok(params(req)?.self_signed(key).map_err(sign(format_args!("signing CA {}", req.cn)))?.pem())
}

/// A certificate for `key`, signed by the CA (`ca_pem` + `ca_key`).
pub fn signed(req: &Request, key: &KeyPair, ca_pem: &str, ca_key: &KeyPair) -> Result<String> {
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key).map_err(sign("reading the CA certificate"))?;
    Ok(params(req)?.signed_by(key, &issuer).map_err(sign(format_args!("signing {}", req.cn)))?.pem())
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::ParsedExtension;
    use x509_parser::oid_registry::{
        OID_X509_EXT_AUTHORITY_KEY_IDENTIFIER, OID_X509_EXT_BASIC_CONSTRAINTS, OID_X509_EXT_SUBJECT_KEY_IDENTIFIER,
    };

    fn req(cn: &str, usage: Usage) -> Request {
        Request {
            cn: cn.into(),
            orgs: vec![],
            usage,
            sans: SanList::default(),
            validity: Duration::from_secs(3600),
            start: OffsetDateTime::now_utc(),
        }
    }

    fn der(pem: &str) -> Vec<u8> {
        x509_parser::pem::parse_x509_pem(pem.as_bytes()).unwrap().1.contents
    }

    /// (SKI, AKI key id, basicConstraints (critical, cA)) as Go's x509 would write them.
    #[allow(clippy::type_complexity)]
    fn ids(der: &[u8]) -> (Option<Vec<u8>>, Option<Vec<u8>>, Option<(bool, bool)>) {
        let (_, c) = x509_parser::parse_x509_certificate(der).unwrap();
        let mut out = (None, None, None);
        for e in c.extensions() {
            match e.parsed_extension() {
                ParsedExtension::SubjectKeyIdentifier(k) => out.0 = Some(k.0.to_vec()),
                ParsedExtension::AuthorityKeyIdentifier(a) => {
                    out.1 = Some(a.key_identifier.as_ref().unwrap().0.to_vec())
                }
                ParsedExtension::BasicConstraints(b) => out.2 = Some((e.critical, b.ca)),
                _ => {}
            }
        }
        let count = |oid| c.extensions().iter().filter(|e| e.oid == oid).count();
        assert!(count(OID_X509_EXT_SUBJECT_KEY_IDENTIFIER) <= 1);
        assert!(count(OID_X509_EXT_AUTHORITY_KEY_IDENTIFIER) <= 1);
        assert_eq!(count(OID_X509_EXT_BASIC_CONSTRAINTS), 1);
        out
    }

    /// kubeadm's NewSelfSignedCACert / NewSignedCert through Go's x509.CreateCertificate: the CA
    /// has a subjectKeyIdentifier and no authorityKeyIdentifier (self-signed); a leaf has no
    /// subjectKeyIdentifier, an authorityKeyIdentifier equal to its CA's SKI, and a critical
    /// basicConstraints with cA false.
    #[test]
    fn extensions_match_go_for_cas_and_leaves() {
        let ca_key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let ca = self_signed(&req("kubernetes", Usage::Ca), &ca_key).unwrap();
        let (ca_ski, ca_aki, ca_bc) = ids(&der(&ca));
        let ca_ski = ca_ski.expect("a CA has a subjectKeyIdentifier");
        assert_eq!(ca_aki, None);
        assert_eq!(ca_bc, Some((true, true)));
        for usage in [Usage::Server, Usage::Client, Usage::ServerAndClient] {
            let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
            let leaf = signed(&req("leaf", usage), &key, &ca, &ca_key).unwrap();
            let (ski, aki, bc) = ids(&der(&leaf));
            assert_eq!(ski, None, "{usage:?}: kubeadm's leaves have no subjectKeyIdentifier");
            assert_eq!(aki.as_ref(), Some(&ca_ski), "{usage:?}");
            assert_eq!(bc, Some((true, false)), "{usage:?}");
        }
    }
}
