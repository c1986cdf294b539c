//! Which engine each item handed out belongs to.
//!
//! `allocate` and `get` hand the host items of the connection's bucket's engine, and the host
//! later gives each back (`release`) and reads or stamps it (`get_item_info`, `item_set_cas`)
//! on the same cookie. Those calls must reach the engine that made the item, whichever bucket
//! the connection is attached to by then (the default bucket, another one after SELECT, none
//! after its bucket was deleted), and that engine must still exist. So each item handed out on
//! a connection keeps a [`Hold`] on its engine, recorded in the connection's [`ItemHolds`]
//! until its release. A hold does not delay a DELETE of the bucket (it completes as the seed's
//! does, once no call is inside), but the engine is destroyed only after the last of its items
//! came back, or at global destroy: a bucket deleted while a SET's value is still arriving, or
//! while a large value is still being sent, is gone for everyone else at once, and its engine
//! follows when the item is released.
//!
//! A connection's list is reused, so the call path allocates nothing once it has held as many
//! items at once as it ever will. Items still held when a connection's state is freed (a host
//! that fires ON_DISCONNECT before releasing them) move to one process-wide list.

use super::loader::DlEngine;
use crate::abi::item;
use mcb_core::bucket::Hold;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Items held, each with the hold on the bucket whose engine made it.
#[derive(Default)]
pub(crate) struct ItemHolds(Mutex<VecDeque<(usize, Hold<DlEngine>)>>);

impl ItemHolds {
    const fn new() -> Self {
        Self(Mutex::new(VecDeque::new()))
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<(usize, Hold<DlEngine>)>> {
        // A panic while locked (a bug of ours, caught at the boundary) leaves a usable list.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records that `item` came from the engine `hold` keeps.
    pub(crate) fn add(&self, item: *mut item, hold: Hold<DlEngine>) {
        self.lock().push_back((item as usize, hold));
    }

    /// Runs `call` with the engine that made `item`, if it is recorded here.
    pub(crate) fn with<T>(
        &self,
        item: *const item,
        call: impl FnOnce(&DlEngine) -> T,
    ) -> Option<T> {
        let held = self.lock();
        // From the end: the host asks about the item it was handed last (a multi-get's info
        // call follows each get), so a long list is not scanned once per item.
        let (_, hold) = held.iter().rev().find(|(i, _)| *i == item as usize)?;
        Some(call(hold.engine()))
    }

    /// Takes `item`'s record out, if it is here: the caller releases the item to
    /// `hold.engine()`, then drops the hold.
    pub(crate) fn take(&self, item: *const item) -> Option<Hold<DlEngine>> {
        let mut held = self.lock();
        // From the front, keeping the order: the host gives items back in the order it was
        // handed them (a multi-get's replies), so each is found first and popped.
        let at = held.iter().position(|(i, _)| *i == item as usize)?;
        held.remove(at).map(|(_, hold)| hold)
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
        orphans.append(&mut held);
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
