//! Private keys: generation per `encryptionAlgorithm`, loading from any PEM kubeadm or openssl
//! writes (PKCS#8, PKCS#1 RSA, SEC1 EC), and PEM encoding.
//! ring signs and makes EC keys; ring cannot make RSA keys, so the `rsa` crate generates those
//! and hands them to ring as PKCS#8.

use pkcs8::der::{Decode, Encode};
use rcgen::{KeyPair, PKCS_ECDSA_P256_SHA256, PKCS_ECDSA_P384_SHA384, PublicKeyData};
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::EncodePrivateKey;

use super::check::PkiError;
use crate::config::KeyAlgorithm;

/// What is wrong with a private key file's contents, phrased to follow its file name
/// (`/etc/kubernetes/pki/ca.key: the key is encrypted; ...`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyProblem {
    #[error("not a PEM file")]
    NotPem,
    #[error("bad RSA key: {detail}")]
    BadRsa { detail: String },
    #[error("bad EC key: {detail}")]
    BadEc { detail: String },
    #[error("EC key names no curve")]
    NoCurve,
    #[error("re-encoding EC key: {detail}")]
    Reencode { detail: String },
    #[error("the key is encrypted; kubestrap needs it unencrypted")]
    Encrypted,
    #[error("PEM block {label:?} is not a private key")]
    NotAKey { label: String },
    #[error("unsupported or corrupt private key: {detail}")]
    Corrupt { detail: String },
}

impl KeyProblem {
    /// The problem, attributed to the key file it was found in.
    pub fn at(self, path: impl Into<String>) -> PkiError {
        PkiError::Key { path: path.into(), problem: self }
    }
}

/// A fresh key of the given algorithm.
pub fn generate(alg: KeyAlgorithm) -> Result<KeyPair, PkiError> {
    let err = |e: &dyn std::fmt::Display| PkiError::Generate { alg: format!("{alg:?}"), detail: e.to_string() };
    match alg {
        KeyAlgorithm::EcdsaP256 => KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| err(&e)),
        KeyAlgorithm::EcdsaP384 => KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384).map_err(|e| err(&e)),
        KeyAlgorithm::Rsa(bits) => {
            let key = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, bits).map_err(|e| err(&e))?;
            let der = key.to_pkcs8_der().map_err(|e| err(&e))?;
            KeyPair::try_from(der.as_bytes()).map_err(|e| err(&e))
        }
    }
}

/// `n` fresh keys, made on all cores: RSA generation dominates init time otherwise.
pub fn generate_many(alg: KeyAlgorithm, n: usize) -> Result<Vec<KeyPair>, PkiError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if !matches!(alg, KeyAlgorithm::Rsa(_)) {
        return (0..n).map(|_| generate(alg)).collect();
    }
    let threads = std::thread::available_parallelism().map(|t| t.get()).unwrap_or(1).min(n);
    let per = n.div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let count = per.min(n.saturating_sub(t * per));
                s.spawn(move || (0..count).map(|_| generate(alg)).collect::<Result<Vec<_>, _>>())
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        for h in handles {
            out.extend(h.join().map_err(|_| PkiError::GeneratorPanicked)??);
        }
        Ok(out)
    })
}

/// Parses a private key PEM. Accepts PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY") and
/// SEC1 ("EC PRIVATE KEY"), so CAs made by kubeadm or openssl can be brought in.
pub fn parse_pem(pem_text: &[u8]) -> Result<KeyPair, KeyProblem> {
    let block = x509_parser::pem::parse_x509_pem(pem_text).map_err(|_| KeyProblem::NotPem)?.1;
    let pkcs8: Vec<u8> = match block.label.as_str() {
        "PRIVATE KEY" => block.contents,
        "RSA PRIVATE KEY" => rsa::RsaPrivateKey::from_pkcs1_der(&block.contents)
            .and_then(|k| k.to_pkcs8_der().map_err(rsa::pkcs1::Error::from))
            .map_err(|e| KeyProblem::BadRsa { detail: e.to_string() })?
            .as_bytes()
            .to_vec(),
        "EC PRIVATE KEY" => sec1_to_pkcs8(&block.contents)?,
        "ENCRYPTED PRIVATE KEY" => return Err(KeyProblem::Encrypted),
        other => return Err(KeyProblem::NotAKey { label: other.to_string() }),
    };
    KeyPair::try_from(pkcs8.as_slice()).map_err(|e| KeyProblem::Corrupt { detail: e.to_string() })
}

fn sec1_to_pkcs8(der: &[u8]) -> Result<Vec<u8>, KeyProblem> {
    let ec = sec1::EcPrivateKey::from_der(der).map_err(|e| KeyProblem::BadEc { detail: e.to_string() })?;
    let curve = ec.parameters.and_then(|p| p.named_curve()).ok_or(KeyProblem::NoCurve)?;
    let params = pkcs8::der::asn1::AnyRef::from(&curve);
    let info = pkcs8::PrivateKeyInfo {
        algorithm: pkcs8::AlgorithmIdentifierRef { oid: sec1::ALGORITHM_OID, parameters: Some(params) },
        private_key: der,
        public_key: None,
    };
    info.to_der().map_err(|e| KeyProblem::Reencode { detail: e.to_string() })
}

/// PEM of the key (PKCS#8, which every Go and openssl consumer reads).
pub fn to_pem(key: &KeyPair) -> String {
    key.serialize_pem()
}

/// DER SubjectPublicKeyInfo of the key.
pub fn spki(key: &KeyPair) -> Vec<u8> {
    key.subject_public_key_info()
}

/// PEM "PUBLIC KEY" (PKIX), as kubeadm writes sa.pub.
pub fn public_pem(key: &KeyPair) -> String {
    key.public_key_pem()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_each_algorithm_and_round_trip_pem() {
        for alg in [KeyAlgorithm::EcdsaP256, KeyAlgorithm::EcdsaP384, KeyAlgorithm::Rsa(2048)] {
            let k = generate(alg).unwrap();
            let back = parse_pem(to_pem(&k).as_bytes()).unwrap();
            assert_eq!(spki(&k), spki(&back), "{alg:?}");
        }
    }

    #[test]
    fn generate_many_gives_distinct_keys() {
        let ks = generate_many(KeyAlgorithm::Rsa(2048), 3).unwrap();
        assert_eq!(ks.len(), 3);
        assert_ne!(spki(&ks[0]), spki(&ks[1]));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_pem(b"hello").is_err());
        assert!(parse_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").is_err());
    }

    #[test]
    fn errors_name_the_file() {
        let e = parse_pem(b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e, KeyProblem::Encrypted);
        assert_eq!(
            e.at("/etc/kubernetes/pki/ca.key").to_string(),
            "/etc/kubernetes/pki/ca.key: the key is encrypted; kubestrap needs it unencrypted; fix or remove it"
        );
        let e = parse_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").map(|_| ()).unwrap_err();
        assert_eq!(e.to_string(), "PEM block \"CERTIFICATE\" is not a private key");
    }
}
