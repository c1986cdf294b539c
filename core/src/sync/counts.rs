//! [`Counts`]: counters that a thread adds to without a locked read-modify-write.
//!
//! A thread claims a slot number once, on its first count, and gives it back when it exits
//! ([`Claim`], kept in a thread-local); while it holds the number, slot `n` of every `Counts`
//! is its own, so it adds with a load and a store (a `lock xadd` costs about 20 cycles even
//! uncontended). A thread that finds no free number, or counts while its thread-locals are
//! being destroyed, adds to a shared slot with `fetch_add`. A read sums every slot. A reset
//! does not write the slots (a store would race their owners' load and store, and a count
//! in flight could put back what the reset zeroed): it records the sums as a baseline, which
//! reads subtract.

use super::atomic::{AtomicU64, Ordering};
#[cfg(mcb_loom)]
use super::loom as build;
use super::mutant::{self, Mutant};
#[cfg(not(mcb_loom))]
use super::std as build;
use crossbeam_utils::CachePadded;
use std::cell::Cell;

/// `N` counters (see the module docs).
#[derive(Debug)]
pub struct Counts<const N: usize> {
    /// Slot `n` is written only by the thread that holds claim `n`.
    slots: Box<[CachePadded<[AtomicU64; N]>]>,
    /// For threads without a slot.
    shared: CachePadded<[AtomicU64; N]>,
    /// The sums at the last reset.
    base: [AtomicU64; N],
}

impl<const N: usize> Default for Counts<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Counts<N> {
    /// All zero, with a slot for each of `slot_count()` numbers.
    pub fn new() -> Self {
        let zeros = || CachePadded::new(std::array::from_fn(|_| AtomicU64::new(0)));
        Self {
            slots: (0..slot_count()).map(|_| zeros()).collect(),
            shared: zeros(),
            base: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Adds `n` to counter `i`.
    #[inline]
    pub fn add(&self, i: usize, n: u64) {
        match claimed().and_then(|slot| self.slots.get(slot)) {
            Some(own) => {
                let cell = &own[i];
                // Relaxed (both): only this thread writes the cell while it holds the claim,
                // and the load sees its own last store, or the last one of the claim's previous
                // holder (the claim's Acquire); readers sum what they see.
                cell.store(
                    cell.load(Ordering::Relaxed).wrapping_add(n),
                    Ordering::Relaxed,
                );
            }
            // Relaxed: a count; nothing is published with it.
            None => _ = self.shared[i].fetch_add(n, Ordering::Relaxed),
        }
    }

    /// Counter `i`: what was added since the last reset.
    pub fn get(&self, i: usize) -> u64 {
        // Acquire: pairs with `reset`'s Release, so that the cells summed below are read after
        // those the reset summed, and (each cell only growing) the sum is at least the base.
        let base = self.base[i].load(Ordering::Acquire);
        self.sum(i).wrapping_sub(base)
    }

    /// Sets every counter back to zero (counts racing with the reset may land on either side
    /// of it, but none made before it comes back).
    pub fn reset(&self) {
        for i in 0..N {
            if mutant::active(Mutant::ResetZeroesCells) {
                // Relaxed: the broken variant's stores, racing the owners'.
                self.cells(i)
                    .for_each(|cell| cell.store(0, Ordering::Relaxed));
                continue;
            }
            // Release: see `get`. The larger of two racing resets' sums stays.
            self.base[i].fetch_max(self.sum(i), Ordering::Release);
        }
    }

    fn sum(&self, i: usize) -> u64 {
        // Relaxed: each cell's latest count; `get` says why the sum is not below the base.
        self.cells(i)
            .map(|cell| cell.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    fn cells(&self, i: usize) -> impl Iterator<Item = &AtomicU64> {
        self.slots
            .iter()
            .chain([&self.shared])
            .map(move |slot| &slot[i])
    }
}

/// How many slot numbers a structure gives rows of its own: twice the CPUs (threads usually
/// outnumber CPUs), at least 8, as many as there are claims at most.
pub(super) fn slot_count() -> usize {
    (build::cpu_count() * 2).max(8).min(build::claims().len())
}

/// A thread's claim of a slot number (see the module docs), held in a thread-local and given
/// back when the thread exits.
#[derive(Debug)]
struct Claim {
    claims: build::Claims,
    slot: Option<usize>,
}

impl Claim {
    /// The lowest free number, if any.
    fn take() -> Self {
        let claims = build::claims();
        let slot = (0..claims.len()).find(|&n| {
            claims[n]
                // Acquire: pairs with `drop`'s Release: the counts of the number's previous
                // holder happen before this thread's, so its first load sees them. Relaxed
                // on failure: another thread holds the number; nothing is read.
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        });
        Self { claims, slot }
    }

    #[inline]
    fn slot(&self) -> Option<usize> {
        self.slot
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // The thread's later counts (other thread-locals' destructors) go to the shared slot.
        let _ = SLOT.try_with(|cell| cell.set(NO_SLOT));
        if let Some(n) = self.slot {
            let order = mutant::ordering(
                Mutant::ClaimReleasedRelaxed,
                Ordering::Release,
                Ordering::Relaxed,
            );
            // Release: see `take`.
            self.claims[n].store(false, order);
        }
    }
}

#[cfg(not(mcb_loom))]
thread_local! {
    static CLAIM: Claim = Claim::take();
    static SLOT: Cell<usize> = const { Cell::new(UNCLAIMED) };
}
#[cfg(mcb_loom)]
loom::thread_local! {
    static CLAIM: Claim = Claim::take();
    static SLOT: Cell<usize> = Cell::new(UNCLAIMED);
}

/// `SLOT` before the thread's first call of [`claimed`].
const UNCLAIMED: usize = usize::MAX;
/// `SLOT` of a thread that found no free number, or gave its number back.
const NO_SLOT: usize = usize::MAX - 1;

/// The calling thread's slot number (claimed on the first call, given back when the thread
/// exits), or `None` if every number is held or the thread is exiting. The number is read
/// from `SLOT`, a thread-local without a destructor (one load, where `CLAIM`'s access checks
/// its state), which the claim clears before it gives the number back.
#[inline]
pub(super) fn claimed() -> Option<usize> {
    match SLOT.try_with(Cell::get).unwrap_or(NO_SLOT) {
        UNCLAIMED => claim(),
        NO_SLOT => None,
        slot => Some(slot),
    }
}

/// The first call of [`claimed`] on a thread: takes its number and notes it in `SLOT`.
#[cold]
fn claim() -> Option<usize> {
    let slot = CLAIM.try_with(Claim::slot).ok().flatten();
    let _ = SLOT.try_with(|cell| cell.set(slot.unwrap_or(NO_SLOT)));
    slot
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;
    use build::thread;

    #[test]
    fn counts_sum_every_thread_and_a_reset_keeps_later_counts() {
        let counts = Counts::<2>::new();
        counts.add(0, 2);
        // More threads than slots: some count in the shared slot; all are summed.
        thread::scope(|s| {
            for _ in 0..3 * counts.slots.len() {
                s.spawn(|| counts.add(1, 1));
            }
        });
        assert_eq!(counts.get(0), 2);
        assert_eq!(counts.get(1), 3 * counts.slots.len() as u64);
        counts.reset();
        assert_eq!((counts.get(0), counts.get(1)), (0, 0));
        counts.add(1, 5);
        thread::scope(|s| _ = s.spawn(|| counts.add(1, 1)));
        assert_eq!((counts.get(0), counts.get(1)), (0, 6));
    }

    #[test]
    fn a_thread_keeps_its_claim_and_gives_it_back_when_it_exits() {
        let mine = claimed();
        assert!(mine.is_some(), "a free number for a test thread");
        assert_eq!(claimed(), mine);
        // Twice as many threads as numbers, one after another: each finds one free, since
        // the ones before gave theirs back.
        for _ in 0..2 * build::claims().len() {
            let other = thread::spawn(claimed).join().expect("thread");
            assert!(other.is_some() && other != mine);
        }
    }
}
