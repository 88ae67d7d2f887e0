//! The `csrsigning` controller for `kubernetes.io/kube-apiserver-client-kubelet`:
//! issues approved kubelet client CSRs from the cluster CA, or marks them
//! Failed when they break the signer's rules.

use crate::csr::{self, KUBELET_CLIENT_SIGNER};
use crate::resources::CSRS;
use crate::store::{Store, meta_str, random_bytes};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use rcgen::{
    CertificateParams, CertificateSigningRequestParams, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SerialNumber,
};
use serde_json::Value;
use time::{Duration, OffsetDateTime};

/// KCM's default `--cluster-signing-duration`.
const SIGNING_DURATION: Duration = Duration::days(365);
/// KCM backdates certificates to tolerate clock skew.
const BACKDATE: Duration = Duration::minutes(5);

/// The cluster CA used for signing.
#[derive(Debug, Clone)]
pub struct Ca {
    pub cert_pem: String,
    pub key_pem: String,
}

fn key_usage(u: &str) -> Option<KeyUsagePurpose> {
    Some(match u {
        "digital signature" => KeyUsagePurpose::DigitalSignature,
        "content commitment" => KeyUsagePurpose::ContentCommitment,
        "key encipherment" => KeyUsagePurpose::KeyEncipherment,
        "key agreement" => KeyUsagePurpose::KeyAgreement,
        "data encipherment" => KeyUsagePurpose::DataEncipherment,
        "cert sign" => KeyUsagePurpose::KeyCertSign,
        "crl sign" => KeyUsagePurpose::CrlSign,
        "encipher only" => KeyUsagePurpose::EncipherOnly,
        "decipher only" => KeyUsagePurpose::DecipherOnly,
        _ => return None,
    })
}

fn ext_key_usage(u: &str) -> Option<ExtendedKeyUsagePurpose> {
    Some(match u {
        "client auth" => ExtendedKeyUsagePurpose::ClientAuth,
        "server auth" => ExtendedKeyUsagePurpose::ServerAuth,
        "code signing" => ExtendedKeyUsagePurpose::CodeSigning,
        "email protection" => ExtendedKeyUsagePurpose::EmailProtection,
        "timestamping" => ExtendedKeyUsagePurpose::TimeStamping,
        "ocsp signing" => ExtendedKeyUsagePurpose::OcspSigning,
        _ => return None,
    })
}

/// Signs one CSR; returns the PEM certificate.
fn sign(ca: &Ca, req_der: &[u8], usages: &[String], expiration_seconds: Option<i64>) -> Result<String, String> {
    let key = KeyPair::from_pem(&ca.key_pem).map_err(|e| format!("CA key: {e}"))?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, key).map_err(|e| format!("CA certificate: {e}"))?;
    let mut req = CertificateSigningRequestParams::from_der(&req_der.to_vec().into())
        .map_err(|e| format!("parsing request: {e}"))?;
    let now = OffsetDateTime::now_utc();
    let ttl = match expiration_seconds {
        Some(s) => Duration::seconds(s).min(SIGNING_DURATION),
        None => SIGNING_DURATION,
    };
    let mut params = CertificateParams::default();
    params.distinguished_name = req.params.distinguished_name.clone();
    params.not_before = now - BACKDATE;
    params.not_after = now + ttl;
    let mut serial = [0u8; 16];
    random_bytes(&mut serial);
    serial[0] &= 0x7f; // positive INTEGER
    params.serial_number = Some(SerialNumber::from_slice(&serial));
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = usages.iter().filter_map(|u| key_usage(u)).collect();
    params.extended_key_usages = usages.iter().filter_map(|u| ext_key_usage(u)).collect();
    params.use_authority_key_identifier_extension = true;
    req.params = params;
    let cert = req.signed_by(&issuer).map_err(|e| format!("signing: {e}"))?;
    Ok(cert.pem())
}

/// One sync: sign every approved, unsigned, not-failed kubelet client CSR.
/// Without a CA key nothing is signed (like a KCM without signing flags).
pub fn sync(store: &mut Store, ca: Option<&Ca>) -> bool {
    let Some(ca) = ca else { return false };
    let todo: Vec<Value> = store
        .list(&CSRS, "")
        .filter(|c| c["spec"]["signerName"].as_str() == Some(KUBELET_CLIENT_SIGNER))
        .filter(|c| csr::is_approved(c) && !csr::has_true_condition(c, "Failed"))
        .filter(|c| c["status"]["certificate"].as_str().unwrap_or("").is_empty())
        .cloned()
        .collect();
    let legacy = store.knobs.legacy_approver;
    let mut changed = false;
    for mut c in todo {
        let name = meta_str(&c, "name").to_string();
        let usages: Vec<String> = csr::usages(&c).into_iter().collect();
        let outcome = csr::parse_request(&c)
            .and_then(|req| {
                csr::validate_kubelet_client(&req, &csr::usages(&c), legacy)?;
                Ok(req)
            })
            .and_then(|req| sign(ca, &req.der, &usages, c["spec"]["expirationSeconds"].as_i64()));
        match outcome {
            Ok(pem) => c["status"]["certificate"] = STANDARD.encode(pem).into(),
            Err(e) => {
                log::warn!("csr signer: {name}: {e}");
                csr::add_condition(&mut c, "Failed", "SignerValidationFailure", &e);
            }
        }
        match store.replace(&CSRS, "", &name, c) {
            Ok(_) => changed = true,
            Err(e) => log::warn!("csr signer: {name}: {e}"),
        }
    }
    changed
}
