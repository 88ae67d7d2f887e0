//! Retrying with capped, jittered exponential backoff until a deadline; every failed attempt is
//! logged with its reason, so a waiting node says why it waits (the same reason again within
//! `REPEAT_INFO_EVERY` at debug only: a fast poll must not flood the console). Time comes from
//! a [`Clock`].

use std::time::Duration;

use log::{debug, info};
use ring::rand::{SecureRandom, SystemRandom};

use crate::clock::Clock;

/// A reason unchanged since it was last logged at info is logged at info again after this.
const REPEAT_INFO_EVERY: Duration = Duration::from_secs(5);

pub struct Backoff {
    pub initial: Duration,
    pub max: Duration,
    /// Attempts made at `initial` before the doubling starts.
    pub hold: u32,
}

impl Backoff {
    /// The pause before attempt `n` (0-based): `initial` for the first `hold` attempts, then
    /// doubled each time, capped, with ±25% jitter so a fleet booting together does not hit the
    /// API server in lockstep.
    pub fn delay(&self, n: u32) -> Duration {
        let n = n.saturating_sub(self.hold);
        let base = self.initial.saturating_mul(1u32 << n.min(16)).min(self.max);
        let mut b = [0u8; 2];
        let r = if SystemRandom::new().fill(&mut b).is_ok() { u16::from_be_bytes(b) } else { 32768 };
        let factor = 0.75 + 0.5 * f64::from(r) / 65535.0;
        base.mul_f64(factor)
    }
}

/// What one attempt says; `E` is the caller's error type.
pub enum Attempt<T, E> {
    Done(T),
    /// Not yet; the reason is logged and the attempt repeated after the backoff, which grows
    /// with each such attempt (a server that is down, or not ready).
    Wait(String),
    /// Not yet, but the server was there: it took the connection, then the exchange broke
    /// (reset, cut mid-stream). The network failed, not the server: the first of a run of these
    /// is repeated at once, the next ones after a backoff of their own from `initial`, and the
    /// growth of `Wait`'s backoff is left as it was.
    Broken(String),
    /// Give up now.
    Fail(E),
}

/// The deadline passed while an attempt still said "not yet".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: gave up after {:.0?} ({attempts} attempts); last reason: {reason}", .waited)]
pub struct GaveUp {
    pub what: String,
    pub waited: Duration,
    pub attempts: u32,
    pub reason: String,
}

/// How to retry: what is being waited for (for messages), the log tag, the time budget, the
/// backoff, and the clock.
pub struct Retry<'a> {
    pub what: &'a str,
    pub tag: &'a str,
    pub timeout: Duration,
    pub backoff: &'a Backoff,
    pub clock: &'a dyn Clock,
}

impl Retry<'_> {
    /// Repeats `f` until it is done, fails, or the timeout passes (then the last reason is the
    /// error, with the number of attempts). Each layer keeps its own error type `E`: it only
    /// has to hold a [`GaveUp`].
    pub fn run<T, E: From<GaveUp>>(&self, mut f: impl FnMut() -> Attempt<T, E>) -> Result<T, E> {
        let started = self.clock.now();
        let deadline = started + self.timeout;
        // Attempts made, `Wait`s among them, and `Broken`s in a row.
        let (mut n, mut down, mut broken) = (0u32, 0u32, 0u32);
        // The last reason logged at info, and when: a fast poll repeats it at debug only.
        let mut shown: Option<(_, String)> = None;
        loop {
            let (reason, delay) = match f() {
                Attempt::Done(t) => return Ok(t),
                Attempt::Fail(e) => return Err(e),
                Attempt::Wait(reason) => {
                    broken = 0;
                    down += 1;
                    (reason, self.backoff.delay(down - 1))
                }
                Attempt::Broken(reason) => {
                    broken += 1;
                    (reason, if broken == 1 { Duration::ZERO } else { self.backoff.delay(broken - 2) })
                }
            };
            let now = self.clock.now();
            if now >= deadline {
                return Err(
                    GaveUp { what: self.what.to_string(), waited: now - started, attempts: n + 1, reason }.into()
                );
            }
            let repeat = shown.as_ref().is_some_and(|(at, r)| *r == reason && now - *at < REPEAT_INFO_EVERY);
            if repeat {
                debug!("[{}] {}: attempt {} failed: {reason}; retrying", self.tag, self.what, n + 1);
            } else {
                info!("[{}] {}: attempt {} failed: {reason}; retrying", self.tag, self.what, n + 1);
                shown = Some((now, reason.clone()));
            }
            if !delay.is_zero() {
                self.clock.sleep(delay.min(deadline - now), &reason);
            }
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::FakeClock;

    #[test]
    fn delays_grow_and_cap() {
        let b = Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(1), hold: 0 };
        assert!(b.delay(0) >= Duration::from_millis(75) && b.delay(0) <= Duration::from_millis(125));
        assert!(b.delay(10) <= Duration::from_millis(1250));
        assert!(b.delay(10) >= Duration::from_millis(750));
    }

    #[test]
    fn held_delays_stay_at_the_initial_pause_then_grow() {
        let b = Backoff { initial: Duration::from_millis(100), max: Duration::from_secs(1), hold: 5 };
        for n in 0..=5 {
            assert!(b.delay(n) <= Duration::from_millis(125), "attempt {n}: {:?}", b.delay(n));
        }
        assert!(b.delay(6) >= Duration::from_millis(150), "{:?}", b.delay(6));
        assert!(b.delay(40) >= Duration::from_millis(750));
    }

    #[test]
    fn gives_up_at_the_deadline_with_the_last_reason() {
        let clock = FakeClock::new();
        let b = Backoff { initial: Duration::from_secs(1), max: Duration::from_secs(5), hold: 0 };
        let r = Retry { what: "waiting", tag: "test", timeout: Duration::from_secs(60), backoff: &b, clock: &clock };
        let e = r.run::<(), GaveUp>(|| Attempt::Wait("nope".into())).unwrap_err().to_string();
        assert!(e.contains("last reason: nope"), "{e}");
        assert!(e.contains("gave up after 60s"), "{e}");
        assert_eq!(clock.elapsed(), Duration::from_secs(60));
        // Capped at 5 s (+25%): at least 60 / 6.25 waits, every one with the reason.
        let waits = clock.waits();
        assert!(waits.len() >= 10, "{}", waits.len());
        assert!(waits.iter().all(|w| w.why == "nope" && w.duration <= Duration::from_millis(6250)));
        let mut i = 0;
        let v = r
            .run::<_, GaveUp>(|| {
                i += 1;
                if i == 3 { Attempt::Done(i) } else { Attempt::Wait("not yet".into()) }
            })
            .unwrap();
        assert_eq!(v, 3);
    }
}
