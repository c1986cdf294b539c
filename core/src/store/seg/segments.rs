//! The cache's memory as fixed-size segments, and the life of each one.
//!
//! The segments are one mapping, taken once; a segment goes from free to open (a write lane
//! appends items to it), to sealed (full: in an eviction queue, the small one for new items,
//! the main one for those an eviction kept), to evicting (its live items
//! being unlinked or moved on), to retired (nothing links into it; a grace period runs), and
//! back to free once its grace period ended and no counted hold (an item a host holds past
//! its get's pin; counted in per-thread rows, `sync::Tally`) is left on it. Segments go
//! wherever writes go: no lane or shard owns a share.
//!
//! One word per segment counts its live items (linked in the index) and its writers
//! (allocations not yet released: they may still be linked into it) beside its state, so
//! that the one change that leaves a sealed segment with neither retires it at once, whoever
//! makes it: a segment whose items all died (replaced, deleted) is reclaimed without eviction.
//!
//! Items larger than a segment are large objects: a mapping each, charged at its size, in the
//! small eviction queue, numbered after the segments. The budget, `capacity` bytes, bounds the
//! segments charged (open, sealed, retired and free ones alike: their pages stay resident),
//! the large objects (until their memory is freed) and the index.

use super::index::{Loc, MAX_SEGMENTS};
use super::memory::Words;
use super::reclaim;
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{Mutex, PayloadArc, Striped, Tally};
use crossbeam_utils::CachePadded;
use std::collections::VecDeque;
use std::fmt;

/// The segment states (the top byte of the segment word).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum State {
    Free = 0,
    Open = 1,
    Sealed = 2,
    Evicting = 3,
    Retired = 4,
}

const STATE_SHIFT: u32 = 56;
const WRITER: u64 = 1 << 32;
const WRITER_MASK: u64 = ((1 << 24) - 1) << 32;
const LIVE_MASK: u64 = (1 << 32) - 1;

fn state_of(word: u64) -> State {
    match word >> STATE_SHIFT {
        0 => State::Free,
        1 => State::Open,
        2 => State::Sealed,
        3 => State::Evicting,
        _ => State::Retired,
    }
}

fn with_state(word: u64, state: State) -> u64 {
    (word & !(0xff << STATE_SHIFT)) | (state as u64) << STATE_SHIFT
}

fn writers(word: u64) -> u64 {
    (word & WRITER_MASK) >> 32
}

fn live(word: u64) -> u64 {
    word & LIVE_MASK
}

/// Sealed with no live item and no writer: to retire.
fn dead(word: u64) -> bool {
    state_of(word) == State::Sealed && word & (WRITER_MASK | LIVE_MASK) == 0
}

/// An expiry of "never", for a segment's latest expiry.
pub(crate) const NEVER: u32 = u32::MAX;

/// What the store knows of one segment (or large object).
#[derive(Debug, Default)]
struct Meta {
    /// State, writers and live items.
    word: AtomicU64,
    /// Bytes of its live items.
    live_bytes: AtomicU32,
    /// Bytes reserved in it (final once sealed): where a walk of its items stops.
    used: AtomicU32,
    /// The latest expiry of any item linked into it since it opened ([`NEVER`] for one
    /// without); 0 before the first.
    latest_expiry: AtomicU32,
    /// Bumped each time it opens, so that a queue entry of an earlier life is ignored.
    life: AtomicU32,
}

/// Memory outside the segments: a large object or a detached allocation (one made when no
/// segment had room, stored by copying), with what it is charged.
pub(crate) struct Block {
    pub(crate) words: Words<AtomicU32>,
    /// The large objects' charge, which this block's bytes count in until it drops.
    charge: Option<(PayloadArc<AtomicUsize>, usize)>,
}

impl fmt::Debug for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Block({} bytes)", self.words.len() * 4)
    }
}

impl Block {
    /// A detached block of `bytes` (not charged), or `None` if the OS has no memory.
    pub(crate) fn detached(bytes: usize) -> Option<Self> {
        Some(Self {
            words: Words::new(bytes.div_ceil(4))?,
            charge: None,
        })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Some((charge, bytes)) = &self.charge {
            // Relaxed: a budget figure, reread under the pool's lock.
            charge.fetch_sub(*bytes, Ordering::Relaxed);
        }
    }
}

/// What a look into one eviction queue found.
enum Picked {
    /// A victim, now evicting.
    Seg(u32),
    /// Nothing evictable there.
    None,
    /// A victim changed under the pick (the next try looks again).
    Raced,
}

impl Picked {
    fn seg(self) -> Option<u32> {
        match self {
            Picked::Seg(seg) => Some(seg),
            Picked::None | Picked::Raced => None,
        }
    }
}

/// Why no room could be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Short {
    /// Full, and eviction is off.
    NoMemory,
    /// Nothing can be evicted or reused now (every segment held by writers, or readers
    /// pinned for too long).
    Busy,
}

/// Above one in this many of the sealed segments, the small queue gives the next victim. A
/// twentieth beat a tenth on each of five regimes tried (64 MiB of 100 B-4 KB values over 2x
/// the cache: hit ratio 0.923 -> 0.924; 22 MiB of 100 B values: 0.850 -> 0.854).
const SMALL_SHARE: usize = 20;

/// The free lists and the eviction queues.
#[derive(Debug)]
struct Pool {
    /// The small queue: sealed segments of new items and large objects, with the life they
    /// were sealed in, oldest first.
    queue: VecDeque<(u32, u32)>,
    /// The main queue: sealed segments of items an eviction kept (read since written).
    main: VecDeque<(u32, u32)>,
    /// Retired segments waiting for their grace period and holds.
    pending: Vec<u32>,
    /// Reusable segments (charged).
    free: Vec<u32>,
    /// Segments never used: `fresh..count`.
    fresh: usize,
    /// Segments whose pages went back to the OS (not charged).
    released: Vec<u32>,
    /// Segments charged to the budget: all but the fresh and released ones.
    charged: usize,
    /// Free large-object numbers.
    large_free: Vec<u32>,
}

/// A write lane: the segment it appends to and where.
#[derive(Debug, Default)]
pub(crate) struct Lane {
    seg: Option<u32>,
    cursor: usize,
}

/// The segments (see the module docs).
pub(crate) struct Segments {
    seg_size: usize,
    count: usize,
    capacity: usize,
    memory: Words<AtomicU32>,
    meta: Box<[CachePadded<Meta>]>,
    /// Counted holds per segment (taken by readers that hand items to a host), a row per
    /// thread: a hold writes only its thread's line.
    holds: Tally,
    /// Per segment and large object: the CAS its items' 4-byte CAS words count from (written
    /// when it opens, read by readers that want a CAS: a line apart from the writers' words).
    cas_base: Box<[AtomicU64]>,
    /// Per segment: its grace period since it retired has ended.
    grace: PayloadArc<[AtomicBool]>,
    large: Box<[Mutex<Option<PayloadArc<Block>>>]>,
    large_bytes: PayloadArc<AtomicUsize>,
    pool: Mutex<Pool>,
    lanes: Striped<Mutex<Lane>>,
}

impl fmt::Debug for Segments {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segments")
            .field("seg_size", &self.seg_size)
            .field("count", &self.count)
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Segments {
    /// `count` segments of `seg_size` bytes (a multiple of 4) and up to `max_large` large
    /// objects, within `capacity` bytes of which `reserved` go elsewhere (the index), written
    /// through `lanes` lanes.
    pub(crate) fn new(
        seg_size: usize,
        count: usize,
        max_large: usize,
        capacity: usize,
        lanes: usize,
    ) -> Option<Self> {
        assert!(seg_size % 4 == 0 && count > 0);
        let all = count + max_large;
        if all > MAX_SEGMENTS {
            return None;
        }
        Some(Self {
            seg_size,
            count,
            capacity,
            memory: Words::new(count.checked_mul(seg_size)? / 4)?,
            meta: (0..all)
                .map(|_| CachePadded::new(Meta::default()))
                .collect(),
            holds: Tally::new(count),
            cas_base: (0..all).map(|_| AtomicU64::new(0)).collect(),
            grace: (0..count).map(|_| AtomicBool::new(false)).collect(),
            large: (0..max_large).map(|_| Mutex::new(None)).collect(),
            large_bytes: PayloadArc::new(AtomicUsize::new(0)),
            pool: Mutex::new(Pool {
                queue: VecDeque::with_capacity(all),
                main: VecDeque::with_capacity(count),
                pending: Vec::with_capacity(count),
                free: Vec::with_capacity(count),
                fresh: 0,
                released: Vec::new(),
                charged: 0,
                large_free: (0..max_large as u32).rev().collect(),
            }),
            lanes: Striped::with_stripes(lanes.max(1), || Mutex::new(Lane::default())),
        })
    }

    /// Bytes per segment.
    pub(crate) fn seg_size(&self) -> usize {
        self.seg_size
    }

    /// Fixed segments.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The mapping of all fixed segments.
    pub(crate) fn memory(&self) -> &Words<AtomicU32> {
        &self.memory
    }

    /// Whether `seg` numbers a large object.
    #[inline]
    pub(crate) fn is_large(&self, seg: u32) -> bool {
        seg as usize >= self.count
    }

    /// The large object `seg`, if it still exists.
    pub(crate) fn large(&self, seg: u32) -> Option<PayloadArc<Block>> {
        self.large
            .get(seg as usize - self.count)
            .and_then(|slot| slot.lock().clone())
    }

    /// The byte offset of `loc` in [`Segments::memory`] (a fixed segment's).
    #[inline]
    pub(crate) fn at(&self, loc: Loc) -> usize {
        loc.seg as usize * self.seg_size + loc.off as usize
    }

    /// The base CAS of `seg`'s items.
    #[inline]
    pub(crate) fn cas_base(&self, seg: u32) -> u64 {
        // Relaxed: written when the segment opened, before any of its items was published
        // (their slots' Release stores carry it).
        self.cas_base[seg as usize].load(Ordering::Relaxed)
    }

    fn meta(&self, seg: u32) -> &Meta {
        &self.meta[seg as usize]
    }

    /// `seg`'s live items and bytes.
    pub(crate) fn live(&self, seg: u32) -> (u64, u64) {
        let meta = self.meta(seg);
        // Relaxed (both): statistics.
        (
            live(meta.word.load(Ordering::Relaxed)),
            u64::from(meta.live_bytes.load(Ordering::Relaxed)),
        )
    }

    /// Sums of live items and bytes over every segment and large object.
    pub(crate) fn totals(&self) -> (u64, u64) {
        (0..self.meta.len() as u32)
            .map(|seg| self.live(seg))
            .fold((0, 0), |(a, b), (c, d)| (a + c, b + d))
    }

    /// Bytes reserved in a sealed (or evicting) segment: where a walk of it stops.
    pub(crate) fn used(&self, seg: u32) -> usize {
        // Relaxed: written before the seal's Release change of the word, which `state` read.
        self.meta(seg).used.load(Ordering::Relaxed) as usize
    }

    /// Notes that an item of `seg` may live until `exptime` (0: forever).
    pub(crate) fn note_expiry(&self, seg: u32, exptime: u32) {
        let at = if exptime == 0 { NEVER } else { exptime };
        // Relaxed: a hint for eviction.
        self.meta(seg)
            .latest_expiry
            .fetch_max(at, Ordering::Relaxed);
    }

    /// An item of `bytes` was linked into `seg`.
    pub(crate) fn link(&self, seg: u32, bytes: usize) {
        let meta = self.meta(seg);
        // Relaxed: a statistic.
        meta.live_bytes.fetch_add(bytes as u32, Ordering::Relaxed);
        // Relaxed: the linker holds a writer on the segment, or it is open (retain copies);
        // the retiring change (AcqRel) comes after in the word's order.
        meta.word.fetch_add(1, Ordering::Relaxed);
    }

    /// An item of `bytes` in `seg` was unlinked; retires a sealed segment left with nothing.
    pub(crate) fn unlink(&self, seg: u32, bytes: usize) {
        let meta = self.meta(seg);
        // Relaxed: a statistic.
        meta.live_bytes.fetch_sub(bytes as u32, Ordering::Relaxed);
        // AcqRel: whoever retires the segment sees every change before.
        let now = meta.word.fetch_sub(1, Ordering::AcqRel) - 1;
        if dead(now) {
            self.retire_dead(seg, now);
        }
    }

    /// An allocation in `seg` was let go; retires a sealed segment left with nothing.
    pub(crate) fn drop_writer(&self, seg: u32) {
        // AcqRel: Release: the allocation's header and value were written before (an
        // eviction's walk reads them after its Acquire); Acquire: as in `unlink`.
        let now = self.meta(seg).word.fetch_sub(WRITER, Ordering::AcqRel) - WRITER;
        if dead(now) {
            self.retire_dead(seg, now);
        }
    }

    fn retire_dead(&self, seg: u32, word: u64) {
        if self
            .meta(seg)
            .word
            // AcqRel: one retirer wins; it sees what came before.
            .compare_exchange(
                word,
                with_state(word, State::Retired),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.retired(seg);
        }
    }

    /// Takes a counted hold on `seg` for a reader: one that is pinned, or holds its item's
    /// lock while the item is linked, so that the hold counts before the segment's grace
    /// period ends (the epoch, or the lock and the eviction's unlink, order it before the
    /// reuser's check), as `Tally` needs.
    #[inline]
    pub(crate) fn hold(&self, seg: u32) {
        self.holds.add(seg as usize);
    }

    /// Lets a counted hold on `seg` go (on any thread): the holder's reads of the segment
    /// happen before its reuse.
    #[inline]
    pub(crate) fn unhold(&self, seg: u32) {
        self.holds.sub(seg as usize);
    }

    /// Whether `seg` has a counted hold (for tests).
    #[cfg(test)]
    pub(crate) fn is_held(&self, seg: u32) -> bool {
        !self.holds.is_zero(seg as usize)
    }

    /// A retired segment or large object: a segment waits for its grace period and holds; a
    /// large object goes now (readers keep what they hold alive).
    fn retired(&self, seg: u32) {
        if self.is_large(seg) {
            let taken = self.large[seg as usize - self.count].lock().take();
            let mut pool = self.pool.lock();
            pool.large_free.push(seg - self.count as u32);
            drop(pool);
            drop(taken);
            return;
        }
        // Relaxed: reset before the grace period starts; its end sets it (Release).
        self.grace[seg as usize].store(false, Ordering::Relaxed);
        reclaim::after_grace(&self.grace, seg as usize);
        self.pool.lock().pending.push(seg);
    }

    /// Reserves `size` bytes (at most a segment) in the calling thread's lane: the location
    /// and a writer on its segment, or `None` when the lane needs a fresh segment, which
    /// [`Segments::install`] gives it (the lane's full segment is sealed on the way).
    pub(crate) fn reserve(&self, size: usize) -> Option<Loc> {
        debug_assert!(size <= self.seg_size && size % 4 == 0);
        let mut lane = self.lanes.own().lock();
        if let Some(seg) = lane.seg {
            if lane.cursor + size <= self.seg_size {
                let off = lane.cursor;
                lane.cursor += size;
                // Relaxed: under the lane's lock; the segment is open, so not evictable.
                self.meta(seg).word.fetch_add(WRITER, Ordering::Relaxed);
                return Some(Loc {
                    seg,
                    off: off as u32,
                });
            }
            lane.seg = None;
            let used = lane.cursor;
            drop(lane);
            self.seal(seg, used, false);
        }
        None
    }

    /// Gives the calling thread's lane `seg` (fresh from [`Segments::take`]) unless another
    /// thread of the lane gave it one meanwhile (then `seg`, which nothing reached, goes back
    /// to the free list).
    pub(crate) fn install(&self, seg: u32) {
        self.give(self.lanes.own(), seg);
    }

    /// Whether `lane` has no segment.
    pub(crate) fn lane_empty(&self, lane: &Mutex<Lane>) -> bool {
        lane.lock().seg.is_none()
    }

    /// Gives `lane` the fresh segment `seg`, unless it has one (then `seg` goes back to the
    /// free list).
    pub(crate) fn give(&self, lane: &Mutex<Lane>, seg: u32) {
        let mut lane = lane.lock();
        if lane.seg.is_none() {
            lane.seg = Some(seg);
            lane.cursor = 0;
        } else {
            drop(lane);
            self.pool.lock().free.push(seg);
        }
    }

    /// Reserves `size` bytes in `lane` (the eviction's lane for items it keeps), taking a free
    /// segment for it when full, never evicting (the caller holds index locks).
    pub(crate) fn reserve_in(
        &self,
        lane: &Mutex<Lane>,
        size: usize,
        index_bytes: usize,
        cas_base: u64,
    ) -> Option<Loc> {
        let mut lane = lane.lock();
        if let Some(seg) = lane.seg {
            if lane.cursor + size <= self.seg_size {
                let off = lane.cursor;
                lane.cursor += size;
                return Some(Loc {
                    seg,
                    off: off as u32,
                });
            }
            lane.seg = None;
            self.seal(seg, lane.cursor, true);
        }
        let seg = self.take(index_bytes, false, 0, cas_base).ok()?;
        lane.seg = Some(seg);
        lane.cursor = size;
        Some(Loc { seg, off: 0 })
    }

    /// Seals an open segment after `used` bytes: into an eviction queue (the main one for the
    /// eviction's own lane), or retired at once when nothing in it lives.
    pub(crate) fn seal(&self, seg: u32, used: usize, main: bool) {
        let meta = self.meta(seg);
        // Relaxed: published by the state change below (Release).
        meta.used.store(used as u32, Ordering::Relaxed);
        // Relaxed: the segment's life is the sealer's to read (set when it opened).
        let life = meta.life.load(Ordering::Relaxed);
        let mut pool = self.pool.lock();
        if main {
            &mut pool.main
        } else {
            &mut pool.queue
        }
        .push_back((seg, life));
        drop(pool);
        // AcqRel: Release publishes `used`; Acquire as in `unlink`.
        let now = meta
            .word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(with_state(w, State::Sealed))
            })
            .map(|w| with_state(w, State::Sealed))
            .expect("the closure always updates");
        if dead(now) {
            self.retire_dead(seg, now);
        }
    }

    /// Seals every lane's open segment that holds something (when nothing else can be
    /// evicted); whether one was.
    pub(crate) fn seal_lanes(&self) -> bool {
        let mut sealed = false;
        for lane in self.lanes.iter() {
            let mut lane = lane.lock();
            if let (Some(seg), true) = (lane.seg, lane.cursor > 0) {
                lane.seg = None;
                let used = lane.cursor;
                drop(lane);
                self.seal(seg, used, false);
                sealed = true;
            }
        }
        sealed
    }

    /// Opens a segment taken from the pool: new life, nothing in it, CAS words counting from
    /// `cas_base`.
    fn open(&self, seg: u32, cas_base: u64) {
        let meta = self.meta(seg);
        // Relaxed (all): the segment is the opener's alone until it hands it to a lane (under
        // the lane's lock) or links an item in it (published by the slot's Release store).
        meta.life.fetch_add(1, Ordering::Relaxed);
        meta.live_bytes.store(0, Ordering::Relaxed);
        meta.used.store(0, Ordering::Relaxed);
        meta.latest_expiry.store(0, Ordering::Relaxed);
        self.cas_base[seg as usize].store(cas_base, Ordering::Relaxed);
        meta.word
            .store(with_state(0, State::Open), Ordering::Relaxed);
    }

    fn budget_used(&self, pool: &Pool, index_bytes: usize) -> usize {
        // Relaxed: a budget figure (large objects uncharge themselves as they drop).
        pool.charged * self.seg_size + self.large_bytes.load(Ordering::Relaxed) + index_bytes
    }

    /// Moves retired segments whose grace period ended and that no hold keeps to the free
    /// list, and hands free segments back to the OS while the budget is over.
    fn collect(&self, pool: &mut Pool, index_bytes: usize) {
        let mut i = 0;
        while i < pool.pending.len() {
            let seg = pool.pending[i] as usize;
            // Acquire: pairs with the grace period's Release end: every read of the segment
            // and every hold on it happened before; then the holds (`Tally::is_zero`'s
            // Acquire pairs with their let-go).
            let graced =
                self.grace[seg].load(Ordering::Acquire) || mutant::active(Mutant::ReuseSkipsGrace);
            let reusable =
                graced && (self.holds.is_zero(seg) || mutant::active(Mutant::ReuseSkipsHolds));
            if reusable {
                pool.pending.swap_remove(i);
                pool.free.push(seg as u32);
            } else {
                i += 1;
            }
        }
        while self.budget_used(pool, index_bytes) > self.capacity {
            let Some(seg) = pool.free.pop() else { break };
            let at = seg as usize * self.seg_size;
            self.memory.release(at, at + self.seg_size);
            pool.charged -= 1;
            pool.released.push(seg);
        }
    }

    /// What `take` found to do.
    fn step(&self, pool: &mut Pool, eviction: bool, now: u32) -> Step {
        if !eviction {
            return if pool.pending.is_empty() {
                Step::Full
            } else {
                Step::Wait
            };
        }
        // A retired segment that waits only for its grace period is free soon. One that a
        // counted hold keeps may stay out for long (a host still sending one of its items, to
        // a slow client): evict another rather than wait (its bytes stay charged meanwhile).
        // A hint: `collect` alone decides what is reused.
        if pool
            .pending
            .iter()
            .any(|&seg| self.holds.is_zero(seg as usize))
        {
            return Step::Wait;
        }
        match self.pick_victim(pool, now) {
            Some((seg, small)) => Step::Evict(seg, small),
            None => Step::Stuck,
        }
    }

    /// A fresh segment for a lane (opened with `cas_base`), or a victim to evict first.
    pub(crate) fn take(
        &self,
        index_bytes: usize,
        eviction: bool,
        now: u32,
        cas_base: u64,
    ) -> Result<u32, Step> {
        let mut pool = self.pool.lock();
        self.collect(&mut pool, index_bytes);
        let seg = match pool.free.pop() {
            Some(seg) => Some(seg),
            None if self.budget_used(&pool, index_bytes) + self.seg_size <= self.capacity => {
                let seg = pool.released.pop().or_else(|| {
                    (pool.fresh < self.count).then(|| {
                        pool.fresh += 1;
                        pool.fresh as u32 - 1
                    })
                });
                if seg.is_some() {
                    pool.charged += 1;
                }
                seg
            }
            None => None,
        };
        match seg {
            Some(seg) => {
                drop(pool);
                self.open(seg, cas_base);
                Ok(seg)
            }
            None => Err(self.step(&mut pool, eviction, now)),
        }
    }

    /// Charges `bytes` more outside the segments (the index's growth), or says what to do first.
    pub(crate) fn charge(
        &self,
        bytes: usize,
        index_bytes: usize,
        eviction: bool,
        now: u32,
    ) -> Result<(), Step> {
        let mut pool = self.pool.lock();
        self.collect(&mut pool, index_bytes + bytes);
        if self.budget_used(&pool, index_bytes) + bytes <= self.capacity {
            return Ok(());
        }
        Err(self.step(&mut pool, eviction, now))
    }

    /// A large object of `bytes` (in the queue, one writer: the caller's allocation, CAS words
    /// counting from `cas_base`), or what to do first.
    pub(crate) fn take_large(
        &self,
        bytes: usize,
        index_bytes: usize,
        eviction: bool,
        now: u32,
        cas_base: u64,
    ) -> Result<(u32, PayloadArc<Block>), Step> {
        let mut pool = self.pool.lock();
        self.collect(&mut pool, index_bytes + bytes);
        if self.budget_used(&pool, index_bytes) + bytes > self.capacity {
            return Err(self.step(&mut pool, eviction, now));
        }
        let Some(id) = pool.large_free.pop() else {
            return Err(self.step(&mut pool, eviction, now));
        };
        let Some(words) = Words::new(bytes.div_ceil(4)) else {
            pool.large_free.push(id);
            return Err(Step::Full);
        };
        // Relaxed: a budget figure.
        self.large_bytes.fetch_add(bytes, Ordering::Relaxed);
        let block = PayloadArc::new(Block {
            words,
            charge: Some((PayloadArc::clone(&self.large_bytes), bytes)),
        });
        let seg = self.count as u32 + id;
        self.open(seg, cas_base);
        let meta = self.meta(seg);
        // Relaxed: published with the state change below.
        meta.used.store(bytes as u32, Ordering::Relaxed);
        // Release: see `seal`.
        meta.word
            .store(with_state(WRITER, State::Sealed), Ordering::Release);
        // Relaxed: the object's life is ours to read (set in `open`).
        pool.queue
            .push_back((seg, meta.life.load(Ordering::Relaxed)));
        drop(pool);
        *self.large[id as usize].lock() = Some(PayloadArc::clone(&block));
        Ok((seg, block))
    }

    /// The next victim, now evicting: S3-FIFO's choice at segment granularity. New items fill
    /// the small queue; an eviction keeps what was read since written in the main queue.
    /// While the small queue holds more than a twentieth of the sealed segments its oldest
    /// goes first (an item written once and not read again leaves after a twentieth of the
    /// cache's writes, not after all of them), else the main queue's oldest; the other queue
    /// when the first has nothing evictable; and whether it is the small queue's. `None` if
    /// every sealed segment has writers.
    fn pick_victim(&self, pool: &mut Pool, now: u32) -> Option<(u32, bool)> {
        let small = pool.queue.len();
        let small_first = small * SMALL_SHARE > small + pool.main.len();
        let (first, second) = if small_first {
            (&mut pool.queue, &mut pool.main)
        } else {
            (&mut pool.main, &mut pool.queue)
        };
        match self.pick_in(first, now) {
            Picked::None => self
                .pick_in(second, now)
                .seg()
                .map(|seg| (seg, !small_first)),
            picked => picked.seg().map(|seg| (seg, small_first)),
        }
    }

    /// The oldest evictable sealed segment of `queue` (expired ones first, among the oldest
    /// few), now evicting.
    fn pick_in(&self, queue: &mut VecDeque<(u32, u32)>, now: u32) -> Picked {
        const LOOK: usize = 8;
        let mut chosen = None;
        let mut i = 0;
        while i < queue.len() && i < LOOK {
            let (seg, life) = queue[i];
            let meta = self.meta(seg);
            // Relaxed: the life changes only while the segment is free or opening, under
            // this lock or before it was queued.
            // Acquire: see `state`.
            let word = meta.word.load(Ordering::Acquire);
            if meta.life.load(Ordering::Relaxed) != life || state_of(word) != State::Sealed {
                queue.remove(i);
                continue;
            }
            if writers(word) == 0 {
                let expiry = meta.latest_expiry.load(Ordering::Relaxed);
                let expired = expiry != 0 && expiry != NEVER && expiry <= now;
                if chosen.is_none() || expired {
                    chosen = Some((i, word));
                    if expired {
                        break;
                    }
                }
            }
            i += 1;
        }
        let Some((i, word)) = chosen else {
            return Picked::None;
        };
        let (seg, _) = queue[i];
        // AcqRel: Acquire: the walk reads what the segment's writers wrote; fails if a writer
        // or an unlink changed the word since (then the next try looks again).
        if self
            .meta(seg)
            .word
            .compare_exchange(
                word,
                with_state(word, State::Evicting),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return Picked::Raced;
        }
        queue.remove(i);
        Picked::Seg(seg)
    }

    /// Ends an eviction: nothing links into `seg` any more; it retires.
    pub(crate) fn evicted(&self, seg: u32) {
        let before = self
            .meta(seg)
            .word
            // AcqRel: as in `retire_dead`.
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(with_state(w, State::Retired))
            })
            .expect("the closure always updates");
        debug_assert_eq!(live(before), 0, "an evicted segment still has live items");
        debug_assert_eq!(state_of(before), State::Evicting);
        self.retired(seg);
    }
}

/// What a writer that found no room must do before it tries again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Evict this segment (it is evicting now), of the small queue if `true`.
    Evict(u32, bool),
    /// Wait for retired segments' grace periods.
    Wait,
    /// Nothing is evictable now.
    Stuck,
    /// Full and eviction is off (or the OS refused memory).
    Full,
}
