//! Building and signing certificates with rcgen, with kubeadm's extensions and validity rules.

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use ring::rand::{SecureRandom, SystemRandom};
use time::OffsetDateTime;

use super::spec::{SanList, Usage};
use crate::constants::CERT_BACKDATE_SECS;
use crate::error::{Context, Result};

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
        rng.fill(&mut b).map_err(|_| super::check::PkiError::Random)?;
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
        let name = rcgen::string::Ia5String::try_from(d.as_str()).ctx(format_args!("DNS name {d:?}"))?;
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
        p.is_ca = IsCa::ExplicitNoCa;
        p.use_authority_key_identifier_extension = true;
    }
    Ok(p)
}

/// A self-signed CA certificate (PEM) for `key`.
pub fn self_signed(req: &Request, key: &KeyPair) -> Result<String> {
    Ok(params(req)?.self_signed(key).ctx(format_args!("signing CA {}", req.cn))?.pem())
}

/// A certificate for `key`, signed by the CA (`ca_pem` + `ca_key`).
pub fn signed(req: &Request, key: &KeyPair, ca_pem: &str, ca_key: &KeyPair) -> Result<String> {
    let issuer = Issuer::from_ca_cert_pem(ca_pem, ca_key).ctx("reading the CA certificate")?;
    Ok(params(req)?.signed_by(key, &issuer).ctx(format_args!("signing {}", req.cn))?.pem())
}
