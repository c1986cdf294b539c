//! L2: one byte-bounded store shared by every cache (the seed's `lua_shared_dict`).
//!
//! Shards of fixed bucket arrays whose chains readers walk without a lock: nodes are published
//! with Release stores and reclaimed through crossbeam-epoch, so a reader pinned before a node
//! was unlinked may still read it. Writers (insert, remove, purge, eviction) take the shard's
//! mutex, which also guards its S3-FIFO policy ([`super::s3fifo`]).
//!
//! Memory stays charged until it is freed. An unlinked node joins its shard's list of retired
//! nodes (under the lock), which goes to the epoch collector as one batch, flushed to its
//! global queue at once: no thread's private bag keeps it. Until the batch's grace period is
//! over its bytes count against the shard's capacity with the live entries', and a writer that
//! finds no room for that reason unpins and drives the collector (advancing the epoch, running
//! expired batches) until the retired bytes are freed, before it stores anything more. Entries
//! keep their expiry until evicted, so stale values stay readable for `peek(stale)` and
//! resurrection.
//!
//! A batch whose grace period is over is not freed but recycled: the collector drops its
//! entries and pushes its nodes onto the shard's [`Pool`], a stack under a lock of its own,
//! and the shard's writers take the whole stack (under the shard lock) when they run out of
//! spare nodes. So a write allocates no node once the store has its working set (the value's
//! own `PayloadArc` is the caller's allocation). Nodes come in blocks ([`Block`]), freed after
//! the store and its last batch in flight.
//! Keys are `(namespace id, key bytes)`: caches are isolated by name exactly.

use super::error::Error;
use super::namespace::Namespace;
use super::s3fifo::{touch, Policy, Tracked};
use crate::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};
use crate::sync::epoch::{self, Atomic, Domain, Guard, Pinned, Shared};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{Arc, Mutex, PayloadArc};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::hash::BuildHasher;

/// Random keys against hash flooding (foldhash: per-instance random seeds, several times
/// faster than SipHash on short keys, which it dominated on every L2 read); fixed ones in
/// models, which must replay exactly. It hashes keys longer than [`INLINE_KEY`] and seeds
/// [`ShortSeeds`], which hash the shorter ones.
#[cfg(not(mcb_loom))]
type Hasher = foldhash::quality::RandomState;
#[cfg(mcb_loom)]
type Hasher = std::hash::BuildHasherDefault<std::hash::DefaultHasher>;

/// How many entries one try evicts at most before giving up (the seed's shared dict evicts a
/// bounded batch per `set`; `set_tries` repeats it).
const EVICTIONS_PER_TRY: usize = 8;

/// Retired nodes a shard gathers before handing them to the collector as one batch (one
/// flush to the global queue, one allocation). In models, every retirement is handed over at
/// once by default, so that the handover runs while readers may still hold the node; models
/// of orderings the handover's fences would stand in for run with batches as well
/// (`mutant::set_batched`).
#[cfg(not(mcb_loom))]
#[inline(always)]
const fn retire_batch() -> usize {
    64
}
#[cfg(mcb_loom)]
use mutant::retire_batch;

/// How long a writer drives the collector to free retired bytes before it gives up and fails
/// its write. A batch is freed two epochs after it was handed over, so three rounds (pin,
/// advance, collect) do unless a pinned thread lags: descheduled, or stalled in the kernel
/// (page faults, mmap) on a loaded machine. The rounds first yield to it, then sleep, backing
/// off to 1 ms, for about this long in all: only a thread pinned that long makes a write fail.
#[cfg(not(mcb_loom))]
const RECLAIM_PATIENCE: std::time::Duration = std::time::Duration::from_secs(2);

/// What L2 keeps for a key: the value, and when it expires and whether resurrection put it
/// back, in one word. `repr(C)`, 16 bytes: with the key's hash, links and short key it fills
/// the first cache line of its [`Node`], all a lookup reads.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Entry<T> {
    /// `None` caches a miss.
    pub value: Option<PayloadArc<T>>,
    /// The clock time (ms) it stops being fresh, zero for never, with [`RESURRECTED`] set for
    /// a value put back by resurrection (hits on it report level 4).
    deadline: u64,
}

/// The bit of [`Entry::deadline`] that marks a resurrected value (a clock time never reaches
/// it: 2^63 ms is 292 million years).
const RESURRECTED: u64 = 1 << 63;

impl<T> Clone for Entry<T> {
    fn clone(&self) -> Self {
        Self {
            value: self.value.clone(),
            ..*self
        }
    }
}

impl<T> Entry<T> {
    /// `value`, written at clock time `stored_at` (ms) to live `ttl` ms (zero: forever).
    pub fn new(value: Option<PayloadArc<T>>, stored_at: u64, ttl: u64, resurrected: bool) -> Self {
        // A ttl of at least 1 ms makes a deadline of at least 1: zero stays "never".
        let at = match ttl {
            0 => 0,
            ttl => stored_at.saturating_add(ttl).min(RESURRECTED - 1),
        };
        let mark = if resurrected { RESURRECTED } else { 0 };
        Self {
            value,
            deadline: at | mark,
        }
    }

    /// When it stops being fresh; `None` for never.
    pub fn expires_at(&self) -> Option<u64> {
        let at = self.deadline & !RESURRECTED;
        (at != 0).then_some(at)
    }

    /// Put back by resurrection.
    pub fn resurrected(&self) -> bool {
        self.deadline & RESURRECTED != 0
    }

    /// Expired (but still readable as a stale value).
    pub fn is_stale(&self, now: u64) -> bool {
        self.expires_at().is_some_and(|at| now > at)
    }
}

/// Keys up to this long are also copied into the node, next to its hash, so that a lookup
/// compares them in the cache line it already loaded instead of missing on the key's own
/// allocation (profiles of the storage bench: a third of a read was that miss and its memcmp).
/// 24 bytes keep the node within 120 bytes (below).
pub(crate) const INLINE_KEY: usize = 24;

/// A key of up to [`INLINE_KEY`] bytes, zero-padded, as three little-endian words: built in
/// registers ([`pad`]), compared in three word compares.
pub(crate) type Inline = [u64; INLINE_KEY / 8];

/// `key` as an [`Inline`], if it is that short. Built from a few loads of the key, not copied
/// into a buffer first: a short copy then read back whole stalls on store forwarding (a third
/// of an L1 hit in the profile).
#[inline(always)]
pub(crate) fn pad(key: &[u8]) -> Option<Inline> {
    let n = key.len();
    if n > INLINE_KEY {
        return None;
    }
    if n < 8 {
        return Some([short_word(key), 0, 0]);
    }
    let load = |at: usize| u64::from_le_bytes(key[at..at + 8].try_into().expect("8 bytes"));
    // A partial word is the top of the key's last 8 bytes (an overlapping load, no branch
    // per length).
    let last = load(n - 8);
    let word = |i: usize| match n.saturating_sub(8 * i) {
        0 => 0,
        left if left >= 8 => load(8 * i),
        left => last >> (8 * (8 - left)),
    };
    Some([load(0), word(1), word(2)])
}

/// Up to 7 bytes as a word, zero above them.
#[inline(always)]
fn short_word(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    if n >= 4 {
        // Two overlapping halves: the bytes they share are equal, so the or is exact.
        let low = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
        let high = u32::from_le_bytes(bytes[n - 4..].try_into().expect("4 bytes"));
        u64::from(low) | u64::from(high) << (8 * (n - 4))
    } else if n > 0 {
        // The first, middle and last bytes cover 1 to 3.
        u64::from(bytes[0])
            | u64::from(bytes[n / 2]) << (8 * (n / 2))
            | u64::from(bytes[n - 1]) << (8 * (n - 1))
    } else {
        0
    }
}

/// The high and low halves of a 128-bit product, folded: the short-key hash's mixing step (the
/// one foldhash and wyhash use).
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let product = u128::from(a) * u128::from(b);
    product as u64 ^ (product >> 64) as u64
}

/// The random keys of a store's hash of short keys (see [`L2::probe`]).
#[derive(Debug)]
struct ShortSeeds([u64; 6]);

impl ShortSeeds {
    /// Drawn from the store's randomly seeded hasher (fixed in models).
    fn from(hasher: &Hasher) -> Self {
        Self(std::array::from_fn(|i| hasher.hash_one(i as u64)))
    }

    /// The hash of a key of `len` bytes, given as its padded words, in namespace `ns`: three
    /// multiplies on words already in registers, where hashing `(ns, key)` through the
    /// `Hasher` trait fed them piece by piece (a tenth of an L1 hit).
    #[inline(always)]
    fn hash(&self, ns: u32, len: usize, words: &Inline) -> u64 {
        let [s0, s1, s2, s3, s4, s5] = self.0;
        let a = fold(words[0] ^ s0, words[1] ^ s1);
        let b = fold(words[2] ^ s2, (u64::from(ns) << 32 | len as u64) ^ s3);
        fold(a ^ s4, b ^ s5)
    }
}

/// `repr(C)`, aligned to a cache line: everything a lookup reads (hash, namespace, frequency,
/// next link, short key and entry) fills its first 64 bytes, so a hit misses on one line of
/// it, not two (Zipf reads over 100k keys, a 4 MiB last-level cache simulated: 1.25 misses a
/// read with 73 hot bytes at malloc's 16-byte alignment, 0.70 with this). Nodes live in
/// [`Block`]s, never in an allocation of their own: malloc would give a 64-byte-aligned node a
/// 144-byte chunk and a gap before it (RSS +30% for 100k entries).
#[repr(C, align(64))]
struct Node<T> {
    hash: u64,
    ns: u32,
    /// The key's length when it is in `inline` (else more than [`INLINE_KEY`]).
    inline_len: u8,
    freq: AtomicU8,
    next: Atomic<Node<T>>,
    inline: Inline,
    entry: Entry<T>,
    /// The key as a shared allocation, for a key longer than [`INLINE_KEY`] only.
    key: Option<PayloadArc<[u8]>>,
    /// Its slot in the shard's policy, fixed before the node is published.
    slot: u32,
    /// What it is charged against the shard's capacity until it is freed.
    weight: usize,
    /// The next node on its shard's retired list (set under the shard lock once the node is
    /// unlinked, read by the recycling of its batch), then on its shard's [`Pool`] and spare
    /// list: one node is on one of these at a time.
    retired_next: AtomicPtr<Node<T>>,
    /// Set when the node counts as freed, so that models see a use after free as a panic.
    #[cfg(mcb_loom)]
    freed: crate::sync::atomic::AtomicBool,
    /// Bumped when the node is reused, so that models see a reader of its previous life.
    #[cfg(mcb_loom)]
    lives: crate::sync::atomic::AtomicUsize,
}

#[cfg(not(mcb_loom))]
const _: () = {
    assert!(std::mem::size_of::<Node<()>>() <= 128);
    assert!(std::mem::offset_of!(Node<()>, entry) + std::mem::size_of::<Entry<()>>() <= 64);
};

/// What a writer puts in a node (the rest is its links, frequency and policy slot).
struct Fields<T> {
    hash: u64,
    ns: u32,
    inline_len: u8,
    inline: Inline,
    entry: Entry<T>,
    key: Option<PayloadArc<[u8]>>,
    weight: usize,
}

impl<T> Fields<T> {
    /// Writes these fields into an empty node (new, or recycled).
    fn fill(self, node: &mut Node<T>) {
        node.hash = self.hash;
        node.ns = self.ns;
        node.inline_len = self.inline_len;
        node.inline = self.inline;
        node.entry = self.entry;
        node.key = self.key;
        node.slot = 0;
        node.weight = self.weight;
        // Relaxed: the node is private to its writer until it is published, with a Release
        // store of the link to it (its `next` is set just before that).
        node.freq.store(0, Ordering::Relaxed);
    }
}

impl<T> Node<T> {
    /// A node that holds nothing, next to `retired_next` on a list of spare nodes.
    fn empty(retired_next: *mut Node<T>) -> Self {
        Node {
            hash: 0,
            ns: 0,
            inline_len: 0,
            freq: AtomicU8::new(0),
            next: Atomic::null(),
            inline: [0; INLINE_KEY / 8],
            entry: Entry::new(None, 0, 0, false),
            key: None,
            slot: 0,
            weight: 0,
            retired_next: AtomicPtr::new(retired_next),
            #[cfg(mcb_loom)]
            freed: crate::sync::atomic::AtomicBool::new(false),
            #[cfg(mcb_loom)]
            lives: crate::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Drops what the node holds (its grace period over, or the store gone).
    fn clear(&mut self) {
        self.entry.value = None;
        self.key = None;
    }

    /// Whether this node holds the key `probe` looks for.
    #[inline(always)]
    fn is(&self, probe: &Probe<'_>) -> bool {
        if self.hash != probe.hash || self.ns != probe.ns {
            return false;
        }
        match &probe.inline {
            // Inline keys are zero-padded: equal lengths and equal arrays (a fixed-size
            // compare, where a slice compare called memcmp: 3-4% of the get-heavy profile).
            Some(padded) => {
                usize::from(self.inline_len) == probe.key.len() && self.inline == *padded
            }
            None => self.key.as_deref() == Some(probe.key),
        }
    }

    /// In a model, this node's life, for [`Node::check_live`] (nothing in the std build).
    fn life(&self) -> usize {
        #[cfg(mcb_loom)]
        // SeqCst: test instrumentation only; the strongest order finds the bug soonest.
        return self.lives.load(Ordering::SeqCst);
        #[cfg(not(mcb_loom))]
        0
    }

    /// In a model, fails if this node was freed, or reused, while a reader that found it in
    /// its life `life` still held it.
    fn check_live(&self, life: usize) {
        #[cfg(mcb_loom)]
        {
            assert_eq!(self.life(), life, "L2 node reused while read");
            // SeqCst: as in `life`.
            assert!(
                !self.freed.load(Ordering::SeqCst),
                "L2 node used after free"
            );
        }
        let _ = life;
    }
}

/// A key as lookups compare it, prepared once per operation (L1 compares it the same way).
#[derive(Debug)]
pub(crate) struct Probe<'k> {
    pub hash: u64,
    pub ns: u32,
    pub key: &'k [u8],
    /// The key as an [`Inline`], when it is that short (how nodes hold it).
    pub inline: Option<Inline>,
}

/// `key`'s probe, given its hash ([`L2::hash`]).
#[inline(always)]
pub(crate) fn probe(ns: u32, key: &[u8], hash: u64) -> Probe<'_> {
    let inline = pad(key);
    Probe {
        hash,
        ns,
        key,
        inline,
    }
}

/// The policy's handle on a linked node.
struct NodeRef<T>(*const Node<T>);

impl<T> Clone for NodeRef<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for NodeRef<T> {}

// SAFETY: a NodeRef is only dereferenced under its shard's mutex, while its node is linked
// (see `Tracked::freq`); the node itself is Send + Sync when T is.
unsafe impl<T: Send + Sync> Send for NodeRef<T> {}

impl<T> Tracked for NodeRef<T> {
    unsafe fn freq(&self) -> &AtomicU8 {
        // SAFETY: the caller guarantees the node is live (`Tracked::freq`'s contract); the
        // policy, the one caller, holds only handles of linked nodes (see `L2::write`).
        unsafe { &(*self.0).freq }
    }
}

struct Shard<T> {
    state: Mutex<Locked<T>>,
    /// Where the collector returns the shard's nodes (shared with the batches in flight,
    /// which may outlive the store).
    pool: Arc<Pool<T>>,
}

/// Capacity bytes per bucket: a full shard of the smallest entries (a node, 128 bytes) has one
/// entry per bucket, and a read walks about 1.5 nodes of its chain, each a cache miss (1.9 at
/// 256 bytes a bucket, for 144-byte entries). The array, 8 bytes a bucket, is a sixteenth of
/// the capacity, beside the budget.
const BYTES_PER_BUCKET: usize = 128;
/// Buckets a store has at most, whatever its shards (128 MiB of them, reached at 2 GiB of
/// capacity): past that, chains grow instead, and a capacity far above what a process will
/// hold costs no more than this.
const MAX_BUCKETS: usize = 1 << 24;

/// Every shard's buckets in one array, a shard's a run of `1 << shard_shift` of them: a read
/// finds its bucket with one multiply and one index (it was a shard's, then the bucket in it,
/// twice a read with the prefetch), and a writer its shard from the bucket's index.
struct Buckets<T> {
    links: Box<[Atomic<Node<T>>]>,
    shard_shift: u32,
}

impl<T> Buckets<T> {
    /// `per_shard` (rounded up to a power of two) for each of `shards`.
    fn new(shards: usize, per_shard: usize) -> Self {
        let per_shard = per_shard.next_power_of_two();
        Self {
            links: (0..shards * per_shard).map(|_| Atomic::null()).collect(),
            shard_shift: per_shard.trailing_zeros(),
        }
    }

    /// The index of `hash`'s bucket: the low half of the hash scaled to the count (a
    /// multiply, not a division: the shard count need not be a power of two).
    #[inline(always)]
    fn index(&self, hash: u64) -> usize {
        ((u64::from(hash as u32) * self.links.len() as u64) >> 32) as usize
    }

    #[inline(always)]
    fn of(&self, hash: u64) -> &Atomic<Node<T>> {
        &self.links[self.index(hash)]
    }

    /// The shard whose lock guards `hash`'s bucket.
    fn shard_of(&self, hash: u64) -> usize {
        self.index(hash) >> self.shard_shift
    }

    /// Shard `i`'s buckets.
    fn of_shard(&self, i: usize) -> &[Atomic<Node<T>>] {
        &self.links[i << self.shard_shift..(i + 1) << self.shard_shift]
    }
}

/// What a shard's mutex guards.
struct Locked<T> {
    policy: Policy<NodeRef<T>>,
    /// Unlinked nodes not yet handed to the collector, linked through `retired_next`.
    retired: Option<NodeRef<T>>,
    retired_len: usize,
    retired_bytes: usize,
    /// Nodes taken from the pool and not yet reused, linked through `retired_next`; their
    /// entries hold nothing.
    spare: *mut Node<T>,
}

// SAFETY: the retired and spare nodes are owned by their lists (unreachable from the buckets
// and out of the policy) and are only touched under the shard lock or by the recycling of
// their batch; the nodes are Send + Sync when T is.
unsafe impl<T: Send + Sync> Send for Locked<T> {}

/// A shard's nodes: the blocks that hold them, those recycled, and the bytes of its batches
/// in flight.
struct Pool<T> {
    /// Every block of the shard's nodes, freed with the pool: after the store and its last
    /// batch in flight. Taken by writers that run out of nodes (under the shard lock).
    blocks: Mutex<Vec<Block<T>>>,
    /// Bytes of retired nodes handed to the collector and not yet recycled (each batch
    /// subtracts its own, possibly after the store is gone).
    in_flight: AtomicUsize,
    /// Nodes whose grace period is over, linked through `retired_next`, their entries
    /// emptied: pushed by the collector (on any thread, once per batch), taken whole by the
    /// shard's writers. Its own lock, never held while anything else is taken: the collector
    /// may run inside a writer that holds the shard lock.
    free: Mutex<Option<NodeRef<T>>>,
}

impl<T> Pool<T> {
    /// Pushes the list `head..=tail` (linked through `retired_next`, owned by the caller).
    fn push(&self, head: NodeRef<T>, tail: NodeRef<T>) {
        let mut free = self.free.lock();
        let below = free.map_or(std::ptr::null_mut(), |n| n.0.cast_mut());
        // SAFETY: the tail of a list the caller owns: a live node in a block of this pool.
        let tail = unsafe { &*tail.0 };
        // Relaxed: read by the taker, under this lock.
        tail.retired_next.store(below, Ordering::Relaxed);
        *free = Some(head);
    }

    /// Takes every node in the pool.
    fn take(&self) -> *mut Node<T> {
        self.free
            .lock()
            .take()
            .map_or(std::ptr::null_mut(), |n| n.0.cast_mut())
    }

    /// A new block's nodes, empty, as a list linked through `retired_next`.
    fn grow(&self) -> *mut Node<T> {
        let block = Block::new();
        let head = block.0.as_ptr();
        self.blocks.lock().push(block);
        head
    }
}

/// Nodes a shard allocates at once (fewer in the models, whose stores hold a few entries).
#[cfg(not(mcb_loom))]
const BLOCK_NODES: usize = 32;
#[cfg(mcb_loom)]
const BLOCK_NODES: usize = 2;

/// [`BLOCK_NODES`] nodes in one allocation, each a valid [`Node`] from the block's making to
/// its drop (an unused one empty): so every node starts a cache line, and memory costs what
/// the nodes weigh.
struct Block<T>(std::ptr::NonNull<Node<T>>);

// SAFETY: a block owns its nodes, which are Send + Sync when T is; who may touch a node is
// settled by the lists and links that reach it, not by the block.
unsafe impl<T: Send + Sync> Send for Block<T> {}

impl<T> Block<T> {
    fn layout() -> std::alloc::Layout {
        std::alloc::Layout::array::<Node<T>>(BLOCK_NODES).expect("a block's size fits")
    }

    /// A block of empty nodes, each linked to the next through `retired_next`.
    fn new() -> Self {
        let layout = Self::layout();
        // SAFETY: the layout's size is not zero (a node is at least 64 bytes).
        let base = unsafe { std::alloc::alloc(layout) }.cast::<Node<T>>();
        let Some(base) = std::ptr::NonNull::new(base) else {
            std::alloc::handle_alloc_error(layout)
        };
        for i in 0..BLOCK_NODES {
            let next = if i + 1 < BLOCK_NODES {
                base.as_ptr().wrapping_add(i + 1)
            } else {
                std::ptr::null_mut()
            };
            // SAFETY: slot `i` lies in the allocation (`layout` holds BLOCK_NODES nodes) and
            // is aligned for a node; nothing reads it before this write.
            unsafe { base.as_ptr().add(i).write(Node::empty(next)) };
        }
        Self(base)
    }
}

impl<T> Drop for Block<T> {
    fn drop(&mut self) {
        // SAFETY: the block is dropped with its pool, after the store and every batch in
        // flight (each holds the pool): nothing can reach its nodes any more. Each slot
        // holds a valid node (`Block::new`), dropped once here; then the allocation is freed
        // with the layout it was made with.
        unsafe {
            let nodes = std::ptr::slice_from_raw_parts_mut(self.0.as_ptr(), BLOCK_NODES);
            std::ptr::drop_in_place(nodes);
            std::alloc::dealloc(self.0.as_ptr().cast(), Self::layout());
        }
    }
}

/// The shared store: bounded by bytes, read without locks, evicting by S3-FIFO.
///
/// Its values must be `'static`: a node unlinked by a writer is freed later, by whichever
/// thread the epoch collector runs on, so it may outlive any borrow. A store of borrowed
/// values does not compile:
///
/// ```compile_fail
/// fn borrowed<'a>() -> mcb_core::tiers::L2<&'a str> {
///     mcb_core::tiers::L2::new(1 << 20).unwrap()
/// }
/// ```
///
/// ```
/// fn owned() -> mcb_core::tiers::L2<String> {
///     mcb_core::tiers::L2::new(1 << 20).unwrap()
/// }
/// # owned();
/// ```
pub struct L2<T> {
    shards: Box<[CachePadded<Shard<T>>]>,
    buckets: Buckets<T>,
    /// Hashes keys longer than [`INLINE_KEY`] (with their namespace).
    hasher: Hasher,
    short: ShortSeeds,
    weigher: Box<dyn Fn(&T) -> usize + Send + Sync>,
    namespaces: Mutex<Vec<Arc<Namespace>>>,
    domain: Domain,
}

impl<T> fmt::Debug for L2<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("L2")
            .field("shards", &self.shards.len())
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static> L2<T> {
    /// A store of `capacity_bytes`, sharded by the CPU count (shards of at least 64 KiB).
    pub fn new(capacity_bytes: usize) -> Result<Self, Error> {
        let by_cpu = (crate::sync::cpu_count() * 4).next_power_of_two();
        Self::with_shards(capacity_bytes, by_cpu.min(capacity_bytes >> 16).max(1))
    }

    /// A store of `capacity_bytes` split evenly over `shards`; a value larger than one shard
    /// cannot be stored. Each entry weighs its key, a fixed overhead and `size_of::<T>()` (plus
    /// the length of a byte-like value: `String`, `Vec<u8>`...) unless [`L2::weigh_with`] says
    /// otherwise.
    pub fn with_shards(capacity_bytes: usize, shards: usize) -> Result<Self, Error> {
        if capacity_bytes == 0 {
            return Err(Error::InvalidOption("L2 capacity must be > 0 bytes"));
        }
        if shards == 0 || shards > capacity_bytes {
            return Err(Error::InvalidOption("L2 shards must be in 1..=capacity"));
        }
        let per_shard = capacity_bytes / shards;
        let buckets = Buckets::new(
            shards,
            // A power of two (as `Buckets::new` rounds up to one), so that the total stays
            // within the bound whatever the shard count.
            (per_shard / BYTES_PER_BUCKET)
                .clamp(16, (MAX_BUCKETS / shards.next_power_of_two()).max(16)),
        );
        let shards = (0..shards)
            .map(|_| {
                CachePadded::new(Shard {
                    state: Mutex::new(Locked {
                        policy: Policy::new(per_shard),
                        retired: None,
                        retired_len: 0,
                        retired_bytes: 0,
                        spare: std::ptr::null_mut(),
                    }),
                    pool: Arc::new(Pool {
                        blocks: Mutex::new(Vec::new()),
                        in_flight: AtomicUsize::new(0),
                        free: Mutex::new(None),
                    }),
                })
            })
            .collect();
        let hasher = Hasher::default();
        Ok(Self {
            shards,
            buckets,
            short: ShortSeeds::from(&hasher),
            hasher,
            weigher: Box::new(super::weigh::default_weight::<T>),
            namespaces: Mutex::new(Vec::new()),
            domain: Domain::per_thread(),
        })
    }

    /// Weighs values with `weigher` (bytes) instead of the default (see [`L2::with_shards`]).
    pub fn weigh_with(mut self, weigher: impl Fn(&T) -> usize + Send + Sync + 'static) -> Self {
        self.weigher = Box::new(weigher);
        self
    }

    /// The byte bound.
    pub fn capacity_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.state.lock().policy.capacity())
            .sum()
    }

    /// Bytes in use by the entries stored.
    pub fn used_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.state.lock().policy.used())
            .sum()
    }

    /// Bytes of removed, replaced and evicted entries not yet freed (charged against the
    /// capacity with [`L2::used_bytes`]).
    pub fn retired_bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.retired_bytes(&s.state.lock()))
            .sum()
    }

    /// Entries stored (live or stale).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.state.lock().policy.len())
            .sum()
    }

    /// Whether no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries evicted to make room since the store was made.
    pub fn evictions(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.state.lock().policy.evictions())
            .sum()
    }

    /// For property tests: checks every shard's eviction policy (its linked lists and byte
    /// counts) and that it tracks exactly the nodes linked in the shard's buckets.
    ///
    /// # Panics
    /// On the first broken invariant.
    #[doc(hidden)]
    pub fn validate(&self) {
        for (i, shard) in self.shards.iter().enumerate() {
            let state = shard.state.lock();
            let policy = &state.policy;
            policy.validate();
            let (mut len, mut bytes) = (0, 0);
            if let Some(head) = state.retired {
                for_each_retired(head, |node| (len, bytes) = (len + 1, bytes + node.weight));
            }
            assert_eq!(
                (len, bytes),
                (state.retired_len, state.retired_bytes),
                "retired list and its counts disagree"
            );
            let guard = self.domain.pin();
            let mut linked = 0;
            for bucket in self.buckets.of_shard(i) {
                // Acquire: as in `find`.
                let mut cur = bucket.load(Ordering::Acquire, &guard);
                // SAFETY: as in `insert` (the shard lock is held).
                while let Some(node) = unsafe { cur.as_ref() } {
                    linked += 1;
                    // Acquire: as in `find`.
                    cur = node.next.load(Ordering::Acquire, &guard);
                }
            }
            assert_eq!(policy.len(), linked, "policy and buckets disagree");
        }
    }

    /// Frees what this store retired as far as the epoch collector can now: for shutdown, when
    /// no other thread reads the store, so that a leak checker finds nothing left behind.
    pub fn reclaim(&self) {
        for shard in self.shards.iter() {
            shard.hand_over(&mut shard.state.lock(), &self.domain.pin());
        }
        self.domain.flush();
    }

    /// The namespace of cache `name`: caches with one name share it (and its entries).
    pub(crate) fn namespace(&self, name: &str) -> Arc<Namespace> {
        let mut all = self.namespaces.lock();
        if let Some(ns) = all.iter().find(|ns| &*ns.name == name) {
            return ns.clone();
        }
        let id = u32::try_from(all.len()).expect("fewer than 2^32 cache names");
        let ns = Arc::new(Namespace::new(id, name));
        all.push(ns.clone());
        ns
    }

    pub(crate) fn hash(&self, ns: u32, key: &[u8]) -> u64 {
        self.probe(ns, key).hash
    }

    /// `key`'s probe in namespace `ns` (hashed once: L1, the invalidation stripe and L2 all
    /// use it). A key of up to [`INLINE_KEY`] bytes is hashed from its padded words, a longer
    /// one by the hasher.
    #[inline(always)]
    pub(crate) fn probe<'k>(&self, ns: u32, key: &'k [u8]) -> Probe<'k> {
        let inline = pad(key);
        let hash = match &inline {
            Some(words) => self.short.hash(ns, key.len(), words),
            None => self.hasher.hash_one((ns, key)),
        };
        Probe {
            hash,
            ns,
            key,
            inline,
        }
    }

    fn shard(&self, hash: u64) -> &Shard<T> {
        &self.shards[self.buckets.shard_of(hash)]
    }

    /// Starts loading the bucket `probe`'s key lies in, for a read to come: a cache asks for
    /// it before it looks in L1, so that on an L1 miss the bucket is on its way (a miss on it
    /// was a fifth of an L2 read over 100k keys).
    #[inline(always)]
    pub(crate) fn prefetch(&self, probe: &Probe<'_>) {
        let bucket = self.buckets.of(probe.hash) as *const Atomic<Node<T>>;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch is a hint: it reads nothing the program sees and cannot fault,
        // and SSE is part of x86_64's baseline.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(bucket.cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = bucket;
    }

    /// Reads `probe`'s key without a lock, handing `f` the stored entry and, for a key longer
    /// than [`INLINE_KEY`], the node's shared copy of it (both only borrowed for the call).
    #[inline]
    pub(crate) fn read_probed<R>(
        &self,
        probe: &Probe<'_>,
        f: impl FnOnce(&Entry<T>, &Option<PayloadArc<[u8]>>) -> R,
    ) -> Option<R> {
        self.find_with(probe, |node| f(&node.entry, &node.key))
    }

    /// `get` and `read`: runs `f` on the probed key's node, found without a lock.
    #[inline(always)]
    fn find_with<R>(&self, probe: &Probe<'_>, f: impl FnOnce(&Node<T>) -> R) -> Option<R> {
        let guard = self.domain.pin();
        let (_, found) = find(self.buckets.of(probe.hash), &guard, |n| n.is(probe));
        // SAFETY: `found` was loaded under `guard` from a link of the shard; a node is retired
        // only after it is unlinked, and the epoch frees it only once every guard pinned
        // before the unlink is gone.
        let node = unsafe { found.as_ref() }?;
        let life = node.life();
        touch(&node.freq);
        let answer = f(node);
        node.check_live(life);
        Some(answer)
    }

    /// Stores `entry` for `key`, evicting up to `tries` batches to make room; `published` runs
    /// under the shard lock right after the entry becomes visible, so that writers of one key
    /// run it in the order of their writes. On failure the key holds nothing. With `admit`, a
    /// key the store does not hold may be declined (`Ok(None)`, nothing stored or evicted: see
    /// [`Admission::Frequency`](super::Admission::Frequency)).
    pub(crate) fn insert<R>(
        &self,
        ns: u32,
        key: &[u8],
        entry: Entry<T>,
        tries: u32,
        admit: bool,
        published: impl FnOnce() -> R,
    ) -> Result<Option<R>, Error> {
        let probe = self.probe(ns, key);
        let hash = probe.hash;
        let (shard, bucket) = (self.shard(hash), self.buckets.of(hash));
        let mut state = shard.state.lock();
        let mut guard = self.domain.pin();
        let (_, old) = find(bucket, &guard, |n| n.is(&probe));
        // SAFETY: as in `get`; besides, only writers retire nodes and we hold the shard lock.
        let old_ref = unsafe { old.as_ref() };
        let weight = self.weight(key, &entry);
        // The old node stays charged until it is freed: room for both.
        let old_weight = old_ref.map_or(0, |n| n.weight);
        if admit && old_ref.is_none() && !state.policy.admits(hash, weight) {
            return Ok(None);
        }
        if let Some(old) = old_ref {
            state.policy.remove(old.slot);
        }
        // Making room may unpin: keep the old node by address (it stays linked, lock held).
        let old = old.as_raw();
        let fits = self.make_room(shard, &mut state, &mut guard, weight + old_weight, tries);
        let old = Shared::from(old);
        // SAFETY: still linked: out of the policy, so no eviction unlinked it, and only
        // writers, who take the lock we hold, unlink nodes.
        let old_ref = unsafe { old.as_ref() };
        if !fits {
            if old_ref.is_some() {
                shard.unlink(&mut state, link_to(bucket, old, &guard), old, &guard);
            }
            return Err(Error::L2Full { tries });
        }
        let (inline, inline_len, copy) = match probe.inline {
            Some(padded) => (padded, key.len() as u8, None),
            None => ([0; INLINE_KEY / 8], u8::MAX, Some(key.into())),
        };
        let fields = Fields {
            hash,
            ns,
            inline_len,
            inline,
            entry,
            key: copy,
            weight,
        };
        let node = shard.node(&mut state, fields);
        // SAFETY: the node stays allocated while in the policy: it is linked below (under this
        // lock), and every path that unlinks and retires it removes it from the policy first.
        let slot = unsafe { state.policy.insert(NodeRef(node), hash, weight) };
        // SAFETY: the node is still private to this writer (made above, not yet linked).
        let node = unsafe { &mut *node };
        node.slot = slot;
        let link = if old.is_null() {
            bucket
        } else {
            link_to(bucket, old, &guard)
        };
        let successor = if old.is_null() {
            // Relaxed: links change only under the shard lock, which we hold.
            link.load(Ordering::Relaxed, &guard)
        } else {
            // SAFETY: `old` is still linked (see above).
            // Relaxed: links change only under the shard lock, which we hold.
            unsafe { old.deref() }.next.load(Ordering::Relaxed, &guard)
        };
        // Relaxed: the node is still private; the Release below publishes this store.
        node.next.store(successor, Ordering::Relaxed);
        // Release: pairs with the Acquire loads in `find`; publishes the node's fields.
        link.store(Shared::from(&*node as *const Node<T>), Ordering::Release);
        if !old.is_null() {
            shard.retire(&mut state, old, &guard);
        }
        Ok(Some(published()))
    }

    /// Makes room for `need` bytes in `shard`: evicts up to `tries` batches until the live
    /// entries leave room, then, if retired bytes still take it, frees them. Whether it fits.
    fn make_room(
        &self,
        shard: &Shard<T>,
        state: &mut Locked<T>,
        guard: &mut Pinned,
        need: usize,
        tries: u32,
    ) -> bool {
        let mut tries_made = 0;
        'tries: while !state.policy.fits(need) && tries_made < tries {
            tries_made += 1;
            for _ in 0..EVICTIONS_PER_TRY {
                // Nothing left to evict: more tries cannot help.
                if !shard.evict(&self.buckets, state, guard) {
                    break 'tries;
                }
                if state.policy.fits(need) {
                    break;
                }
            }
        }
        if !state.policy.fits(need) {
            return false;
        }
        if state.policy.fits(need + shard.retired_bytes(state)) {
            return true;
        }
        // Over budget only by what retired entries hold: free it before growing further. An
        // eviction only moves bytes from live to retired, so a full store would wait here at
        // every write: first evict ahead, a batch's worth of entries like this one (a sixteenth
        // of the shard at most), so that the writes after this one find room while the batch
        // is reclaimed, then wait once, unpinned (or this thread would hold back the epochs
        // it waits for).
        let ahead = need
            .saturating_mul(retire_batch())
            .min(state.policy.capacity() / 16);
        while !state.policy.fits(need + ahead) && shard.evict(&self.buckets, state, guard) {}
        guard.repin_after(|| self.reclaim_shard(shard, state, need));
        state.policy.fits(need + shard.retired_bytes(state))
    }

    /// Hands `shard`'s retired nodes to the collector and drives it until `need` more bytes fit
    /// or the rounds run out (a reader pinned all along). Models only hand over: forcing
    /// collections inside a model makes loom's replay diverge.
    fn reclaim_shard(&self, shard: &Shard<T>, state: &mut Locked<T>, need: usize) {
        shard.hand_over(state, &self.domain.pin());
        #[cfg(mcb_loom)]
        let _ = need;
        #[cfg(not(mcb_loom))]
        {
            use crate::sync::thread;
            use std::time::Duration;
            let (mut round, mut pause, mut waited) = (0, Duration::from_micros(1), Duration::ZERO);
            while !state.policy.fits(need + shard.retired_bytes(state)) {
                if waited >= RECLAIM_PATIENCE {
                    return;
                }
                round += 1;
                if round > 16 {
                    thread::sleep(pause);
                    waited += pause;
                    pause = (pause * 2).min(Duration::from_millis(1));
                } else if round > 2 {
                    // Let a lagging pinned thread (or one freeing a batch) run.
                    thread::yield_now();
                }
                // Each flush tries to advance the epoch and frees the batches that expired.
                self.domain.pin().flush();
            }
        }
    }

    /// What an entry costs against the byte bound.
    fn weight(&self, key: &[u8], entry: &Entry<T>) -> usize {
        std::mem::size_of::<Node<T>>() + key.len() + entry.value.as_deref().map_or(0, &self.weigher)
    }

    /// Removes `key`; `removed` runs under the shard lock after the removal, as in `insert`.
    pub(crate) fn remove<R>(&self, ns: u32, key: &[u8], removed: impl FnOnce() -> R) -> R {
        let probe = self.probe(ns, key);
        let shard = self.shard(probe.hash);
        let mut state = shard.state.lock();
        let guard = self.domain.pin();
        let (link, node) = find(self.buckets.of(probe.hash), &guard, |n| n.is(&probe));
        // SAFETY: as in `insert`.
        if let Some(n) = unsafe { node.as_ref() } {
            state.policy.remove(n.slot);
            shard.unlink(&mut state, link, node, &guard);
        }
        removed()
    }

    /// Removes every entry of namespace `ns`, and with `expired_at` also every entry of any
    /// namespace that is stale at that time (the seed's `flush_expired`).
    pub(crate) fn purge(&self, ns: u32, expired_at: Option<u64>) {
        self.remove_where(|node_ns, entry| {
            node_ns == ns || expired_at.is_some_and(|now| entry.is_stale(now))
        });
    }

    /// Removes every entry `dead` (given the entry's namespace) picks, shard by shard under
    /// each shard's lock.
    pub(crate) fn remove_where(&self, mut dead: impl FnMut(u32, &Entry<T>) -> bool) {
        for (i, shard) in self.shards.iter().enumerate() {
            let mut state = shard.state.lock();
            let guard = self.domain.pin();
            for bucket in self.buckets.of_shard(i) {
                let mut link = bucket;
                loop {
                    // Acquire: pairs with the Release stores in `insert` and `unlink`, as in `find`.
                    let cur = link.load(Ordering::Acquire, &guard);
                    // SAFETY: as in `insert`.
                    let Some(node) = (unsafe { cur.as_ref() }) else {
                        break;
                    };
                    if dead(node.ns, &node.entry) {
                        state.policy.remove(node.slot);
                        shard.unlink(&mut state, link, cur, &guard);
                    } else {
                        link = &node.next;
                    }
                }
            }
        }
    }
}

impl<T> Shard<T> {
    /// Bytes of retired nodes not yet freed: on the list, and handed over.
    fn retired_bytes(&self, state: &Locked<T>) -> usize {
        // Relaxed: a budget figure; a batch freed a moment ago may still count (the writer
        // then drives the collector once more), never the other way round, since a batch
        // is added before it is handed over.
        state.retired_bytes + self.pool.in_flight.load(Ordering::Relaxed)
    }

    /// A node holding `fields` for a writer (lock held): a spare one, refilled from the pool
    /// when none is left, else from a new block. Not yet linked or in the policy.
    fn node(&self, state: &mut Locked<T>, fields: Fields<T>) -> *mut Node<T> {
        if state.spare.is_null() {
            state.spare = self.pool.take();
        }
        if state.spare.is_null() {
            state.spare = self.pool.grow();
        }
        let spare = state.spare;
        // SAFETY: the spare list owns its nodes (lock held); this one leaves it, and no reader
        // can reach it: it is new, or its grace period ended before the collector recycled it.
        let node = unsafe { &mut *spare };
        // Relaxed: spare links are read and written under the shard lock only.
        state.spare = node.retired_next.load(Ordering::Relaxed);
        #[cfg(mcb_loom)]
        {
            // SeqCst: test instrumentation, as in `Node::life`.
            node.lives.fetch_add(1, Ordering::SeqCst);
            node.freed.store(false, Ordering::SeqCst);
        }
        fields.fill(node);
        spare
    }

    /// Evicts one entry by the policy (lock held); whether there was one.
    fn evict(&self, buckets: &Buckets<T>, state: &mut Locked<T>, guard: &Guard) -> bool {
        let Some(victim) = state.policy.evict() else {
            return false;
        };
        let victim = Shared::from(victim.0);
        // SAFETY: the victim was in the policy, hence linked and live (lock held).
        let vhash = unsafe { victim.deref() }.hash;
        let link = link_to(buckets.of(vhash), victim, guard);
        self.unlink(state, link, victim, guard);
        true
    }

    /// Unlinks `node` (pointed to by `link`, lock held) and retires it.
    fn unlink(
        &self,
        state: &mut Locked<T>,
        link: &Atomic<Node<T>>,
        node: Shared<'_, Node<T>>,
        guard: &Guard,
    ) {
        // SAFETY: `node` is linked and the shard lock is held, so it is live.
        // Relaxed: links change only under the shard lock, which the caller holds.
        let next = unsafe { node.deref() }.next.load(Ordering::Relaxed, guard);
        // Release: pairs with the Acquire in `find`; a reader that skips the node through this
        // link still sees the (older, already published) successor fully.
        link.store(next, Ordering::Release);
        self.retire(state, node, guard);
    }

    /// Puts an unlinked node (out of the policy, lock held) on the retired list; a full list
    /// goes to the collector.
    fn retire(&self, state: &mut Locked<T>, node: Shared<'_, Node<T>>, guard: &Guard) {
        // SAFETY: unlinked under the lock we hold and not yet handed over: still allocated.
        let node_ref = unsafe { node.deref() };
        #[cfg(mcb_loom)]
        if crate::sync::mutant::active(crate::sync::mutant::Mutant::L2FreesEagerly) {
            // SeqCst: test instrumentation, as in `check_live`.
            node_ref.freed.store(true, Ordering::SeqCst);
        }
        let next = state
            .retired
            .map_or(std::ptr::null_mut(), |n| n.0.cast_mut());
        // Relaxed: read under the shard lock, or by the batch's free, which the collector
        // orders after the handover.
        node_ref.retired_next.store(next, Ordering::Relaxed);
        state.retired = Some(NodeRef(node.as_raw()));
        state.retired_len += 1;
        state.retired_bytes += node_ref.weight;
        if state.retired_len >= retire_batch() {
            self.hand_over(state, guard);
        }
    }

    /// Gives the retired list to the collector as one batch, freed once no reader pinned
    /// before now is left, and flushes it to the collector's global queue, where any thread's
    /// collection frees it (a thread's private bag would keep it until that thread pins
    /// again, perhaps never). Its bytes stay charged (`in_flight`) until then.
    fn hand_over(&self, state: &mut Locked<T>, guard: &Guard) {
        let Some(head) = state.retired.take() else {
            return;
        };
        let bytes = std::mem::take(&mut state.retired_bytes);
        state.retired_len = 0;
        #[cfg(mcb_loom)]
        if crate::sync::mutant::active(crate::sync::mutant::Mutant::L2FreesBatchAtHandover) {
            for_each_retired(head, |node| {
                // SeqCst: test instrumentation, as in `check_live`.
                node.freed.store(true, Ordering::SeqCst)
            });
        }
        // The models' collector: each node counts as freed at the end of its grace period,
        // the earliest an epoch collector may free the batch handed over here.
        #[cfg(mcb_loom)]
        for_each_retired(head, |node| epoch::mark_freed_when_unpinned(&node.freed));
        // Relaxed: a budget figure (see `retired_bytes`); the free that subtracts it runs
        // after this, ordered by the collector's own synchronisation.
        self.pool.in_flight.fetch_add(bytes, Ordering::Relaxed);
        let pool = self.pool.clone();
        if mutant::active(Mutant::L2RecyclesAtHandover) {
            recycle(head, &pool);
            // Relaxed: see above.
            pool.in_flight.fetch_sub(bytes, Ordering::Relaxed);
            return;
        }
        // SAFETY: every node on the list is unlinked and out of the policy, so only readers
        // pinned before now can hold one; the collector runs this once they unpinned. The
        // values are `'static` (see `L2`), so dropping them later, anywhere, is sound.
        unsafe {
            guard.defer_unchecked(move || {
                recycle(head, &pool);
                // Relaxed: see above.
                pool.in_flight.fetch_sub(bytes, Ordering::Relaxed);
            });
        }
        #[cfg(not(mcb_loom))]
        guard.flush();
    }
}

/// Runs `f` on each node of a retired list from `head`.
fn for_each_retired<T>(head: NodeRef<T>, mut f: impl FnMut(&Node<T>)) {
    let mut cur = head.0;
    while !cur.is_null() {
        // SAFETY: the caller owns the list (lock held, or the batch's free): allocated.
        let node = unsafe { &*cur };
        // Relaxed: see `Shard::retire`.
        cur = node.retired_next.load(Ordering::Relaxed);
        f(node);
    }
}

/// Drops the entries of a retired list that no reader can reach any more and gives its nodes
/// to `pool`.
fn recycle<T>(head: NodeRef<T>, pool: &Pool<T>) {
    let tail = clear_list(head);
    pool.push(head, tail);
}

/// Empties a list of nodes from `head` (linked through `retired_next`) that no reader can reach
/// any more (the batch's grace period is over, or the store is gone); returns its last node.
fn clear_list<T>(head: NodeRef<T>) -> NodeRef<T> {
    let mut cur = head.0.cast_mut();
    loop {
        // SAFETY: the caller owns the list, so nothing else touches its nodes; each lies in a
        // block, which outlives the store.
        let node = unsafe { &mut *cur };
        node.clear();
        // Relaxed: see `Shard::retire`.
        let next = node.retired_next.load(Ordering::Relaxed);
        if next.is_null() {
            return NodeRef(cur);
        }
        cur = next;
    }
}

/// Walks a chain to the first node `wanted` accepts; returns the link that points to it (or
/// the last link) and the node (or null).
#[inline(always)]
fn find<'g, T>(
    bucket: &'g Atomic<Node<T>>,
    guard: &'g Guard,
    mut wanted: impl FnMut(&Node<T>) -> bool,
) -> (&'g Atomic<Node<T>>, Shared<'g, Node<T>>) {
    let mut link = bucket;
    loop {
        // Acquire: pairs with the Release stores in `insert` and `unlink`; makes the fields of
        // the node it reaches (and of the nodes after it) visible.
        let cur = link.load(Ordering::Acquire, guard);
        // SAFETY: loaded under `guard` from a link reachable from the bucket: either linked or
        // retired after this guard was pinned, so not yet freed.
        match unsafe { cur.as_ref() } {
            Some(node) if !wanted(node) => link = &node.next,
            _ => return (link, cur),
        }
    }
}

/// The link that points to `target`, which must be linked in this chain (lock held).
fn link_to<'g, T>(
    bucket: &'g Atomic<Node<T>>,
    target: Shared<'g, Node<T>>,
    guard: &'g Guard,
) -> &'g Atomic<Node<T>> {
    let (link, found) = find(bucket, guard, |n| std::ptr::eq(n, target.as_raw()));
    assert!(
        found == target,
        "a node in the policy is linked in its bucket"
    );
    link
}

/// Drops what the store's nodes hold; their memory goes with the shards' pools, once the
/// last batch in flight is done with it.
impl<T> Drop for L2<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader or writer is left, so nothing needs protection.
        let guard = unsafe { epoch::unprotected() };
        for bucket in self.buckets.links.iter() {
            // Relaxed: exclusive access (`&mut self`).
            let mut cur = bucket.load(Ordering::Relaxed, guard);
            while !cur.is_null() {
                // SAFETY: exclusive access; a linked node lies in a block of a pool the store
                // still holds.
                let node = unsafe { &mut *cur.as_raw().cast_mut() };
                node.clear();
                // Relaxed: exclusive access.
                cur = node.next.load(Ordering::Relaxed, guard);
            }
        }
        for shard in self.shards.iter() {
            if let Some(head) = shard.state.lock().retired.take() {
                clear_list(head);
            }
        }
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn pad_is_the_zero_padded_key_at_every_length() {
        let bytes: Vec<u8> = (1..=INLINE_KEY as u8 + 1).collect();
        for len in 0..=INLINE_KEY {
            let mut padded = [0u8; INLINE_KEY];
            padded[..len].copy_from_slice(&bytes[..len]);
            let words: Vec<u64> = padded
                .chunks(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(pad(&bytes[..len]).map(|w| w.to_vec()), Some(words), "{len}");
        }
        assert_eq!(pad(&bytes), None, "too long");
    }

    #[test]
    fn short_keys_hash_apart_by_length_namespace_and_bytes_and_spread_every_bit_range() {
        let l2 = L2::<()>::new(1 << 20).expect("valid");
        let h = |ns, key: &[u8]| l2.hash(ns, key);
        assert_ne!(h(0, b"a"), h(0, b"a\0"), "zero padding is not the key");
        assert_ne!(h(0, b""), h(0, b"\0"));
        assert_ne!(h(0, b"a"), h(1, b"a"), "namespaces");
        let long = [7u8; INLINE_KEY + 1];
        assert_eq!(h(0, &long), h(0, &long), "a long key hashes by the hasher");
        // Sequential 8-byte keys, as the benches use: each 8-bit range of the hash (shard,
        // bucket, stripe, L1 tag) fills all 256 values about evenly.
        let hashes: Vec<u64> = (0..1u64 << 16).map(|k| h(0, &k.to_le_bytes())).collect();
        for shift in (0..64).step_by(8) {
            let mut counts = [0u32; 256];
            for hash in &hashes {
                counts[(hash >> shift) as usize & 255] += 1;
            }
            let (low, high) = (counts.iter().min(), counts.iter().max());
            assert!(
                low >= Some(&160) && high <= Some(&360),
                "bits {shift}..: {low:?}..{high:?} of 256 expected"
            );
        }
    }

    /// A full store of the smallest entries (a node each) has at most one a bucket, at 4 MiB
    /// as at 1 GiB: the buckets grow with the capacity (at 65,536 a shard, as before, a full
    /// 1 GiB store over 8 shards had 16 a chain), up to a bound whatever the capacity.
    #[test]
    fn a_full_store_has_at_most_one_smallest_entry_a_bucket() {
        for (capacity, shards) in [(4 << 20, 1), (1 << 30, 8)] {
            let l2 = L2::<()>::with_shards(capacity, shards).expect("valid");
            let most = capacity / std::mem::size_of::<Node<()>>();
            let buckets = l2.buckets.links.len();
            assert!(most <= buckets, "{most} entries in {buckets} buckets");
        }
        // Three shards: a bound that is not a power of two rounds down, not up.
        let vast = L2::<()>::with_shards(usize::MAX / 2, 3).expect("valid");
        let buckets = vast.buckets.links.len();
        assert!(
            (MAX_BUCKETS / 2..=MAX_BUCKETS).contains(&buckets),
            "{buckets} buckets"
        );
    }

    /// An entry's one word keeps its deadline and its resurrection apart, a ttl of any size
    /// included.
    #[test]
    fn an_entry_keeps_its_deadline_and_resurrection_apart() {
        let entry = |ttl, resurrected| Entry::<()>::new(None, 1000, ttl, resurrected);
        assert_eq!(entry(0, false).expires_at(), None, "forever");
        assert_eq!(entry(0, true).expires_at(), None);
        assert!(entry(0, true).resurrected());
        assert_eq!(entry(1, true).expires_at(), Some(1001));
        assert!(!entry(1, false).resurrected());
        let far = entry(u64::MAX, false);
        assert!(!far.resurrected(), "a far deadline is not a mark");
        assert!(far.expires_at() > Some(1 << 62) && !far.is_stale(u64::MAX >> 1));
        assert!(entry(5, false).is_stale(1006) && !entry(5, false).is_stale(1005));
    }

    /// The store's values go with it, though a batch it retired is still in flight (a reader
    /// pinned): the batch keeps the nodes' blocks, not what the store holds. And every node
    /// starts a cache line.
    #[test]
    fn a_dropped_store_drops_its_values_while_a_batch_is_in_flight() {
        let l2 = L2::<u64>::with_shards(1 << 20, 1).expect("valid");
        let put = |key: &[u8], value: &PayloadArc<u64>| {
            let entry = Entry::new(Some(value.clone()), 0, 0, false);
            l2.insert(0, key, entry, 1, false, || ()).expect("room");
        };
        let kept = PayloadArc::new(7);
        put(b"kept", &kept);
        let probe = l2.probe(0, b"kept");
        let at = l2.find_with(&probe, |node| node as *const Node<u64> as usize);
        assert_eq!(at.map(|at| at % 64), Some(0), "a node starts a line");
        let retired = PayloadArc::new(8);
        let pinned = l2.domain.pin();
        // A full batch handed over (its grace period waits for `pinned`), then one more
        // retired node on the shard's list.
        for i in 0..=retire_batch() {
            let key = i.to_le_bytes();
            put(&key, &retired);
            l2.remove(0, &key, || ());
        }
        assert_eq!(PayloadArc::strong_count(&retired), 1 + retire_batch() + 1);
        drop(l2);
        assert_eq!(PayloadArc::strong_count(&kept), 1, "a linked value");
        assert_eq!(
            PayloadArc::strong_count(&retired),
            1 + retire_batch(),
            "the batch in flight keeps its values until its grace period ends"
        );
        drop(pinned);
    }
}
