//! One bucket: its engine, its state, the calls in flight and the references to it.
//!
//! # The handshake (the seed's `get_engine_handle` proof, with striped clients)
//!
//! A client *enters* by incrementing its stripe of `clients` (SeqCst) and then loading `state`
//! (SeqCst); if the state is not RUNNING it backs out. The stopper moves RUNNING to STOPPING by
//! a SeqCst CAS. A leaver decrements its stripe (SeqCst), loads `state` (SeqCst) and, if it is
//! STOPPING, loads every stripe (SeqCst); only if all are zero does it CAS STOPPING to STOPPED.
//! All these operations sit in the single SeqCst total order S (a Dekker pattern: each side
//! writes one location and then reads the other's).
//!
//! *A client that entered never sees STOPPED, and STOPPED is never reached while it is inside.*
//! Say client C incremented stripe i (write W) and then read RUNNING (read R). The CAS to
//! STOPPING (X) did not precede R in S, else R would have read STOPPING or later; so
//! W < R < X in S. A STOPPED CAS happens only after some leaver read STOPPING (after X in S)
//! and then read stripe i (read Ri, after X). Ri comes after W in S, so it reads W or a later
//! write to stripe i. Every write to stripe i is a +1 by some client followed later by that
//! client's own -1, so until C's -1 the stripe holds at least C's 1: Ri reads a non-zero value
//! and that leaver does not stop the bucket. The state only moves forward, so C never observes
//! STOPPED while inside.
//!
//! *Exactly one shutdown, and never a missed one.* Only the winner of the STOPPING to STOPPED
//! CAS starts the shutdown, so at most one does. The stopper counts itself in around its CAS
//! (as the seed does), so X precedes at least one decrement. Take the last decrement D in S:
//! every increment precedes its own decrement, so when D's thread then reads the state (after
//! X: STOPPING or STOPPED) and the stripes (all after D), it reads all zeros and attempts the
//! CAS; if it fails, someone else already won it.
//!
//! # Held items: the delete completes, the engine stays until the last item is back
//!
//! An item the engine handed out (to a connection, until it gives the item back) is a *hold*
//! ([`Hold`](super::Hold), or a record in a connection's [`HeldItems`](super::HeldItems)): not
//! a call inside, so it does not keep the bucket from STOPPED, and the delete completes with
//! holds outstanding; but the engine is destroyed only once the count of holds (`holds`) is
//! back to zero, or at global destroy. The count is a `sync::Tally`: each thread adds and gives
//! back on a row of its own (a hold taken on one thread may come back on another, so a row
//! can go below zero), and only the sum over the rows means anything.
//!
//! *No hold is counted after STOPPED.* A hold is made from a lease (a client that entered),
//! and counted before that lease leaves. STOPPED is never reached while a client is inside
//! (above), and the STOPPED winner's SeqCst stripe loads read that lease's decrement or a later
//! read-modify-write of its stripe, so they synchronise with it (a release sequence): the
//! shutdown worker, spawned after the CAS, sees every hold counted. From its first look on,
//! every row only goes down, so each row it reads holds at least what that row will end at:
//! a sum of zero means every hold was given back, and zero seen once stays zero.
//!
//! *The engine is destroyed once, after the last hold, never while a call is inside.* Only the
//! shutdown worker destroys a deleted bucket's engine (global destroy destroys only what is
//! still in the registry, and waits for the workers first). It does so at once if it saw no
//! hold, else once it reads a sum of zero under the shutdown mutex. Its loads of the rows are
//! Acquire and every give-back is a SeqCst (so Release) store to the giver's row (or a
//! decrement of the shared row, a read-modify-write): each value it reads synchronises with
//! the give-back that wrote it, which follows that row's earlier ones, so each held item's
//! last engine call (made while its hold lived) happens before the destroy. No client is
//! inside after STOPPED.
//!
//! *A give-back wakes the worker only when one can be waiting.* It stores to its row (SeqCst)
//! and then loads the state (SeqCst); it takes the shutdown mutex to wake the worker unless the
//! state was RUNNING. No thread can tell that its give-back was the last one (it sees only its
//! own row), so every give-back of a bucket that is no longer RUNNING wakes the worker, which
//! sums again. The worker runs a SeqCst fence before each sum. If the giver read RUNNING, its
//! load preceded the STOPPED CAS in the total order S, which precedes (happens before) the
//! worker's fence: the store precedes the fence in S, so the worker's load of that row reads
//! it (or later). Otherwise the giver wakes under the mutex, and that wake-up cannot be missed
//! (see `shutdown.rs`). At global destroy the worker stops waiting and destroys with
//! holds outstanding: the host makes no call then or after, so no held item is used again.
//!
//! `retain` uses the same handshake with `refcount` in place of the stripes, so a lookup that
//! races the shutdown worker either sees the bucket stopping and backs out, or is seen by the
//! worker's wait for the last reference.
//!
//! The std build relies on the C++20 SeqCst total order for "RMW then load of another location"
//! and "load then load of another location"; loom does not model that, so each such step goes
//! through [`Ordered::then_load`](crate::sync::atomic::Ordered::then_load), a SeqCst fence under loom when both accesses are SeqCst (see the
//! shim).

use super::clients::Clients;
use super::engine::Engine;
use super::shutdown::Shutdown;
use super::state::State;
use crate::sync::atomic::{fence, AtomicBool, AtomicU8, AtomicUsize, Ordered, Ordering};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{Arc, Mutex, Tally};

/// A bucket: the engine that serves it and the bookkeeping that keeps calls, references and
/// shutdown apart.
#[derive(Debug)]
pub struct Handle<E: Engine> {
    name: Box<str>,
    state: AtomicU8,
    clients: Clients,
    /// References: the registry's, each connection's, each reservation's, each temporary lookup.
    refcount: AtomicUsize,
    /// Items the engine handed out that are not back yet (each a [`Hold`](super::Hold) or a
    /// record in a [`HeldItems`](super::HeldItems)), counted in per-thread rows: the engine is
    /// destroyed only once they sum to zero, or at global destroy.
    holds: Tally,
    force: AtomicBool,
    /// The connection that asked for the delete, told once no call is inside (by then the
    /// engine is gone, unless items of it are still held).
    pending_delete: Mutex<Option<E::Cookie>>,
    shutdown: Arc<Shutdown>,
    engine: E,
}

/// What happened to a request to stop a bucket.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct StopOutcome {
    /// This caller moved the bucket from RUNNING to STOPPING.
    pub(crate) stopped: bool,
    /// This caller must start the shutdown worker (it also won STOPPING to STOPPED).
    pub(crate) start_shutdown: bool,
}

impl<E: Engine> Handle<E> {
    /// A new bucket in state NULL with one reference (its creator's).
    pub(crate) fn new(name: &str, engine: E, shutdown: Arc<Shutdown>) -> Self {
        Self {
            name: name.into(),
            state: AtomicU8::new(State::Null as u8),
            clients: Clients::new(),
            refcount: AtomicUsize::new(1),
            holds: Tally::new(1),
            force: AtomicBool::new(false),
            pending_delete: Mutex::new(None),
            shutdown,
            engine,
        }
    }

    /// The bucket's name ("" for the unnamed default bucket).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The current state (a snapshot).
    pub fn state(&self) -> State {
        // SeqCst: callers such as `Registry::create` report it next to their own decisions.
        State::from_u8(self.state.load(Ordering::SeqCst))
    }

    /// Calls inside the engine right now (a snapshot, for stats).
    pub fn clients(&self) -> usize {
        self.clients.count()
    }

    /// References held right now (a snapshot, for stats and tests).
    pub fn refcount(&self) -> usize {
        // Relaxed: informational.
        self.refcount.load(Ordering::Relaxed)
    }

    /// Items of the engine held right now (a snapshot, for stats and tests).
    pub fn holds(&self) -> usize {
        self.holds.sum(0) as usize
    }

    /// Whether the pending delete asked for a forced shutdown.
    pub fn force_shutdown(&self) -> bool {
        // Relaxed: written before the stopper leaves; the STOPPED CAS chain orders it before
        // the shutdown worker that reads it.
        self.force.load(Ordering::Relaxed)
    }

    /// NULL to RUNNING once the engine is initialised. SeqCst: publishes the initialised engine
    /// to every client whose SeqCst state load sees RUNNING.
    pub(crate) fn start(&self) {
        let order = mutant::ordering(
            Mutant::StartStoresRelaxed,
            Ordering::SeqCst,
            Ordering::Relaxed,
        );
        self.state.store(State::Running as u8, order);
    }

    /// The engine, for the registry's lifecycle steps (initialise and destroy), which run when
    /// no client can be inside.
    pub(crate) fn engine_unguarded(&self) -> &E {
        &self.engine
    }

    /// Takes a reference if the bucket is RUNNING (the seed's `retain_handle`). The caller must
    /// already be able to reach the handle (it holds a reference, or reads a registry snapshot).
    /// Explicit form for the FFI layer; Rust callers use [`Ref`](super::Ref).
    pub fn retain(&self) -> bool {
        // SeqCst: the handshake with the shutdown worker, which stops the bucket first and then
        // waits for references: count first, then check the state.
        let (_, counted) = Ordered::fetch_add(&self.refcount, 1, Ordering::SeqCst);
        // SeqCst: the load half of that handshake.
        let (state, _) = counted.then_load(&self.state, Ordering::SeqCst);
        if state == State::Running as u8 {
            return true;
        }
        self.release();
        false
    }

    /// Takes a reference regardless of state (for a holder that already has one and hands a
    /// second one out, such as a reservation).
    pub(crate) fn retain_again(&self) {
        // Relaxed: the caller already holds a reference, so the count cannot be at zero and
        // nobody is deciding anything on this increment.
        let before = self.refcount.fetch_add(1, Ordering::Relaxed);
        debug_assert!(before > 0, "retain_again without a reference");
    }

    /// Drops a reference (the seed's `release_handle`); the last one wakes the shutdown worker.
    /// Explicit form for the FFI layer; Rust callers drop a [`Ref`](super::Ref).
    pub fn release(&self) {
        // SeqCst: pairs with `retain`'s handshake; the worker's check of the count is under
        // the shutdown mutex, which orders it with the wake-up below.
        let before = self.refcount.fetch_sub(1, Ordering::SeqCst);
        debug_assert!(before > 0, "release without a reference");
        if before == 1 {
            self.shutdown.wake_workers();
        }
    }

    /// Counts one more held item. The caller is inside (it holds a lease, which leaves after
    /// this): see "Held items" in the module docs.
    #[inline]
    pub(crate) fn hold(&self) {
        // (Relaxed, in the tally): the caller's lease leaves after this increment, and the
        // shutdown worker, the only reader that decides on it, starts after the last leave
        // synchronised with the STOPPED CAS (module docs), so it sees every hold taken.
        self.holds.add(0);
    }

    /// A held item came back, on this thread's row of the count. While the bucket is RUNNING
    /// this writes nothing another thread writes and makes no wake-up call; otherwise it wakes
    /// the shutdown worker, which may be waiting for it ("A give-back wakes the worker", above).
    #[inline]
    pub(crate) fn unhold(&self) {
        if mutant::active(Mutant::UnholdChecksStateFirst) {
            let running = self.state() == State::Running;
            self.holds.sub(0);
            if !running {
                self.shutdown.wake_workers();
            }
            return;
        }
        // SeqCst: the first half of the handshake with the shutdown worker's fenced sum of the
        // rows (its Release part orders the held item's engine calls before the destroy).
        let order = mutant::ordering(Mutant::UnholdRelaxed, Ordering::SeqCst, Ordering::Relaxed);
        let counted = self.holds.sub_then(0, order);
        // SeqCst: the second half: RUNNING here means the worker, which starts after STOPPED,
        // sees this give-back and need not be woken.
        let (state, _) = counted.then_load(&self.state, Ordering::SeqCst);
        if state != State::Running as u8 {
            self.shutdown.wake_workers();
        }
    }

    /// Whether an item is still held (read by the shutdown worker, which starts after STOPPED;
    /// the last time under the shutdown mutex).
    pub(crate) fn is_held(&self) -> bool {
        // SeqCst fence: the worker's half of the handshake with `unhold`: a give-back whose
        // thread then read RUNNING precedes this fence in the total order, so the sum below
        // sees it. A cold path (once or twice a delete), so a real fence in both builds.
        // loom cannot tell it is needed (it orders the STOPPED CAS after `unhold`'s fence, so
        // the spawned worker sees the give-back anyway): this step rests on the proof above.
        fence(Ordering::SeqCst);
        // (Acquire, in the tally): pairs with `unhold`'s give-backs: the destroy that follows
        // a zero sees the calls made under every hold.
        !self.holds.is_zero(0)
    }

    /// Whether any reference is left (read by the shutdown worker under the shutdown mutex).
    pub(crate) fn is_referenced(&self) -> bool {
        // SeqCst: see `release`; the mutex already orders this load after any decrement whose
        // wake-up the worker could otherwise miss.
        self.refcount.load(Ordering::SeqCst) > 0
    }

    /// Counts a client in if the bucket is RUNNING (the seed's `get_engine_handle`). `Ok` holds
    /// the stripe to leave from; `Err(true)` means this caller, backing out, was the last one
    /// out of a STOPPING bucket and must start its shutdown.
    #[inline]
    pub(crate) fn enter(&self) -> Result<usize, bool> {
        if mutant::active(Mutant::EnterChecksBeforeCounting) {
            if self.state() != State::Running {
                return Err(false);
            }
            return Ok(self.clients.enter().0);
        }
        let (stripe, counted) = self.clients.enter();
        // SeqCst: the load half of the handshake (see the module docs).
        let order = mutant::ordering(
            Mutant::EnterLoadsStateAcquire,
            Ordering::SeqCst,
            Ordering::Acquire,
        );
        let (state, _) = counted.then_load(&self.state, order);
        if state == State::Running as u8 {
            Ok(stripe)
        } else if mutant::active(Mutant::BackOutSkipsStop) {
            let _ = self.clients.leave(stripe);
            Err(false)
        } else {
            Err(self.leave(stripe))
        }
    }

    /// Counts a client out (the seed's `release_engine_handle`). Returns true if this caller
    /// moved the bucket from STOPPING to STOPPED and must start its shutdown.
    #[inline]
    pub(crate) fn leave(&self, stripe: usize) -> bool {
        let counted = self.clients.leave(stripe);
        // SeqCst: the state must be read before the stripes ("observing state before clients
        // == 0 is crucial", as the seed says): see the module docs.
        let (state, seen) = counted.then_load(&self.state, Ordering::SeqCst);
        state == State::Stopping as u8 && self.clients.is_idle(stripe, seen) && self.try_stop()
    }

    fn try_stop(&self) -> bool {
        if mutant::active(Mutant::StopWithoutCas) {
            self.state.store(State::Stopped as u8, Ordering::SeqCst);
            return true;
        }
        // SeqCst: one total order with the stopper's CAS and the clients' handshake; the
        // winner alone starts the shutdown.
        self.state
            .compare_exchange(
                State::Stopping as u8,
                State::Stopped as u8,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok()
    }

    /// RUNNING to STOPPING, recording who asked and whether to force (the seed's delete path).
    /// The caller is counted in around the CAS so that STOPPED cannot be reached before the
    /// cookie is recorded.
    pub(crate) fn request_stop(&self, cookie: E::Cookie, force: bool) -> StopOutcome {
        let (stripe, _) = self.clients.enter();
        // SeqCst: the stopper's side of the handshake (see the module docs).
        let stopped = self
            .state
            .compare_exchange(
                State::Running as u8,
                State::Stopping as u8,
                Ordering::SeqCst,
                Ordering::SeqCst,
            )
            .is_ok();
        if stopped {
            *self.pending_delete.lock() = Some(cookie);
            // Relaxed: published to the shutdown worker by our SeqCst decrement in `leave`
            // and the STOPPED CAS that reads it.
            self.force.store(force, Ordering::Relaxed);
        }
        let start_shutdown = self.leave(stripe);
        StopOutcome {
            stopped,
            start_shutdown,
        }
    }

    /// The cookie of the pending delete, taken once by the shutdown worker.
    pub(crate) fn take_pending_delete(&self) -> Option<E::Cookie> {
        self.pending_delete.lock().take()
    }

    /// Global destroy claims the bucket: any state to NULL in one atomic step, so a racing
    /// delete either stopped it before (and its worker stands down) or finds it gone. Returns
    /// whether there was an engine to destroy (false if it was never started or already freed).
    pub(crate) fn claim_for_destroy(&self) -> bool {
        // SeqCst: an RMW in the same total order as the stop CASes it races with.
        self.state.swap(State::Null as u8, Ordering::SeqCst) != State::Null as u8
    }

    /// STOPPED (or never started) to NULL: the bucket is freed and nothing may enter it again.
    pub(crate) fn mark_freed(&self) {
        // SeqCst: later lookups through stale snapshots must see that it is gone.
        self.state.store(State::Null as u8, Ordering::SeqCst);
    }
}
