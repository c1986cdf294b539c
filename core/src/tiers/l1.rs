//! L1: a fixed-capacity LRU per thread and cache name (the seed's per-worker
//! lua-resty-lrucache): every cache of one name on one store shares the calling thread's L1, as
//! mlcache's instances of one name share one LRU per worker, and a new thread starts empty.
//!
//! An index-linked slab (recency list threaded through slot indices) plus a hash index, both
//! sized on first use: a hit allocates nothing, and neither does a promotion once full, since
//! it reuses the least recently used slot. The index is probed with the key's L2 hash, which
//! the cache computes once per operation (for L1, its invalidation stripe and L2 alike): L1
//! hashes nothing itself. Each entry carries the invalidation generation of its stripe at the
//! time it was read from L2; a hit whose stripe has moved on is a miss.

use super::l2::INLINE_KEY;
use super::namespace::Namespace;
use crate::linked_slab::{LinkedSlab, List};
use crate::sync::{Arc, PayloadArc};
use hashbrown::HashTable;
use std::any::{Any, TypeId};
use std::cell::RefCell;

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

/// A key as L1 keeps it: inline when L2 keeps it inline too, copied from the caller's key (no
/// allocation, and no shared count to touch on promotion and eviction: each was a cache miss),
/// else L2's shared copy.
#[derive(Debug)]
pub(crate) enum Key {
    /// The length and the bytes.
    Inline(u8, [u8; INLINE_KEY]),
    Shared(PayloadArc<[u8]>),
}

impl Key {
    /// `key`, inline when short enough, else `shared` (the same bytes, shared) or a new copy.
    pub(crate) fn new(key: &[u8], shared: Option<PayloadArc<[u8]>>) -> Self {
        if key.len() <= INLINE_KEY {
            let mut bytes = [0; INLINE_KEY];
            bytes[..key.len()].copy_from_slice(key);
            Self::Inline(key.len() as u8, bytes)
        } else {
            Self::Shared(shared.unwrap_or_else(|| key.into()))
        }
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Self::Inline(len, bytes) => &bytes[..usize::from(*len)],
            Self::Shared(key) => key,
        }
    }
}

#[derive(Debug)]
struct Entry<T> {
    key: Key,
    /// The key's L2 hash (randomly seeded per store, against hash flooding); its stripe is
    /// [`Namespace::stripe`] of it.
    hash: u64,
    /// `None` caches a miss.
    value: Option<PayloadArc<T>>,
    /// Clock time it stops being valid (ms); `None` for never.
    expires_at: Option<u64>,
    generation: u64,
}

impl<T> Entry<T> {
    fn stripe(&self) -> usize {
        Namespace::stripe(self.hash)
    }
}

/// One thread's LRU for one cache name.
#[derive(Debug)]
pub(crate) struct L1<T> {
    /// Slab indices, by their entries' hashes.
    index: HashTable<u32>,
    slab: LinkedSlab<Entry<T>>,
    /// Front: most recently used. Back: least recently used, the next to go.
    recency: List,
    capacity: usize,
}

impl<T> L1<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            index: HashTable::new(),
            slab: LinkedSlab::new(),
            recency: List::EMPTY,
            capacity,
        }
    }

    /// The value cached for `key` of L2 hash `hash` (`Some(None)` for a cached miss), unless it
    /// expired at `now` or its stripe's generation (`generation(stripe)`) moved on since it was
    /// read.
    pub(crate) fn get(
        &mut self,
        key: &[u8],
        hash: u64,
        now: u64,
        generation: impl Fn(usize) -> u64,
    ) -> Option<Option<PayloadArc<T>>> {
        let index = self.find(key, hash)?;
        let entry = self.slab.get(index);
        if entry.expires_at.is_some_and(|at| now >= at)
            || generation(entry.stripe()) != entry.generation
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

    /// Caches `value` for `key` of L2 hash `hash` until `expires_at`, tagged with its stripe's
    /// `generation`.
    pub(crate) fn insert(
        &mut self,
        key: Key,
        hash: u64,
        value: Option<PayloadArc<T>>,
        expires_at: Option<u64>,
        generation: u64,
    ) {
        if self.slab.is_unsized() {
            // Sized once: the index at twice the capacity so that churn rehashes in place.
            self.slab.reserve_exact(self.capacity);
            let slab = &self.slab;
            self.index.reserve(self.capacity * 2, |&i| slab.get(i).hash);
        }
        if let Some(index) = self.find(key.bytes(), hash) {
            self.evict(index);
        }
        if self.recency.len() >= self.capacity {
            if let Some(lru) = self.recency.back() {
                self.evict(lru);
            }
        }
        let entry = Entry {
            key,
            hash,
            value,
            expires_at,
            generation,
        };
        let index = self.slab.push_front(&mut self.recency, entry);
        let slab = &self.slab;
        self.index.insert_unique(hash, index, |&i| slab.get(i).hash);
    }

    /// Drops the copy of `key` (of L2 hash `hash`).
    pub(crate) fn remove(&mut self, key: &[u8], hash: u64) {
        if let Some(index) = self.find(key, hash) {
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
            if generation(entry.stripe()) != entry.generation {
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
        for &index in &self.index {
            let entry = self.slab.get(index);
            assert_eq!(
                self.find(entry.key.bytes(), entry.hash),
                Some(index),
                "L1 index points elsewhere"
            );
        }
    }

    /// The slot of `key`'s copy.
    fn find(&self, key: &[u8], hash: u64) -> Option<u32> {
        let slab = &self.slab;
        self.index
            .find(hash, |&i| slab.get(i).key.bytes() == key)
            .copied()
    }

    fn evict(&mut self, index: u32) {
        let hash = self.slab.get(index).hash;
        // Found by its slot: no key compare.
        if let Ok(found) = self.index.find_entry(hash, |&i| i == index) {
            found.remove();
        }
        self.slab.remove(&mut self.recency, index);
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    fn key(k: &str) -> Key {
        Key::new(k.as_bytes(), None)
    }

    /// A test hash: the key's first byte, in the stripe bits too (so stripes differ per key).
    fn h(k: &[u8]) -> u64 {
        u64::from(k[0]) * 0x0101_0101_0101_0101
    }

    fn put(l1: &mut L1<i32>, k: &str, v: Option<i32>, expires_at: Option<u64>, generation: u64) {
        let v = v.map(PayloadArc::new);
        l1.insert(key(k), h(k.as_bytes()), v, expires_at, generation);
    }

    fn get(l1: &mut L1<i32>, k: &[u8], now: u64, g: u64) -> Option<Option<PayloadArc<i32>>> {
        l1.get(k, h(k), now, |_| g)
    }

    #[test]
    fn keeps_the_most_recently_used_within_capacity() {
        let mut l1 = L1::new(2);
        put(&mut l1, "a", Some(1), None, 0);
        put(&mut l1, "b", Some(2), None, 0);
        assert!(get(&mut l1, b"a", 0, 0).is_some()); // a is now the most recent
        put(&mut l1, "c", Some(3), None, 0);
        assert!(
            get(&mut l1, b"b", 0, 0).is_none(),
            "b was least recently used"
        );
        assert_eq!(get(&mut l1, b"a", 0, 0).flatten().as_deref(), Some(&1));
        assert_eq!(get(&mut l1, b"c", 0, 0).flatten().as_deref(), Some(&3));
        assert_eq!(l1.len(), 2);
        l1.validate();
    }

    #[test]
    fn keys_of_one_hash_stay_apart() {
        let mut l1 = L1::new(4);
        l1.insert(key("ab"), 7, Some(PayloadArc::new(1)), None, 0);
        l1.insert(key("ac"), 7, Some(PayloadArc::new(2)), None, 0);
        l1.insert(key("ab"), 7, Some(PayloadArc::new(3)), None, 0);
        assert_eq!(l1.len(), 2, "a re-insert replaces its own key only");
        assert_eq!(l1.get(b"ab", 7, 0, |_| 0).flatten().as_deref(), Some(&3));
        assert_eq!(l1.get(b"ac", 7, 0, |_| 0).flatten().as_deref(), Some(&2));
        let long = [b'l'; INLINE_KEY + 1];
        l1.insert(Key::new(&long, None), 7, None, None, 0);
        assert_eq!(l1.get(&long, 7, 0, |_| 0), Some(None), "a long key, shared");
        l1.remove(b"ab", 7);
        assert!(l1.get(b"ab", 7, 0, |_| 0).is_none());
        assert!(l1.get(b"ac", 7, 0, |_| 0).is_some());
        assert_eq!(l1.len(), 2);
        l1.validate();
    }

    #[test]
    fn expiry_generation_remove_clear_and_sweep() {
        let mut l1: L1<i32> = L1::new(4);
        put(&mut l1, "t", None, Some(10), 0);
        assert_eq!(get(&mut l1, b"t", 9, 0), Some(None), "a cached miss");
        assert_eq!(get(&mut l1, b"t", 10, 0), None, "expired at 10");
        put(&mut l1, "g", Some(1), None, 5);
        assert!(get(&mut l1, b"g", 0, 6).is_none(), "its stripe moved on");
        put(&mut l1, "x", Some(1), None, 0);
        put(&mut l1, "y", Some(1), None, 0);
        l1.remove(b"x", h(b"x"));
        assert!(get(&mut l1, b"x", 0, 0).is_none());
        let y = Namespace::stripe(h(b"y"));
        l1.sweep(|stripe| u64::from(stripe == y));
        assert_eq!(l1.len(), 0, "y's stripe moved on");
        put(&mut l1, "z", Some(1), None, 0);
        l1.clear();
        assert_eq!(l1.len(), 0);
        l1.validate();
    }
}
