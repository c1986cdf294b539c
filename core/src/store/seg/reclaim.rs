//! Grace periods, one per retired segment (or index table), not one per item: a flag set once
//! every thread that was pinned when the segment was retired has unpinned, so that no reader
//! can still hold a location inside it.
//!
//! In the std build a deferred function of crossbeam-epoch's global collector sets the flag
//! (the collector runs it two epochs later, once every pinned thread moved on); the retirer
//! flushes its bag to the global queue at once, so that no thread keeps it private. Under loom
//! the shim's model collector marks the flag at the end of the grace period, so that the models
//! can see a segment reused under a reader when the grace period is skipped.

use crate::sync::atomic::AtomicBool;
#[cfg(not(mcb_loom))]
use crate::sync::atomic::Ordering;
use crate::sync::PayloadArc;

/// Sets `flags[i]` (Release) once every thread pinned now has unpinned.
pub(crate) fn after_grace(flags: &PayloadArc<[AtomicBool]>, i: usize) {
    #[cfg(not(mcb_loom))]
    {
        let guard = crate::sync::epoch::Domain.pin();
        let flags = PayloadArc::clone(flags);
        // Release: pairs with the Acquire load of whoever reuses what the flag guards.
        guard.defer(move || flags[i].store(true, Ordering::Release));
        guard.flush();
    }
    #[cfg(mcb_loom)]
    crate::sync::epoch::mark_freed_when_unpinned(&flags[i]);
}

/// Helps grace periods end: advances the collector and runs what expired (std); lets other
/// model threads run (loom).
pub(crate) fn drive() {
    #[cfg(not(mcb_loom))]
    crate::sync::epoch::Domain.flush();
    #[cfg(mcb_loom)]
    crate::sync::thread::yield_now();
}

/// How long a writer waits for grace periods before it gives up on room in segments: a reader
/// pinned that long (descheduled on a loaded machine, or a worker stuck in its turn) is rare,
/// and the writer then falls back to memory outside the segments.
#[cfg(not(mcb_loom))]
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// A writer's wait for grace periods: yields first, then sleeps, backing off to 1 ms.
#[derive(Debug)]
pub(crate) struct Patience {
    rounds: u32,
    /// Waits only this many rounds (a writer that holds an item, which may be what the
    /// grace period waits for).
    brief: Option<u32>,
    #[cfg(not(mcb_loom))]
    since: Option<std::time::Instant>,
}

impl Patience {
    pub(crate) fn new() -> Self {
        Self {
            rounds: 0,
            brief: None,
            #[cfg(not(mcb_loom))]
            since: None,
        }
    }

    /// A few rounds only.
    pub(crate) fn brief() -> Self {
        Self {
            brief: Some(16),
            ..Self::new()
        }
    }

    /// Waits a little for a writer elsewhere to let a segment go (nothing is evictable now);
    /// false after a few rounds (the caller then uses memory outside the segments).
    pub(crate) fn stuck(&mut self) -> bool {
        self.rounds += 1;
        crate::sync::thread::yield_now();
        self.rounds < if cfg!(mcb_loom) { 4 } else { 32 }
    }

    /// Drives the collector and waits a little; false once patience ran out.
    pub(crate) fn wait(&mut self) -> bool {
        drive();
        self.rounds += 1;
        if self.brief.is_some_and(|most| self.rounds > most) {
            return false;
        }
        #[cfg(not(mcb_loom))]
        {
            let since = *self.since.get_or_insert_with(crate::sync::time::now);
            if self.rounds <= 16 {
                crate::sync::thread::yield_now();
            } else {
                let micros = 1u64 << (self.rounds - 16).min(10);
                crate::sync::thread::sleep(std::time::Duration::from_micros(micros));
            }
            crate::sync::time::now().saturating_duration_since(since) < PATIENCE
        }
        #[cfg(mcb_loom)]
        {
            self.rounds < 4
        }
    }
}
