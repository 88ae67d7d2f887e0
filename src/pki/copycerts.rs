//! kubeadm's copycerts: the keys and certificates every control-plane node must share travel in
//! the `kube-system/kubeadm-certs` Secret, each file sealed with AES-256-GCM under the
//! certificate key (the raw 32 bytes, no KDF, no AAD), stored as `nonce(12) ‖ ciphertext ‖
//! tag(16)`, exactly as kubeadm's `EncryptBytes` does, so kubeadm and kubestrap nodes interoperate.

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use thiserror::Error;

use crate::config::InitConfig;

use crate::config::values::{BadCertificateKey, CERTIFICATE_KEY_SIZE, CertificateKey};
pub(crate) const SECRET_NAME: &str = "kubeadm-certs";
/// The Role and RoleBinding that let bootstrap tokens read the Secret.
pub(crate) const RBAC_NAME: &str = "kubeadm:kubeadm-certs";
/// The short-lived token whose expiry deletes the Secret (through its ownerReference).
pub(crate) const PROXY_TOKEN_DESCRIPTION: &str = "Proxy for managing TTL for the kubeadm-certs secret";
/// kubeadm's DefaultCertTokenDuration.
pub(crate) const PROXY_TOKEN_TTL: &str = "2h0m0s";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum CopyCertsError {
    #[error(transparent)]
    Key(#[from] BadCertificateKey),
    #[error("no randomness available to make a certificate key or nonce")]
    Random,
    #[error("size of data is less than the nonce")]
    TooShort,
    #[error(
        "could not decrypt {0:?} from the kubeadm-certs Secret: the certificate key is wrong (or the Secret was re-uploaded with another key)"
    )]
    Open(String),
}

// The type and its parser live with the config values; sealing needs ring, so it stays here.
impl CertificateKey {
    /// 32 random bytes, as kubeadm's CreateCertificateKey.
    pub fn generate() -> Result<CertificateKey, CopyCertsError> {
        let mut k = [0u8; CERTIFICATE_KEY_SIZE];
        SystemRandom::new().fill(&mut k).map_err(|_| CopyCertsError::Random)?;
        Ok(CertificateKey(k))
    }

    fn aead(&self) -> LessSafeKey {
        // Invariant: a 32-byte key is always a valid AES-256 key.
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.0).unwrap_or_else(|_| unreachable!("32-byte AES key")))
    }

    /// Seals `plain` under a random nonce: `nonce ‖ ciphertext ‖ tag`.
    pub fn seal(&self, plain: &[u8]) -> Result<Vec<u8>, CopyCertsError> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| CopyCertsError::Random)?;
        Ok(self.seal_with_nonce(nonce, plain))
    }

    /// Sealing with a given nonce, for interop vectors; production uses [`seal`](Self::seal).
    pub(crate) fn seal_with_nonce(&self, nonce: [u8; NONCE_LEN], plain: &[u8]) -> Vec<u8> {
        let mut out = plain.to_vec();
        // Invariant: sealing only fails for inputs beyond AES-GCM's 64 GiB limit.
        let tag = self
            .aead()
            .seal_in_place_separate_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut out)
            .unwrap_or_else(|_| unreachable!("plaintext within the AES-GCM limit"));
        let mut blob = nonce.to_vec();
        blob.extend_from_slice(&out);
        blob.extend_from_slice(tag.as_ref());
        blob
    }

    /// Opens `nonce ‖ ciphertext ‖ tag`; `what` names the entry in errors.
    pub fn open(&self, blob: &[u8], what: &str) -> Result<Vec<u8>, CopyCertsError> {
        if blob.len() < NONCE_LEN {
            return Err(CopyCertsError::TooShort);
        }
        let (nonce, rest) = blob.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| CopyCertsError::TooShort)?;
        let mut buf = rest.to_vec();
        let plain =
            self.aead().open_in_place(nonce, Aad::empty(), &mut buf).map_err(|_| CopyCertsError::Open(what.into()))?;
        Ok(plain.to_vec())
    }
}

/// One file that travels in the Secret: its host path and its data key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transfer {
    pub path: String,
    pub key: String,
}

/// The files every control plane shares, relative to the certs dir.
pub const SHARED: [&str; 6] = ["ca.crt", "ca.key", "front-proxy-ca.crt", "front-proxy-ca.key", "sa.pub", "sa.key"];
/// Shared too with stacked etcd.
pub(crate) const SHARED_LOCAL_ETCD: [&str; 2] = ["etcd/ca.crt", "etcd/ca.key"];

/// kubeadm's `certsToTransfer`: the shared CAs and sa pair, the etcd CA for stacked etcd, or the
/// external etcd client files. Data keys are the path relative to the certs dir with `/` → `-`.
pub(crate) fn files_to_transfer(cfg: &InitConfig) -> Vec<Transfer> {
    let dir = cfg.certs_dir();
    let rel = |r: &str| Transfer { path: format!("{dir}/{r}"), key: r.replace('/', "-") };
    let mut v: Vec<Transfer> = SHARED.iter().map(|r| rel(r)).collect();
    match cfg.external_etcd() {
        None => v.extend(SHARED_LOCAL_ETCD.iter().map(|r| rel(r))),
        Some(ext) => {
            for (path, key) in [
                (&ext.ca_file, "external-etcd-ca.crt"),
                (&ext.cert_file, "external-etcd.crt"),
                (&ext.key_file, "external-etcd.key"),
            ] {
                if !path.is_empty() {
                    v.push(Transfer { path: path.clone(), key: key.into() });
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kubeadm's TestValidateCertificateKey key, and vectors computed with Go's GCM
    /// (ha-capi-facts.md §A4).
    const KEY: &str = "e6a2eb8581237ab72a4f494f30285ec12a9694d750b9785706a83bfcbbbd2204";
    const NONCE: [u8; 12] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];

    #[test]
    fn kubeadm_key_validation_cases() {
        assert!(CertificateKey::parse(KEY).is_ok());
        assert_eq!(
            CertificateKey::parse("z6a2eb8581237ab72a4f494f30285ec12a9694d750b9785706a83bfcbbbd2204"),
            Err(BadCertificateKey::NotHex)
        );
        let e = CertificateKey::parse("e6a2").unwrap_err();
        assert_eq!(e.to_string(), "invalid certificate key size 2, the key must be an AES key of size 32");
        assert!(!format!("{:?}", CertificateKey::parse(KEY).unwrap()).contains("e6a2"));
        let g = CertificateKey::generate().unwrap();
        assert_eq!(CertificateKey::parse(&g.to_hex()).unwrap(), g);
        assert_eq!(g.to_hex().len(), 64);
    }

    #[test]
    fn seals_exactly_like_go_and_opens_its_own() {
        let k = CertificateKey::parse(KEY).unwrap();
        assert_eq!(
            crate::fsutil::hex(&k.seal_with_nonce(NONCE, b"")),
            "000102030405060708090a0bbd5cef4ec9f40316341554cbb7533b63"
        );
        assert_eq!(
            crate::fsutil::hex(&k.seal_with_nonce(NONCE, b"cert-data")),
            "000102030405060708090a0b0aa33c84673cac9e075db13fe84cb343544b08949df2f76648"
        );
        let plain = b"Lorem ipsum dolor sit amet, consectetur adipiscing elit.";
        let blob = k.seal(plain).unwrap();
        assert_eq!(k.open(&blob, "x").unwrap(), plain);
        let other = CertificateKey::generate().unwrap();
        assert_eq!(other.open(&blob, "ca.key"), Err(CopyCertsError::Open("ca.key".into())));
        assert_eq!(k.open(&blob[..5], "x"), Err(CopyCertsError::TooShort));
    }
}
