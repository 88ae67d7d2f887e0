//! Retrying with capped, jittered exponential backoff until a deadline; every failed attempt is
//! logged with its reason, so a waiting node says why it waits.

use std::time::{Duration, Instant};

use log::info;
use ring::rand::{SecureRandom, SystemRandom};

pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
}

impl Backoff {
    pub const API: Backoff = Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(5) };

    /// The pause before attempt `n` (0-based): doubled each time, capped, with ±25% jitter so a
    /// fleet booting together does not hit the API server in lockstep.
    pub fn delay(&self, n: u32) -> Duration {
        let base = self.initial.saturating_mul(1u32 << n.min(16)).min(self.max);
        let mut b = [0u8; 2];
        let r = if SystemRandom::new().fill(&mut b).is_ok() { u16::from_be_bytes(b) } else { 32768 };
        let factor = 0.75 + 0.5 * f64::from(r) / 65535.0;
        base.mul_f64(factor)
    }
}

/// What one attempt says.
pub enum Attempt<T> {
    Done(T),
    /// Not yet; the reason is logged and the attempt repeated.
    Wait(String),
    /// Give up now.
    Fail(crate::error::Error),
}

/// Repeats `f` until it is done, fails, or `deadline` passes (then the last reason is the error).
pub fn until<T>(
    what: &str,
    tag: &str,
    deadline: Instant,
    backoff: &Backoff,
    mut f: impl FnMut() -> Attempt<T>,
) -> crate::error::Result<T> {
    let started = Instant::now();
    let mut n = 0u32;
    loop {
        match f() {
            Attempt::Done(t) => return Ok(t),
            Attempt::Fail(e) => return Err(e),
            Attempt::Wait(reason) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(crate::error::Error::runtime(format!(
                        "{what}: gave up after {:.0?} ({} attempts); last reason: {reason}",
                        now - started,
                        n + 1
                    )));
                }
                info!("[{tag}] {what}: attempt {} failed: {reason}; retrying", n + 1);
                std::thread::sleep(backoff.delay(n).min(deadline - now));
                n += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_cap() {
        let b = Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(1) };
        assert!(b.delay(0) >= Duration::from_millis(75) && b.delay(0) <= Duration::from_millis(125));
        assert!(b.delay(10) <= Duration::from_millis(1250));
        assert!(b.delay(10) >= Duration::from_millis(750));
    }

    #[test]
    fn gives_up_at_the_deadline_with_the_last_reason() {
        let b = Backoff { initial: Duration::from_millis(5), max: Duration::from_millis(10) };
        let e = until::<()>("waiting", "test", Instant::now() + Duration::from_millis(50), &b, || {
            Attempt::Wait("nope".into())
        })
        .unwrap_err();
        assert!(e.message.contains("last reason: nope"), "{}", e.message);
        let mut i = 0;
        let v = until("counting", "test", Instant::now() + Duration::from_secs(5), &b, || {
            i += 1;
            if i == 3 { Attempt::Done(i) } else { Attempt::Wait("not yet".into()) }
        })
        .unwrap();
        assert_eq!(v, 3);
    }
}
