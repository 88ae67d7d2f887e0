//! Random primes for kubestrap's RSA keys. crypto-primes decides primality (`is_prime`:
//! Miller-Rabin base 2 and a strong Lucas test, what the `rsa` crate uses); this crate only
//! chooses which candidates reach that test, the expensive part of key generation (one modular
//! exponentiation each).
//!
//! As the `rsa` crate does, a candidate run starts at a random odd number with its two top bits
//! set (so `p·q` has exactly the key's bits) and the prime taken is the first one after it. The
//! difference: the next `2·bits` odd numbers are sieved at once by every odd prime below
//! [`SIEVE_BOUND`], where crypto-primes' incremental sieve stops at 17,863: about 29 candidates
//! per 1024-bit prime reach the test instead of 41. A candidate then meets a cheaper Miller-Rabin
//! to base 2 first (see [`strong_probable_prime_base_two`]), and only the rare one that passes
//! it meets crypto-primes' full test.

use std::num::NonZeroU32;
use std::sync::OnceLock;

use crypto_bigint::modular::{BoxedMontyForm, FixedMontyForm};
use crypto_bigint::{
    BoxedUint, Choice, CtAssign, Limb, MontyForm, MontyMultiplier, Odd, RandomBits, RandomMod, U1024, Unsigned,
    UnsignedWithMontyForm,
};
use crypto_primes::hazmat::{SetBits, random_odd_integer};
use crypto_primes::{Flavor, is_prime};
use rand_core::CryptoRng;

/// Small primes up to here are sieved out. The cheapest bound by instruction count (callgrind,
/// 16 seeded primes, `examples/prime_instructions.rs`): 2^18 5.33 G, 2^19 5.24 G, 2^20 5.17 G,
/// 2^21 5.24 G, 2^22 5.57 G. The table is 1.3 MB.
pub const SIEVE_BOUND: u64 = 1 << 20;

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
        let mut table = Vec::with_capacity(82_025);
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

/// `x mod p` for any `x`, `p < 2^20`, `m = floor((2^64 - 1) / p)` (Barrett: `x/p - q < x/2^64 + 1
/// < 2`, so the estimated quotient is at most one short and one subtraction corrects it).
#[inline(always)]
fn rem(x: u64, p: u64, m: u64) -> u64 {
    let q = ((u128::from(x) * u128::from(m)) >> 64) as u64;
    let r = x - q * p;
    if r >= p { r - p } else { r }
}

/// `n mod p`, 128 bits per reduction: with `c_k = 2^k mod p`, a 128-bit digit `h1·2^96 + h0·2^64
/// + l1·2^32 + l0` adds `h1·c_96 + h0·c_64 + l1·c_32 + l0` to `r·c_128`. Each product is below
/// 2^52, the sum below 2^54, so one [`rem`] per digit (a quarter of the 32-bit Horner's).
fn rem_big(limbs: &[Limb], p: u64, m: u64) -> u64 {
    let c32 = rem(1 << 32, p, m);
    let c64 = rem(c32 * c32, p, m);
    let (c96, c128) = (rem(c64 * c32, p, m), rem(c64 * c64, p, m));
    let digit = |r: u64, hi: u64, lo: u64| {
        rem(r * c128 + (hi >> 32) * c96 + (hi & 0xffff_ffff) * c64 + (lo >> 32) * c32 + (lo & 0xffff_ffff), p, m)
    };
    // An odd limb count leaves the top limb alone: a digit with a zero high half.
    let (pairs, top) = limbs.split_at(limbs.len() - limbs.len() % 2);
    let r = top.first().map_or(0, |l| digit(0, 0, l.0));
    pairs.rchunks_exact(2).fold(r, |r, d| digit(r, d[1].0, d[0].0))
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
    T::MontyForm: DoubleIf,
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
            // The filter turns away nearly every composite; crypto-primes still decides.
            if strong_probable_prime_base_two(&c) && is_prime(Flavor::Any, &c) {
                return c;
            }
        }
    }
}

/// Whether odd `n > 3` passes Miller-Rabin to base 2, the first half of crypto-primes'
/// `is_prime`, at ~15% less cost: `2^d mod n` by squaring and *doubling* (a modular addition)
/// where a general power multiplies by a table entry every four bits. It never turns a prime
/// away (a prime passes to every base), so the primes found are the same; a candidate that passes
/// is then tested in full. Constant time in `d`'s bits: the candidate that passes is a secret
/// prime.
fn strong_probable_prime_base_two<T>(n: &T) -> bool
where
    T: Unsigned + UnsignedWithMontyForm,
    T::MontyForm: DoubleIf,
{
    let Some(odd) = Odd::new(n.clone()).into_option() else { return false };
    let params = T::MontyForm::new_params_vartime(odd);
    let one = T::MontyForm::one(&params);
    let minus_one = -one.clone();
    let n_minus_1 = n.wrapping_sub(&T::one_like(n));
    let s = n_minus_1.trailing_zeros_vartime();
    let d = n_minus_1.wrapping_shr_vartime(s);
    let mut mul = <T::MontyForm as MontyForm>::Multiplier::from(&params);
    // d's top bit: x = 2.
    let mut x = one.double();
    for i in (0..d.bits_vartime().saturating_sub(1)).rev() {
        mul.square_assign(&mut x);
        x.double_if(d.bit(i));
    }
    if x == one || x == minus_one {
        return true;
    }
    for _ in 1..s {
        mul.square_assign(&mut x);
        if x == minus_one {
            return true;
        }
        if x == one {
            return false;
        }
    }
    false
}

/// `x = 2x` where `double` is chosen, in constant time, on the Montgomery integer alone
/// (`MontyForm::double` and `ct_select` also copy the modulus' parameters, half the cost of the
/// step).
trait DoubleIf {
    fn double_if(&mut self, double: Choice);
}

impl<const LIMBS: usize> DoubleIf for FixedMontyForm<LIMBS> {
    #[inline(always)]
    fn double_if(&mut self, double: Choice) {
        let doubled = self.as_montgomery().double_mod(self.params().modulus().as_nz_ref());
        self.as_montgomery_mut().ct_assign(&doubled, double);
    }
}

impl DoubleIf for BoxedMontyForm {
    fn double_if(&mut self, double: Choice) {
        let doubled = self.as_montgomery().double_mod(self.params().modulus().as_nz_ref());
        self.as_montgomery_mut().ct_assign(&doubled, double);
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
        assert_eq!(t.len(), 82_025 - 1, "π(2^20) = 82025, less the prime 2");
        assert_eq!(&t[..5].iter().map(|e| e.0).collect::<Vec<_>>(), &[3, 5, 7, 11, 13]);
        assert_eq!(t.last().map(|e| e.0), Some(1_048_573));
        for &(p, m) in t.iter().step_by(97) {
            for x in [0, 1, p - 1, p, p + 1, (1 << 54) - 1, 0x3_1234_5678_9abc, 1 << 63, u64::MAX - p, u64::MAX] {
                assert_eq!(rem(x, p, m), x % p, "{x} mod {p}");
            }
        }
    }

    #[test]
    fn big_remainders_match_crypto_bigint_for_even_and_odd_limb_counts() {
        let mut rng = rng();
        for limbs in 1..=5 {
            let bits = NonZeroU32::new(64 * limbs).unwrap();
            let n = random_odd_integer::<BoxedUint, _>(&mut rng, bits, SetBits::Msb).unwrap().get();
            for &(p, m) in small_primes().iter().step_by(1009).chain(small_primes().last()) {
                let expected = n.rem_limb(crypto_bigint::NonZero::new(Limb(p)).unwrap()).0;
                assert_eq!(rem_big(n.as_limbs(), p, m), expected, "{limbs} limbs mod {p}");
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
        // Roughly the share Mertens' theorem predicts (2·e^-γ / ln 2^20 ≈ 8.1% survive).
        let left = struck.iter().filter(|s| !**s).count();
        assert!((100..300).contains(&left), "{left} of 2048 survive");
    }

    #[test]
    fn base_two_filter_agrees_with_crypto_primes_miller_rabin() {
        use crypto_bigint::U64;
        use crypto_primes::hazmat::MillerRabin;
        let theirs = |n: &U64| !MillerRabin::new(Odd::new(*n).unwrap()).test_base_two().is_composite();
        let mut passed = 0;
        for n in (5..30_000u64).step_by(2) {
            let n = U64::from_u64(n);
            assert_eq!(strong_probable_prime_base_two(&n), theirs(&n), "{n}");
            passed += usize::from(theirs(&n));
        }
        // 3243 primes in 5..30000 (π(30000) = 3245, less 2 and 3), and the base-2 strong
        // pseudoprimes 2047, 3277, 4033, 4681, 8321, 15841, 29341.
        assert_eq!(passed, 3243 + 7);
        for spsp in [2047u64, 3277, 4033, 4681, 8321, 15841, 29341, 3_215_031_751] {
            assert!(strong_probable_prime_base_two(&U64::from_u64(spsp)), "{spsp}");
        }
        // Carmichael numbers are Fermat liars to base 2 but not strong ones.
        for carmichael in [561u64, 1105, 1729, 2465, 2821, 6601] {
            assert!(!strong_probable_prime_base_two(&U64::from_u64(carmichael)), "{carmichael}");
        }

        let mut rng = rng();
        for bits in [1024, 1536] {
            for _ in 0..60 {
                let c = random_odd_integer::<BoxedUint, _>(&mut rng, NonZeroU32::new(bits).unwrap(), SetBits::TwoMsb)
                    .unwrap()
                    .get();
                let mr = !MillerRabin::new(Odd::new(c.clone()).unwrap()).test_base_two().is_composite();
                assert_eq!(strong_probable_prime_base_two(&c), mr);
            }
            let p = random_prime(&mut rng, bits as usize);
            assert!(strong_probable_prime_base_two(&p));
            let w: Option<[u64; 16]> = p.as_words().try_into().ok();
            if let Some(w) = w {
                assert!(strong_probable_prime_base_two(&U1024::from_words(w)));
            }
        }
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
