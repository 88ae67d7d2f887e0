//! Time as a parameter. Every retry and wait loop reads the time and sleeps through a [`Clock`],
//! so tests can run "server down for 20 s, then up" or a 5-minute deadline in milliseconds of real
//! time with a [`FakeClock`], and assert the attempts and the reasons given for each wait.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub trait Clock: Send + Sync {
    fn now(&self) -> Instant;
    /// Waits `d`; `why` is the reason the caller is waiting (already logged by the caller).
    fn sleep(&self, d: Duration, why: &str);
    /// The wall-clock time (UTC), for judging certificates: a [`FakeClock`] can be set to any
    /// date ([`FakeClock::at`]) and moves with its virtual time.
    fn wall(&self) -> time::OffsetDateTime {
        time::OffsetDateTime::now_utc()
    }
}

/// Milliseconds on the boot clock (CLOCK_BOOTTIME: since the kernel started, suspend included),
/// the clock the kernel's and systemd's own timestamps use, so a boot timeline lines up with
/// theirs.
pub fn boot_ms() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    (t.tv_sec.max(0) as u64) * 1000 + (t.tv_nsec.max(0) as u64) / 1_000_000
}

/// The real clock.
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn sleep(&self, d: Duration, _why: &str) {
        std::thread::sleep(d);
    }
}

/// One wait seen by a [`FakeClock`]: when it began (virtual time since the clock's start), how
/// long, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub at: Duration,
    pub duration: Duration,
    pub why: String,
}

type Hook = Box<dyn Fn(Duration) + Send + Sync>;

/// A clock whose sleeps return at once and move virtual time forward. `on_advance` runs after
/// each sleep with the new virtual time, so a test can change the world at a given moment
/// (start the server at 20 s).
pub struct FakeClock {
    start: Instant,
    elapsed: Mutex<Duration>,
    /// Wall-clock time at virtual time zero.
    wall_start: time::OffsetDateTime,
    waits: Mutex<Vec<Wait>>,
    on_advance: Option<Hook>,
}

impl Default for FakeClock {
    fn default() -> Self {
        FakeClock::new()
    }
}

impl FakeClock {
    pub fn new() -> FakeClock {
        FakeClock {
            start: Instant::now(),
            elapsed: Mutex::new(Duration::ZERO),
            wall_start: time::OffsetDateTime::now_utc(),
            waits: Mutex::default(),
            on_advance: None,
        }
    }

    pub fn on_advance(mut self, hook: impl Fn(Duration) + Send + Sync + 'static) -> FakeClock {
        self.on_advance = Some(Box::new(hook));
        self
    }

    /// Sets the wall-clock time at virtual time zero (the date certificates are judged against).
    pub fn at(mut self, wall: time::OffsetDateTime) -> FakeClock {
        self.wall_start = wall;
        self
    }

    /// Moves virtual time forward without recording a wait (a clock jump: "a year later").
    pub fn advance(&self, d: Duration) {
        *self.elapsed.lock().unwrap_or_else(|p| p.into_inner()) += d;
    }

    /// Virtual time since the clock was made.
    pub fn elapsed(&self) -> Duration {
        *self.elapsed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every sleep so far, in order.
    pub fn waits(&self) -> Vec<Wait> {
        self.waits.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.start + self.elapsed()
    }
    fn wall(&self) -> time::OffsetDateTime {
        self.wall_start + self.elapsed()
    }
    fn sleep(&self, d: Duration, why: &str) {
        let now = {
            let mut e = self.elapsed.lock().unwrap_or_else(|p| p.into_inner());
            self.waits.lock().unwrap_or_else(|p| p.into_inner()).push(Wait {
                at: *e,
                duration: d,
                why: why.to_string(),
            });
            *e += d;
            *e
        };
        if let Some(h) = &self.on_advance {
            h(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn fake_sleeps_advance_virtual_time_and_call_the_hook() {
        let seen = Arc::new(AtomicU64::new(0));
        let s = seen.clone();
        let c = FakeClock::new().on_advance(move |t| s.store(t.as_secs(), Ordering::SeqCst));
        let t0 = c.now();
        c.sleep(Duration::from_secs(20), "server down");
        c.sleep(Duration::from_secs(5), "again");
        assert_eq!(c.now() - t0, Duration::from_secs(25));
        assert_eq!(seen.load(Ordering::SeqCst), 25);
        let w = c.waits();
        assert_eq!(w.len(), 2);
        assert_eq!((w[1].at, w[1].why.as_str()), (Duration::from_secs(20), "again"));
    }
}
