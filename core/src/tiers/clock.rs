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

/// The system clock: milliseconds on the shim's coarse monotonic clock.
mod system {
    /// The coarse clock's reading when a clock was made.
    pub(super) type Origin = u64;

    pub(super) fn now() -> Origin {
        crate::sync::time::coarse_ms()
    }

    pub(super) fn since(origin: Origin) -> u64 {
        now().saturating_sub(origin)
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
