//! A fixed workload for callgrind: N 1024-bit primes from a seeded generator, so two builds of the
//! search can be compared by instruction count, free of this shared machine's noise.
//!   valgrind --tool=callgrind target/release/examples/prime_instructions [N [BITS]]
use std::convert::Infallible;

/// splitmix64: reproducible, and for this count only, never for keys.
struct Seeded(u64);

impl rand_core::TryRng for Seeded {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        self.try_next_u64().map(|v| v as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Ok(z ^ (z >> 31))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(8) {
            let v = self.try_next_u64()?.to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        Ok(())
    }
}
impl rand_core::TryCryptoRng for Seeded {}

fn main() {
    let n: u32 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(16);
    let bits: usize = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let mut rng = Seeded(7);
    let mut tested = 0;
    for _ in 0..n {
        std::hint::black_box(kubestrap_primes::random_prime_counted(&mut rng, bits, &mut tested));
    }
    println!("{n} primes of {bits} bits, {tested} candidates tested");
}
