//! Deliberate bugs for the loom models to catch.
//!
//! A model that passes proves something only if it fails when the code is wrong. Each variant
//! below names one line of the real code that a model test switches to a broken form; the
//! models in `model-tests` assert that loom then reports a failure. Outside `--cfg mcb_loom`
//! [`active`] is a constant `false`, so the release build carries none of this.

// std's own: the ordering both builds' atomics take (`super::atomic` re-exports it). This
// module is the bottom of the shim, below both builds.
use std::sync::atomic::Ordering;

/// One deliberate bug, or none.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum Mutant {
    /// The real code.
    None = 0,
    /// `atomic::Ordered::then_load` emits no fence under loom either: the Dekker handshake loses its
    /// order.
    NoStoreLoadFence,
    /// `enter` checks the state before counting itself in (check-then-act).
    EnterChecksBeforeCounting,
    /// `leave` only looks at its own stripe when deciding that the bucket is idle.
    LeaveReadsOwnStripeOnly,
    /// The last leaver stores STOPPED instead of winning a compare-and-swap.
    StopWithoutCas,
    /// `release` does not take the shutdown mutex before waking the waiter.
    ReleaseWakesWithoutLock,
    /// The shutdown worker does not re-check for references under the mutex before waiting.
    WorkerWaitsWithoutRecheck,
    /// A connection frees its state on disconnect even while it is still reserved.
    DisconnectIgnoresReservations,
    /// `Connection::disconnect` drops its bucket reference after giving up the CONNECTED bit,
    /// reading the state a concurrent last release may have freed.
    DisconnectReleasesLate,
    /// `create` checks for the name outside the writer lock.
    CreateChecksOutsideLock,
    /// The L2 frees a node as soon as it is unlinked instead of after the epoch grace period.
    L2FreesEagerly,
    /// The L2 frees a batch of retired nodes when it hands it to the collector, without the
    /// epoch grace period.
    L2FreesBatchAtHandover,
    /// The loader path skips re-reading L2 after taking the per-key lock.
    LoaderSkipsRecheck,
    /// A loader lock's holder counts the sleepers in a critical section before the one that
    /// marks the lock done: a caller that starts to wait in between is never woken.
    FlightCountsSleepersFirst,
    /// A promotion into L1 reads the invalidation generation after reading L2, not before.
    L1TagsAfterL2Read,
    /// `Clients::enter` increments its stripe Relaxed instead of SeqCst.
    EnterCountsRelaxed,
    /// `Clients::leave` decrements its stripe Release instead of SeqCst.
    LeaveUncountsRelease,
    /// `Handle::enter` loads the state Acquire instead of SeqCst.
    EnterLoadsStateAcquire,
    /// `Handle::start` stores RUNNING Relaxed instead of SeqCst.
    StartStoresRelaxed,
    /// A client backing out of a bucket that is not RUNNING leaves without the last-leaver
    /// check (so the bucket may never stop).
    BackOutSkipsStop,
    /// `Connection::release` takes its reservation with a Relaxed CAS instead of AcqRel.
    ReleaseCasRelaxed,
    /// `Clients::leave` counts out of the calling thread's stripe, not the lease's.
    LeaveFromCallersStripe,
    /// `Cache::delete` does not bump the key's generation.
    DeleteSkipsBump,
    /// `Cache::purge` does not bump the generations.
    PurgeSkipsBump,
    /// A loaded value is tagged with the generation read after its L2 write, not before.
    StoreTagsAfterWrite,
    /// `Cache::set` does not bump the key's generation.
    SetSkipsBump,
    /// The recache token is checked, then taken, in two steps instead of one read-modify-write.
    TokenCheckThenTake,
    /// The shutdown worker destroys a deleted bucket's engine at once, as the delete
    /// completes, while items of it are still held.
    DestroyIgnoresHolds,
    /// `Lease::into_hold` counts the hold after its lease left, not before: the shutdown may
    /// start in between and miss it.
    HoldCountedAfterLeave,
    /// `Handle::unhold` decrements Relaxed instead of Release: the destroy need not happen after
    /// the held item's last call.
    UnholdRelaxed,
    /// `Handle::unhold` reads the state before its decrement: it can read RUNNING, and so skip
    /// the wake-up, while the shutdown worker reads the count before the decrement and waits.
    UnholdChecksStateFirst,
    /// `HeldItems::release` gives the item's hold back before its release reaches the engine:
    /// the shutdown worker can destroy the engine under that call.
    HeldGivenBackBeforeUse,
    /// `l1::Slot::take` shares a slot that no cache holds any more, with its old incarnation,
    /// so that a new cache of a name reads the L1 copies of the dropped ones.
    L1SlotOutlivesItsCaches,
    /// The L2 recycles a batch of retired nodes (into its pool, for the next writes to reuse)
    /// when it hands the batch to the collector, without the epoch grace period.
    L2RecyclesAtHandover,
    /// The store's index publishes a slot with a Relaxed store instead of Release: a reader can
    /// find the slot before the item's bytes.
    SlotPublishedRelaxed,
    /// A retired segment is reused without waiting for its grace period.
    ReuseSkipsGrace,
    /// A retired segment is reused while counted holds remain on it.
    ReuseSkipsHolds,
    /// `Tally::is_zero` sums the rows of threads with a slot number and leaves out the shared
    /// row: a hold taken by a thread without one does not count.
    TallySkipsSharedRow,
    /// An eviction unlinks whatever its item's key holds, not the slot naming the evicted
    /// location.
    EvictionUnlinksByKey,
    /// A lookup of the store's index that misses returns at once, without checking whether a
    /// slot moved to its other bucket meanwhile.
    FindSkipsMoveCheck,
    /// A thread gives its `Counts` slot number back with a Relaxed store instead of Release:
    /// the next holder's counts can start from before the last holder's.
    ClaimReleasedRelaxed,
    /// `Counts::reset` stores zero into every cell instead of recording a baseline: a count
    /// in flight (a load, then a store) puts back what the reset zeroed.
    ResetZeroesCells,
    /// The end of a host's turn unpins without counting a hold for the items it handed out
    /// that are still out.
    TurnEndSkipsHolds,
    /// The end of a host's turn unpins before it counts those holds (a reuse may check the
    /// holds in between).
    TurnEndUnpinsFirst,
}

/// `real`, or `broken` while `bug` is switched on: an ordering that a deliberate bug weakens.
#[inline(always)]
pub fn ordering(bug: Mutant, real: Ordering, broken: Ordering) -> Ordering {
    if active(bug) {
        broken
    } else {
        real
    }
}

#[cfg(mcb_loom)]
mod switch {
    use super::Mutant;
    use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
    use std::sync::{Mutex, MutexGuard, PoisonError};

    // A std atomic on purpose: it is set before a model starts and never changes inside one,
    // so loom must not explore it.
    static ACTIVE: AtomicU8 = AtomicU8::new(Mutant::None as u8);
    // The L2's retirement batch (see `retire_batch`), set and read like `ACTIVE`.
    static RETIRE_BATCH: AtomicUsize = AtomicUsize::new(1);

    // Models run one at a time: the switch is global, and a test harness runs tests in parallel.
    static EXCLUSIVE: Mutex<()> = Mutex::new(());

    /// Switches the real code to `mutant` until the returned guard drops. Every model takes this
    /// guard (with `Mutant::None` for the real code), which also runs models one at a time.
    pub fn set(mutant: Mutant) -> Guard {
        set_batched(mutant, 1)
    }

    /// As [`set`], with the L2 handing its retired nodes to the collector `batch` at a time
    /// until the guard drops (1 otherwise: every retirement at once).
    pub fn set_batched(mutant: Mutant, batch: usize) -> Guard {
        let lock = EXCLUSIVE.lock().unwrap_or_else(PoisonError::into_inner);
        // Relaxed: written before the model's threads exist; thread spawn publishes it.
        ACTIVE.store(mutant as u8, Ordering::Relaxed);
        // Relaxed: as above.
        RETIRE_BATCH.store(batch.max(1), Ordering::Relaxed);
        Guard(lock)
    }

    /// Restores the real code when dropped.
    #[derive(Debug)]
    pub struct Guard(#[allow(dead_code)] MutexGuard<'static, ()>);

    impl Drop for Guard {
        fn drop(&mut self) {
            // Relaxed: as in `set`.
            ACTIVE.store(Mutant::None as u8, Ordering::Relaxed);
            // Relaxed: as in `set`.
            RETIRE_BATCH.store(1, Ordering::Relaxed);
        }
    }

    #[inline]
    pub fn active(mutant: Mutant) -> bool {
        // Relaxed: constant for the whole model run (see `set`).
        ACTIVE.load(Ordering::Relaxed) == mutant as u8
    }

    /// How many retired nodes an L2 shard hands to the collector at once in this model (the
    /// std build: 64). At 1, the handover (and its fences) runs inside every write.
    #[inline]
    pub fn retire_batch() -> usize {
        // Relaxed: constant for the whole model run (see `set`).
        RETIRE_BATCH.load(Ordering::Relaxed)
    }
}

#[cfg(mcb_loom)]
pub use switch::{active, retire_batch, set, set_batched, Guard};

/// Whether `mutant` is switched on: always `false` outside loom builds.
#[cfg(not(mcb_loom))]
#[inline(always)]
pub const fn active(_mutant: Mutant) -> bool {
    false
}
