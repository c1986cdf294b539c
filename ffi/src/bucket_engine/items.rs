//! Which engine each item handed out belongs to.
//!
//! `allocate` and `get` hand the host items of the connection's bucket's engine, and the host
//! later gives each back (`release`) and reads or stamps it (`get_item_info`, `item_set_cas`)
//! on the same cookie. Those calls must reach the engine that made the item, whichever bucket
//! the connection is attached to by then (the default bucket, another one after SELECT, none
//! after its bucket was deleted), and that engine must still exist. So each item handed out on
//! a connection is a hold on its engine, recorded in the connection's [`ItemHolds`] until its
//! release. A hold does not delay a DELETE of the bucket (it completes as the seed's
//! does, once no call is inside), but the engine is destroyed only after the last of its items
//! came back, or at global destroy: a bucket deleted while a SET's value is still arriving, or
//! while a large value is still being sent, is gone for everyone else at once, and its engine
//! follows when the item is released.
//!
//! A connection's list is reused, so the call path allocates nothing once it has held as many
//! items at once as it ever will. Items still held when a connection's state is freed (a host
//! that fires ON_DISCONNECT before releasing them) move to one process-wide list.

use super::loader::{DlEngine, DlEnv};
use crate::abi::item;
use mcb_core::bucket::{HeldItems, Lease};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Items held, each with what keeps the engine that made it (the core's [`HeldItems`]: a get
/// from the connection's usual bucket writes no line that other connections write).
#[derive(Default)]
pub(crate) struct ItemHolds(Mutex<HeldItems<DlEngine>>);

impl ItemHolds {
    const fn new() -> Self {
        Self(Mutex::new(HeldItems::new()))
    }

    fn lock(&self) -> MutexGuard<'_, HeldItems<DlEngine>> {
        // A panic while locked (a bug of ours, caught at the boundary) leaves a usable list.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Ends `lease`'s call, recording that `item` came from its engine.
    pub(crate) fn add(&self, item: *mut item, lease: Lease<'_, DlEnv>) {
        self.lock().add(item as usize, lease);
    }

    /// Runs `call` with the engine that made `item`, if it is recorded here.
    pub(crate) fn with<T>(
        &self,
        item: *const item,
        call: impl FnOnce(&DlEngine) -> T,
    ) -> Option<T> {
        self.lock().with(item as usize, call)
    }

    /// Gives `item` back, if it is recorded here: runs `call` (its release) with the engine
    /// that made it, then lets that engine go.
    pub(crate) fn release<T>(
        &self,
        item: *const item,
        call: impl FnOnce(&DlEngine) -> T,
    ) -> Option<T> {
        self.lock().release(item as usize, call)
    }

    /// Moves every record to the process-wide list (the connection's state is being freed).
    pub(crate) fn orphan(&self) {
        let mut held = self.lock();
        if held.is_empty() {
            return;
        }
        let mut orphans = ORPHANS.lock();
        // Relaxed: a hint that lets `orphans()` skip the lock; the list itself is under it.
        ORPHAN_COUNT.fetch_add(held.len(), Ordering::Relaxed);
        held.move_into(&mut orphans);
    }
}

/// Items of connections whose state is gone (see the module docs).
static ORPHANS: ItemHolds = ItemHolds::new();
/// How many records `ORPHANS` has held in all, never decreased: zero means it was never used,
/// so a stateless call need not take its lock.
static ORPHAN_COUNT: AtomicUsize = AtomicUsize::new(0);

/// The process-wide list, when it has ever been used.
pub(crate) fn orphans() -> Option<&'static ItemHolds> {
    // Relaxed: a record added before the host's release of that item is ordered before it by
    // the host's own synchronisation of the connection (the same cookie's calls).
    (ORPHAN_COUNT.load(Ordering::Relaxed) > 0).then_some(&ORPHANS)
}

/// Drops every orphaned record (global destroy: no engine will be called again).
pub(crate) fn forget_orphans() {
    let drained = std::mem::take(&mut *ORPHANS.lock());
    drop(drained);
}
