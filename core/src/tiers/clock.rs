//! Milliseconds since the clock was made: the one time source of a cache.
//!
//! The system clock is Linux's coarse monotonic clock (the time of the last timer tick, 1 to
//! 4 ms old): every get reads the clock, and the coarse read costs a few nanoseconds where a
//! precise one costs tens (lua-resty-mlcache's `ngx.now()` is coarse too: the time of the event
//! loop's last turn). A ttl may so end up to one tick late.

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::time::Duration;
use crate::sync::Arc;

/// Where a cache reads the time: the system's monotonic clock, or a hand-moved one for tests.
#[derive(Clone, Debug)]
pub struct Clock(Source);

#[derive(Clone, Debug)]
enum Source {
    /// The monotonic clock's reading when the clock was made.
    System(system::Origin),
    Manual(Arc<AtomicU64>),
}

/// The coarse monotonic clock, where there is one.
#[cfg(all(target_os = "linux", not(mcb_loom)))]
#[allow(unsafe_code)] // one clock_gettime call
mod system {
    /// Milliseconds on the coarse clock.
    pub(super) type Origin = u64;

    pub(super) fn now() -> Origin {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec for the call; CLOCK_MONOTONIC_COARSE
        // exists on every Linux the crate runs on (2.6.32 and later), so the call cannot fail.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
        // Both fields are non-negative for a monotonic clock.
        (ts.tv_sec as u64) * 1_000 + (ts.tv_nsec as u64) / 1_000_000
    }

    pub(super) fn since(origin: Origin) -> u64 {
        now().saturating_sub(origin)
    }
}

/// Elsewhere (and under loom, where time stands still): std's monotonic clock.
#[cfg(not(all(target_os = "linux", not(mcb_loom))))]
mod system {
    use crate::sync::time::{self, Instant};

    pub(super) type Origin = Instant;

    pub(super) fn now() -> Origin {
        time::now()
    }

    pub(super) fn since(origin: Origin) -> u64 {
        super::to_ms(time::now().saturating_duration_since(origin))
    }
}

impl Clock {
    /// The monotonic system clock (coarse: see the module's doc).
    pub fn system() -> Self {
        Self(Source::System(system::now()))
    }

    /// A clock that stands still until [`Clock::advance`] moves it; clones share the time.
    pub fn manual() -> Self {
        Self(Source::Manual(Arc::new(AtomicU64::new(0))))
    }

    /// Moves a manual clock forward.
    ///
    /// # Panics
    /// On a system clock, which only time moves.
    pub fn advance(&self, by: Duration) {
        match &self.0 {
            // Relaxed: the time publishes no other data; a test orders its own threads.
            Source::Manual(ms) => {
                ms.fetch_add(to_ms(by), Ordering::Relaxed);
            }
            Source::System(_) => panic!("Clock::advance on the system clock"),
        }
    }

    /// Milliseconds since the clock was made.
    pub fn now_ms(&self) -> u64 {
        match &self.0 {
            Source::System(origin) => system::since(*origin),
            // Relaxed: as in `advance`.
            Source::Manual(ms) => ms.load(Ordering::Relaxed),
        }
    }
}

impl Clock {
    /// Whether only [`Clock::advance`] moves it (a waiter must then look at it again and again).
    pub(crate) fn is_manual(&self) -> bool {
        matches!(self.0, Source::Manual(_))
    }
}

/// Whole milliseconds, saturating (a ttl of centuries is still "very long", not a wrap-around).
pub(crate) fn to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
