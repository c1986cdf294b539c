//! [`HeldItems`]: the items handed out on one connection, each a hold on the engine that made
//! it (see "Held items" in `handle.rs`), for a host that gives items back by connection (the
//! bucket engine's FFI, whose `release` and `get_item_info` name only a cookie and an item).
//!
//! A [`Hold`](super::Hold) keeps its bucket's handle by an `Arc` of its own: a write to the
//! handle's reference count, a line that every connection's gets of that bucket write, when it
//! is made and another when it is dropped. Here a connection keeps one `Arc` per bucket it
//! holds items of, and keeps it after the last of them came back while that bucket is RUNNING
//! and the only one: so a get from a connection's usual bucket writes only its thread's row of
//! the bucket's count of holds, and the list, which is the connection's.

use super::engine::{Engine, Env};
use super::handle::Handle;
use super::registry::Lease;
use super::state::State;
use crate::sync::mutant::{self, Mutant};
use crate::sync::Arc;
use std::collections::VecDeque;
use std::fmt;

/// A connection's held items (see the module docs). Items are named by their address.
pub struct HeldItems<E: Engine> {
    /// Each item held, with the address of the handle whose engine made it, in the order they
    /// were handed out.
    items: VecDeque<(usize, usize)>,
    /// The buckets of those items, each with its number of items here; and at most one with
    /// none (the last whose items all came back, kept while RUNNING and the only one).
    buckets: Vec<(Arc<Handle<E>>, usize)>,
}

impl<E: Engine> HeldItems<E> {
    /// No item held.
    pub const fn new() -> Self {
        Self {
            items: VecDeque::new(),
            buckets: Vec::new(),
        }
    }

    /// Ends `lease`'s call with `item` held on its engine. Allocates nothing once the lists
    /// have held as many items and buckets at once as they ever will.
    pub fn add<V: Env<Engine = E>>(&mut self, item: usize, lease: Lease<'_, V>) {
        let handle = lease.into_counted();
        let key = address(handle);
        match self.buckets.iter_mut().find(|(h, _)| address(h) == key) {
            Some((_, count)) => *count += 1,
            None => {
                // A new bucket here: one kept with no items goes.
                self.buckets.retain(|&(_, count)| count > 0);
                self.buckets.push((Arc::clone(handle), 1));
            }
        }
        self.items.push_back((item, key));
    }

    /// Runs `call` with the engine that made `item`, if it is held here.
    pub fn with<T>(&self, item: usize, call: impl FnOnce(&E) -> T) -> Option<T> {
        // From the end: the host asks about the item it was handed last (a multi-get's info
        // call follows each get), so a long list is not scanned once per item. The last one
        // looked at first: a scan of the deque's two halves costs more than the rest here.
        let &(_, key) = match self.items.back() {
            Some(last) if last.0 == item => last,
            _ => self.items.iter().rev().find(|&&(i, _)| i == item)?,
        };
        Some(call(self.buckets[self.bucket(key)].0.engine_unguarded()))
    }

    /// Gives `item` back, if it is held here: runs `call` (the item's release) with the engine
    /// that made it, then gives back the hold that kept that engine.
    pub fn release<T>(&mut self, item: usize, call: impl FnOnce(&E) -> T) -> Option<T> {
        // From the front, keeping the order: the host gives items back in the order it was
        // handed them (a multi-get's replies), so each is found first and popped (the front
        // looked at first, as in `with`).
        let (_, key) = match self.items.front() {
            Some(first) if first.0 == item => self.items.pop_front()?,
            _ => {
                let at = self.items.iter().position(|&(i, _)| i == item)?;
                self.items.remove(at)?
            }
        };
        let b = self.bucket(key);
        let others = self.buckets.len() > 1;
        let (handle, count) = &mut self.buckets[b];
        let answer = if mutant::active(Mutant::HeldGivenBackBeforeUse) {
            handle.unhold();
            call(handle.engine_unguarded())
        } else {
            let answer = call(handle.engine_unguarded());
            handle.unhold();
            answer
        };
        *count -= 1;
        if *count == 0 && (others || handle.state() != State::Running) {
            self.buckets.swap_remove(b);
        }
        Some(answer)
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether no item is held.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Moves every item held here to `into`, with what keeps its engine.
    pub fn move_into(&mut self, into: &mut Self) {
        into.items.append(&mut self.items);
        for (handle, count) in self.buckets.drain(..).filter(|&(_, count)| count > 0) {
            let key = address(&handle);
            match into.buckets.iter_mut().find(|(h, _)| address(h) == key) {
                Some((_, kept)) => *kept += count,
                None => into.buckets.push((handle, count)),
            }
        }
    }

    /// Where in `buckets` the handle at `key` is (it is there while an item of it is held).
    fn bucket(&self, key: usize) -> usize {
        self.buckets
            .iter()
            .position(|(h, _)| address(h) == key)
            .expect("a held item's bucket is kept with it")
    }
}

/// A handle's address, which names its bucket in a connection's list.
fn address<E: Engine>(handle: &Arc<Handle<E>>) -> usize {
    Arc::as_ptr(handle) as usize
}

impl<E: Engine> Default for HeldItems<E> {
    fn default() -> Self {
        Self::new()
    }
}

/// Items still held when the list goes give their holds back (the host will not give them
/// back any more: a connection freed before its items, or global destroy).
impl<E: Engine> Drop for HeldItems<E> {
    fn drop(&mut self) {
        for (handle, count) in &self.buckets {
            for _ in 0..*count {
                handle.unhold();
            }
        }
    }
}

impl<E: Engine> fmt::Debug for HeldItems<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldItems")
            .field("items", &self.items.len())
            .field("buckets", &self.buckets.len())
            .finish()
    }
}
