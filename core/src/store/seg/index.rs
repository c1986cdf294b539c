//! The index: where each key's item lies, as a table of 64-byte buckets of eight 8-byte slots.
//!
//! A slot holds a 16-bit tag from the key's hash, the item's segment and offset, and a
//! two-bit count of reads since the item was written (0, 1, 2 or more: a bit set by a read
//! that finds it clear, so a read writes at most twice per item and segment). A key
//! hashes once; its item may sit in either of two buckets (the low hash bits pick the first,
//! the second is the first with higher bits flipped by a mix of the tag, so that either is
//! found from the other and a slot's tag alone), so a lookup reads one bucket line, maybe a
//! second one, then the item: readers take no lock and write nothing but a clear read bit.
//! Writers lock the key's stripe (a striped array of mutexes keyed by the low bucket bits, which
//! both buckets share) and publish a slot with a Release store after the item's bytes are
//! written; readers load slots with Acquire. An insert takes the key's first bucket until that
//! holds six slots, then the emptier of the two (most hits read one bucket line). When both
//! buckets are full, an insert first moves
//! one of their items to its other bucket (cuckoo hashing, one step; that bucket is in the same
//! stripe, so under the same lock): the table fills to about 95% before an item must give way.
//! A reader that misses while an item moves retries (a move count and a version, read before
//! and after the probe).
//!
//! The table grows by doubling, while readers go on: a bucket `b` of `n` (a power of two) splits
//! into buckets `b` and `b + n` of `2n` (one more hash bit; the second choice splits the same
//! way), and the two tables live in two mappings used in turn. A migrator moves old buckets in order, under their locks, and advances a
//! cursor (Release); a reader or writer reads a bucket below the cursor in the new table and
//! one at or above it in the old one. A doubling starts at two thirds full (or when an insert
//! finds a full pair before the table is at its largest: the store then doubles, waiting for
//! the last doubling's grace period if it must, before it evicts for room), and an insert may
//! still move an item meanwhile, within the table the item lies in: a cache far from full
//! evicts nothing.
//! Old buckets keep their slots after they moved, so a reader
//! that read the cursor before a bucket moved reads a version that was current when it began;
//! segments those stale slots point into are reclaimed only after every such reader unpinned
//! (they were pinned before the segment's grace period began), and the old mapping is cleared
//! for its next use only after a grace period of its own. The index's memory is charged to the
//! store's budget: the tables in use, and the old one until it is cleared.

use super::memory::Words;
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{Mutex, MutexGuard, PayloadArc, Striped};
use std::fmt;
use std::hash::BuildHasher;

/// Slots per bucket.
pub(crate) const SLOTS: usize = 8;
/// Bytes per bucket.
pub(crate) const BUCKET_BYTES: usize = SLOTS * 8;
/// A key's slot goes to its first bucket while that holds fewer slots than this, then to the
/// emptier of its two: most keys are found by a lookup's first probe (one bucket line read),
/// and a full first bucket still leaves its keys room in their second.
const FIRST_UNTIL: usize = 6;

/// Random keys against hash flooding; fixed ones in models, which must replay exactly.
#[cfg(not(mcb_loom))]
type Hasher = foldhash::quality::RandomState;
#[cfg(mcb_loom)]
type Hasher = std::hash::BuildHasherDefault<std::hash::DefaultHasher>;

/// Where an item lies: its segment (or large object) and byte offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Loc {
    /// The segment's number (large objects after the segments).
    pub seg: u32,
    /// The byte offset in the segment, a multiple of 4.
    pub off: u32,
}

const OCCUPIED: u64 = 1 << 63;
/// Read once since written.
const FREQ: u64 = 1 << 62;
/// Read twice or more.
const FREQ2: u64 = 1 << 45;
const TAG_SHIFT: u32 = 46;
const SEG_SHIFT: u32 = 18;
const SEG_BITS: u32 = 27;
/// The most segments and large objects a slot can name.
pub(crate) const MAX_SEGMENTS: usize = 1 << SEG_BITS;
/// The largest offset a slot can name (in 4-byte units: 18 bits).
pub(crate) const MAX_OFFSET: usize = 4 << SEG_SHIFT;

fn slot(tag: u16, loc: Loc) -> u64 {
    debug_assert!(loc.off % 4 == 0 && (loc.off as usize) < MAX_OFFSET);
    OCCUPIED
        | u64::from(tag) << TAG_SHIFT
        | u64::from(loc.seg) << SEG_SHIFT
        | u64::from(loc.off / 4)
}

/// The read bits of a count of `reads`.
fn freq(reads: u8) -> u64 {
    match reads {
        0 => 0,
        1 => FREQ,
        _ => FREQ | FREQ2,
    }
}

fn slot_loc(value: u64) -> Loc {
    Loc {
        seg: ((value >> SEG_SHIFT) & ((1 << SEG_BITS) - 1)) as u32,
        off: ((value & ((1 << SEG_SHIFT) - 1)) * 4) as u32,
    }
}

fn slot_tag(value: u64) -> u16 {
    (value >> TAG_SHIFT) as u16
}

/// The bits of a slot that say whether it is occupied and by which tag.
const TAGGED: u64 = OCCUPIED | (u16::MAX as u64) << TAG_SHIFT;

/// What an occupied slot of `tag` holds under [`TAGGED`].
#[inline]
fn wanted(tag: u16) -> u64 {
    OCCUPIED | u64::from(tag) << TAG_SHIFT
}

/// A writer's store to a slot (under its bucket's lock). Under loom a swap: loom lets a plain
/// store fall between the read and the write of a concurrent read-modify-write (a reader's
/// frequency bit), which the memory model forbids (tokio-rs/loom#254), and the models would
/// then see a slot come back after it was emptied; a swap is ordered with it as every RMW is.
/// (The same effect as the store for every execution the memory model allows.)
#[inline]
fn set_slot(cell: &AtomicU64, value: u64, order: Ordering) {
    #[cfg(not(mcb_loom))]
    cell.store(value, order);
    #[cfg(mcb_loom)]
    cell.swap(value, order);
}

/// A key's hash, computed once per operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hash(pub u64);

impl Hash {
    #[inline]
    fn tag(self) -> u16 {
        (self.0 >> 48) as u16
    }

    /// The key's first bucket in a table of `mask + 1` buckets.
    #[inline]
    fn first(self, mask: usize) -> usize {
        self.0 as usize & mask
    }
}

/// What a key with `tag` flips in its first bucket number to get its second (bits above
/// `lock_bits`, so that both lie in one lock stripe), in a table of `mask + 1` buckets. The
/// lowest of those bits is always flipped: a key whose mix had none of them set would have
/// one bucket only (a quarter of all keys, with two bits above the stripe), and a full
/// bucket evicts.
#[inline]
fn alt_bits(tag: u16, lock_bits: u32, mask: usize) -> usize {
    let mix = (u64::from(tag) | 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
    ((mix as usize | 1) << lock_bits) & mask
}

/// The table state word: which mapping holds the current table, whether a doubling is under
/// way (into the other mapping), and the current table's bucket count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    region: usize,
    growing: bool,
    buckets: usize,
}

impl State {
    fn pack(self) -> u64 {
        self.region as u64 | u64::from(self.growing) << 1 | (self.buckets as u64) << 2
    }

    fn unpack(word: u64) -> Self {
        Self {
            region: (word & 1) as usize,
            growing: word & 2 != 0,
            buckets: (word >> 2) as usize,
        }
    }
}

/// A bucket: which mapping, which bucket of the table there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bucket {
    region: usize,
    number: usize,
}

/// Where a key's buckets lie at one moment (see [`Index::placement`]).
#[derive(Clone, Copy)]
struct Placement {
    state: State,
    /// Buckets of the current table already moved into the next one.
    migrated: usize,
    lock_bits: u32,
}

impl Placement {
    /// `hash`'s first bucket, or its second (`second`), in the table that holds it now: the
    /// next one during a doubling once its old bucket has moved.
    #[inline]
    fn bucket(self, hash: Hash, second: bool) -> Bucket {
        let in_table = |n: usize| {
            let first = hash.first(n - 1);
            if second {
                first ^ alt_bits(hash.tag(), self.lock_bits, n - 1)
            } else {
                first
            }
        };
        let old = in_table(self.state.buckets);
        if self.state.growing && old < self.migrated {
            Bucket {
                region: 1 - self.state.region,
                number: in_table(2 * self.state.buckets),
            }
        } else {
            Bucket {
                region: self.state.region,
                number: old,
            }
        }
    }
}

/// A slot found by a lookup, with the value it held.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Hit {
    region: usize,
    word: usize,
    value: u64,
}

impl Hit {
    /// Whether the item was read since it was written to its segment.
    pub(crate) fn seen(&self) -> bool {
        self.value & FREQ != 0
    }

    /// Reads since the item was written: 0, 1, or 2 for two or more.
    pub(crate) fn reads(&self) -> u8 {
        u8::from(self.value & FREQ != 0) + u8::from(self.value & FREQ2 != 0)
    }
}

/// The index (see the module docs).
pub(crate) struct Index {
    regions: [Words<AtomicU64>; 2],
    state: AtomicU64,
    /// Old buckets below this one have moved to the new table (during a doubling).
    migrated: AtomicUsize,
    /// One migrator at a time (a try-lock: others go on with their write).
    migrator: AtomicBool,
    locks: Box<[Mutex<()>]>,
    /// log2 of the lock count: a stripe is the low bits of a bucket's number.
    lock_bits: u32,
    max_buckets: usize,
    /// Moves of a slot to its other bucket now under way, and how many ever finished: a reader
    /// that misses while either changed retries.
    moving: AtomicU32,
    moved: AtomicU64,
    /// Slots in use, striped by thread (their sum only matters now and then).
    entries: Striped<AtomicU64>,
    /// Set once no reader can still read the old mapping of a finished doubling.
    grace: PayloadArc<[AtomicBool]>,
    /// The mapping that held the old table of a finished doubling and is not cleared yet.
    stale_region: AtomicUsize,
    /// Bytes charged: the tables in use and a stale one.
    bytes: AtomicUsize,
    hasher: Hasher,
}

impl fmt::Debug for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Index")
            .field("state", &self.state())
            .field("bytes", &self.charged())
            .finish_non_exhaustive()
    }
}

/// No stale mapping waits.
const NO_REGION: usize = usize::MAX;

impl Index {
    /// An index of `buckets` buckets that may double up to `max_buckets`, writers striped over
    /// `locks` mutexes (powers of two, `locks` at most `buckets`).
    pub(crate) fn new(buckets: usize, max_buckets: usize, locks: usize) -> Option<Self> {
        let buckets = buckets.max(1);
        let max_buckets = max_buckets.max(buckets);
        let locks = locks.clamp(1, buckets);
        debug_assert!(
            buckets.is_power_of_two() && max_buckets.is_power_of_two() && locks.is_power_of_two()
        );
        Some(Self {
            regions: [
                Words::new(max_buckets * SLOTS)?,
                Words::new(max_buckets * SLOTS)?,
            ],
            state: AtomicU64::new(
                State {
                    region: 0,
                    growing: false,
                    buckets,
                }
                .pack(),
            ),
            migrated: AtomicUsize::new(0),
            migrator: AtomicBool::new(false),
            locks: (0..locks).map(|_| Mutex::new(())).collect(),
            lock_bits: locks.trailing_zeros(),
            max_buckets,
            moving: AtomicU32::new(0),
            moved: AtomicU64::new(0),
            entries: Striped::new(|| AtomicU64::new(0)),
            grace: (0..2).map(|_| AtomicBool::new(true)).collect(),
            stale_region: AtomicUsize::new(NO_REGION),
            bytes: AtomicUsize::new(buckets * BUCKET_BYTES),
            hasher: Hasher::default(),
        })
    }

    /// `key`'s hash.
    #[inline]
    pub(crate) fn hash(&self, key: &[u8]) -> Hash {
        Hash(self.hasher.hash_one(key))
    }

    #[inline]
    fn state(&self) -> State {
        // Acquire: pairs with the Release stores that start and finish a doubling, so that a
        // reader sees the cursor reset and the new table's moved buckets.
        State::unpack(self.state.load(Ordering::Acquire))
    }

    /// Bytes of memory the index holds against the store's budget.
    pub(crate) fn charged(&self) -> usize {
        // Relaxed: a budget figure; the pool rereads it under its lock.
        self.bytes.load(Ordering::Relaxed)
    }

    /// Slots in use.
    pub(crate) fn entries(&self) -> u64 {
        self.entries
            .iter()
            // Relaxed: a count summed now and then.
            .map(|e| e.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }

    /// Slots of the current table.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.state().buckets * SLOTS
    }

    /// The buckets of `hash` as the table stands: the first, and the second unless the same.
    #[inline]
    fn buckets(&self, hash: Hash) -> (Bucket, Option<Bucket>) {
        let at = self.placement();
        let (first, second) = (at.bucket(hash, false), at.bucket(hash, true));
        (first, (second != first).then_some(second))
    }

    /// Where buckets lie now: the table state and, during a doubling, how far it got.
    #[inline]
    fn placement(&self) -> Placement {
        let state = self.state();
        let migrated = if state.growing {
            // Acquire: pairs with the migrator's Release store after it moved a bucket.
            self.migrated.load(Ordering::Acquire)
        } else {
            0
        };
        Placement {
            state,
            migrated,
            lock_bits: self.lock_bits,
        }
    }

    #[inline]
    fn word(&self, bucket: Bucket, slot: usize) -> (&AtomicU64, usize) {
        let word = bucket.number * SLOTS + slot;
        (self.regions[bucket.region].at(word), word)
    }

    /// The slot of the item `accept` takes among `hash`'s buckets, without a lock, and what
    /// `accept` made of it. The caller is pinned (so that what the slot names is not reused
    /// while it reads it).
    #[inline]
    pub(crate) fn find<R>(
        &self,
        hash: Hash,
        mut accept: impl FnMut(Loc) -> Option<R>,
    ) -> Option<(Hit, R)> {
        let tag = hash.tag();
        loop {
            // Acquire: pairs with the Release end of a move (see `Locked::displace`).
            let moved = self.moved.load(Ordering::Acquire);
            let at = self.placement();
            let first = at.bucket(hash, false);
            if let Some(found) = self.probe(first, tag, &mut accept) {
                return Some(found);
            }
            // The second bucket only now: most keys are found in their first.
            let second = at.bucket(hash, true);
            if second != first {
                if let Some(found) = self.probe(second, tag, &mut accept) {
                    return Some(found);
                }
            }
            // Acquire (both): a miss is true only if no move ran meanwhile (a slot that moved
            // from the second bucket to the first after the first was probed).
            if mutant::active(Mutant::FindSkipsMoveCheck)
                || (self.moving.load(Ordering::Acquire) == 0
                    && self.moved.load(Ordering::Acquire) == moved)
            {
                return None;
            }
        }
    }

    /// The slot of `bucket` with `tag` that `accept` takes: the bucket's eight words bounds
    /// checked once, each matched with the occupied bit and tag in one masked compare.
    #[inline(always)]
    fn probe<R>(
        &self,
        bucket: Bucket,
        tag: u16,
        accept: &mut impl FnMut(Loc) -> Option<R>,
    ) -> Option<(Hit, R)> {
        let want = wanted(tag);
        let first = bucket.number * SLOTS;
        let words = self.regions[bucket.region].span(first, first + SLOTS);
        for (slot, cell) in words.iter().enumerate() {
            // Acquire: pairs with the writer's Release store, after the item's bytes.
            let value = cell.load(Ordering::Acquire);
            if value & TAGGED != want {
                continue;
            }
            if let Some(made) = accept(slot_loc(value)) {
                let hit = Hit {
                    region: bucket.region,
                    word: first + slot,
                    value,
                };
                return Some((hit, made));
            }
        }
        None
    }

    /// Counts a read of a found item, up to two (the only write a read makes, at most twice
    /// per item and segment).
    #[inline]
    pub(crate) fn mark_seen(&self, hit: &Hit) {
        if hit.value & FREQ2 == 0 {
            let bit = if hit.value & FREQ == 0 { FREQ } else { FREQ2 };
            // Relaxed (both): a hint for eviction; it fails harmlessly if a writer changed the
            // slot since, and publishes nothing.
            let _ = self.regions[hit.region].at(hit.word).compare_exchange(
                hit.value,
                hit.value | bit,
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// Locks `hash`'s buckets for a write: one lock, of the stripe both lie in.
    pub(crate) fn lock(&self, hash: Hash) -> Locked<'_> {
        let guard = self.locks[hash.first(self.locks.len() - 1)].lock();
        // Under the lock the buckets cannot move (a migrator takes the same lock).
        let (first, second) = self.buckets(hash);
        Locked {
            index: self,
            hash,
            first,
            second,
            _guard: guard,
        }
    }

    /// Whether the table is over two thirds full (past that, a pair of buckets, each of a
    /// key's two choices, begins to fill) and may double.
    pub(crate) fn wants_growth(&self) -> bool {
        self.may_grow() && self.entries() * 3 > (self.state().buckets * SLOTS * 2) as u64
    }

    /// Whether the table may double now.
    pub(crate) fn may_grow(&self) -> bool {
        let state = self.state();
        !state.growing && state.buckets * 2 <= self.max_buckets
    }

    /// Whether a doubling is under way or may start: the table is not at its largest.
    pub(crate) fn may_get_room(&self) -> bool {
        let state = self.state();
        state.growing || state.buckets * 2 <= self.max_buckets
    }

    /// Bytes a doubling would add now.
    pub(crate) fn growth_bytes(&self) -> usize {
        self.state().buckets * 2 * BUCKET_BYTES
    }

    /// Starts a doubling into the other mapping, if none runs, the table may grow, and that
    /// mapping is clear (the caller made room in the budget for [`Index::growth_bytes`]).
    pub(crate) fn start_growth(&self) -> bool {
        if self.migrator.swap(true, Ordering::Acquire) {
            return false;
        }
        let state = self.state();
        let started = !state.growing
            && state.buckets * 2 <= self.max_buckets
            && self.clear_stale_held() != Some(false);
        if started {
            // Relaxed: published by the Release store of the state below.
            self.migrated.store(0, Ordering::Relaxed);
            // Relaxed: a budget figure.
            self.bytes
                .fetch_add(state.buckets * 2 * BUCKET_BYTES, Ordering::Relaxed);
            // Release: pairs with readers' Acquire loads of the state (they then read the
            // reset cursor and the new, empty table).
            self.state.store(
                State {
                    growing: true,
                    ..state
                }
                .pack(),
                Ordering::Release,
            );
        }
        // Release: hands the migrator role on with what it wrote.
        self.migrator.store(false, Ordering::Release);
        started
    }

    /// Whether a doubling is under way.
    pub(crate) fn growing(&self) -> bool {
        self.state().growing
    }

    /// Moves up to `steps` old buckets to the new table, when a doubling runs and no other
    /// thread migrates now; `hash_of` gives the hash of the item at a location (read from the
    /// item: a slot keeps only 16 bits of it).
    pub(crate) fn migrate(&self, steps: usize, hash_of: impl Fn(Loc) -> Hash) {
        if !self.growing() || self.migrator.swap(true, Ordering::Acquire) {
            return;
        }
        self.migrate_held(steps, &hash_of);
        // Release: hands the migrator role on with what it wrote.
        self.migrator.store(false, Ordering::Release);
    }

    /// `migrate` by the holder of the migrator role.
    fn migrate_held(&self, steps: usize, hash_of: &impl Fn(Loc) -> Hash) {
        let state = self.state();
        if !state.growing {
            return;
        }
        let n = state.buckets;
        for _ in 0..steps {
            // Relaxed: only the migrator writes the cursor.
            let b = self.migrated.load(Ordering::Relaxed);
            if b == n {
                break;
            }
            let _lock = self.locks[b & (self.locks.len() - 1)].lock();
            let mut used = [0usize; 2];
            for slot in 0..SLOTS {
                let old = Bucket {
                    region: state.region,
                    number: b,
                };
                // Relaxed: under the bucket's lock, which its writers hold too.
                let value = self.word(old, slot).0.load(Ordering::Relaxed);
                if value & OCCUPIED == 0 {
                    continue;
                }
                let hash = hash_of(slot_loc(value));
                let alt = alt_bits(hash.tag(), self.lock_bits, n - 1);
                let second = hash.first(n - 1) != b;
                debug_assert_eq!(
                    hash.first(n - 1) ^ if second { alt } else { 0 },
                    b,
                    "a slot in a foreign bucket"
                );
                let mut target = hash.first(2 * n - 1);
                if second {
                    target ^= alt_bits(hash.tag(), self.lock_bits, 2 * n - 1);
                }
                let half = usize::from(target != b);
                let new = Bucket {
                    region: 1 - state.region,
                    number: target,
                };
                // Relaxed: published by the cursor's Release store below.
                self.word(new, used[half]).0.store(value, Ordering::Relaxed);
                used[half] += 1;
            }
            // Release: pairs with the Acquire loads of the cursor (readers then read the moved
            // slots).
            self.migrated.store(b + 1, Ordering::Release);
        }
        // Relaxed: only the migrator writes the cursor.
        if self.migrated.load(Ordering::Relaxed) == n {
            self.finish_growth(state);
        }
    }

    fn finish_growth(&self, state: State) {
        let old = state.region;
        // Relaxed: reset before the grace period starts; set by its end (Release).
        self.grace[old].store(false, Ordering::Relaxed);
        // Relaxed: the migrator's own record.
        self.stale_region.store(old, Ordering::Relaxed);
        // Release: pairs with the Acquire loads of the state: whoever sees the new table sees
        // every moved bucket.
        self.state.store(
            State {
                region: 1 - old,
                growing: false,
                buckets: state.buckets * 2,
            }
            .pack(),
            Ordering::Release,
        );
        super::reclaim::after_grace(&self.grace, old);
    }

    /// Clears the old table of a finished doubling once no reader can read it, handing its
    /// memory back to the budget (when no other thread migrates now).
    pub(crate) fn clear_stale(&self) {
        // Acquire: pairs with the Release that hands the migrator role on.
        if !self.migrator.swap(true, Ordering::Acquire) {
            self.clear_stale_held();
            // Release: hands the migrator role on with what it wrote.
            self.migrator.store(false, Ordering::Release);
        }
    }

    /// `clear_stale` by the holder of the migrator role: `Some(false)` while readers may still
    /// read the old table, `None` when there is none.
    fn clear_stale_held(&self) -> Option<bool> {
        // Relaxed: the migrator's own record.
        let region = self.stale_region.load(Ordering::Relaxed);
        if region == NO_REGION {
            return None;
        }
        // Acquire: pairs with the Release store that ends the grace period: every read of the
        // old table happened before.
        if !self.grace[region].load(Ordering::Acquire) {
            return Some(false);
        }
        // Relaxed: the migrator's own record.
        self.stale_region.store(NO_REGION, Ordering::Relaxed);
        let old_buckets = self.state().buckets / 2;
        let words = &self.regions[region];
        let used = old_buckets * SLOTS;
        words.release(0, used * 8);
        for word in 0..used {
            // Relaxed: no reader can reach the table now (grace period); what pages the
            // release did not cover must read as empty for its next use too.
            if words.at(word).load(Ordering::Relaxed) != 0 {
                words.at(word).store(0, Ordering::Relaxed);
            }
        }
        // Relaxed: a budget figure.
        self.bytes
            .fetch_sub(old_buckets * BUCKET_BYTES, Ordering::Relaxed);
        Some(true)
    }

    /// Every location in the table, for `keep` to keep (true) or drop (false), bucket by
    /// bucket under the locks (flush and scrub); returns how many went. A doubling under way
    /// is finished first, and none starts during the walk.
    pub(crate) fn retain(
        &self,
        hash_of: impl Fn(Loc) -> Hash,
        mut keep: impl FnMut(Loc) -> bool,
    ) -> u64 {
        // Acquire: pairs with the Release that hands the migrator role on.
        while self.migrator.swap(true, Ordering::Acquire) {
            crate::sync::thread::yield_now();
        }
        self.migrate_held(usize::MAX, &hash_of);
        let state = self.state();
        let mut dropped = 0;
        for number in 0..state.buckets {
            let bucket = Bucket {
                region: state.region,
                number,
            };
            let _lock = self.locks[number & (self.locks.len() - 1)].lock();
            for slot in 0..SLOTS {
                let cell = self.word(bucket, slot).0;
                // Relaxed: under the bucket's lock.
                let value = cell.load(Ordering::Relaxed);
                if value & OCCUPIED != 0 && !keep(slot_loc(value)) {
                    // Release: as every slot store (see `Locked::remove`).
                    set_slot(cell, 0, Ordering::Release);
                    self.count(-1);
                    dropped += 1;
                }
            }
        }
        // Release: hands the migrator role on.
        self.migrator.store(false, Ordering::Release);
        dropped
    }

    fn count(&self, delta: i64) {
        // Relaxed: a count; see `entries`.
        self.entries
            .own()
            .fetch_add(delta as u64, Ordering::Relaxed);
    }
}

/// `hash`'s buckets, locked for a write.
pub(crate) struct Locked<'i> {
    index: &'i Index,
    hash: Hash,
    first: Bucket,
    second: Option<Bucket>,
    _guard: MutexGuard<'i, ()>,
}

impl fmt::Debug for Locked<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Locked")
            .field("first", &self.first)
            .field("second", &self.second)
            .finish()
    }
}

/// A slot of locked buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    bucket: Bucket,
    slot: usize,
}

/// Where a new key's slot goes ([`Locked::vacancy`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Vacancy {
    /// A free slot, in a bucket that holds `used` slots.
    Free { pos: Pos, used: usize },
    /// Both buckets are full: `victim`'s slot would give way.
    Full { victim: Pos },
}

impl Locked<'_> {
    fn buckets(&self) -> impl Iterator<Item = &Bucket> {
        std::iter::once(&self.first).chain(self.second.as_ref())
    }

    fn cells(&self) -> impl Iterator<Item = (Pos, &AtomicU64)> + '_ {
        self.buckets().flat_map(move |&bucket| {
            (0..SLOTS).map(move |slot| (Pos { bucket, slot }, self.index.word(bucket, slot).0))
        })
    }

    fn cell(&self, pos: Pos) -> &AtomicU64 {
        self.index.word(pos.bucket, pos.slot).0
    }

    /// The slot of the item `is_key` accepts, with its value.
    pub(crate) fn find(&self, mut is_key: impl FnMut(Loc) -> bool) -> Option<(Pos, Hit)> {
        let want = wanted(self.hash.tag());
        for bucket in self.buckets() {
            let first = bucket.number * SLOTS;
            let words = self.index.regions[bucket.region].span(first, first + SLOTS);
            for (slot, cell) in words.iter().enumerate() {
                // Relaxed: under the bucket's lock, which every writer of the slot holds.
                let value = cell.load(Ordering::Relaxed);
                if value & TAGGED == want && is_key(slot_loc(value)) {
                    let pos = Pos {
                        bucket: *bucket,
                        slot,
                    };
                    let hit = Hit {
                        region: bucket.region,
                        word: first + slot,
                        value,
                    };
                    return Some((pos, hit));
                }
            }
        }
        None
    }

    /// The slot that names `loc`, with its value.
    pub(crate) fn find_loc(&self, loc: Loc) -> Option<(Pos, Hit)> {
        self.find(|at| at == loc)
    }

    /// Stores `value` in a slot, publishing the item it names.
    fn publish(&self, pos: Pos, value: u64) {
        // Release: pairs with readers' Acquire loads; the item's bytes were written before.
        let order = mutant::ordering(
            Mutant::SlotPublishedRelaxed,
            Ordering::Release,
            Ordering::Relaxed,
        );
        set_slot(self.cell(pos), value, order);
    }

    /// The locked key's hash.
    pub(crate) fn hash(&self) -> Hash {
        self.hash
    }

    /// Points a slot at `loc` (a new item of the same key), publishing it.
    pub(crate) fn replace(&self, pos: Pos, loc: Loc) {
        self.publish(pos, slot(self.hash.tag(), loc));
    }

    /// Points a slot at `loc` with a count of `reads` (an item moved, not rewritten).
    pub(crate) fn move_to(&self, pos: Pos, loc: Loc, reads: u8) {
        self.publish(pos, slot(self.hash.tag(), loc) | freq(reads));
    }

    /// Empties a slot.
    pub(crate) fn remove(&self, pos: Pos) {
        // Release: as every slot store (an empty slot publishes nothing, but costs nothing
        // more on the machines we run on, and keeps one rule).
        set_slot(self.cell(pos), 0, Ordering::Release);
        self.index.count(-1);
    }

    /// Where a new key's slot goes: in its first bucket while that holds fewer than
    /// [`FIRST_UNTIL`], else in the emptier bucket. When both are full, one of their slots
    /// moves to its other bucket if that has room; else the slot of an item not read since
    /// it was written (else the first) is the one that would give way.
    pub(crate) fn vacancy(&self) -> Vacancy {
        let mut best: Option<(usize, Pos)> = None;
        for bucket in self.buckets() {
            if let (used, Some(pos)) = self.room(*bucket) {
                if best.is_none_or(|(u, _)| used < u) {
                    best = Some((used, pos));
                }
                // The first bucket comes first (see `buckets`).
                if used < FIRST_UNTIL {
                    break;
                }
            }
        }
        if let Some((used, pos)) = best.or_else(|| self.displace().map(|pos| (SLOTS, pos))) {
            return Vacancy::Free { pos, used };
        }
        let victim = self
            .cells()
            // Relaxed: under the lock.
            .find(|(_, cell)| cell.load(Ordering::Relaxed) & FREQ == 0)
            .map_or_else(|| self.cells().next().expect("a bucket").0, |(pos, _)| pos);
        Vacancy::Full { victim }
    }

    /// The first free slot of `bucket` and how many are used.
    fn room(&self, bucket: Bucket) -> (usize, Option<Pos>) {
        let mut free = None;
        let mut used = 0;
        for slot in 0..SLOTS {
            let pos = Pos { bucket, slot };
            // Relaxed: under the lock.
            if self.cell(pos).load(Ordering::Relaxed) & OCCUPIED != 0 {
                used += 1;
            } else if free.is_none() {
                free = Some(pos);
            }
        }
        (used, free)
    }

    /// Inserts a slot for `loc` (a key the buckets do not hold), counted as read `reads` times,
    /// at `vacancy` (of [`Locked::vacancy`], nothing written since). When the buckets were
    /// full, the victim's location is returned: that item is evicted. Also says whether the
    /// table wants to grow.
    pub(crate) fn fill(&self, vacancy: Vacancy, loc: Loc, reads: u8) -> (Option<Loc>, bool) {
        let value = slot(self.hash.tag(), loc) | freq(reads);
        match vacancy {
            Vacancy::Free { pos, used } => {
                self.publish(pos, value);
                self.index.count(1);
                (None, used + 1 >= SLOTS - 2 && self.index.wants_growth())
            }
            Vacancy::Full { victim } => {
                // Relaxed: under the lock.
                let old = self.cell(victim).load(Ordering::Relaxed);
                self.publish(victim, value);
                (Some(slot_loc(old)), self.index.wants_growth())
            }
        }
    }

    /// [`Locked::fill`] at [`Locked::vacancy`].
    #[cfg(any(test, mcb_loom))]
    pub(crate) fn insert(&self, loc: Loc, reads: u8) -> (Option<Loc>, bool) {
        self.fill(self.vacancy(), loc, reads)
    }

    /// Moves a slot of the (full) buckets to its other bucket where that has room, and returns
    /// the slot it freed. During a doubling the other bucket must lie in the same table as the
    /// slot (readers look for it there): unmoved for a slot of the old table, moved for one of
    /// the new. The lock held is the stripe of every bucket involved, so none of them moves
    /// meanwhile.
    fn displace(&self) -> Option<Pos> {
        let index = self.index;
        let state = index.state();
        let n = state.buckets;
        let migrated = if state.growing {
            // Acquire: as in `Index::buckets`.
            index.migrated.load(Ordering::Acquire)
        } else {
            0
        };
        for (from, cell) in self.cells() {
            // Relaxed: under the lock.
            let value = cell.load(Ordering::Relaxed);
            let tag = slot_tag(value);
            let number = if from.bucket.region == state.region {
                let number = from.bucket.number ^ alt_bits(tag, index.lock_bits, n - 1);
                if state.growing && number < migrated {
                    continue;
                }
                number
            } else {
                let number = from.bucket.number ^ alt_bits(tag, index.lock_bits, 2 * n - 1);
                if number % n >= migrated {
                    continue;
                }
                number
            };
            let other = Bucket {
                region: from.bucket.region,
                number,
            };
            if Some(other) == self.second || other == self.first {
                continue;
            }
            let (_, Some(to)) = self.room(other) else {
                continue;
            };
            // Relaxed: the count is read by readers after their probes; the Release stores
            // below carry it (a reader that sees the slot gone sees the count).
            index.moving.fetch_add(1, Ordering::Relaxed);
            // Release (both): as every slot store; the copy lands before the original goes.
            set_slot(self.cell(to), value, Ordering::Release);
            set_slot(cell, 0, Ordering::Release);
            // Release (both): pair with readers' Acquire loads after a miss.
            index.moved.fetch_add(1, Ordering::Release);
            index.moving.fetch_sub(1, Ordering::Release);
            return Some(from);
        }
        None
    }
}

/// The index driven directly by the loom models (loom builds only, hidden from the docs): the
/// store models' index has one bucket, where no slot ever moves to another.
#[cfg(mcb_loom)]
pub mod model {
    use super::{alt_bits, BuildHasher, Hash, Hasher, Index, Loc, Ordering};

    /// How many slots a key's first bucket holds before keys of it may go to their second.
    pub const FIRST_UNTIL: usize = super::FIRST_UNTIL;

    /// An index of numbered keys, with one lock stripe: location `i` (segment `i`) holds key `i`.
    #[derive(Debug)]
    pub struct Keys {
        index: Index,
        keys: Vec<Vec<u8>>,
    }

    impl Keys {
        /// A table of `buckets` buckets (a power of two) for `keys`, that may double once.
        pub fn new(buckets: usize, keys: Vec<Vec<u8>>) -> Self {
            let index = Index::new(buckets, 2 * buckets, 1).expect("a loom index");
            Self { index, keys }
        }

        fn hash(&self, i: usize) -> Hash {
            self.index.hash(&self.keys[i])
        }

        fn loc(i: usize) -> Loc {
            Loc {
                seg: i as u32,
                off: 0,
            }
        }

        /// `key`'s first and second bucket in a table of `buckets` buckets with one lock stripe.
        pub fn choices(key: &[u8], buckets: usize) -> (usize, usize) {
            let hash = Hash(Hasher::default().hash_one(key));
            let first = hash.first(buckets - 1);
            (first, first ^ alt_bits(hash.tag(), 0, buckets - 1))
        }

        /// Stores key `i`, which is not stored; false when another key's slot gave way to it.
        pub fn insert(&self, i: usize) -> bool {
            self.index
                .lock(self.hash(i))
                .insert(Self::loc(i), 0)
                .0
                .is_none()
        }

        /// Whether a lookup without the lock finds key `i`.
        pub fn find(&self, i: usize) -> bool {
            self.index
                .find(self.hash(i), |at| (at == Self::loc(i)).then_some(()))
                .is_some()
        }

        /// Starts a doubling and moves the first `steps` old buckets to the new table.
        pub fn grow(&self, steps: usize) {
            assert!(self.index.start_growth(), "the table may double once");
            self.index.migrate(steps, |at| self.hash(at.seg as usize));
        }

        /// How many moves of a slot to its other bucket finished.
        pub fn moves(&self) -> u64 {
            // Relaxed: read after the model's threads were joined.
            self.index.moved.load(Ordering::Relaxed)
        }
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    fn loc(seg: u32, off: u32) -> Loc {
        Loc { seg, off }
    }

    #[test]
    fn slots_round_trip() {
        for l in [
            loc(0, 0),
            loc(MAX_SEGMENTS as u32 - 1, MAX_OFFSET as u32 - 4),
        ] {
            let v = slot(0xbeef, l);
            assert_eq!((slot_loc(v), slot_tag(v)), (l, 0xbeef));
            assert_ne!(v, 0);
        }
    }

    #[test]
    fn a_doubling_splits_each_bucket_in_two_and_both_choices_share_a_stripe() {
        for x in [0u64, 1, 12345, 0xffff_ffff_ffff_ffff, 0x0123_4567_89ab_cdef] {
            let h = Hash(x);
            for (n, lock_bits) in [(1usize, 0), (4, 1), (64, 2), (1024, 4)] {
                let second = |n: usize| h.first(n - 1) ^ alt_bits(h.tag(), lock_bits, n - 1);
                for b in [h.first(n - 1), second(n)] {
                    assert!(b < n);
                }
                assert_eq!(h.first(2 * n - 1) % n, h.first(n - 1), "{x:#x} n={n}");
                assert_eq!(second(2 * n) % n, second(n), "{x:#x} n={n}");
                let stripe = (1 << lock_bits) - 1;
                assert_eq!(second(n) & stripe, h.first(n - 1) & stripe);
            }
        }
    }

    /// Keys stored by location: location `i` holds key `i`.
    fn keys(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| format!("key{i}").into_bytes()).collect()
    }

    fn put(index: &Index, keys: &[Vec<u8>], i: usize) -> Option<Loc> {
        let l = loc(i as u32, 0);
        let locked = index.lock(index.hash(&keys[i]));
        assert!(locked.find(|at| at == l).is_none());
        locked.insert(l, 0).0
    }

    /// Every one of the first `stored` keys that was not evicted (`gone`) is found.
    fn all_found(
        index: &Index,
        keys: &[Vec<u8>],
        stored: usize,
        gone: &std::collections::HashSet<usize>,
    ) {
        let missing: Vec<usize> = (0..stored)
            .filter(|&i| !gone.contains(&i) && !get(index, keys, i))
            .collect();
        assert!(missing.is_empty(), "after {stored}: {missing:?} lost");
    }

    fn get(index: &Index, keys: &[Vec<u8>], i: usize) -> bool {
        let h = index.hash(&keys[i]);
        index
            .find(h, |at| (at.seg as usize == i).then_some(()))
            .is_some()
    }

    #[test]
    fn inserts_finds_and_removes() {
        // Sixteen keys in 32 slots, two choices each and moves: room for all.
        let index = Index::new(4, 4, 1).unwrap();
        let keys = keys(16);
        for i in 0..16 {
            assert_eq!(put(&index, &keys, i), None);
        }
        assert!((0..16).all(|i| get(&index, &keys, i)));
        assert_eq!(index.entries(), 16);
        let locked = index.lock(index.hash(&keys[3]));
        let (pos, hit) = locked.find(|at| at.seg == 3).unwrap();
        assert!(!hit.seen());
        locked.remove(pos);
        drop(locked);
        assert!(!get(&index, &keys, 3));
        assert_eq!(index.entries(), 15);
    }

    #[test]
    fn a_key_goes_to_its_first_bucket_until_that_holds_six() {
        let index = Index::new(4, 4, 1).unwrap();
        let keys = keys(1000);
        // Keys whose first bucket is 0 and whose second is another.
        let of_0: Vec<usize> = (0..keys.len())
            .filter(|&i| {
                let (first, second) = index.buckets(index.hash(&keys[i]));
                first.number == 0 && second.is_some()
            })
            .take(FIRST_UNTIL + 1)
            .collect();
        assert_eq!(of_0.len(), FIRST_UNTIL + 1);
        let bucket_of = |i: usize| {
            let locked = index.lock(index.hash(&keys[i]));
            let (pos, _) = locked.find(|at| at.seg as usize == i).unwrap();
            pos.bucket.number
        };
        for (n, &i) in of_0.iter().enumerate() {
            assert_eq!(put(&index, &keys, i), None);
            let want_first = n < FIRST_UNTIL;
            assert_eq!(bucket_of(i) == 0, want_first, "key {n} of bucket 0");
        }
    }

    #[test]
    fn a_full_pair_of_buckets_evicts_an_unread_slot() {
        let index = Index::new(1, 1, 1).unwrap();
        let keys = keys(9);
        for i in 0..8 {
            assert_eq!(put(&index, &keys, i), None);
        }
        for i in [0, 2, 3, 4, 5, 6, 7] {
            let (hit, ()) = index
                .find(index.hash(&keys[i]), |at| {
                    (at.seg as usize == i).then_some(())
                })
                .unwrap();
            index.mark_seen(&hit);
        }
        assert_eq!(put(&index, &keys, 8), Some(loc(1, 0)));
        assert!(!get(&index, &keys, 1) && get(&index, &keys, 8));
    }

    #[test]
    fn a_slot_counts_two_reads_and_no_more() {
        let index = Index::new(1, 1, 1).unwrap();
        let keys = keys(1);
        assert_eq!(put(&index, &keys, 0), None);
        let reads = || {
            let (hit, ()) = index.find(index.hash(&keys[0]), |_| Some(())).unwrap();
            index.mark_seen(&hit);
            hit.reads()
        };
        assert_eq!([reads(), reads(), reads(), reads()], [0, 1, 2, 2]);
        let locked = index.lock(index.hash(&keys[0]));
        let (pos, hit) = locked.find(|_| true).unwrap();
        locked.move_to(pos, slot_loc(hit.value), 1);
        drop(locked);
        assert_eq!(reads(), 1, "moved with one read");
    }

    #[test]
    fn doubling_keeps_every_key_findable_at_each_step() {
        let index = Index::new(2, 64, 2).unwrap();
        let keys = keys(400);
        let hash_of = |l: Loc| index.hash(&keys[l.seg as usize]);
        let mut gone = std::collections::HashSet::new();
        for stored in 0..400 {
            if index.growing() {
                index.migrate(1, hash_of);
            } else if index.wants_growth() {
                // The previous doubling's old table waits for its grace period.
                while !index.start_growth() {
                    super::super::reclaim::drive();
                }
            }
            // A full pair of buckets evicts (rare once the table has grown).
            if let Some(victim) = put(&index, &keys, stored) {
                gone.insert(victim.seg as usize);
            }
            all_found(&index, &keys, stored + 1, &gone);
        }
        assert!(gone.len() < 10, "{} evicted of 400", gone.len());
        while index.growing() {
            index.migrate(1, hash_of);
        }
        assert_eq!(index.capacity(), 512);
        let live = index.capacity() / SLOTS * BUCKET_BYTES;
        assert!(
            index.charged() > live,
            "the old table stays charged until cleared"
        );
        while index.charged() > live {
            super::super::reclaim::drive();
            index.clear_stale();
        }
        assert_eq!(index.entries(), 400 - gone.len() as u64);
    }

    /// A doubling half done: inserts into full pairs move slots within the old table (buckets
    /// not moved yet) and within the new one (buckets moved); every key not evicted stays
    /// findable, during the doubling and after it.
    #[test]
    fn slots_displaced_during_a_doubling_stay_findable() {
        let index = Index::new(16, 32, 2).unwrap();
        let keys = keys(300);
        let hash_of = |l: Loc| index.hash(&keys[l.seg as usize]);
        let mut gone = std::collections::HashSet::new();
        let mut stored = 0;
        while !index.wants_growth() {
            assert_eq!(put(&index, &keys, stored), None);
            stored += 1;
        }
        assert!(index.start_growth());
        index.migrate(8, hash_of);
        let moved = index.moved.load(Ordering::Relaxed);
        while stored < 200 {
            if let Some(victim) = put(&index, &keys, stored) {
                gone.insert(victim.seg as usize);
            }
            stored += 1;
            all_found(&index, &keys, stored, &gone);
        }
        assert!(
            index.moved.load(Ordering::Relaxed) > moved,
            "no slot moved during the doubling: the test proves nothing"
        );
        index.migrate(8, hash_of);
        assert!(!index.growing());
        all_found(&index, &keys, stored, &gone);
    }

    /// Writers fill a table that cannot grow to where inserts move slots to their other bucket
    /// (and evict), while readers look up keys without a lock: a reader may miss only a key that
    /// an insert evicted, never one that moved.
    #[test]
    fn readers_never_miss_a_moving_slot() {
        use crate::sync::atomic::AtomicBool;
        let index = Index::new(64, 64, 16).unwrap();
        let keys = keys(600);
        let evicted: Vec<AtomicBool> = (0..600).map(|_| AtomicBool::new(false)).collect();
        for i in 0..300 {
            if let Some(gone) = put(&index, &keys, i) {
                evicted[gone.seg as usize].store(true, Ordering::Relaxed);
            }
        }
        let done = AtomicBool::new(false);
        let misses = crate::sync::Mutex::new(Vec::new());
        crate::sync::thread::scope(|s| {
            for r in 0..2 {
                let (index, keys, done, misses) = (&index, &keys, &done, &misses);
                s.spawn(move || {
                    let mut round = 0;
                    while !done.load(Ordering::Relaxed) || round < 3 {
                        for i in (r..300).step_by(2) {
                            if !get(index, keys, i) {
                                misses.lock().push(i);
                            }
                        }
                        round += 1;
                    }
                });
            }
            for i in 300..600 {
                if let Some(gone) = put(&index, &keys, i) {
                    evicted[gone.seg as usize].store(true, Ordering::Relaxed);
                }
            }
            done.store(true, Ordering::Relaxed);
        });
        let moved = index.moved.load(Ordering::Relaxed);
        assert!(moved > 0, "no slot moved: the test proves nothing");
        let wrong: Vec<usize> = misses
            .lock()
            .iter()
            .copied()
            .filter(|&i| !evicted[i].load(Ordering::Relaxed))
            .collect();
        assert!(
            wrong.is_empty(),
            "keys missed though never evicted: {wrong:?}"
        );
    }
}
