//! Random primes for kubestrap's RSA keys. crypto-primes decides primality (`is_prime`:
//! Miller-Rabin base 2 and a strong Lucas test, what the `rsa` crate uses); this crate only
//! chooses which candidates reach that test, the expensive part of key generation (one modular
//! exponentiation each).
//!
//! As the `rsa` crate does, a candidate run starts at a random odd number with its two top bits
//! set (so `p·q` has exactly the key's bits) and the prime taken is the first one after it. The
//! difference: the next `2·bits` odd numbers are sieved at once by every odd prime below
//! [`SIEVE_BOUND`], where crypto-primes' incremental sieve stops at 17,863. A third fewer
//! candidates reach the test (about 29 instead of 41 per 1024-bit prime).

use std::num::NonZeroU32;
use std::sync::OnceLock;

use crypto_bigint::{BoxedUint, Limb, RandomBits, RandomMod, U1024, Unsigned, UnsignedWithMontyForm};
use crypto_primes::hazmat::{SetBits, random_odd_integer};
use crypto_primes::{Flavor, is_prime};
use rand_core::CryptoRng;

/// Small primes up to here are sieved out. Beyond 2^18 the table costs about what it saves.
pub const SIEVE_BOUND: u64 = 1 << 18;

/// A random prime of exactly `bits` bits, its two top bits set.
pub fn random_prime<R: CryptoRng + ?Sized>(rng: &mut R, bits: usize) -> BoxedUint {
    random_prime_counted(rng, bits, &mut 0)
}

/// [`random_prime`], adding to `tested` the number of candidates that reached the primality
/// test (for the benchmark in `examples/`).
pub fn random_prime_counted<R: CryptoRng + ?Sized>(rng: &mut R, bits: usize, tested: &mut u64) -> BoxedUint {
    // Fixed width where it is the common case: ~10% fewer instructions per test than BoxedUint.
    if bits == 1024 {
        BoxedUint::from(&search::<U1024, R>(rng, 1024, tested))
    } else {
        search::<BoxedUint, R>(rng, bits as u32, tested)
    }
}

/// Odd primes below [`SIEVE_BOUND`], each with `floor((2^64 - 1) / p)` for [`rem`].
fn small_primes() -> &'static [(u64, u64)] {
    static TABLE: OnceLock<Vec<(u64, u64)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let bound = SIEVE_BOUND as usize;
        let mut composite = vec![false; bound];
        let mut table = Vec::with_capacity(24_000);
        for i in (3..bound).step_by(2) {
            if !composite[i] {
                table.push((i as u64, u64::MAX / i as u64));
                for j in (i * i..bound).step_by(2 * i) {
                    composite[j] = true;
                }
            }
        }
        table
    })
}

/// `x mod p` for `x < 2^50`, `p < 2^18`, `m = floor((2^64 - 1) / p)` (Barrett: the estimated
/// quotient is at most one short, so one subtraction corrects it).
#[inline(always)]
fn rem(x: u64, p: u64, m: u64) -> u64 {
    let q = ((u128::from(x) * u128::from(m)) >> 64) as u64;
    let r = x - q * p;
    if r >= p { r - p } else { r }
}

/// `n mod p`, 32 bits at a time so every step stays below 2^50.
fn rem_big(limbs: &[Limb], p: u64, m: u64) -> u64 {
    limbs.iter().rev().fold(0, |r, limb| {
        let w = limb.0;
        let r = rem((r << 32) | (w >> 32), p, m);
        rem((r << 32) | (w & 0xffff_ffff), p, m)
    })
}

/// Offsets `i` (candidate `start + 2i`, `i < width`) that no small prime divides.
fn sieve(start: &[Limb], width: usize) -> Vec<bool> {
    let mut struck = vec![false; width];
    for &(p, m) in small_primes() {
        let r = rem_big(start, p, m);
        // start + 2i ≡ 0 (mod p)  ⇔  i ≡ (p - r)·(p + 1)/2 (mod p)
        let first = if r == 0 { 0 } else { rem((p - r) * p.div_ceil(2), p, m) };
        for i in (first as usize..width).step_by(p as usize) {
            struck[i] = true;
        }
    }
    struck
}

fn search<T, R>(rng: &mut R, bits: u32, tested: &mut u64) -> T
where
    T: Unsigned + UnsignedWithMontyForm + RandomBits + RandomMod,
    R: CryptoRng + ?Sized,
{
    // ~5.8 primes expected among 2·bits odd numbers (density 2/(bits·ln 2)); a run without one
    // (0.3%) draws a new start.
    let width = 2 * bits as usize;
    let Some(nz_bits) = NonZeroU32::new(bits) else { unreachable!("RSA primes have at least 512 bits") };
    loop {
        let start = match random_odd_integer::<T, R>(rng, nz_bits, SetBits::TwoMsb) {
            Ok(s) => s.get(),
            // Invariant: `bits` fits T (U1024 is asked for 1024 bits only; BoxedUint grows).
            Err(e) => unreachable!("random start of {bits} bits: {e}"),
        };
        let struck = sieve(start.as_ref(), width);
        for (i, _) in struck.iter().enumerate().filter(|(_, s)| !**s) {
            let c = start.wrapping_add(&T::from_limb_like(Limb::from(2 * i as u32), &start));
            if c.bits() != bits {
                break;
            }
            *tested += 1;
            if is_prime(Flavor::Any, &c) {
                return c;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rng() -> getrandom::rand_core::UnwrapErr<getrandom::SysRng> {
        getrandom::rand_core::UnwrapErr(getrandom::SysRng)
    }

    #[test]
    fn table_is_the_odd_primes_below_the_bound() {
        let t = small_primes();
        assert_eq!(t.len(), 23_000 - 1, "π(2^18) = 23000, less the prime 2");
        assert_eq!(&t[..5].iter().map(|e| e.0).collect::<Vec<_>>(), &[3, 5, 7, 11, 13]);
        assert_eq!(t.last().map(|e| e.0), Some(262_139));
        for &(p, m) in t.iter().step_by(97) {
            for x in [0, 1, p - 1, p, p + 1, (1 << 50) - 1, 0x3_1234_5678_9abc] {
                assert_eq!(rem(x, p, m), x % p, "{x} mod {p}");
            }
        }
    }

    #[test]
    fn sieve_strikes_exactly_the_multiples_of_small_primes() {
        let mut rng = rng();
        let start =
            random_odd_integer::<U1024, _>(&mut rng, NonZeroU32::new(1024).unwrap(), SetBits::TwoMsb).unwrap().get();
        let struck = sieve(start.as_ref(), 2048);
        for (i, s) in struck.iter().enumerate() {
            let c = start.wrapping_add(&U1024::from_u64(2 * i as u64));
            let divisible = small_primes()
                .iter()
                .any(|&(p, _)| c.rem_limb(crypto_bigint::NonZero::new(Limb(p)).unwrap()) == Limb::ZERO);
            assert_eq!(*s, divisible, "offset {i}");
        }
        // Roughly the share Mertens' theorem predicts (2·e^-γ / ln 2^18 ≈ 9.0% survive).
        let left = struck.iter().filter(|s| !**s).count();
        assert!((100..300).contains(&left), "{left} of 2048 survive");
    }

    #[test]
    fn primes_have_the_bits_and_pass_the_test() {
        let mut rng = rng();
        for bits in [1024, 1536] {
            let p = random_prime(&mut rng, bits);
            assert_eq!(p.bits() as usize, bits);
            assert!(p.bit_vartime(bits as u32 - 2), "two top bits set");
            assert!(is_prime(Flavor::Any, &p));
        }
    }
}
