//! Where RSA key generation's time goes, side by side in one run: N random 1024-bit primes (an
//! RSA-2048 key takes two) found (a) as the `rsa` crate finds them (crypto-primes' incremental
//! sieve over 2047 small primes, BoxedUint) and (b) by this crate (a sieve over the primes below
//! 2^20, a cheaper base-2 test first, fixed-width U1024), with the candidates each sends to the
//! primality test and the CPU time per prime and per test. Run by bench/run.sh:
//!   cargo run --release -p kubestrap-primes --example prime_search [-- N]
use std::time::Instant;

use crypto_bigint::BoxedUint;
use crypto_primes::hazmat::{SetBits, SmallFactorsSieveFactory};
use crypto_primes::{Flavor, is_prime, sieve_and_find};

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let mut rng = getrandom::rand_core::UnwrapErr(getrandom::SysRng);
    let mut rows = Vec::new();
    // Alternate the two, a prime at a time, so load from other work hits both alike.
    let (mut t_rsa, mut t_ours) = (0.0, 0.0);
    let (mut n_rsa, mut n_ours) = (0u64, 0u64);
    for _ in 0..n {
        let tested = std::cell::Cell::new(0u64);
        let t = Instant::now();
        let factory = SmallFactorsSieveFactory::<BoxedUint>::new(Flavor::Any, 1024, SetBits::TwoMsb);
        let Ok(factory) = factory else { panic!("sieve factory") };
        let p = sieve_and_find(&mut rng, factory, |_, c| {
            tested.set(tested.get() + 1);
            is_prime(Flavor::Any, c)
        });
        t_rsa += t.elapsed().as_secs_f64();
        n_rsa += tested.get();
        assert!(matches!(p, Ok(Some(ref p)) if p.bits() == 1024));

        let t = Instant::now();
        let p = kubestrap_primes::random_prime_counted(&mut rng, 1024, &mut n_ours);
        t_ours += t.elapsed().as_secs_f64();
        assert_eq!(p.bits(), 1024);
    }
    let n = f64::from(n);
    for (label, t, c) in
        [("rsa crate's search (crypto-primes sieve)", t_rsa, n_rsa), ("kubestrap-primes", t_ours, n_ours)]
    {
        rows.push(format!(
            "  {label:<42}{:>8.1} ms/prime {:>6.1} tested/prime {:>7.0} us/test",
            t * 1e3 / n,
            c as f64 / n,
            t * 1e6 / c as f64
        ));
    }
    println!("1024-bit primes, {n} each (wall time, this thread alone):");
    rows.iter().for_each(|r| println!("{r}"));
    println!("  ratio kubestrap-primes / rsa crate: {:.2}", t_ours / t_rsa);
}
