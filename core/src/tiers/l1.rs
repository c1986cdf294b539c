//! L1: a fixed-capacity LRU per thread and cache name (the seed's per-worker
//! lua-resty-lrucache): every cache of one name on one store shares the calling thread's L1, as
//! mlcache's instances of one name share one LRU per worker, and a new thread starts empty.
//!
//! Each thread keeps its L1s in one table, at the index of the [`Slot`] of the caches that use
//! them: the caches of one name (on one store) that keep one value type in L1 hold one slot
//! while any of them lives. A get finds its L1 at that index, with no search and no type
//! check: a slot's incarnation is unique in the process, so an L1 tagged with it was made for
//! that slot, hence for its value type, and one tagged otherwise was left by an earlier holder
//! of the index. When the last of those caches is dropped, its slot goes, and with it every
//! thread's L1 of that name (mlcache keeps its LRUs in a weak table: they die with their
//! instances): no get reads one again, since a later cache of the name takes a new
//! incarnation, and each thread frees it when it next makes an L1 or ends. The table holds each
//! L1 by an `Rc` ([`Here`]), and so does a handle on it
//! ([`Cache::local`](super::Cache::local)), whose reads skip the table; a handle borrows its
//! cache, so the L1 still goes with the last cache of its name. Each read borrows the L1's
//! `RefCell` only while it works on it.
//!
//! An L1 is an index-linked slab (recency list threaded through slot indices) plus a hash
//! index, both sized on first use: a hit allocates nothing, and neither does a promotion once
//! full, since it reuses the least recently used slot. The index ([`Index`]) is an open
//! addressing table of slab slots tagged with 32 bits of their key's hash, probed with the
//! key's L2 hash, which the cache computes once per operation (for L1, its invalidation stripe
//! and L2 alike); keys up to [`INLINE_KEY`] bytes are compared as L2 compares them, in three
//! words. Each entry carries the invalidation generation of its stripe at the time it was read
//! from L2; a hit whose stripe has moved on is a miss.
//!
//! [`Promotion::SecondHit`](super::options::Promotion) keeps, per L1, a table of the hashes of
//! keys missed once (TinyLFU's doorkeeper, one direct-mapped slot per entry of capacity): a
//! miss whose hash is there is promoted, any other leaves its hash there.

#[cfg(doc)]
use super::l2::INLINE_KEY;
use super::l2::{Inline, Probe};
use super::namespace::Namespace;
use crate::linked_slab::{LinkedSlab, List};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{Arc, Mutex, PayloadArc};
use std::any::TypeId;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::rc::Rc;

/// The caches of one name and L1 value type (see the module doc) while any of them lives.
#[derive(Debug)]
pub(crate) struct Slot {
    index: usize,
    incarnation: u64,
}

/// Who holds each slot index.
#[derive(Debug)]
struct Registry {
    held: Vec<Holders>,
    /// The last incarnation handed out.
    incarnations: u64,
}

/// One slot index: its holders, their name and value type, and the incarnation they took.
#[derive(Debug)]
struct Holders {
    caches: usize,
    /// The namespace's address: while a cache holds the slot it keeps the namespace alive, so
    /// no other namespace can have this address.
    ns: usize,
    type_id: TypeId,
    incarnation: u64,
}

#[cfg(not(mcb_loom))]
static REGISTRY: Mutex<Registry> = Mutex::new(Registry::new());
#[cfg(mcb_loom)]
loom::lazy_static! {
    static ref REGISTRY: Mutex<Registry> = Mutex::new(Registry::new());
}

impl Registry {
    const fn new() -> Self {
        Self {
            held: Vec::new(),
            incarnations: 0,
        }
    }

    /// Whether an L1 tagged `incarnation` at `index` is still its slot's.
    fn is_live(&self, index: usize, incarnation: u64) -> bool {
        self.held
            .get(index)
            .is_some_and(|h| h.caches > 0 && h.incarnation == incarnation)
    }
}

impl Slot {
    /// The slot of the caches of `ns` that keep `V` in L1: the one they hold, else a new one.
    pub(crate) fn take<V: 'static>(ns: &Arc<Namespace>) -> Self {
        let (ns, type_id) = (Arc::as_ptr(ns) as usize, TypeId::of::<V>());
        let mut registry = REGISTRY.lock();
        let shared = registry.held.iter_mut().enumerate().find(|(_, h)| {
            let held = h.caches > 0 || mutant::active(Mutant::L1SlotOutlivesItsCaches);
            held && h.ns == ns && h.type_id == type_id
        });
        if let Some((index, holders)) = shared {
            holders.caches += 1;
            return Self {
                index,
                incarnation: holders.incarnation,
            };
        }
        registry.incarnations += 1;
        let holders = Holders {
            caches: 1,
            ns,
            type_id,
            incarnation: registry.incarnations,
        };
        let incarnation = holders.incarnation;
        let index = match registry.held.iter().position(|h| h.caches == 0) {
            Some(free) => {
                registry.held[free] = holders;
                free
            }
            None => {
                registry.held.push(holders);
                registry.held.len() - 1
            }
        };
        Self { index, incarnation }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        REGISTRY.lock().held[self.index].caches -= 1;
    }
}

/// A thread's L1 of one slot, shared by the thread's table and the handles on it
/// ([`Cache::local`](super::Cache::local)): a handle keeps it alive, so that it cannot outlive
/// the L1, not even past the thread's table.
pub(crate) type Here<V> = Rc<RefCell<L1<V>>>;

/// One entry of a thread's table: a [`Here<V>`] (`V` its slot's type), type-erased.
struct Held {
    incarnation: u64,
    /// From `Rc::into_raw` of a `Here<V>`.
    l1: NonNull<()>,
    drop_l1: unsafe fn(NonNull<()>),
}

impl Held {
    fn new<V>(incarnation: u64, l1: L1<V>) -> Self {
        /// # Safety
        /// `l1` came from `Rc::into_raw` of a `Here<V>`, and this gives back its count.
        unsafe fn drop_l1<V>(l1: NonNull<()>) {
            // SAFETY: see the function's contract.
            drop(unsafe { Here::<V>::from_raw(l1.as_ptr().cast()) });
        }
        let l1 = Rc::into_raw(Rc::new(RefCell::new(l1)));
        Self {
            incarnation,
            // SAFETY: `Rc::into_raw` never returns null.
            l1: unsafe { NonNull::new_unchecked(l1.cast_mut()) }.cast(),
            drop_l1: drop_l1::<V>,
        }
    }

    /// Another count on the L1.
    ///
    /// # Safety
    /// `V` is the type this entry was made for (`Held::new::<V>`).
    #[inline(always)]
    unsafe fn share<V>(&self) -> Here<V> {
        let l1 = self.l1.as_ptr().cast::<RefCell<L1<V>>>().cast_const();
        // SAFETY: `l1` came from `Rc::into_raw` of a `Here<V>` (the caller's contract), and
        // the entry still holds its count, so the allocation lives.
        unsafe {
            Rc::increment_strong_count(l1);
            Rc::from_raw(l1)
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: `l1` and `drop_l1` were made together by `Held::new`, for the same `V`, and
        // the entry's count is given back only here.
        unsafe { (self.drop_l1)(self.l1) }
    }
}

/// A thread's L1s, by slot index.
type Table = Vec<Option<Held>>;

#[cfg(not(mcb_loom))]
thread_local! {
    static LOCAL: RefCell<Table> = const { RefCell::new(Vec::new()) };
}
#[cfg(mcb_loom)]
loom::thread_local! {
    static LOCAL: RefCell<Table> = RefCell::new(Vec::new());
}

/// How a thread's L1 of a slot is made, by the first cache to use it on the thread.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub capacity: usize,
    pub second_hit: bool,
}

/// The calling thread's L1 of `slot` (whose caches keep `V`s in L1), made with `shape` by the
/// first cache of the slot to use it on this thread. Its `RefCell` is borrowed only while the
/// cache works on it, never across a call out to user code but
/// [`Cache::get_with`](super::Cache::get_with)'s reader.
#[inline(always)]
pub(crate) fn this_thread<V: 'static>(slot: &Slot, shape: Shape) -> Here<V> {
    let found = LOCAL.with(|cell| match cell.borrow().get(slot.index) {
        Some(Some(held)) if held.incarnation == slot.incarnation => {
            // SAFETY: the entry carries `slot`'s incarnation, which is unique in the process,
            // so `make_local::<V>` made it for this slot, whose caches all keep `V`s (a slot
            // is shared only by caches of one value type).
            Some(unsafe { held.share() })
        }
        _ => None,
    });
    // Out of line: the lookup above stays small enough to inline into every read.
    found.unwrap_or_else(|| first_use(slot, shape))
}

/// This thread's first use of `slot` (or its first since the slot's caches were dropped): a
/// new L1 in the table.
#[cold]
#[inline(never)]
fn first_use<V: 'static>(slot: &Slot, shape: Shape) -> Here<V> {
    LOCAL.with(|cell| {
        // Freed without the table borrowed: their values' drops may use caches.
        let (here, dead) = make_local::<V>(&mut cell.borrow_mut(), slot, shape);
        drop(dead);
        here
    })
}

/// Puts a new L1 for `slot` in `table`; returns it, and the L1s it replaced and those of slots
/// no cache holds any more, for the caller to drop.
#[cold]
fn make_local<V: 'static>(table: &mut Table, slot: &Slot, shape: Shape) -> (Here<V>, Vec<Held>) {
    let mut dead = Vec::new();
    {
        let registry = REGISTRY.lock();
        for (index, entry) in table.iter_mut().enumerate() {
            if entry
                .as_ref()
                .is_some_and(|l| !registry.is_live(index, l.incarnation))
            {
                dead.extend(entry.take());
            }
        }
    }
    if table.len() <= slot.index {
        table.resize_with(slot.index + 1, || None);
    }
    let held = Held::new(
        slot.incarnation,
        L1::<V>::new(shape.capacity, shape.second_hit),
    );
    // SAFETY: just made for `V`.
    let here = unsafe { held.share() };
    dead.extend(table[slot.index].replace(held));
    (here, dead)
}

/// A key as L1 keeps it: inline when L2 keeps it inline too, copied from the caller's key (no
/// allocation, and no shared count to touch on promotion and eviction: each was a cache miss),
/// else L2's shared copy.
#[derive(Debug)]
pub(crate) enum Key {
    /// The length and the bytes, zero-padded.
    Inline(u8, Inline),
    Shared(PayloadArc<[u8]>),
}

impl Key {
    /// `probe`'s key, inline when short enough, else `shared` (the same bytes, shared) or a new
    /// copy.
    pub(crate) fn new(probe: &Probe<'_>, shared: Option<PayloadArc<[u8]>>) -> Self {
        match probe.inline {
            Some(padded) => Self::Inline(probe.key.len() as u8, padded),
            None => Self::Shared(shared.unwrap_or_else(|| probe.key.into())),
        }
    }

    /// Whether it is the key `probe` looks for.
    #[inline(always)]
    fn is(&self, probe: &Probe<'_>) -> bool {
        match (self, &probe.inline) {
            // Fixed-size compares, as L2's (a slice compare calls memcmp).
            (Self::Inline(len, bytes), Some(padded)) => {
                usize::from(*len) == probe.key.len() && bytes == padded
            }
            (Self::Shared(key), None) => **key == *probe.key,
            _ => false,
        }
    }

    fn same(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Inline(a, x), Self::Inline(b, y)) => a == b && x == y,
            (Self::Shared(x), Self::Shared(y)) => x == y,
            _ => false,
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

/// What an L1 lookup found.
#[derive(Debug)]
pub(crate) enum Found<'a, T> {
    /// The value kept (`None`: a cached miss).
    Hit(&'a Option<PayloadArc<T>>),
    /// Nothing usable; whether an L2 hit of the key now goes into this L1.
    Miss { promote: bool },
}

/// L1's hash index: slab slots by their keys' hashes, in an open-addressing table with linear
/// probing, at most half full. Each table slot holds a slab slot and the high 32 bits of its
/// key's hash, so that a probe reads the slab only for a likely match. (hashbrown's table,
/// before it, did the same with more indirection, and its generic probe was not inlined into
/// the get: a quarter of an L1 hit.)
#[derive(Debug, Default)]
struct Index {
    /// `tag << 32 | slab slot`, or [`Index::EMPTY`].
    table: Box<[u64]>,
    len: usize,
}

impl Index {
    const EMPTY: u64 = u64::MAX;

    /// A table for up to `capacity` entries (at least twice as many slots).
    fn with_capacity(capacity: usize) -> Self {
        Self {
            table: vec![Self::EMPTY; (capacity * 2).next_power_of_two()].into_boxed_slice(),
            len: 0,
        }
    }

    /// The bits of a hash the table keeps (and starts its probe from).
    fn tag(hash: u64) -> u64 {
        hash >> 32
    }

    /// Where a probe for a key of tag `tag` starts.
    fn home(&self, tag: u64) -> usize {
        tag as usize & (self.table.len() - 1)
    }

    /// The slab slot of hash `hash` that `is` accepts.
    #[inline(always)]
    fn find(&self, hash: u64, mut is: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.table.is_empty() {
            return None;
        }
        let (tag, mask) = (Self::tag(hash), self.table.len() - 1);
        let mut at = self.home(tag);
        loop {
            let held = self.table[at];
            if held == Self::EMPTY {
                return None;
            }
            if held >> 32 == tag && is(held as u32) {
                return Some(held as u32);
            }
            at = (at + 1) & mask;
        }
    }

    /// Adds slab slot `slot` of hash `hash` (the table must have room: see `with_capacity`).
    #[inline]
    fn insert(&mut self, hash: u64, slot: u32) {
        let mask = self.table.len() - 1;
        let mut at = self.home(Self::tag(hash));
        while self.table[at] != Self::EMPTY {
            at = (at + 1) & mask;
        }
        self.table[at] = Self::tag(hash) << 32 | u64::from(slot);
        self.len += 1;
    }

    /// Removes slab slot `slot` (of hash `hash`), shifting back the entries after it that
    /// probed past it, so that no probe stops short at the hole.
    #[inline]
    fn remove(&mut self, hash: u64, slot: u32) {
        let mask = self.table.len() - 1;
        let mut hole = self.home(Self::tag(hash));
        while self.table[hole] == Self::EMPTY || self.table[hole] as u32 != slot {
            hole = (hole + 1) & mask;
        }
        let mut next = (hole + 1) & mask;
        while self.table[next] != Self::EMPTY {
            // Where the entry at `next` would sit: it may move to the hole if the hole lies
            // between that home and `next` (cyclically).
            let home = self.home(self.table[next] >> 32);
            if (next.wrapping_sub(home) & mask) >= (next.wrapping_sub(hole) & mask) {
                self.table[hole] = self.table[next];
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.table[hole] = Self::EMPTY;
        self.len -= 1;
    }

    /// The slab slots held, in table order.
    fn slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.table
            .iter()
            .filter(|&&held| held != Self::EMPTY)
            .map(|&held| held as u32)
    }
}

/// One thread's LRU for one cache name.
#[derive(Debug)]
pub(crate) struct L1<T> {
    index: Index,
    slab: LinkedSlab<Entry<T>>,
    /// Front: most recently used. Back: least recently used, the next to go.
    recency: List,
    capacity: usize,
    second_hit: bool,
    /// With `second_hit`: the hashes of keys missed once, at their low bits (empty until the
    /// first miss, then a power of two at least `capacity` long).
    seen: Box<[u64]>,
}

impl<T> L1<T> {
    pub(crate) fn new(capacity: usize, second_hit: bool) -> Self {
        Self {
            index: Index::default(),
            slab: LinkedSlab::new(),
            recency: List::EMPTY,
            capacity,
            second_hit,
            seen: Box::default(),
        }
    }

    /// The value cached for `probe`'s key, unless it expired at `now` or its stripe's
    /// generation (`generation(stripe)`) moved on since it was read.
    #[inline(always)]
    pub(crate) fn get(
        &mut self,
        probe: &Probe<'_>,
        now: u64,
        generation: impl Fn(usize) -> u64,
    ) -> Found<'_, T> {
        let Some(index) = self.find(probe) else {
            return Found::Miss {
                promote: self.admit(probe.hash),
            };
        };
        let entry = self.slab.get(index);
        if entry.expires_at.is_some_and(|at| now >= at)
            || generation(entry.stripe()) != entry.generation
        {
            self.evict(index);
            // Kept until now: read back at once.
            return Found::Miss { promote: true };
        }
        // A hot key is often already the most recent: no relinking then.
        if self.recency.front() != Some(index) {
            self.slab.move_front(&mut self.recency, None, index);
        }
        Found::Hit(&self.slab.get(index).value)
    }

    /// Whether a miss of the key of hash `hash` goes into L1 (see the module doc).
    #[inline]
    fn admit(&mut self, hash: u64) -> bool {
        if !self.second_hit {
            return true;
        }
        if self.seen.is_empty() {
            self.seen = vec![0; self.capacity.next_power_of_two()].into_boxed_slice();
        }
        // Bits the index's probe and the stripe do not start from.
        let at = (hash >> 20) as usize & (self.seen.len() - 1);
        if self.seen[at] == hash {
            self.seen[at] = 0;
            true
        } else {
            self.seen[at] = hash;
            false
        }
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
            // Sized once.
            self.slab.reserve_exact(self.capacity);
            self.index = Index::with_capacity(self.capacity);
        }
        let slab = &self.slab;
        let same = self.index.find(hash, |i| slab.get(i).key.same(&key));
        if let Some(index) = same {
            self.evict(index);
        }
        let entry = Entry {
            key,
            hash,
            value,
            expires_at,
            generation,
        };
        let index = match self.recency.back() {
            // Full: the least recently used slot takes the entry in place (no trip through
            // the slab's free list: a promotion into a full L1 was a third of a Zipf read).
            Some(lru) if self.recency.len() >= self.capacity => {
                self.index.remove(self.slab.get(lru).hash, lru);
                *self.slab.get_mut(lru) = entry;
                self.slab.move_front(&mut self.recency, None, lru);
                lru
            }
            _ => self.slab.push_front(&mut self.recency, entry),
        };
        self.index.insert(hash, index);
    }

    /// Drops the copy of `probe`'s key.
    pub(crate) fn remove(&mut self, probe: &Probe<'_>) {
        if let Some(index) = self.find(probe) {
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
        self.index.len
    }

    /// Checks the LRU's invariants: the slab's (see [`LinkedSlab::validate`]), at most
    /// `capacity` copies, and an index that names exactly the copies held.
    ///
    /// # Panics
    /// On the first broken invariant.
    pub(crate) fn validate(&self) {
        self.slab.validate(&[&self.recency]);
        assert!(self.recency.len() <= self.capacity, "L1 over capacity");
        assert_eq!(self.index.len, self.recency.len(), "L1 index size");
        assert_eq!(self.index.slots().count(), self.index.len, "L1 index count");
        for index in self.index.slots() {
            let entry = self.slab.get(index);
            let slab = &self.slab;
            let found = self
                .index
                .find(entry.hash, |i| slab.get(i).key.same(&entry.key));
            assert_eq!(found, Some(index), "L1 index points elsewhere");
        }
    }

    /// The slot of `probe`'s key's copy.
    #[inline(always)]
    fn find(&self, probe: &Probe<'_>) -> Option<u32> {
        let slab = &self.slab;
        self.index.find(probe.hash, |i| {
            let entry = slab.get(i);
            entry.hash == probe.hash && entry.key.is(probe)
        })
    }

    fn evict(&mut self, index: u32) {
        // Found by its slot: no key compare.
        self.index.remove(self.slab.get(index).hash, index);
        self.slab.remove(&mut self.recency, index);
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::super::l2::{probe, INLINE_KEY};
    use super::*;

    /// A test hash: the key's first byte, in the stripe bits too (so stripes differ per key).
    fn h(k: &[u8]) -> u64 {
        u64::from(k[0]) * 0x0101_0101_0101_0101
    }

    fn p(k: &[u8]) -> Probe<'_> {
        probe(0, k, h(k))
    }

    fn put(l1: &mut L1<i32>, k: &str, v: Option<i32>, expires_at: Option<u64>, generation: u64) {
        let v = v.map(PayloadArc::new);
        let probe = p(k.as_bytes());
        l1.insert(
            Key::new(&probe, None),
            probe.hash,
            v,
            expires_at,
            generation,
        );
    }

    fn get(l1: &mut L1<i32>, k: &[u8], now: u64, g: u64) -> Option<Option<i32>> {
        match l1.get(&p(k), now, |_| g) {
            Found::Hit(v) => Some(v.as_deref().copied()),
            Found::Miss { .. } => None,
        }
    }

    #[test]
    fn keeps_the_most_recently_used_within_capacity() {
        let mut l1 = L1::new(2, false);
        put(&mut l1, "a", Some(1), None, 0);
        put(&mut l1, "b", Some(2), None, 0);
        assert!(get(&mut l1, b"a", 0, 0).is_some()); // a is now the most recent
        put(&mut l1, "c", Some(3), None, 0);
        assert!(
            get(&mut l1, b"b", 0, 0).is_none(),
            "b was least recently used"
        );
        assert_eq!(get(&mut l1, b"a", 0, 0), Some(Some(1)));
        assert_eq!(get(&mut l1, b"c", 0, 0), Some(Some(3)));
        assert_eq!(l1.len(), 2);
        l1.validate();
    }

    #[test]
    fn keys_of_one_hash_stay_apart() {
        let mut l1 = L1::new(4, false);
        let at = |k: &'static [u8]| probe(0, k, 7);
        let put = |l1: &mut L1<i32>, k: &'static [u8], v| {
            l1.insert(Key::new(&at(k), None), 7, v, None, 0)
        };
        let get = |l1: &mut L1<i32>, k: &'static [u8]| match l1.get(&at(k), 0, |_| 0) {
            Found::Hit(v) => Some(v.as_deref().copied()),
            Found::Miss { .. } => None,
        };
        put(&mut l1, b"ab", Some(PayloadArc::new(1)));
        put(&mut l1, b"ac", Some(PayloadArc::new(2)));
        put(&mut l1, b"ab", Some(PayloadArc::new(3)));
        assert_eq!(l1.len(), 2, "a re-insert replaces its own key only");
        assert_eq!(get(&mut l1, b"ab"), Some(Some(3)));
        assert_eq!(get(&mut l1, b"ac"), Some(Some(2)));
        const LONG: &[u8] = &[b'l'; INLINE_KEY + 1];
        put(&mut l1, LONG, None);
        assert_eq!(get(&mut l1, LONG), Some(None), "a long key, shared");
        l1.remove(&at(b"ab"));
        assert!(get(&mut l1, b"ab").is_none());
        assert!(get(&mut l1, b"ac").is_some());
        assert_eq!(l1.len(), 2);
        l1.validate();
    }

    #[test]
    fn expiry_generation_remove_clear_and_sweep() {
        let mut l1: L1<i32> = L1::new(4, false);
        put(&mut l1, "t", None, Some(10), 0);
        assert_eq!(get(&mut l1, b"t", 9, 0), Some(None), "a cached miss");
        assert_eq!(get(&mut l1, b"t", 10, 0), None, "expired at 10");
        put(&mut l1, "g", Some(1), None, 5);
        assert!(get(&mut l1, b"g", 0, 6).is_none(), "its stripe moved on");
        put(&mut l1, "x", Some(1), None, 0);
        put(&mut l1, "y", Some(1), None, 0);
        l1.remove(&p(b"x"));
        assert!(get(&mut l1, b"x", 0, 0).is_none());
        let y = Namespace::stripe(h(b"y"));
        l1.sweep(|stripe| u64::from(stripe == y));
        assert_eq!(l1.len(), 0, "y's stripe moved on");
        put(&mut l1, "z", Some(1), None, 0);
        l1.clear();
        assert_eq!(l1.len(), 0);
        l1.validate();
    }

    #[test]
    fn second_hit_promotes_a_key_missed_before_and_a_dropped_copy_at_once() {
        let mut l1: L1<i32> = L1::new(4, true);
        let promote = |l1: &mut L1<i32>, k: &[u8]| match l1.get(&p(k), 0, |_| 0) {
            Found::Miss { promote } => promote,
            Found::Hit(_) => panic!("nothing is kept"),
        };
        assert!(!promote(&mut l1, b"a"), "first miss");
        assert!(promote(&mut l1, b"a"), "second miss");
        assert!(
            !promote(&mut l1, b"a"),
            "the table forgets what it admitted"
        );
        put(&mut l1, "b", Some(1), None, 0);
        assert!(get(&mut l1, b"b", 0, 1).is_none(), "invalidated");
        assert!(
            L1::<i32>::new(4, false)
                .get(&p(b"b"), 0, |_| 0)
                .is_miss_promoted(),
            "without the rule every miss is promoted"
        );
        put(&mut l1, "c", Some(1), None, 0);
        assert!(
            l1.get(&p(b"c"), 0, |_| 1).is_miss_promoted(),
            "a copy dropped as invalidated is read back at once"
        );
    }

    #[test]
    fn the_index_finds_every_entry_through_collisions_and_removals() {
        let mut index = Index::with_capacity(32);
        // Hashes whose tags crowd a few homes of the 64-slot table.
        let hash = |slot: u32| u64::from(slot % 5 + 64 * (slot % 3)) << 32 | u64::from(slot);
        let mut held: Vec<u32> = (0..32).collect();
        for &slot in &held {
            index.insert(hash(slot), slot);
        }
        let mut order = 7u32;
        while !held.is_empty() {
            order = order.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            let gone = held.swap_remove(order as usize % held.len());
            index.remove(hash(gone), gone);
            assert_eq!(index.find(hash(gone), |s| s == gone), None);
            for &slot in &held {
                assert_eq!(index.find(hash(slot), |s| s == slot), Some(slot));
            }
            assert_eq!(index.slots().count(), held.len());
        }
    }

    impl<T> Found<'_, T> {
        fn is_miss_promoted(&self) -> bool {
            matches!(self, Found::Miss { promote: true })
        }
    }
}
