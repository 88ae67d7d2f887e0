//! Private keys: generation per `encryptionAlgorithm`, loading from any PEM kubeadm or openssl
//! writes (PKCS#8, PKCS#1 RSA, SEC1 EC), and PEM encoding.
//! ring signs and makes EC keys; ring cannot make RSA keys, so [`super::rsa_key`] finds the primes
//! and the `rsa` crate builds the key, handed to ring as PKCS#8. The prime search is most of
//! `init`'s time with RSA (16 keys, 32 random 1024-bit primes), so a [`KeyPool`] makes primes
//! ahead on every core while the phases sign, write and sync.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use pkcs8::der::asn1::OctetStringRef;
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
    let err = |e: &dyn std::fmt::Display| generate_error(alg, e);
    match alg {
        KeyAlgorithm::EcdsaP256 => KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(|e| err(&e)),
        KeyAlgorithm::EcdsaP384 => KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384).map_err(|e| err(&e)),
        KeyAlgorithm::Rsa(bits) => {
            let mut rng = getrandom::rand_core::UnwrapErr(getrandom::SysRng);
            let key = super::rsa_key::rsa_key(&mut rng, bits).map_err(|e| err(&e))?;
            rsa_key_pair(alg, &key)
        }
    }
}

fn generate_error(alg: KeyAlgorithm, e: &dyn std::fmt::Display) -> PkiError {
    PkiError::Generate { alg: format!("{alg:?}"), detail: e.to_string() }
}

fn rsa_key_pair(alg: KeyAlgorithm, key: &rsa::RsaPrivateKey) -> Result<KeyPair, PkiError> {
    let err = |e: &dyn std::fmt::Display| generate_error(alg, e);
    let der = key.to_pkcs8_der().map_err(|e| err(&e))?;
    KeyPair::try_from(der.as_bytes()).map_err(|e| err(&e))
}

/// Keys made ahead of use. [`reserve`](KeyPool::reserve) says how many keys the run will take;
/// for RSA that starts one prime-search thread per core at once, and [`take`](KeyPool::take)
/// builds each key from two finished primes. The work is shared out a prime at a time, and
/// every thread keeps searching until enough primes are *finished*, so the last prime is raced
/// by all cores (the first to finish wins, the others' work is dropped): the time to find a
/// prime varies widely, and the race cuts the wait for the slowest one.
/// ECDSA keys take microseconds and are made inline by `take`, on no thread.
pub struct KeyPool {
    alg: KeyAlgorithm,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Keys reserved and not yet taken.
    owed: usize,
    /// Finished primes, not yet in a key.
    primes: Vec<rsa::BoxedUint>,
    /// Prime-search threads running.
    workers: usize,
}

impl State {
    /// Primes still to find for the keys owed.
    fn primes_wanted(&self) -> usize {
        (2 * self.owed).saturating_sub(self.primes.len())
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Leaves the worker count right however a search thread ends (a panic included), so `take`
/// never waits for a thread that is gone.
struct WorkerExit(Arc<Shared>);

impl Drop for WorkerExit {
    fn drop(&mut self) {
        self.0.lock().workers -= 1;
        self.0.changed.notify_all();
    }
}

impl KeyPool {
    pub fn new(alg: KeyAlgorithm) -> KeyPool {
        KeyPool { alg, shared: Arc::default() }
    }

    /// The run will take at least `n` more keys: RSA primes start being found now, on every
    /// core. Reserving again raises the count to `n` if it is lower (phases that run alone
    /// reserve their own keys; a whole `init` reserves every phase's keys up front).
    pub(crate) fn reserve(&self, n: usize) {
        let KeyAlgorithm::Rsa(bits) = self.alg else {
            return;
        };
        let cores = std::thread::available_parallelism().map(|t| t.get()).unwrap_or(1);
        let mut st = self.shared.lock();
        st.owed = st.owed.max(n);
        let wanted = cores.min(st.primes_wanted());
        while st.workers < wanted {
            let shared = Arc::clone(&self.shared);
            let spawned = std::thread::Builder::new().name("keygen".into()).spawn(move || searcher(bits / 2, shared));
            match spawned {
                Ok(_) => st.workers += 1,
                // No thread to be had: `take` makes the keys itself.
                Err(_) => break,
            }
        }
    }

    /// A fresh key: one built from two found primes (waiting for the searches if needed), or
    /// (nothing reserved or in the making) one made now on this thread.
    pub fn take(&self) -> Result<KeyPair, PkiError> {
        let KeyAlgorithm::Rsa(bits) = self.alg else {
            return generate(self.alg);
        };
        let mut st = self.shared.lock();
        loop {
            if st.primes.len() >= 2 {
                let (Some(p), Some(q)) = (st.primes.pop(), st.primes.pop()) else {
                    unreachable!("two primes were there under the lock")
                };
                st.owed = st.owed.saturating_sub(1);
                drop(st);
                let made = super::rsa_key::rsa_key_from(p, q, bits).map_err(|e| generate_error(self.alg, &e))?;
                if let Some(key) = made {
                    return rsa_key_pair(self.alg, &key);
                }
                // A pair that makes no key (about 1 in 30,000): owe it again, search on.
                self.shared.lock().owed += 1;
                self.reserve(0);
                st = self.shared.lock();
                continue;
            }
            if st.workers == 0 || st.owed == 0 {
                st.owed = st.owed.saturating_sub(1);
                drop(st);
                return generate(self.alg);
            }
            st = self.shared.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
    }
}

impl Drop for KeyPool {
    /// Search threads still running stop after their current prime.
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        st.owed = 0;
        st.primes.clear();
    }
}

/// One search thread: finds primes of `bits` while fewer are finished than the keys owed need.
fn searcher(bits: usize, shared: Arc<Shared>) {
    let _exit = WorkerExit(Arc::clone(&shared));
    let mut rng = getrandom::rand_core::UnwrapErr(getrandom::SysRng);
    loop {
        if shared.lock().primes_wanted() == 0 {
            return;
        }
        let prime = super::rsa_key::random_prime(&mut rng, bits);
        let mut st = shared.lock();
        if st.primes_wanted() > 0 {
            st.primes.push(prime);
            shared.changed.notify_all();
        }
    }
}

/// Parses a private key PEM. Accepts PKCS#8 ("PRIVATE KEY"), PKCS#1 ("RSA PRIVATE KEY") and
/// SEC1 ("EC PRIVATE KEY"), so CAs made by kubeadm or openssl can be brought in.
pub fn parse_pem(pem_text: &[u8]) -> Result<KeyPair, KeyProblem> {
    let block = x509_parser::pem::parse_x509_pem(pem_text).map_err(|_| KeyProblem::NotPem)?.1;
    let pkcs8: Vec<u8> = match block.label.as_str() {
        "PRIVATE KEY" => block.contents,
        "RSA PRIVATE KEY" => {
            let bad = |e: &dyn std::fmt::Display| KeyProblem::BadRsa { detail: e.to_string() };
            let key = rsa::RsaPrivateKey::from_pkcs1_der(&block.contents).map_err(|e| bad(&e))?;
            key.to_pkcs8_der().map_err(|e| bad(&e))?.as_bytes().to_vec()
        }
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
    let reencode = |e: pkcs8::der::Error| KeyProblem::Reencode { detail: e.to_string() };
    let info = pkcs8::PrivateKeyInfoRef {
        algorithm: pkcs8::AlgorithmIdentifierRef { oid: sec1::ALGORITHM_OID, parameters: Some(params) },
        private_key: OctetStringRef::new(der).map_err(reencode)?,
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
pub(crate) fn public_pem(key: &KeyPair) -> String {
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
    fn pool_gives_distinct_keys_reserved_or_not() {
        let pool = KeyPool::new(KeyAlgorithm::Rsa(2048));
        pool.reserve(2);
        pool.reserve(1); // lower: no change
        // Two reserved, one more made inline on this thread.
        let ks: Vec<KeyPair> = (0..3).map(|_| pool.take().unwrap()).collect();
        assert!(ks.iter().all(|k| k.algorithm() == &rcgen::PKCS_RSA_SHA256));
        assert_ne!(spki(&ks[0]), spki(&ks[1]));
        assert_ne!(spki(&ks[1]), spki(&ks[2]));
        let ec = KeyPool::new(KeyAlgorithm::EcdsaP256);
        ec.reserve(5);
        assert_eq!(ec.shared.lock().workers, 0, "EC keys are made inline");
        assert!(ec.take().is_ok());
    }

    #[test]
    fn pool_redraws_a_pair_that_makes_no_key() {
        use rsa::pkcs8::DecodePrivateKey;
        use rsa::traits::PrivateKeyParts;
        let pool = KeyPool::new(KeyAlgorithm::Rsa(2048));
        let mut rng = getrandom::rand_core::UnwrapErr(getrandom::SysRng);
        let p = crate::pki::rsa_key::random_prime(&mut rng, 1024);
        {
            let mut st = pool.shared.lock();
            st.owed = 1;
            st.primes = vec![p.clone(), p.clone()];
        }
        let key = pool.take().unwrap();
        assert_eq!(key.algorithm(), &rcgen::PKCS_RSA_SHA256);
        let der = key.serialize_der();
        let rsa_key = rsa::RsaPrivateKey::from_pkcs8_der(&der).unwrap();
        assert!(rsa_key.primes().iter().all(|f| f.as_ref() != &p), "p·p was not used");
        assert_eq!(pool.shared.lock().owed, 0);
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
