//! [`Tally`]: counts that go up and down, one per index, that a thread moves without a locked
//! read-modify-write and without writing a line another thread writes.
//!
//! A row of cells per [`Counts`](super::Counts) slot number (the thread that holds the number
//! writes its row with a load and a store), and a shared row for threads without a number
//! (`fetch_add`). A count taken on one thread may be given back on another, so a row can go
//! below zero (wrapping): only the sum over the rows means anything. [`Tally::is_zero`] is
//! exact once nothing adds to that index any more, and the caller's protocol must order every
//! add before the check (the store's: a hold is taken by a pinned reader or under its item's
//! lock, and the check waits for the segment's grace period). Then each cell the check reads
//! holds all of its row's adds and the gives-back it saw, so the sum is zero only when every
//! add was given back and the check saw each give-back (Release, read with Acquire): what the
//! holders did happens before what the checker does next.

use super::atomic::{AtomicU32, Ordered, Ordering};
use super::counts;
use super::mutant::{self, Mutant};

/// Cells per cache line: rows of different threads never share one.
const LINE: usize = 64 / std::mem::size_of::<u32>();

/// `len` counts (see the module docs).
#[derive(Debug)]
pub(crate) struct Tally {
    len: usize,
    /// Cells per row: `len` rounded up to a line.
    width: usize,
    /// Rows with an owner (the shared row follows them).
    owned: usize,
    /// Row `n` (of `counts::slot_count()`) is written only by the thread that holds claim
    /// `n`; the last row is shared.
    cells: Box<[AtomicU32]>,
}

impl Tally {
    /// `len` counts, all zero.
    pub(crate) fn new(len: usize) -> Self {
        let width = len.div_ceil(LINE).max(1) * LINE;
        let owned = counts::slot_count();
        Self {
            len,
            width,
            owned,
            cells: (0..(owned + 1) * width)
                .map(|_| AtomicU32::new(0))
                .collect(),
        }
    }

    /// Counts one up at `i`.
    #[inline]
    pub(crate) fn add(&self, i: usize) {
        // Relaxed (both): the caller's protocol orders the add before any check of `i`.
        match self.own(i) {
            Some(cell) => cell.store(
                cell.load(Ordering::Relaxed).wrapping_add(1),
                Ordering::Relaxed,
            ),
            None => self.shared_add(i),
        }
    }

    /// Counts one down at `i` (one added on any thread).
    #[inline]
    pub(crate) fn sub(&self, i: usize) {
        // Release: what the count kept happens before a check that sees it gone.
        let _ = self.sub_then(i, Ordering::Release);
    }

    /// [`Tally::sub`] as the first step of a handshake ([`Ordered`]): the row's store, or the
    /// shared row's decrement, made with `order` (at least Release, as in `sub`), which the
    /// caller's next access follows.
    #[inline]
    pub(crate) fn sub_then(&self, i: usize, order: Ordering) -> Ordered {
        match self.own(i) {
            // Relaxed load: the owner's own last store.
            Some(cell) => Ordered::store(cell, cell.load(Ordering::Relaxed).wrapping_sub(1), order),
            None => self.shared_sub(i, order),
        }
    }

    /// The counts at `i` summed over the rows, wrapping (exact when `is_zero` is).
    pub(crate) fn sum(&self, i: usize) -> u32 {
        // Acquire: pairs with `sub`'s Release.
        assert!(i < self.len);
        let rows = if mutant::active(Mutant::TallySkipsSharedRow) {
            self.owned
        } else {
            self.owned + 1
        };
        (0..rows)
            .map(|row| self.cells[row * self.width + i].load(Ordering::Acquire))
            .fold(0u32, u32::wrapping_add)
    }

    /// Whether the counts at `i` sum to zero (see the module docs for when that is exact).
    pub(crate) fn is_zero(&self, i: usize) -> bool {
        self.sum(i) == 0
    }

    /// The calling thread's cell for `i`, if it holds a slot number.
    #[inline]
    fn own(&self, i: usize) -> Option<&AtomicU32> {
        assert!(i < self.len);
        let row = counts::claimed().filter(|&row| row < self.owned)?;
        Some(&self.cells[row * self.width + i])
    }

    /// [`Tally::add`] of a thread without a row.
    #[cold]
    fn shared_add(&self, i: usize) {
        // Relaxed: as in `add`.
        self.shared(i).fetch_add(1, Ordering::Relaxed);
    }

    /// [`Tally::sub_then`] of a thread without a row.
    #[cold]
    fn shared_sub(&self, i: usize, order: Ordering) -> Ordered {
        // `order`: as in `sub_then`.
        Ordered::fetch_sub(self.shared(i), 1, order).1
    }

    fn shared(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.len);
        &self.cells[self.owned * self.width + i]
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;
    use crate::sync::std::thread;

    #[test]
    fn counts_taken_on_some_threads_and_given_back_on_others_sum_to_zero() {
        let tally = Tally::new(3);
        tally.add(1);
        assert!(tally.is_zero(0) && !tally.is_zero(1) && tally.is_zero(2));
        // More threads than rows: some count in the shared row. Each adds at 2 and gives back
        // one count at 1 (this thread's).
        let threads = 3 * tally.owned;
        thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    tally.add(2);
                    tally.sub(1);
                });
            }
        });
        assert!(!tally.is_zero(2), "{threads} counts at 2");
        // The counts at 1 went below zero: one added, `threads` given back.
        for _ in 1..threads {
            tally.add(1);
        }
        assert!(tally.is_zero(1));
        for _ in 0..threads {
            tally.sub(2);
        }
        assert!(tally.is_zero(2) && tally.is_zero(0));
    }

    #[test]
    #[should_panic]
    fn an_index_past_the_end_is_refused() {
        Tally::new(3).add(3);
    }
}
