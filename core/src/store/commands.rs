//! The [`Store`] and memcached's classic commands on it: allocate, store, get, remove, touch,
//! flush, scrub and the statistics. The meta commands (and incr/decr, the meta arithmetic
//! without its options) are in `meta`.

use super::clock::Clock;
use super::config::{Config, KEY_MAX, PAGE_SIZE};
use super::error::Error;
use super::item::{Hold, ItemRef, RelTime, ITEM_OVERHEAD};
use super::seg::{
    key_mark, Engine, Hash, Item, Locked, Plan, Pos, Shape, Short, Unpublished, ACCESS_SHIFT,
    BUCKET_BYTES,
};
use super::stats::{Counter, Counters, Stats};
use super::token::{Blocks, TURN_RECORDS};
use super::turn;
use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::epoch::Pinned;
use crate::sync::Mutex;
use std::fmt;

/// How [`Store::store`] stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreOp {
    /// Only if the key is absent.
    Add,
    /// Unconditionally.
    Set,
    /// Only if the key is present.
    Replace,
    /// After the present value (keeping its flags and expiry).
    Append,
    /// Before the present value (keeping its flags and expiry).
    Prepend,
    /// Only if the present item's CAS is the item's.
    Cas,
}

/// What a key holds under its locks, as memcached sees it.
pub(super) enum Found<'l> {
    Absent,
    /// Expired, still linked.
    Dead(Pos, Item<'l>),
    Live(Pos, Item<'l>),
}

impl<'l> Found<'l> {
    /// The slot and item to replace, live or dead.
    fn slot(&self) -> Option<(Pos, &Item<'l>)> {
        match self {
            Found::Absent => None,
            Found::Dead(pos, item) | Found::Live(pos, item) => Some((*pos, item)),
        }
    }

    pub(super) fn live(&self) -> Option<&Item<'l>> {
        match self {
            Found::Live(_, item) => Some(item),
            _ => None,
        }
    }
}

/// How a reservation that finds no room in the segments goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// Waits for room (grace periods included), then takes memory of its own (`allocate`).
    Detach,
    /// Waits for room, then fails.
    Patient,
    /// Fails soon: the caller holds an item.
    Brief,
}

/// A pinned thread: items it reads stay readable until it drops, without a counted hold
/// ([`Store::get_pinned`]). A host pins once per turn of its event loop.
pub struct Pin<'s> {
    _store: &'s Store,
    guard: Pinned,
}

impl fmt::Debug for Pin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pin")
    }
}

/// memcached items in segments (see the module docs of [`crate::store`]).
pub struct Store {
    pub(super) engine: Engine,
    config: Config,
    clock: Box<dyn Clock>,
    /// A delayed flush: from this time on, items stored before it are gone (0: none).
    flush_at: AtomicU32,
    /// Held by the one thread that carries a delayed flush out.
    flushing: Mutex<()>,
    pub(super) counters: Counters,
    /// The engine's eviction counts at the last stats reset.
    evictions_base: AtomicU64,
    expired_base: AtomicU64,
    /// Items in memory of their own that the C boundary holds as tokens.
    pub(super) blocks: Blocks,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("config", &self.config)
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A store with `config`, reading the time from `clock`.
    pub fn new(config: Config, clock: Box<dyn Clock>) -> Result<Self, Error> {
        // A store with a segment size of its own (tests, models) may be tiny.
        let (least_item, least_index) = match config.segment_size {
            0 => (1024, 64 * BUCKET_BYTES),
            _ => (64, BUCKET_BYTES),
        };
        if config.item_size_max < least_item || config.item_size_max > 128 * PAGE_SIZE {
            return Err(Error::InvalidConfig(
                "item_size_max must be between 1 KiB and 128 MiB",
            ));
        }
        let seg_size = match config.segment_size {
            0 => PAGE_SIZE,
            n => n,
        };
        // One segment and a small index at least, and room for the largest item.
        let capacity = config
            .cache_size
            .max(seg_size.max(config.item_size_max) + least_index);
        let lanes = match config.lanes {
            0 => (crate::sync::cpu_count() * 2)
                .next_power_of_two()
                .min(capacity / seg_size / 8)
                .max(1),
            n => n,
        };
        let engine = Engine::new(Plan {
            capacity,
            seg_size,
            lanes,
            use_cas: config.use_cas,
            eviction: config.eviction,
        })
        .map_err(Error::InvalidConfig)?;
        Ok(Self {
            engine,
            config,
            clock,
            flush_at: AtomicU32::new(0),
            flushing: Mutex::new(()),
            counters: Counters::default(),
            evictions_base: AtomicU64::new(0),
            expired_base: AtomicU64::new(0),
            blocks: Blocks::default(),
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The current time on the store's clock.
    #[inline]
    pub fn now(&self) -> RelTime {
        self.clock.now()
    }

    /// Pins the calling thread (see [`Pin`]).
    pub fn pin(&self) -> Pin<'_> {
        Pin {
            _store: self,
            guard: self.engine.pin(),
        }
    }

    pub(super) fn check(&self, klen: usize, nbytes: usize) -> Result<(), Error> {
        if klen == 0 || klen > KEY_MAX {
            return Err(Error::BadKey);
        }
        if klen.saturating_add(nbytes).saturating_add(ITEM_OVERHEAD) > self.config.item_size_max {
            return Err(Error::TooBig);
        }
        Ok(())
    }

    /// A new item of `nbytes` zeroed value bytes for the caller to fill and [`Store::store`]
    /// (memcached's `allocate`). When no segment has room now (full with eviction off, or
    /// every segment held), it lies in memory of its own and is copied in when stored.
    pub fn allocate(
        &self,
        key: &[u8],
        nbytes: usize,
        flags: u32,
        exptime: RelTime,
    ) -> Result<ItemRef<'_>, Error> {
        let item = self.allocate_unfilled(key, nbytes, flags, exptime)?;
        // Segment memory holds what was there before; a detached block starts zeroed.
        if item.item.loc().is_some() {
            item.item.zero_value();
        }
        Ok(item)
    }

    /// [`Store::allocate`] for a caller that writes every value byte before it stores the
    /// item, as memcached's hosts do (a value that did not arrive whole is released, never
    /// stored): the value's bytes are what the segment held until then, as memcached's slabs
    /// hand memory out. Zeroing a 1 MB value word by word cost about 3.3 M instructions, more
    /// than all the rest of the SET's work in the engine.
    pub fn allocate_unfilled(
        &self,
        key: &[u8],
        nbytes: usize,
        flags: u32,
        exptime: RelTime,
    ) -> Result<ItemRef<'_>, Error> {
        self.fresh(key, nbytes, flags, exptime, Mode::Detach)
    }

    /// A new item holding `value`, ready to store.
    pub fn item(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: RelTime,
    ) -> Result<ItemRef<'_>, Error> {
        let item = self.fresh(key, value.len(), flags, exptime, Mode::Detach)?;
        item.item.write_value(0, value);
        Ok(item)
    }

    /// A reserved item (header and key written).
    pub(super) fn fresh(
        &self,
        key: &[u8],
        nbytes: usize,
        flags: u32,
        exptime: RelTime,
        mode: Mode,
    ) -> Result<ItemRef<'_>, Error> {
        self.check(key.len(), nbytes)?;
        let shape = Shape::new(key.len(), nbytes, self.config.use_cas, exptime, flags);
        self.reserve(shape, key, exptime, flags, mode)
    }

    pub(super) fn reserve(
        &self,
        shape: Shape,
        key: &[u8],
        exptime: RelTime,
        flags: u32,
        mode: Mode,
    ) -> Result<ItemRef<'_>, Error> {
        let patient = mode != Mode::Brief;
        let item = match self
            .engine
            .reserve(shape, key, exptime, flags, self.now(), patient)
        {
            Ok(item) => item,
            Err(_) if mode == Mode::Detach => self
                .engine
                .detached(shape, key, exptime, flags)
                .ok_or(Error::NoMemory)?,
            Err(Short::NoMemory | Short::Busy) => return Err(Error::NoMemory),
        };
        Ok(ItemRef {
            engine: &self.engine,
            item,
            hold: Hold::Writer,
        })
    }

    /// A copy of `source`'s item into a fresh reservation (CAS word wide when `wide`).
    fn copy_of(&self, source: &Item<'_>, wide: bool) -> Result<ItemRef<'_>, Error> {
        let shape = Shape {
            wide: wide && self.config.use_cas,
            ..source.shape()
        };
        let mut key = [0; 256];
        let n = source.key_into(&mut key);
        let copy = self.reserve(
            shape,
            &key[..n],
            source.exptime(),
            source.flags(),
            Mode::Patient,
        )?;
        copy.item.copy_value(0, source, 0, shape.vlen());
        Ok(copy)
    }

    /// The meta word of an item stored at `now` with the meta commands' `bits`.
    pub(super) fn meta_word(now: RelTime, bits: u32) -> u32 {
        bits | now << ACCESS_SHIFT
    }

    #[inline]
    pub(super) fn is_live(&self, item: &Item<'_>, now: RelTime) -> bool {
        let exptime = item.exptime();
        exptime == 0 || exptime > now
    }

    /// What `key` holds under `locked`.
    pub(super) fn found<'l>(&'l self, locked: &Locked<'l>, key: &[u8], now: RelTime) -> Found<'l> {
        match self.engine.current(locked, key) {
            None => Found::Absent,
            Some((pos, _, item)) if self.is_live(&item, now) => Found::Live(pos, item),
            Some((pos, _, item)) => Found::Dead(pos, item),
        }
    }

    /// Takes back a dead item's slot (after a failed write found it).
    fn take_back_found(&self, locked: &Locked<'_>, found: &Found<'_>) {
        if let Found::Dead(pos, item) = found {
            self.engine.unlink(locked, *pos, item);
            self.counters.add(Counter::Reclaimed, 1);
        }
    }

    /// Stores `item` by `op` and returns its new CAS. For [`StoreOp::Cas`], and for append and
    /// prepend when it is not 0, the item's CAS (see [`ItemRef::set_cas`]) must match the
    /// present one.
    pub fn store(&self, item: &ItemRef<'_>, op: StoreOp) -> Result<u64, Error> {
        self.store_marked(item, op, false)
    }

    /// [`Store::store`], the key marked as sent in base64 when `key_binary` (memcached's
    /// `ms … b`: its meta commands then answer the key in base64, see
    /// [`ItemRef::key_binary`]). An append or prepend makes a new item, unmarked, as
    /// memcached's does.
    pub fn store_marked(
        &self,
        item: &ItemRef<'_>,
        op: StoreOp,
        key_binary: bool,
    ) -> Result<u64, Error> {
        self.counters.add(Counter::CmdSet, 1);
        let result = self.store_op(item, op, key_mark(key_binary));
        if op == StoreOp::Cas {
            self.count_cas(&result);
        }
        result
    }

    /// Counts a compare-and-swap store's outcome: a hit, a bad value or a miss.
    pub(super) fn count_cas(&self, result: &Result<u64, Error>) {
        let counter = match result {
            Ok(_) => Counter::CasHits,
            Err(Error::Exists) => Counter::CasBadval,
            Err(Error::NotFound) => Counter::CasMisses,
            Err(_) => return,
        };
        self.counters.add(counter, 1);
    }

    /// [`Store::store`] with the meta commands' `bits` for the stored item's meta word.
    pub(super) fn store_op(
        &self,
        item: &ItemRef<'_>,
        op: StoreOp,
        bits: u32,
    ) -> Result<u64, Error> {
        self.check(item.key_len(), item.value_len())?;
        let now = self.now();
        self.settle_flush(now);
        let mut buf = [0; 256];
        let n = item.item.key_into(&mut buf);
        let key = &buf[..n];
        let hash = self.engine.hash(key);
        if matches!(op, StoreOp::Append | StoreOp::Prepend) {
            let expected = item.cas();
            return self
                .rewrite(key, hash, now, false, |current| {
                    let Some(old) = current else {
                        return Err(Error::NotStored);
                    };
                    if expected != 0 && old.cas() != expected {
                        return Err(Error::Exists);
                    }
                    let (head, tail) = if op == StoreOp::Append {
                        (&old.item, &item.item)
                    } else {
                        (&item.item, &old.item)
                    };
                    let (h, t) = (head.shape().vlen(), tail.shape().vlen());
                    let new = self.fresh(key, h + t, old.flags(), old.exptime(), Mode::Brief)?;
                    new.item.copy_value(0, head, 0, h);
                    new.item.copy_value(h, tail, 0, t);
                    Ok(Made {
                        item: new,
                        meta: Self::meta_word(now, 0),
                        linked: true,
                    })
                })
                .map(|(cas, _)| cas);
        }
        self.store_whole(item, key, hash, now, |found| {
            match (op, found.live()) {
                (StoreOp::Add, Some(_)) => Err(Error::NotStored),
                (StoreOp::Replace, None) => Err(Error::NotStored),
                (StoreOp::Cas, None) => Err(Error::NotFound),
                // The item's CAS read only here: a SET needs none (about 50 instructions).
                (StoreOp::Cas, Some(old)) if self.engine.cas_of(old) != item.cas() => {
                    Err(Error::Exists)
                }
                _ => Ok(()),
            }
            .map(|()| Self::meta_word(now, bits))
        })
    }

    /// Links `item` for `key` if `decide` accepts what the key holds (returning the stored
    /// item's meta word), in place when it is an allocation not stored yet, else by a copy.
    pub(super) fn store_whole(
        &self,
        item: &ItemRef<'_>,
        key: &[u8],
        hash: Hash,
        now: RelTime,
        mut decide: impl FnMut(&Found<'_>) -> Result<u32, Error>,
    ) -> Result<u64, Error> {
        self.settle_flush(now);
        let in_place =
            item.hold == Hold::Writer && item.item.loc().is_some() && !item.item.published();
        let mut copy = if in_place {
            None
        } else {
            Some(self.copy_of(&item.item, false)?)
        };
        let mut grown = false;
        loop {
            let target = copy.as_ref().map_or(&item.item, |c| &c.item);
            let locked = self.engine.lock(hash);
            let found = self.found(&locked, key, now);
            let meta = match decide(&found) {
                Ok(meta) => meta,
                Err(e) => {
                    self.take_back_found(&locked, &found);
                    return Err(e);
                }
            };
            match self
                .engine
                .publish(&locked, found.slot(), target, meta, None, grown)
            {
                Ok((cas, grow)) => {
                    drop(locked);
                    self.stored(&found, true, grow, now);
                    return Ok(cas);
                }
                Err(Unpublished::Wide) => {
                    drop(locked);
                    copy = Some(self.copy_of(&item.item, true)?);
                }
                Err(Unpublished::Grow) => {
                    drop(locked);
                    self.engine.make_room(now);
                    grown = true;
                }
                Err(Unpublished::IndexFull) => return Err(Error::NoMemory),
            }
        }
    }

    /// After a store: counts it (a `linked` item: see [`Made::linked`]; a dead item it
    /// replaced), doubles the index if asked.
    fn stored(&self, found: &Found<'_>, linked: bool, grow: bool, now: RelTime) {
        if matches!(found, Found::Dead(..)) {
            self.counters.add(Counter::Reclaimed, 1);
        }
        if linked {
            self.counters.add(Counter::TotalItems, 1);
        }
        if grow {
            self.engine.grow(now);
        }
    }

    /// Replaces `key`'s item by one `make` builds from the live one (held while `make` reads
    /// it; `None` if absent or expired), with the meta word `make` returns, once the key still
    /// holds the item `make` saw; retries when another write came between. The new item gets a
    /// new CAS, or keeps the old one's with `keep_cas` (touch: `make` then reserves it wide).
    /// Returns the new item's CAS and the item. `make` reserves with [`Mode::Brief`]: it holds
    /// an item, which may keep the segment a patient reservation would wait for.
    pub(super) fn rewrite<'s>(
        &'s self,
        key: &[u8],
        hash: Hash,
        now: RelTime,
        keep_cas: bool,
        mut make: impl FnMut(Option<&ItemRef<'s>>) -> Result<Made<'s>, Error>,
    ) -> Result<(u64, ItemRef<'s>), Error> {
        self.settle_flush(now);
        let (mut short, mut grown) = (0, false);
        loop {
            let current = self.get_held(key, hash, now);
            let Made {
                item: new,
                meta,
                linked,
            } = match make(current.as_ref()) {
                Ok(made) => made,
                Err(Error::NoMemory) if short < 3 => {
                    // Let go of what we hold, so that its segment can be reused, and retry.
                    drop(current);
                    short += 1;
                    self.engine.drive();
                    continue;
                }
                Err(e) => {
                    drop(current);
                    self.take_back(key, hash, now);
                    return Err(e);
                }
            };
            let locked = self.engine.lock(hash);
            let found = self.found(&locked, key, now);
            let same = match (&current, found.live()) {
                (Some(seen), Some(live)) => seen.item.loc() == live.loc(),
                (None, None) => true,
                _ => false,
            };
            if !same {
                continue;
            }
            let cas = keep_cas
                .then(|| current.as_ref().map(ItemRef::cas))
                .flatten();
            match self
                .engine
                .publish(&locked, found.slot(), &new.item, meta, cas, grown)
            {
                Ok((cas, grow)) => {
                    drop(locked);
                    self.stored(&found, linked, grow, now);
                    return Ok((cas, new));
                }
                // Its segment is too old for a CAS word: the next try reserves anew.
                Err(Unpublished::Wide) => continue,
                Err(Unpublished::Grow) => {
                    drop(locked);
                    self.engine.make_room(now);
                    grown = true;
                }
                Err(Unpublished::IndexFull) => return Err(Error::NoMemory),
            }
        }
    }

    /// `key`'s live item with a counted hold, or `None`.
    fn get_held(&self, key: &[u8], hash: Hash, now: RelTime) -> Option<ItemRef<'_>> {
        let pin = self.engine.pin();
        let (item, _) = self.engine.find(&pin, hash, key)?;
        if !self.is_live(&item, now) {
            return None;
        }
        self.engine.hold(&item);
        Some(ItemRef {
            engine: &self.engine,
            item,
            hold: Hold::Counted,
        })
    }

    /// Takes back `key`'s item if it is dead.
    fn take_back(&self, key: &[u8], hash: Hash, now: RelTime) {
        let locked = self.engine.lock(hash);
        let found = self.found(&locked, key, now);
        self.take_back_found(&locked, &found);
    }

    /// The live item of `key` (memcached's `get`), with a counted hold on its segment. A get
    /// that finds a live item (or none) takes no lock and allocates nothing; one that finds an
    /// expired one takes its key's locks once, to take it back.
    pub fn get(&self, key: &[u8]) -> Option<ItemRef<'_>> {
        self.get_at(key, self.now(), false)
    }

    /// [`Store::get`] as a client's get (memcached's engine `get`): a hit is noted as a fetch
    /// ([`ItemRef::note_access`]) at the time the lookup used, with one read of the clock.
    pub fn fetch(&self, key: &[u8]) -> Option<ItemRef<'_>> {
        self.get_at(key, self.now(), true)
    }

    /// [`Store::fetch`] as a token ([`Store::into_token`]), for the C boundary: on a thread
    /// whose host ends its turns ([`end_turn`]), an item in the segments is
    /// pinned by the turn and counts no hold until the turn ends (see `store::turn`).
    pub fn fetch_token(&self, key: &[u8]) -> Option<u64> {
        let in_turn = turn::pinned(self.address(), &self.engine, TURN_RECORDS, |pin, record| {
            let now = self.now();
            let item = self.find_live(pin, key, now)?;
            let mut item = ItemRef {
                engine: &self.engine,
                item,
                hold: Hold::Pinned,
            };
            item.note_access(now);
            match (item.item.loc(), record) {
                // In a segment, and the turn has room to record it.
                (Some(loc), Some(record)) if item.item.block().is_none() => {
                    Some((self.blocks.turn_token_of(item, record), Some(loc)))
                }
                // Memory of its own, kept by its token, or one item too many: as a get's.
                _ => {
                    self.engine.hold(&item.item);
                    item.hold = Hold::Counted;
                    Some((self.into_token(item), None))
                }
            }
        });
        match in_turn {
            Some(found) => found,
            None => self.fetch(key).map(|item| self.into_token(item)),
        }
    }

    /// The address a host's turn records this store by: what [`end_turn`]'s `with_store` is
    /// given (exposed, so that the C boundary may turn it back into the store it holds).
    fn address(&self) -> usize {
        std::ptr::from_ref(self).expose_provenance()
    }

    /// [`Store::get`] at `now`, noting the hit as a fetch if `noted`.
    pub(super) fn get_at(&self, key: &[u8], now: RelTime, noted: bool) -> Option<ItemRef<'_>> {
        let pin = self.engine.pin();
        let found = self.find_live(&pin, key, now);
        found.map(|item| {
            self.engine.hold(&item);
            let item = ItemRef {
                engine: &self.engine,
                item,
                hold: Hold::Counted,
            };
            if noted {
                item.note_access(now);
            }
            item
        })
    }

    /// The live item of `key`, readable while `pin` lives: nothing counted, nothing written
    /// but a clear frequency bit (and, as memcached, a minute-old access time).
    #[inline]
    pub fn get_pinned<'p>(&'p self, pin: &'p Pin<'_>, key: &[u8]) -> Option<ItemRef<'p>> {
        self.find_live(&pin.guard, key, self.now())
            .map(|item| ItemRef {
                engine: &self.engine,
                item,
                hold: Hold::Pinned,
            })
    }

    #[inline]
    fn find_live(&self, pin: &Pinned, key: &[u8], now: RelTime) -> Option<Item<'_>> {
        self.settle_flush(now);
        let hash = self.engine.hash(key);
        match self.engine.find(pin, hash, key) {
            Some((item, hit)) if self.is_live(&item, now) => {
                self.engine.mark_seen(&hit);
                self.counters.add(Counter::GetHits, 1);
                Some(item)
            }
            Some(_) => {
                self.take_back(key, hash, now);
                self.counters.add(Counter::GetMisses, 1);
                None
            }
            None => {
                self.counters.add(Counter::GetMisses, 1);
                None
            }
        }
    }

    /// Removes `key` if its CAS is `cas` (0: any).
    pub fn remove(&self, key: &[u8], cas: u64) -> Result<(), Error> {
        let now = self.now();
        self.settle_flush(now);
        let hash = self.engine.hash(key);
        let locked = self.engine.lock(hash);
        let found = self.found(&locked, key, now);
        let result = match &found {
            Found::Live(pos, item) if cas == 0 || self.engine.cas_of(item) == cas => {
                self.engine.unlink(&locked, *pos, item);
                Ok(())
            }
            Found::Live(..) => Err(Error::Exists),
            Found::Dead(..) | Found::Absent => Err(Error::NotFound),
        };
        self.take_back_found(&locked, &found);
        drop(locked);
        self.counters.add(
            if result.is_ok() {
                Counter::DeleteHits
            } else {
                Counter::DeleteMisses
            },
            1,
        );
        result
    }

    /// Sets the expiry of `key`'s live item and returns it (memcached's touch; get-and-touch
    /// reads the returned item). An item stored without an expiry is rewritten to get one.
    pub fn touch(&self, key: &[u8], exptime: RelTime) -> Option<ItemRef<'_>> {
        let item = self.touch_item(key, exptime).map(|(item, _)| item);
        self.counters.add(
            if item.is_some() {
                Counter::TouchHits
            } else {
                Counter::TouchMisses
            },
            1,
        );
        item
    }

    /// [`Store::touch`] without its count (a meta get counts its own), and the expiry the item
    /// had before.
    pub(super) fn touch_item(
        &self,
        key: &[u8],
        exptime: RelTime,
    ) -> Option<(ItemRef<'_>, RelTime)> {
        let now = self.now();
        self.settle_flush(now);
        let hash = self.engine.hash(key);
        {
            let locked = self.engine.lock(hash);
            let found = self.found(&locked, key, now);
            let Found::Live(_, item) = &found else {
                self.take_back_found(&locked, &found);
                return None;
            };
            let before = item.exptime();
            if item.set_exptime(exptime) {
                self.engine.note_expiry(item, exptime);
                // Linked under the locks, so its segment cannot be reused before the hold counts.
                self.engine.hold(item);
                let item = ItemRef {
                    engine: &self.engine,
                    item: item.clone(),
                    hold: Hold::Counted,
                };
                return Some((item, before));
            }
        }
        // No expiry word: a copy with one.
        let mut before = 0;
        self.rewrite(key, hash, now, true, |current| {
            let old = current.ok_or(Error::NotFound)?;
            before = old.exptime();
            // The CAS stays (as memcached's touch keeps it): whole, since it is older than the
            // new segment's base.
            let shape = Shape {
                wide: self.config.use_cas,
                ..Shape::new(
                    old.key_len(),
                    old.value_len(),
                    self.config.use_cas,
                    exptime,
                    old.flags(),
                )
            };
            let new = self.reserve(shape, key, exptime, old.flags(), Mode::Brief)?;
            new.item.copy_value(0, &old.item, 0, shape.vlen());
            Ok(Made {
                item: new,
                // Relaxed: the meta state carries over (a racing note of a read may be lost).
                meta: old.item.meta().load(Ordering::Relaxed),
                // memcached's touch changes the item in place.
                linked: false,
            })
        })
        .ok()
        .map(|(_, item)| (item, before))
    }

    /// Hides every item stored before now (`when` 0 or not in the future) or, from time
    /// `when` on, every item stored before `when`. A flush replaces a pending delayed one.
    pub fn flush(&self, when: RelTime) {
        self.counters.add(Counter::CmdFlush, 1);
        let now = self.now();
        // A delayed flush whose time came has taken effect: a new one does not undo it.
        self.settle_flush(now);
        if when != 0 && when > now {
            // Release: pairs with `settle_flush`'s Acquire load.
            self.flush_at.store(when, Ordering::Release);
            return;
        }
        let _one = self.flushing.lock();
        // Relaxed: under the flush lock; a pending delayed flush is replaced.
        self.flush_at.store(0, Ordering::Relaxed);
        self.engine.sweep(|_| true);
    }

    /// Carries out a delayed flush whose time came, before any operation at or after it
    /// reads or writes.
    #[inline]
    fn settle_flush(&self, now: RelTime) {
        // Acquire: pairs with the Release store that ends a flush: whoever reads 0 after it
        // sees its sweep.
        let at = self.flush_at.load(Ordering::Acquire);
        if at == 0 || at > now {
            return;
        }
        let _one = self.flushing.lock();
        // Relaxed: under the flush lock.
        if self.flush_at.load(Ordering::Relaxed) == at {
            self.engine.sweep(|_| true);
            // Release: see above.
            self.flush_at.store(0, Ordering::Release);
        }
    }

    /// Takes back every expired item now (memcached's SCRUB), instead of when next touched;
    /// returns how many went. Readers holding one keep it until they let go.
    pub fn scrub(&self) -> u64 {
        let now = self.now();
        self.settle_flush(now);
        let removed = self.engine.sweep(|item| !self.is_live(item, now));
        self.counters.add(Counter::Reclaimed, removed);
        removed
    }

    /// The statistics now.
    pub fn stats(&self) -> Stats {
        let c = |counter| self.counters.get(counter);
        let (items, bytes) = self.engine.totals();
        let counts = self.engine.eviction_counts();
        // Relaxed (both): a statistic's baseline; see `reset_stats`.
        let evictions_base = self.evictions_base.load(Ordering::Relaxed);
        let expired_base = self.expired_base.load(Ordering::Relaxed);
        Stats {
            curr_items: items,
            total_items: c(Counter::TotalItems),
            bytes,
            engine_maxbytes: self.config.cache_size as u64,
            evictions: counts.evicted.saturating_sub(evictions_base),
            reclaimed: c(Counter::Reclaimed) + counts.expired.saturating_sub(expired_base),
            // Each get counts once, as a hit or a miss.
            cmd_get: c(Counter::GetHits) + c(Counter::GetMisses),
            get_hits: c(Counter::GetHits),
            get_misses: c(Counter::GetMisses),
            cmd_set: c(Counter::CmdSet),
            delete_hits: c(Counter::DeleteHits),
            delete_misses: c(Counter::DeleteMisses),
            incr_hits: c(Counter::IncrHits),
            incr_misses: c(Counter::IncrMisses),
            decr_hits: c(Counter::DecrHits),
            decr_misses: c(Counter::DecrMisses),
            cas_hits: c(Counter::CasHits),
            cas_misses: c(Counter::CasMisses),
            cas_badval: c(Counter::CasBadval),
            touch_hits: c(Counter::TouchHits),
            touch_misses: c(Counter::TouchMisses),
            cmd_flush: c(Counter::CmdFlush),
        }
    }

    /// Zeroes the counters (memcached's `reset_stats`); `curr_items`, `bytes` and
    /// `engine_maxbytes` describe the contents and stay.
    pub fn reset_stats(&self) {
        self.counters.reset();
        let counts = self.engine.eviction_counts();
        // Relaxed (both): a statistic's baseline; nothing is published with it.
        self.evictions_base.store(counts.evicted, Ordering::Relaxed);
        self.expired_base.store(counts.expired, Ordering::Relaxed);
    }

    /// Runs what waits for grace periods as far as other threads allow: call at shutdown,
    /// when no other thread uses the store, so that a leak checker finds nothing left.
    pub fn reclaim(&self) {
        self.engine.reclaim();
    }
}

/// Items as tokens for the C boundary (the encoding is `token.rs`'s).
impl Store {
    /// The token of `item`, whose hold now goes with the token.
    pub fn into_token(&self, item: ItemRef<'_>) -> u64 {
        self.blocks.token_of(item)
    }

    /// The item of `token` (from [`Store::into_token`], not released), for one call; its hold
    /// stays with the token.
    pub fn with_token<R>(&self, token: u64, f: impl FnOnce(&ItemRef<'_>) -> R) -> R {
        let mut item = self.token_item(token, false);
        let result = f(&item);
        item.hold = Hold::Pinned;
        result
    }

    /// Gives back `token`'s hold (memcached's `release`).
    pub fn release_token(&self, token: u64) {
        self.blocks
            .release(self.address(), &self.engine, self.config.use_cas, token);
    }

    fn token_item(&self, token: u64, take: bool) -> ItemRef<'_> {
        self.blocks
            .token_item(&self.engine, self.config.use_cas, token, take)
    }
}

/// Ends the calling thread's turn (and from now on, serves its gets by turns, see
/// [`Store::fetch_token`]): every item handed out since the turn began and not given back gets
/// a counted hold, and the thread unpins. Call it before the thread waits for its next events.
///
/// `with_store(address, count)` calls `count` with the store at `address` (a store that
/// handed this thread an item in the turn, not yet given back): the caller's rules are that a
/// store stays alive while an item it handed out is not given back, and that every item a
/// turn hands out is given back on the thread that got it. At the thread's exit, items still
/// out are forgotten: by those rules no one reads them any more.
pub fn end_turn(mut with_store: impl FnMut(usize, &mut dyn FnMut(&Store))) {
    turn::end(|address, loc| {
        with_store(address, &mut |store| {
            debug_assert_eq!(store.address(), address, "the store asked for");
            store.engine.hold_at(loc);
        });
    });
}

/// What a rewrite's `make` built from the live item (see [`Store::rewrite`]).
pub(super) struct Made<'s> {
    pub item: ItemRef<'s>,
    /// The new item's meta word.
    pub meta: u32,
    /// Whether memcached links a new item for this (counted in `total_items`), rather than
    /// changing the old one in place (a touch, an invalidation, an incr whose number fits).
    pub linked: bool,
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::super::clock::ManualClock;
    use super::super::config::Config;
    use super::{end_turn, Store, StoreOp, TURN_RECORDS};

    /// Whether `token`'s segment has a counted hold.
    fn held(store: &Store, token: u64) -> bool {
        let loc = store.with_token(token, |item| item.item.loc().expect("in a segment"));
        store.engine.is_held(loc)
    }

    /// Runs `test` with a store that holds `k`, on a thread of its own (turns are per thread,
    /// and the test harness may run other tests on this one).
    fn with_k_on_a_new_thread(test: impl FnOnce(&Store) + Send) {
        let store = Store::new(Config::default(), Box::new(ManualClock::new(1))).unwrap();
        let item = store.item(b"k", b"v", 0, 0).unwrap();
        store.store(&item, StoreOp::Set).unwrap();
        drop(item);
        crate::sync::thread::scope(|s| _ = s.spawn(|| test(&store)));
    }

    #[test]
    fn a_turn_counts_a_hold_only_for_an_item_still_out_at_its_end() {
        with_k_on_a_new_thread(|store| {
            let counted = store.fetch_token(b"k").unwrap();
            assert!(
                held(store, counted),
                "before its first end of turn: counted"
            );
            store.release_token(counted);
            assert!(!held(store, counted));
            let end = || end_turn(|_, count| count(store));
            end();
            let (a, b) = (
                store.fetch_token(b"k").unwrap(),
                store.fetch_token(b"k").unwrap(),
            );
            assert!(!held(store, a), "in a turn: no count");
            store.release_token(a);
            end();
            assert!(held(store, b), "out at the end of its turn: counted");
            store.release_token(b);
            assert!(!held(store, b), "its release lets the count go");
            let c = store.fetch_token(b"k").unwrap();
            store.release_token(c);
            end();
            assert!(
                !held(store, c),
                "given back within its turn: nothing counted"
            );
        });
    }

    #[test]
    fn a_turn_records_what_it_can_and_every_hold_comes_back_in_any_order() {
        with_k_on_a_new_thread(|store| {
            let end = || end_turn(|_, count| count(store));
            end();
            // One more than a turn records: the last counts a hold of its own.
            let tokens: Vec<u64> = (0..=TURN_RECORDS)
                .map(|_| store.fetch_token(b"k").unwrap())
                .collect();
            assert!(
                held(store, tokens[TURN_RECORDS]),
                "past the records: counted"
            );
            // Given back last first, in its turn: nothing stays counted.
            tokens
                .into_iter()
                .rev()
                .for_each(|t| store.release_token(t));
            let again = store.fetch_token(b"k").unwrap();
            assert!(!held(store, again), "numbers given back are taken again");
            store.release_token(again);
            // In order too: the last one given back empties the record.
            let tokens: Vec<u64> = (0..=TURN_RECORDS)
                .map(|_| store.fetch_token(b"k").unwrap())
                .collect();
            tokens.into_iter().for_each(|t| store.release_token(t));
            let again = store.fetch_token(b"k").unwrap();
            assert!(!held(store, again), "numbers given back are taken again");
            store.release_token(again);
            end();
            // A token of an earlier turn, given back while a token of this turn holds
            // the same record number for the same item: the counts still come out even.
            let earlier = store.fetch_token(b"k").unwrap();
            end();
            let now = store.fetch_token(b"k").unwrap();
            store.release_token(earlier);
            end();
            assert!(held(store, now), "out past its turn: held");
            store.release_token(now);
            assert!(!held(store, now), "every hold given back");
        });
    }
}
