//! The count of calls in flight in one bucket, striped so that calls on different threads do not
//! write the same cache line.
//!
//! The seed keeps one `clients` integer per bucket that every call on every core increments and
//! decrements: under load that line bounces between all cores. Here each thread counts on its
//! own stripe (a [`Striped`] counter) and the rare reader, the leaver that may have to stop
//! the bucket, sums the stripes. A lease remembers its stripe, so each stripe only ever goes up
//! by one and later down by the same one: every stripe is individually a non-negative count, and
//! a sum of zero read after the state became STOPPING therefore proves nobody who saw RUNNING is
//! still inside (the argument is written out in `handle.rs`).

use crate::sync::atomic::{AtomicUsize, Ordered, Ordering};
use crate::sync::mutant::{self, Mutant};
use crate::sync::Striped;

/// Calls in flight, one padded counter per stripe.
#[derive(Debug)]
pub(crate) struct Clients {
    stripes: Striped<AtomicUsize>,
}

impl Clients {
    pub(crate) fn new() -> Self {
        Self {
            stripes: Striped::new(|| AtomicUsize::new(0)),
        }
    }

    /// Counts the caller in on its stripe; returns the stripe to [`Clients::leave`] from, and
    /// the increment, which the caller's load of the state follows.
    #[inline]
    pub(crate) fn enter(&self) -> (usize, Ordered) {
        let stripe = self.stripes.own_index();
        // SeqCst: the store half of the Dekker handshake with `request_stop`'s state CAS; the
        // caller's next SeqCst state load must not be ordered before this increment.
        let order = mutant::ordering(
            Mutant::EnterCountsRelaxed,
            Ordering::SeqCst,
            Ordering::Relaxed,
        );
        let (_, counted) = Ordered::fetch_add(&self.stripes[stripe], 1, order);
        (stripe, counted)
    }

    /// Counts the caller out of `stripe` (the one [`Clients::enter`] returned); returns the
    /// decrement, which the caller's load of the state follows.
    #[inline]
    pub(crate) fn leave(&self, stripe: usize) -> Ordered {
        let stripe = if mutant::active(Mutant::LeaveFromCallersStripe) {
            self.stripes.own_index()
        } else {
            stripe
        };
        // SeqCst: the leaver then loads the state and sums the stripes; whoever sums after
        // this decrement in the single total order must see it (no missed last leaver).
        let order = mutant::ordering(
            Mutant::LeaveUncountsRelease,
            Ordering::SeqCst,
            Ordering::Release,
        );
        let (before, counted) = Ordered::fetch_sub(&self.stripes[stripe], 1, order);
        debug_assert!(before > 0, "leave without enter");
        counted
    }

    /// Whether no client is inside, as seen by a caller whose load `state_seen` saw STOPPING.
    /// `own` is the caller's stripe (used only by the deliberately broken variant the models
    /// must catch).
    pub(crate) fn is_idle(&self, own: usize, state_seen: Ordered) -> bool {
        // SeqCst: these loads follow the caller's SeqCst state load in the total order, so each
        // sees every increment of a client that saw RUNNING (see `handle.rs`).
        let is_zero = |s: &AtomicUsize| state_seen.then_load(s, Ordering::SeqCst).0 == 0;
        if mutant::active(Mutant::LeaveReadsOwnStripeOnly) {
            return is_zero(&self.stripes[own]);
        }
        self.stripes.iter().all(is_zero)
    }

    /// Sum of all stripes (for stats; a snapshot, not used for decisions).
    pub(crate) fn count(&self) -> usize {
        // Relaxed: an informational figure; no decision rests on it.
        self.stripes.iter().map(|s| s.load(Ordering::Relaxed)).sum()
    }
}
