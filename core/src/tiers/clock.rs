//! Milliseconds since the clock was made: the one time source of a cache.
//!
//! The system clock reads one process-wide coarse time: a static that a background thread (the
//! ticker, `mcb-clock`) sets from Linux's coarse monotonic clock every millisecond while any
//! cache on the system clock lives. A get then reads the time with one load, where even the
//! coarse clock costs about 10 ns a read on this project's machines (a vDSO call), two thirds
//! of an L1 hit. Without a ticker (no such cache lives, the thread could not be started, or in
//! a child after `fork`) a read asks the coarse clock itself. lua-resty-mlcache's `ngx.now()` is
//! coarse too: the time of the event loop's last turn. A ttl may so end up late by a tick plus
//! the coarse clock's own lag (the time of the last timer interrupt: 1 to 4 ms).
//!
//! The ticker starts with the first cache on the system clock and stops within a tick of the
//! last one's drop; it is never joined (a cache's drop does not wait for it).

use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::time::Duration;
use crate::sync::Arc;

/// Where a cache reads the time: the system's monotonic clock, or a hand-moved one for tests.
#[derive(Clone, Debug)]
pub struct Clock(Source);

#[derive(Clone, Debug)]
enum Source {
    /// The process-wide coarse time (ms) when the clock was made.
    System(u64),
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// The monotonic system clock (coarse: see the module's doc).
    pub fn system() -> Self {
        Self(Source::System(ticker::now()))
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
    #[inline(always)]
    pub fn now_ms(&self) -> u64 {
        match &self.0 {
            Source::System(origin) => ticker::now().saturating_sub(*origin),
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

    /// Keeps the process-wide time ticking while the result lives, for a system clock (a cache
    /// holds one for its life); nothing for a manual one.
    pub(crate) fn keep_ticking(&self) -> Option<Ticking> {
        match self.0 {
            Source::System(_) => Some(ticker::hold()),
            Source::Manual(_) => None,
        }
    }
}

pub(crate) use ticker::Ticking;

/// The ticker (see the module's doc).
#[cfg(not(mcb_loom))]
mod ticker {
    use crate::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use crate::sync::thread;
    use crate::sync::time::{coarse_ms, Duration};

    /// How often the ticker reads the coarse clock.
    const TICK: Duration = Duration::from_millis(1);

    /// The coarse clock's reading at the last tick, plus one; 0 while no ticker runs.
    static NOW: AtomicU64 = AtomicU64::new(0);
    /// The live [`Ticking`]s.
    static HOLDERS: AtomicUsize = AtomicUsize::new(0);
    /// Which ticker is the current one: each start bumps it, and an older ticker that sees it
    /// moved on stops (so that a stop racing a start never leaves two running for long).
    static GENERATION: AtomicU64 = AtomicU64::new(0);
    static FORK_HOOK: AtomicBool = AtomicBool::new(false);

    /// The process-wide coarse time (ms).
    #[inline(always)]
    pub(super) fn now() -> u64 {
        // Relaxed: the time publishes nothing; a reading from the last tick is what the clock
        // promises (a stale 0 only sends this read to the coarse clock itself).
        match NOW.load(Ordering::Relaxed) {
            0 => coarse_ms(),
            ticked => ticked - 1,
        }
    }

    /// Keeps the ticker running while it lives.
    #[derive(Debug)]
    pub(crate) struct Ticking(());

    pub(super) fn hold() -> Ticking {
        // Relaxed: the count is its own only data; its read-modify-writes are ordered among
        // themselves, so exactly one holder sees it go from 0 and starts a ticker.
        if HOLDERS.fetch_add(1, Ordering::Relaxed) == 0 {
            start();
        }
        Ticking(())
    }

    impl Drop for Ticking {
        fn drop(&mut self) {
            // Relaxed: as in `hold`; the ticker sees 0 at its next tick and stops.
            HOLDERS.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn start() {
        // Relaxed (all three below): the values publish nothing but themselves.
        if !FORK_HOOK.swap(true, Ordering::Relaxed) {
            // SAFETY: `forked` is async-signal-safe (one atomic store), as a child handler of
            // pthread_atfork must be. If registration fails, a forked child keeps a time that
            // stands still until its ticker would have ticked: nothing worse than a late ttl.
            unsafe { libc::pthread_atfork(None, None, Some(forked)) };
        }
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed) + 1;
        NOW.store(coarse_ms() + 1, Ordering::Relaxed);
        let ticker = thread::Builder::new()
            .name("mcb-clock".into())
            .spawn(move || tick(generation));
        if ticker.is_err() {
            // No thread: every read asks the coarse clock itself.
            NOW.store(0, Ordering::Relaxed);
        }
    }

    fn tick(generation: u64) {
        loop {
            thread::sleep(TICK);
            // Relaxed (all): see `start`.
            if GENERATION.load(Ordering::Relaxed) != generation {
                return;
            }
            if HOLDERS.load(Ordering::Relaxed) == 0 {
                // A start racing this store finds its time replaced by 0 until its own ticker
                // ticks: its reads then ask the coarse clock, which is only slower.
                NOW.store(0, Ordering::Relaxed);
                return;
            }
            NOW.store(coarse_ms() + 1, Ordering::Relaxed);
        }
    }

    /// In a child after `fork`, where the ticker is not: every read asks the coarse clock.
    extern "C" fn forked() {
        // Relaxed: see `now`.
        NOW.store(0, Ordering::Relaxed);
    }
}

/// Under loom: the shim's clock, standing still, and no thread.
#[cfg(mcb_loom)]
mod ticker {
    pub(super) fn now() -> u64 {
        crate::sync::time::coarse_ms()
    }

    #[derive(Debug)]
    pub(crate) struct Ticking(());

    pub(super) fn hold() -> Ticking {
        Ticking(())
    }
}

/// Whole milliseconds, saturating (a ttl of centuries is still "very long", not a wrap-around).
pub(crate) fn to_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn the_system_clock_ticks_while_held_and_falls_back_after() {
        let clock = Clock::system();
        let held = clock.keep_ticking();
        let start = crate::sync::time::now();
        let first = clock.now_ms();
        while clock.now_ms() < first + 20 {
            assert!(
                crate::sync::time::now().duration_since(start) < Duration::from_secs(10),
                "the ticked time moves"
            );
            crate::sync::thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        let after = clock.now_ms();
        crate::sync::thread::sleep(Duration::from_millis(20));
        assert!(
            clock.now_ms() > after,
            "without a ticker the time still moves"
        );
    }
}
