//! RSA keys from two primes of [`kubestrap_primes`] (the prime search, a crate of its own so
//! it is built for speed), assembled by the `rsa` crate.

use getrandom::rand_core::CryptoRng;
pub use kubestrap_primes::random_prime;
use rsa::BoxedUint;
use rsa::RsaPrivateKey;
use rsa::traits::PublicKeyParts;

const PUBLIC_EXPONENT: u32 = 65537;

/// An RSA key of `bits` (even, ≥ 1024) from two fresh primes.
pub(crate) fn rsa_key<R: CryptoRng + ?Sized>(rng: &mut R, bits: usize) -> Result<RsaPrivateKey, rsa::Error> {
    loop {
        let p = random_prime(rng, bits / 2);
        let q = random_prime(rng, bits / 2);
        if let Some(key) = rsa_key_from(p, q, bits)? {
            return Ok(key);
        }
    }
}

/// The key from primes `p` and `q`, or `None` when the pair cannot make one (equal primes, or a
/// prime `p` with `p - 1` divisible by the exponent: draw two new ones).
pub(crate) fn rsa_key_from(p: BoxedUint, q: BoxedUint, bits: usize) -> Result<Option<RsaPrivateKey>, rsa::Error> {
    // from_p_q refuses p == q (InvalidPrime) and an exponent that divides p-1.
    match RsaPrivateKey::from_p_q(p, q, BoxedUint::from(PUBLIC_EXPONENT)) {
        Ok(key) => Ok((key.n().bits_vartime() as usize == bits).then_some(key)),
        Err(rsa::Error::InvalidPrime | rsa::Error::InvalidModulus | rsa::Error::InvalidExponent) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rsa::traits::PrivateKeyParts;

    #[test]
    fn keys_are_consistent_and_exactly_sized() {
        let mut rng = getrandom::rand_core::UnwrapErr(getrandom::SysRng);
        let key = rsa_key(&mut rng, 2048).unwrap();
        assert_eq!(key.n().bits_vartime(), 2048);
        assert_eq!(key.e(), &BoxedUint::from(65537u32));
        key.validate().unwrap();
        let [p, q] = key.primes() else { panic!("two primes") };
        assert_ne!(p, q);
        assert_eq!(
            rsa_key_from(p.as_ref().clone(), p.as_ref().clone(), 2048).unwrap().map(|_| ()),
            None,
            "equal primes"
        );
    }
}
