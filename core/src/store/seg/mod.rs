//! The segment store under the memcached commands: memory as fixed-size segments taken from the
//! OS once, an index of tagged slots, eviction and reclamation by whole segments.
//!
//! The folder, bottom up: `memory` (the raw mappings, accessed only atomically: the store's one
//! `unsafe` module), `layout` (an item's header), `reclaim` (grace periods), `index` (the
//! tagged-slot table), `ghost` (keys evicted unread), `segments` (segment lives, lanes, the
//! pool and the budget), `item` (an item where it lies) and, here, the [`Engine`] that joins
//! them: reservation, lookup, publication, eviction.
//!
//! - **Write**: an item is reserved in the writing thread's lane (its open segment), its header,
//!   key and value written there (by the host, for `allocate`), then linked: under its key's
//!   bucket locks it is stamped (CAS, meta word) and its slot stored with Release.
//! - **Read**: pinned, hash once, read the bucket line(s), compare the tag, then the key in the
//!   segment (Acquire on the slot): two dependent misses, no lock, nothing written but a clear
//!   read bit (two per slot: the first two reads count).
//! - **Evict**: S3-FIFO by whole segments. New items fill the small queue's segments, items an
//!   eviction keeps the main queue's; the victim is the small queue's oldest sealed segment with no
//!   writer while that queue holds over a twentieth of the sealed segments, else the main queue's
//!   (one whose items all expired first, among the oldest few). It is walked: each item still
//!   linked is unlinked, or, when it was read twice since it was written, or once and is not much
//!   larger than the segment's mean item, copied into the eviction's own lane (the main queue) and
//!   relinked with one read fewer (a count of two becomes one, so an item read twice outlives two
//!   evictions, once read one): an item written once and not read leaves after a twentieth of the
//!   cache's writes, a used one stays. When the eviction's lane fills midway and no free segment is
//!   at hand, the rest of the segment's read items go too: this bounds what an eviction keeps by
//!   what it frees, and a spare segment for the lane, which kept them all, lowered the hit ratio
//!   (small queue a tenth: 22 MiB of 100 B values 0.850 -> 0.839, 64 MiB of 100 B-4 KB values 0.923
//!   -> 0.916). An item the small queue drops unread leaves a tag in the ghost (`ghost`): stored
//!   again soon, it starts as read. The segment then retires: one grace period for the whole
//!   segment, and its memory stays charged until it is reused.

mod ghost;
mod index;
mod item;
mod layout;
mod memory;
mod reclaim;
mod segments;

#[cfg(mcb_loom)]
pub use index::model as index_model;
pub(crate) use index::{Hash, Hit, Loc, Locked, Pos, BUCKET_BYTES, MAX_OFFSET, MAX_SEGMENTS};
pub(crate) use item::{key_mark, Item, Place, ACCESS_SHIFT, FETCHED, KEPT, KEY_BINARY, STALE, WON};
pub(crate) use layout::{Shape, MAX_HEADER};
pub(crate) use segments::{Block, Short};

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use crate::sync::epoch::{Domain, Pinned};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{Mutex, PayloadArc};
use ghost::Ghost;
use index::{Index, Vacancy, SLOTS};
use reclaim::Patience;
use segments::{Lane, Segments, Step};
use std::fmt;

/// How an engine is laid out.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    /// The budget: segments, large objects and index.
    pub capacity: usize,
    /// Bytes per segment.
    pub seg_size: usize,
    /// Write lanes.
    pub lanes: usize,
    /// Items keep CAS words.
    pub use_cas: bool,
    /// Evict when full.
    pub eviction: bool,
}

/// The item the index is sized for: a 12-byte key and a 100-byte value with CAS (124 bytes),
/// the small end of what caches hold.
const SMALL_ITEM: usize = 124;

/// The largest table (in buckets, a power of two) for a cache of `capacity` bytes: the one
/// that lets the cache hold the most small items, counting both what its slots hold (about
/// 95% of them before pairs fill) and what the segments hold beside it. Rounding a fixed share
/// of the cache down to a power of two instead left some sizes with half the slots their
/// segments could fill (a 22 MiB cache: 131,072 slots for 169,000 items).
fn max_buckets(capacity: usize, seg_size: usize) -> usize {
    let room = capacity.saturating_sub(seg_size) / BUCKET_BYTES;
    let items = |buckets: usize| {
        let slots = buckets * SLOTS * 95 / 100;
        slots.min(capacity.saturating_sub(buckets * BUCKET_BYTES) / SMALL_ITEM)
    };
    let mut best = 1;
    let mut buckets = 2;
    while buckets <= room {
        if items(buckets) > items(best) {
            best = buckets;
        }
        buckets *= 2;
    }
    best
}

/// Why [`Engine::publish`] did not publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unpublished {
    /// The CAS does not fit the item's 4-byte CAS word: rewrite it wide.
    Wide,
    /// The index has no slot for the key and eviction is off.
    IndexFull,
    /// The index has no slot for the key but is doubling or may double: finish or start that
    /// ([`Engine::make_room`]) and retry, rather than evict an item from a table that is not
    /// full.
    Grow,
}

/// What one eviction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Evicted {
    /// Items unlinked for room.
    pub evicted: u64,
    /// Expired items unlinked.
    pub expired: u64,
}

/// The fewest segments of a cache that keeps a ghost.
const GHOST_MIN_SEGMENTS: usize = 16;

/// An item read once is kept by an eviction only up to this multiple (numerator, denominator)
/// of its segment's mean live item: a large item read once takes the room of several small
/// ones that would be read as often. With values of 100 B-4 KB over twice the cache the hit
/// ratio went from 0.921 to 0.930 (at 1.15: 0.932, but 100-200 B values lost 0.3 points;
/// at 1.5: 0.928); with values all one size nothing changes.
const ONCE_READ_SIZE: (u64, u64) = (13, 10);

/// Whether an evicting segment's item of `size` bytes, found by `hit`, is worth its room in
/// the main queue (see [`ONCE_READ_SIZE`]): read twice, or read once and at most
/// `once_limit` bytes.
fn worth_keeping(hit: &Hit, size: usize, once_limit: u64) -> bool {
    match hit.reads() {
        0 => false,
        1 => size as u64 <= once_limit,
        _ => true,
    }
}

/// The segment store (see the module docs).
pub(crate) struct Engine {
    segs: Segments,
    index: Index,
    domain: Domain,
    /// The last CAS handed out.
    seq: AtomicU64,
    /// Where the eviction puts the items it keeps.
    keep_lane: Mutex<Lane>,
    /// Set by the first read that marks an item seen: from then on the eviction's lane is
    /// given a segment ahead of the writers' lanes (a cache nobody reads keeps nothing, and
    /// spends no segment on it).
    keep_armed: AtomicBool,
    use_cas: bool,
    eviction: bool,
    evicted: AtomicU64,
    expired: AtomicU64,
    /// Keys evicted unread (see `ghost`).
    ghost: Ghost,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("segs", &self.segs)
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// An engine with `plan`, or why not.
    pub(crate) fn new(plan: Plan) -> Result<Self, &'static str> {
        let seg_size = plan.seg_size;
        if seg_size % 4 != 0 || !(64..=MAX_OFFSET).contains(&seg_size) {
            return Err("segment size");
        }
        let max_buckets = max_buckets(plan.capacity, seg_size);
        // Start small (a sixteenth of the most), doubling as items come: a cache of large
        // values keeps its room for them.
        let buckets = (max_buckets / 16).max(1);
        // Both buckets of a key lie in one lock stripe, their numbers differing above the
        // stripe's bits: a sixteenth of the first table's buckets leaves a key's second bucket
        // one of fifteen, and a displaced slot as many places to go (with four, a fifth of the
        // pairs filled at half the table's load: evictions in a cache far from full).
        let locks = (buckets / 16).clamp(1, 1024);
        let index = Index::new(buckets, max_buckets, locks).ok_or("index memory")?;
        // A ghost entry for every two slots the index may grow to (an eighth of its most
        // bytes, about a 128th of the cache), kept beside the budget (a stated overhead, as
        // the engine's own structures are): charged, it cost 1.1% of the 100 B items a full
        // cache keeps. None in a cache of few segments.
        let ghost_entries = if plan.capacity / seg_size >= GHOST_MIN_SEGMENTS {
            max_buckets * SLOTS / 2
        } else {
            0
        };
        let count = (plan.capacity.saturating_sub(buckets * BUCKET_BYTES) / seg_size).max(1);
        let max_large = plan.capacity / seg_size + 1;
        let segs = Segments::new(seg_size, count, max_large, plan.capacity, plan.lanes)
            .ok_or("segment memory")?;
        Ok(Self {
            segs,
            index,
            domain: Domain::per_thread(),
            seq: AtomicU64::new(0),
            keep_lane: Mutex::new(Lane::default()),
            keep_armed: AtomicBool::new(false),
            use_cas: plan.use_cas,
            eviction: plan.eviction,
            evicted: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            ghost: Ghost::new(ghost_entries),
        })
    }

    /// Pins the calling thread: what it finds stays readable until the pin drops.
    #[inline]
    pub(crate) fn pin(&self) -> Pinned {
        self.domain.pin()
    }

    /// `key`'s hash.
    #[inline]
    pub(crate) fn hash(&self, key: &[u8]) -> Hash {
        self.index.hash(key)
    }

    /// The item at `loc`, if it is still there (a large object may be gone).
    #[inline]
    pub(crate) fn item_at(&self, loc: Loc) -> Option<Item<'_>> {
        let place = if self.segs.is_large(loc.seg) {
            Place::Block {
                block: self.segs.large(loc.seg)?,
                loc: Some(loc),
            }
        } else {
            Place::Seg {
                memory: self.segs.memory(),
                loc,
                at: self.segs.at(loc),
            }
        };
        Some(Item::read(place, self.use_cas))
    }

    /// The CAS of a published item.
    pub(crate) fn cas_of(&self, item: &Item<'_>) -> u64 {
        item.cas(item.loc().map_or(0, |loc| self.segs.cas_base(loc.seg)))
    }

    /// `key`'s item (published, live or not) and its slot. The caller is pinned.
    #[inline]
    pub(crate) fn find(&self, _pin: &Pinned, hash: Hash, key: &[u8]) -> Option<(Item<'_>, Hit)> {
        let (hit, item) = self.index.find(hash, |loc| self.item_if_key(loc, key))?;
        Some((item, hit))
    }

    /// The item at `loc` if it is `key`'s (an index probe asks it of each slot whose tag
    /// matches; the item is made only for the one that is).
    #[inline]
    fn item_if_key(&self, loc: Loc, key: &[u8]) -> Option<Item<'_>> {
        if self.segs.is_large(loc.seg) {
            return self.large_with_key(loc, key);
        }
        let (memory, at) = (self.segs.memory(), self.segs.at(loc));
        let shape = Item::key_shape(memory, at, self.use_cas, key)?;
        Some(Item::in_segment(memory, loc, at, shape))
    }

    /// The large object at `loc` if its key is `key` (out of line: rare, and a lock).
    #[cold]
    #[inline(never)]
    fn large_with_key(&self, loc: Loc, key: &[u8]) -> Option<Item<'_>> {
        self.item_at(loc).filter(|item| item.key_is(key))
    }

    /// Counts a read of a found item, up to two (for eviction's second and third chances).
    #[inline]
    pub(crate) fn mark_seen(&self, hit: &Hit) {
        if hit.reads() < 2 {
            self.index.mark_seen(hit);
            self.arm_keep();
        }
    }

    /// Notes that an item was marked read: the eviction's lane may keep it (see `keep_armed`).
    fn arm_keep(&self) {
        // Relaxed (both): a hint, written once.
        if !self.keep_armed.load(Ordering::Relaxed) {
            self.keep_armed.store(true, Ordering::Relaxed);
        }
    }

    /// Takes a counted hold on a found item's segment (a large object is held by its block).
    pub(crate) fn hold(&self, item: &Item<'_>) {
        if let (None, Some(loc)) = (item.block(), item.loc()) {
            self.segs.hold(loc.seg);
        }
    }

    /// Lets a counted hold go.
    pub(crate) fn unhold(&self, item: &Item<'_>) {
        if let (None, Some(loc)) = (item.block(), item.loc()) {
            self.segs.unhold(loc.seg);
        }
    }

    /// Lets an allocation go (it may still be linked).
    pub(crate) fn drop_writer(&self, item: &Item<'_>) {
        if let Some(loc) = item.loc() {
            self.segs.drop_writer(loc.seg);
        }
    }

    /// Whether the segment at `loc` has a counted hold (for tests).
    #[cfg(test)]
    pub(crate) fn is_held(&self, loc: Loc) -> bool {
        self.segs.is_held(loc.seg)
    }

    /// Takes a counted hold on the item at `loc`, in a segment, for a reader still pinned: as
    /// [`Engine::hold`] of that item (an item a turn handed out that outlives it; a turn
    /// records no large object).
    pub(crate) fn hold_at(&self, loc: Loc) {
        debug_assert!(
            !self.segs.is_large(loc.seg),
            "a turn's item lies in a segment"
        );
        self.segs.hold(loc.seg);
    }

    /// Gives back a counted hold on the item at `loc` without reading it (a token's release):
    /// as [`Engine::unhold`] of that item (a large object's hold is its block's reference).
    pub(crate) fn unhold_at(&self, loc: Loc) {
        if !self.segs.is_large(loc.seg) {
            self.segs.unhold(loc.seg);
        }
    }

    /// Lets the allocation at `loc` go without reading it (a token's release): as
    /// [`Engine::drop_writer`] of that item.
    pub(crate) fn drop_writer_at(&self, loc: Loc) {
        self.segs.drop_writer(loc.seg);
    }

    /// A new item of `shape` for `key` (header and key written, value not), holding a writer
    /// on its segment or large object; `Short` when no room could be made.
    pub(crate) fn reserve(
        &self,
        shape: Shape,
        key: &[u8],
        exptime: u32,
        flags: u32,
        now: u32,
        patient: bool,
    ) -> Result<Item<'_>, Short> {
        let size = shape.size();
        let mut patience = if patient {
            Patience::new()
        } else {
            Patience::brief()
        };
        let place = if size <= self.segs.seg_size() {
            let loc = loop {
                if let Some(loc) = self.segs.reserve(size) {
                    break loc;
                }
                let seg = self.fresh_segment(now, &mut patience)?;
                self.segs.install(seg);
            };
            Place::Seg {
                memory: self.segs.memory(),
                loc,
                at: self.segs.at(loc),
            }
        } else {
            loop {
                self.index.clear_stale();
                match self.segs.take_large(
                    size,
                    self.index.charged(),
                    self.eviction,
                    now,
                    self.seq_now(),
                ) {
                    Ok((seg, block)) => {
                        break Place::Block {
                            block,
                            loc: Some(Loc { seg, off: 0 }),
                        }
                    }
                    Err(step) => self.follow(step, &mut patience, now)?,
                }
            }
        };
        Ok(Item::write(place, shape, key, exptime, flags))
    }

    /// A detached item (outside the segments, not charged): what `allocate` hands out when no
    /// segment has room, stored later by copying.
    pub(crate) fn detached(
        &self,
        shape: Shape,
        key: &[u8],
        exptime: u32,
        flags: u32,
    ) -> Option<Item<'_>> {
        let block = PayloadArc::new(Block::detached(shape.size())?);
        let place = Place::Block { block, loc: None };
        Some(Item::write(place, shape, key, exptime, flags))
    }

    fn seq_now(&self) -> u64 {
        // Relaxed: a base for CAS words, taken before any CAS counted from it is handed out
        // (the counter only grows).
        self.seq.load(Ordering::Relaxed)
    }

    /// The next CAS (0 when CAS is off). Writers of one key take it under its bucket locks,
    /// so a key's CAS only grows.
    pub(crate) fn next_cas(&self) -> u64 {
        if !self.use_cas {
            return 0;
        }
        // Relaxed: only uniqueness and order per key matter (per key, under its locks).
        self.seq.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// A segment for a lane: free, fresh, or made by evicting. The eviction's lane, once
    /// armed and when empty, gets one first.
    fn fresh_segment(&self, now: u32, patience: &mut Patience) -> Result<u32, Short> {
        loop {
            self.index.clear_stale();
            match self
                .segs
                .take(self.index.charged(), self.eviction, now, self.seq_now())
            {
                Ok(seg) if self.wants_keep_segment() => self.segs.give(&self.keep_lane, seg),
                Ok(seg) => return Ok(seg),
                Err(step) => self.follow(step, patience, now)?,
            }
        }
    }

    fn wants_keep_segment(&self) -> bool {
        // Relaxed: a hint (see `keep_armed`).
        self.keep_armed.load(Ordering::Relaxed)
            && self.eviction
            && self.segs.count() >= 4
            && self.segs.lane_empty(&self.keep_lane)
    }

    /// Helps grace periods end (a writer that let go of what it held, before it retries).
    pub(crate) fn drive(&self) {
        reclaim::drive();
    }

    /// Notes that `item` (linked) may now live until `exptime` (touch).
    pub(crate) fn note_expiry(&self, item: &Item<'_>, exptime: u32) {
        if let Some(loc) = item.loc() {
            self.segs.note_expiry(loc.seg, exptime);
        }
    }

    fn follow(&self, step: Step, patience: &mut Patience, now: u32) -> Result<(), Short> {
        match step {
            Step::Evict(seg, small) => {
                self.evict(seg, small, now);
                Ok(())
            }
            Step::Wait if patience.wait() => Ok(()),
            Step::Stuck if self.segs.seal_lanes() || patience.stuck() => Ok(()),
            Step::Full => Err(Short::NoMemory),
            Step::Wait | Step::Stuck => Err(Short::Busy),
        }
    }

    /// Locks `hash`'s buckets for a write, first moving a few buckets of a doubling under way.
    pub(crate) fn lock(&self, hash: Hash) -> Locked<'_> {
        if self.index.growing() {
            self.index.migrate(8, |loc| self.hash_at(loc));
        }
        self.index.lock(hash)
    }

    /// The hash of the key of the linked item at `loc`.
    fn hash_at(&self, loc: Loc) -> Hash {
        let item = self.item_at(loc).expect("a linked item exists");
        let mut key = [0; 256];
        let n = item.key_into(&mut key);
        self.hash(&key[..n])
    }

    /// `key`'s item under `locked`, with its slot.
    pub(crate) fn current<'l>(
        &'l self,
        locked: &Locked<'l>,
        key: &[u8],
    ) -> Option<(Pos, Hit, Item<'l>)> {
        let mut item = None;
        let (pos, hit) = locked.find(|loc| {
            item = self.item_if_key(loc, key);
            item.is_some()
        })?;
        Some((pos, hit, item?))
    }

    /// Publishes `item` (reserved, unpublished, of the locked key) with `meta` as its meta
    /// word, in place of `old` or in a new slot: stamps its CAS (a new one, or `cas` kept from
    /// the item it replaces), stores the slot, updates the counts. Returns the CAS and whether
    /// the index wants to grow, or why not. A new key whose buckets are full evicts an item
    /// only once the caller has grown the index for it (`grown`), or when it may not grow.
    pub(crate) fn publish(
        &self,
        locked: &Locked<'_>,
        old: Option<(Pos, &Item<'_>)>,
        item: &Item<'_>,
        meta: u32,
        cas: Option<u64>,
        grown: bool,
    ) -> Result<(u64, bool), Unpublished> {
        /// Where the item's slot goes.
        enum Target<'a, 'i> {
            /// The slot of the item it replaces.
            Replace(Pos, &'a Item<'i>),
            /// A new key's.
            New(Vacancy),
        }
        let loc = item.loc().expect("a placed item");
        let target = match old {
            Some((pos, old)) => Target::Replace(pos, old),
            None => match locked.vacancy() {
                Vacancy::Full { .. } if !grown && self.index.may_get_room() => {
                    return Err(Unpublished::Grow)
                }
                Vacancy::Full { .. } if !self.eviction => return Err(Unpublished::IndexFull),
                vacancy => Target::New(vacancy),
            },
        };
        let cas = cas.unwrap_or_else(|| self.next_cas());
        if !item.stamp(cas, self.segs.cas_base(loc.seg), meta) {
            return Err(Unpublished::Wide);
        }
        self.segs.link(loc.seg, item.size());
        self.segs.note_expiry(loc.seg, item.exptime());
        let grow = match target {
            Target::Replace(pos, old) => {
                locked.replace(pos, loc);
                self.dead(old);
                false
            }
            Target::New(vacancy) => {
                // A key evicted unread lately starts as read (see `ghost`).
                // It does not arm the eviction's lane: in a cache nobody reads, keeping what
                // comes back is no use (and false recalls of a fill of distinct keys held a
                // segment ahead: 1.5% of the items a 64 MiB cache kept).
                let seen = self.ghost.recall(locked.hash());
                let (victim, grow) = locked.fill(vacancy, loc, u8::from(seen));
                if let Some(victim) = victim {
                    // The index had no room for the key: an item gives way.
                    if let Some(gone) = self.item_at(victim) {
                        self.dead(&gone);
                    }
                    // Relaxed: a statistic.
                    self.evicted.fetch_add(1, Ordering::Relaxed);
                }
                grow
            }
        };
        Ok((cas, grow))
    }

    /// Unlinks the item at `pos` (of the locked key).
    pub(crate) fn unlink(&self, locked: &Locked<'_>, pos: Pos, item: &Item<'_>) {
        locked.remove(pos);
        self.dead(item);
    }

    /// An item was unlinked: its segment counts it no more.
    fn dead(&self, item: &Item<'_>) {
        if let Some(loc) = item.loc() {
            self.segs.unlink(loc.seg, item.size());
        }
    }

    /// Doubles the index if it asked to and the budget can make room (after a write, with no
    /// lock held).
    pub(crate) fn grow(&self, now: u32) {
        // Brief: a write that finds no room for the index goes on without the doubling (the
        // next one that asks tries again).
        self.double(now, false, &mut Patience::brief());
    }

    /// Doubles the index (or finishes the doubling under way) for a key whose buckets are full
    /// ([`Unpublished::Grow`]), with no lock held: waits for the grace period of the last
    /// doubling's table as a patient reservation waits for a segment's (unless this thread is
    /// pinned, which would hold that grace period back itself).
    pub(crate) fn make_room(&self, now: u32) {
        let mut patience = if crate::sync::epoch::is_pinned() {
            Patience::brief()
        } else {
            Patience::new()
        };
        self.double(now, true, &mut patience);
    }

    /// Starts a doubling the index wants (`urgent`: one it may make, then moves every bucket,
    /// as the full ones may not have moved yet).
    fn double(&self, now: u32, urgent: bool, patience: &mut Patience) {
        loop {
            self.index.clear_stale();
            if self.index.growing() {
                if !urgent {
                    return;
                }
                self.index.migrate(usize::MAX, |loc| self.hash_at(loc));
                // Still growing: another thread migrates.
                if !self.index.growing() || !patience.wait() {
                    return;
                }
                continue;
            }
            let wanted = if urgent {
                self.index.may_grow()
            } else {
                self.index.wants_growth()
            };
            if !wanted {
                return;
            }
            let room = self.segs.charge(
                self.index.growth_bytes(),
                self.index.charged(),
                self.eviction,
                now,
            );
            let went_on = match room {
                Ok(()) if self.index.start_growth() => urgent,
                // The last doubling's old table waits for its grace period (which needs the
                // collector driven: writes do not pin), or another thread migrates.
                Ok(()) => patience.wait(),
                Err(step) => self.follow(step, patience, now).is_ok(),
            };
            if !went_on {
                return;
            }
        }
    }

    /// Evicts `seg`, of the small queue if `small` (see the module docs).
    fn evict(&self, seg: u32, small: bool, now: u32) {
        let used = self.segs.used(seg);
        let mut off = 0;
        let mut done = Evicted::default();
        let mut key = [0u8; 256];
        let (items, bytes) = self.segs.live(seg);
        let once_limit = bytes * ONCE_READ_SIZE.0 / (items.max(1) * ONCE_READ_SIZE.1);
        while off < used {
            let loc = Loc {
                seg,
                off: off as u32,
            };
            let Some(item) = self.item_at(loc) else { break };
            off += item.size();
            if !item.published() {
                continue;
            }
            let n = item.key_into(&mut key);
            let hash = self.hash(&key[..n]);
            let locked = self.lock(hash);
            let found = if mutant::active(Mutant::EvictionUnlinksByKey) {
                self.current(&locked, &key[..n])
            } else {
                locked
                    .find_loc(loc)
                    .map(|(pos, hit)| (pos, hit, item.clone()))
            };
            let Some((pos, hit, item)) = found else {
                continue;
            };
            let exptime = item.exptime();
            if exptime != 0 && exptime <= now {
                self.unlink(&locked, pos, &item);
                done.expired += 1;
            } else if !(worth_keeping(&hit, item.size(), once_limit)
                && self.keep(&locked, pos, &item, hit.reads() - 1))
            {
                if small && !hit.seen() {
                    // Evicted unread from the small queue: if the key comes back soon, it
                    // starts as read.
                    self.ghost.remember(hash);
                }
                self.unlink(&locked, pos, &item);
                done.evicted += 1;
            }
        }
        self.segs.evicted(seg);
        // Relaxed (both): statistics.
        self.evicted.fetch_add(done.evicted, Ordering::Relaxed);
        self.expired.fetch_add(done.expired, Ordering::Relaxed);
    }

    /// Copies a read, small item of an evicting segment into the eviction's lane and relinks
    /// it there, counted as read `reads` times; false when it is too large to keep or no free
    /// segment is at hand.
    fn keep(&self, locked: &Locked<'_>, pos: Pos, item: &Item<'_>, reads: u8) -> bool {
        let seg_size = self.segs.seg_size();
        if item.size() > seg_size / 8 || self.segs.count() < 4 {
            return false;
        }
        let cas = self.cas_of(item);
        // Kept items carry their CAS whole: it is older than their new segment's base.
        let shape = Shape {
            wide: item.shape().cas,
            ..item.shape()
        };
        let Some(loc) = self.segs.reserve_in(
            &self.keep_lane,
            shape.size(),
            self.index.charged(),
            self.seq_now(),
        ) else {
            return false;
        };
        let place = Place::Seg {
            memory: self.segs.memory(),
            loc,
            at: self.segs.at(loc),
        };
        let mut key = [0u8; 256];
        let n = item.key_into(&mut key);
        let copy = Item::write(place, shape, &key[..n], item.exptime(), item.flags());
        copy.copy_value(0, item, 0, shape.vlen());
        // Relaxed: the meta word is the item's own; a racing note of a read may be lost.
        let meta = item.meta().load(Ordering::Relaxed);
        if !copy.stamp(cas, self.segs.cas_base(loc.seg), meta) {
            return false;
        }
        self.segs.link(loc.seg, copy.size());
        self.segs.note_expiry(loc.seg, copy.exptime());
        locked.move_to(pos, loc, reads);
        self.dead(item);
        true
    }

    /// Items unlinked for room and expired items unlinked by evictions, since the start.
    pub(crate) fn eviction_counts(&self) -> Evicted {
        // Relaxed (both): statistics.
        Evicted {
            evicted: self.evicted.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
        }
    }

    /// Live items and their bytes.
    pub(crate) fn totals(&self) -> (u64, u64) {
        self.segs.totals()
    }

    /// Unlinks every item `dead` says is dead, bucket by bucket; returns how many went.
    pub(crate) fn sweep(&self, mut dead: impl FnMut(&Item<'_>) -> bool) -> u64 {
        self.index.retain(
            |loc| self.hash_at(loc),
            |loc| match self.item_at(loc) {
                Some(item) if dead(&item) => {
                    self.dead(&item);
                    false
                }
                Some(_) => true,
                None => false,
            },
        )
    }

    /// Frees what waits for grace periods as far as no other thread is pinned (shutdown).
    pub(crate) fn reclaim(&self) {
        reclaim::drive();
        self.index.clear_stale();
    }
}
