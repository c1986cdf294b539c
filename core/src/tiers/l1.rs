//! L1: a fixed-capacity LRU private to one thread (the seed's per-worker lua-resty-lrucache).
//!
//! An index-linked slab (recency list threaded through slot indices) plus a hash index, both
//! sized on first use: a hit allocates nothing, and neither does a promotion once full, since
//! it reuses the least recently used slot. Each entry carries the invalidation generation of
//! its stripe at the time it was read from L2; a hit whose stripe has moved on is a miss.

use crate::sync::PayloadArc;
use std::collections::HashMap;

const NIL: u32 = u32::MAX;

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

#[derive(Debug)]
struct Slot<T> {
    entry: Option<Entry<T>>,
    prev: u32,
    next: u32,
}

/// One thread's LRU.
#[derive(Debug)]
pub(crate) struct L1<T> {
    index: HashMap<PayloadArc<[u8]>, u32>,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    /// Most recently used.
    head: u32,
    /// Least recently used: the next to go.
    tail: u32,
    capacity: usize,
}

impl<T> L1<T> {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            index: HashMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
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
        let entry = self.slots[index as usize].entry.as_ref().expect("indexed");
        if entry.expires_at.is_some_and(|at| now >= at)
            || generation(entry.stripe) != entry.generation
        {
            self.evict(index);
            return None;
        }
        let value = entry.value.clone();
        self.unlink(index);
        self.push_head(index);
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
        if self.slots.capacity() == 0 {
            // Sized once: the index at twice the capacity so that churn rehashes in place.
            self.slots.reserve_exact(self.capacity);
            self.free.reserve_exact(self.capacity);
            self.index.reserve(self.capacity * 2);
        }
        if let Some(&index) = self.index.get(&*key) {
            self.evict(index);
        }
        let index = if let Some(index) = self.free.pop() {
            index
        } else if self.slots.len() < self.capacity {
            self.slots.push(Slot {
                entry: None,
                prev: NIL,
                next: NIL,
            });
            u32::try_from(self.slots.len() - 1).expect("L1 capacity below 2^32")
        } else {
            let lru = self.tail;
            self.evict(lru);
            self.free.pop().expect("just freed")
        };
        self.index.insert(key.clone(), index);
        self.slots[index as usize].entry = Some(Entry {
            key,
            value,
            expires_at,
            stripe,
            generation,
        });
        self.push_head(index);
    }

    /// Drops `key`'s copy.
    pub(crate) fn remove(&mut self, key: &[u8]) {
        if let Some(&index) = self.index.get(key) {
            self.evict(index);
        }
    }

    /// Drops every copy.
    pub(crate) fn clear(&mut self) {
        while self.tail != NIL {
            self.evict(self.tail);
        }
    }

    /// Drops the copies whose stripe moved on (the seed's `update`).
    pub(crate) fn sweep(&mut self, generation: impl Fn(usize) -> u64) {
        let mut index = self.head;
        while index != NIL {
            let slot = &self.slots[index as usize];
            let next = slot.next;
            let entry = slot.entry.as_ref().expect("linked");
            if generation(entry.stripe) != entry.generation {
                self.evict(index);
            }
            index = next;
        }
    }

    /// Copies held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.index.len()
    }

    fn evict(&mut self, index: u32) {
        self.unlink(index);
        let entry = self.slots[index as usize].entry.take().expect("linked");
        self.index.remove(&*entry.key);
        self.free.push(index);
    }

    fn push_head(&mut self, index: u32) {
        let old = self.head;
        let slot = &mut self.slots[index as usize];
        slot.prev = NIL;
        slot.next = old;
        if old == NIL {
            self.tail = index;
        } else {
            self.slots[old as usize].prev = index;
        }
        self.head = index;
    }

    fn unlink(&mut self, index: u32) {
        let Slot { prev, next, .. } = self.slots[index as usize];
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
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
