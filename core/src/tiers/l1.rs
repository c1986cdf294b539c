//! L1: a fixed-capacity LRU per thread and cache name (the seed's per-worker
//! lua-resty-lrucache): every cache of one name on one store shares the calling thread's L1, as
//! mlcache's instances of one name share one LRU per worker, and a new thread starts empty.
//!
//! An index-linked slab (recency list threaded through slot indices) plus a hash index, both
//! sized on first use: a hit allocates nothing, and neither does a promotion once full, since
//! it reuses the least recently used slot. Each entry carries the invalidation generation of
//! its stripe at the time it was read from L2; a hit whose stripe has moved on is a miss.

use super::namespace::Namespace;
use crate::linked_slab::{LinkedSlab, List};
use crate::sync::{Arc, PayloadArc};
use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;

/// The L1 index's hasher: foldhash, several times faster than SipHash on short keys (an L1 hit
/// hashes its key once), randomly seeded per L1 against hash flooding.
type IndexHasher = foldhash::fast::RandomState;

/// One of this thread's L1s: the one of the caches of `ns` that keep `L1<T>`s, `l1`'s type.
struct Local {
    ns: Arc<Namespace>,
    /// `l1`'s, so that finding an L1 makes no virtual call.
    type_id: TypeId,
    l1: Box<dyn Any>,
}

#[cfg(not(mcb_loom))]
thread_local! {
    static LOCAL: RefCell<Vec<Local>> = const { RefCell::new(Vec::new()) };
}
#[cfg(mcb_loom)]
loom::thread_local! {
    static LOCAL: RefCell<Vec<Local>> = RefCell::new(Vec::new());
}

/// Runs `f` on the calling thread's L1 for the caches of `ns` that keep `T` in L1, made with
/// `capacity` entries by the first such cache to use it on this thread. The L1 goes with the
/// thread, or earlier, when this thread makes another L1 after the last other holder of its
/// name (store and caches) is gone.
///
/// # Panics
/// If `f` re-enters (the cache never calls out to user code from inside it).
pub(crate) fn with_local<T: 'static, R>(
    ns: &Arc<Namespace>,
    capacity: usize,
    f: impl FnOnce(&mut L1<T>) -> R,
) -> R {
    LOCAL.with(|local| {
        let mut local = local.borrow_mut();
        let mine = |l: &Local| Arc::ptr_eq(&l.ns, ns) && l.type_id == TypeId::of::<L1<T>>();
        let at = match local.iter().position(mine) {
            Some(at) => at,
            None => {
                // Only this thread still knows these names: their store is gone.
                local.retain(|l| Arc::strong_count(&l.ns) > 1);
                local.push(Local {
                    ns: ns.clone(),
                    type_id: TypeId::of::<L1<T>>(),
                    l1: Box::new(L1::<T>::new(capacity)),
                });
                local.len() - 1
            }
        };
        let l1 = local[at]
            .l1
            .downcast_mut::<L1<T>>()
            .expect("found by its type");
        f(l1)
    })
}

#[derive(Debug)]
struct Entry<T> {
    key: PayloadArc<[u8]>,
    /// `None` caches a miss.
    value: Option<PayloadArc<T>>,
    /// Clock time it stops being valid (ms); `None` for never.
    expires_at: Option<u64>,
    stripe: usize,
    generation: u64,
}

/// One thread's LRU for one cache name.
#[derive(Debug)]
pub(crate) struct L1<T> {
    index: HashMap<PayloadArc<[u8]>, u32, IndexHasher>,
    slab: LinkedSlab<Entry<T>>,
    /// Front: most recently used. Back: least recently used, the next to go.
    recency: List,
    capacity: usize,
}

impl<T> L1<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            index: HashMap::default(),
            slab: LinkedSlab::new(),
            recency: List::EMPTY,
            capacity,
        }
    }

    /// The value cached for `key` (`Some(None)` for a cached miss), unless it expired at `now`
    /// or its stripe's generation (`generation(stripe)`) moved on since it was read.
    pub(crate) fn get(
        &mut self,
        key: &[u8],
        now: u64,
        generation: impl Fn(usize) -> u64,
    ) -> Option<Option<PayloadArc<T>>> {
        let index = *self.index.get(key)?;
        let entry = self.slab.get(index);
        if entry.expires_at.is_some_and(|at| now >= at)
            || generation(entry.stripe) != entry.generation
        {
            self.evict(index);
            return None;
        }
        let value = entry.value.clone();
        // A hot key is often already the most recent: no relinking then.
        if self.recency.front() != Some(index) {
            self.slab.move_front(&mut self.recency, None, index);
        }
        Some(value)
    }

    /// Caches `value` for `key` until `expires_at`, tagged with its stripe's `generation`.
    pub(crate) fn insert(
        &mut self,
        key: PayloadArc<[u8]>,
        value: Option<PayloadArc<T>>,
        expires_at: Option<u64>,
        stripe: usize,
        generation: u64,
    ) {
        if self.slab.is_unsized() {
            // Sized once: the index at twice the capacity so that churn rehashes in place.
            self.slab.reserve_exact(self.capacity);
            self.index.reserve(self.capacity * 2);
        }
        if let Some(&index) = self.index.get(&*key) {
            self.evict(index);
        }
        if self.recency.len() >= self.capacity {
            if let Some(lru) = self.recency.back() {
                self.evict(lru);
            }
        }
        let entry = Entry {
            key: key.clone(),
            value,
            expires_at,
            stripe,
            generation,
        };
        let index = self.slab.push_front(&mut self.recency, entry);
        self.index.insert(key, index);
    }

    /// Drops `key`'s copy.
    pub(crate) fn remove(&mut self, key: &[u8]) {
        if let Some(&index) = self.index.get(key) {
            self.evict(index);
        }
    }

    /// Drops every copy.
    pub(crate) fn clear(&mut self) {
        while let Some(lru) = self.recency.back() {
            self.evict(lru);
        }
    }

    /// Drops the copies whose stripe moved on (the seed's `update`).
    pub(crate) fn sweep(&mut self, generation: impl Fn(usize) -> u64) {
        let mut cursor = self.recency.front();
        while let Some(index) = cursor {
            cursor = self.slab.next(index);
            let entry = self.slab.get(index);
            if generation(entry.stripe) != entry.generation {
                self.evict(index);
            }
        }
    }

    /// Copies held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    /// Checks the LRU's invariants: the slab's (see [`LinkedSlab::validate`]), at most
    /// `capacity` copies, and an index that names exactly the copies held.
    ///
    /// # Panics
    /// On the first broken invariant.
    pub(crate) fn validate(&self) {
        self.slab.validate(&[&self.recency]);
        assert!(self.recency.len() <= self.capacity, "L1 over capacity");
        assert_eq!(self.index.len(), self.recency.len(), "L1 index size");
        for (key, &index) in &self.index {
            assert_eq!(self.slab.get(index).key, *key, "L1 index points elsewhere");
        }
    }

    fn evict(&mut self, index: u32) {
        let entry = self.slab.remove(&mut self.recency, index);
        self.index.remove(&*entry.key);
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    fn key(k: &str) -> PayloadArc<[u8]> {
        k.as_bytes().into()
    }

    #[test]
    fn keeps_the_most_recently_used_within_capacity() {
        let mut l1 = L1::new(2);
        l1.insert(key("a"), Some(PayloadArc::new(1)), None, 0, 0);
        l1.insert(key("b"), Some(PayloadArc::new(2)), None, 0, 0);
        assert!(l1.get(b"a", 0, |_| 0).is_some()); // a is now the most recent
        l1.insert(key("c"), Some(PayloadArc::new(3)), None, 0, 0);
        assert!(
            l1.get(b"b", 0, |_| 0).is_none(),
            "b was least recently used"
        );
        assert_eq!(l1.get(b"a", 0, |_| 0).flatten().as_deref(), Some(&1));
        assert_eq!(l1.get(b"c", 0, |_| 0).flatten().as_deref(), Some(&3));
        assert_eq!(l1.len(), 2);
    }

    #[test]
    fn expiry_generation_remove_clear_and_sweep() {
        let mut l1: L1<i32> = L1::new(4);
        l1.insert(key("t"), None, Some(10), 0, 0);
        assert_eq!(l1.get(b"t", 9, |_| 0), Some(None), "a cached miss");
        assert_eq!(l1.get(b"t", 10, |_| 0), None, "expired at 10");
        l1.insert(key("g"), Some(PayloadArc::new(1)), None, 1, 5);
        assert!(l1.get(b"g", 0, |_| 6).is_none(), "its stripe moved on");
        l1.insert(key("x"), Some(PayloadArc::new(1)), None, 0, 0);
        l1.insert(key("y"), Some(PayloadArc::new(1)), None, 1, 0);
        l1.remove(b"x");
        assert!(l1.get(b"x", 0, |_| 0).is_none());
        l1.sweep(|stripe| stripe as u64);
        assert_eq!(l1.len(), 0, "stripe 1 moved on");
        l1.insert(key("z"), Some(PayloadArc::new(1)), None, 0, 0);
        l1.clear();
        assert_eq!(l1.len(), 0);
    }
}
