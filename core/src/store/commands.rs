//! The [`Store`] and memcached's classic commands on it: allocate, store, get, remove, touch,
//! flush, scrub and the statistics. The meta commands (and incr/decr, the meta arithmetic
//! without its options) are in `meta`.

use super::clock::Clock;
use super::config::{Config, KEY_MAX, PAGE_SIZE};
use super::error::Error;
use super::item::{Bytes, Item, ItemRef, RelTime, ITEM_OVERHEAD};
use super::stats::{Counter, Counters, Stats};
use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::PayloadArc;
use crate::tiers::{Change, Entry, L2};
use std::fmt;

/// What L2 charges per entry beyond the item's own size (its node and key copy), bounded.
const ENTRY_SLACK: usize = 1024 + KEY_MAX;
/// The one namespace of a store's own L2.
const NS: u32 = 0;

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

/// What a key holds, as memcached sees it.
pub(super) enum Current<'e, B: Bytes> {
    Absent,
    /// Expired or flushed, still in L2.
    Dead,
    Live(&'e ItemRef<B>),
}

/// memcached items over an L2 store, their bytes kept in a `B` (see [`Bytes`]).
pub struct Store<B: Bytes = Box<[u8]>> {
    l2: L2<Item<B>>,
    config: Config,
    clock: Box<dyn Clock>,
    /// The last sequence number handed out (CAS values, when `use_cas`).
    seq: AtomicU64,
    /// Items with a sequence number up to this one were flushed.
    flushed_seq: AtomicU64,
    /// A delayed flush: from this time on, items stored before it are gone (0: none).
    flush_at: AtomicU32,
    pub(super) counters: Counters,
    /// L2's eviction count at the last stats reset.
    evictions_base: AtomicU64,
}

impl<B: Bytes> fmt::Debug for Store<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Store {
    /// A store with `config`, reading the time from `clock`, its items' bytes in `Box<[u8]>`s.
    pub fn new(config: Config, clock: Box<dyn Clock>) -> Result<Self, Error> {
        Self::with_bytes(config, clock)
    }
}

impl<B: Bytes> Store<B> {
    /// A store with `config`, reading the time from `clock`, its items' bytes in `B`s.
    pub fn with_bytes(config: Config, clock: Box<dyn Clock>) -> Result<Self, Error> {
        if config.item_size_max < 1024 || config.item_size_max > 128 * PAGE_SIZE {
            return Err(Error::InvalidConfig(
                "item_size_max must be between 1 KiB and 128 MiB",
            ));
        }
        // One page at least, and each shard large enough for the largest item.
        let page = config.item_size_max.max(PAGE_SIZE) + ENTRY_SLACK;
        let capacity = config.cache_size.max(page);
        let wanted = match config.shards {
            0 => (crate::sync::cpu_count() * 4).next_power_of_two(),
            n => n,
        };
        let shards = wanted.min(capacity / page).max(1);
        let l2 = L2::with_shards(capacity, shards)
            .map_err(|_| Error::InvalidConfig("cache_size"))?
            .weigh_with(Item::<B>::size);
        Ok(Self {
            l2,
            config,
            clock,
            seq: AtomicU64::new(0),
            flushed_seq: AtomicU64::new(0),
            flush_at: AtomicU32::new(0),
            counters: Counters::new(),
            evictions_base: AtomicU64::new(0),
        })
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The current time on the store's clock.
    pub fn now(&self) -> RelTime {
        self.clock.now()
    }

    /// A new item of `nbytes` value bytes for the caller to fill and [`Store::store`]
    /// (memcached's `allocate`).
    pub fn allocate(
        &self,
        key: &[u8],
        nbytes: usize,
        flags: u32,
        exptime: RelTime,
    ) -> Result<ItemRef<B>, Error> {
        self.check(key, nbytes)?;
        Ok(PayloadArc::new(Item::zeroed(key, nbytes, flags, exptime)))
    }

    /// A new item holding `value`, ready to store.
    pub fn item(
        &self,
        key: &[u8],
        value: &[u8],
        flags: u32,
        exptime: RelTime,
    ) -> Result<ItemRef<B>, Error> {
        self.check(key, value.len())?;
        Ok(PayloadArc::new(Item::new(key, value, flags, exptime)))
    }

    pub(super) fn check(&self, key: &[u8], nbytes: usize) -> Result<(), Error> {
        if key.is_empty() || key.len() > KEY_MAX {
            return Err(Error::BadKey);
        }
        if key
            .len()
            .saturating_add(nbytes)
            .saturating_add(ITEM_OVERHEAD)
            > self.config.item_size_max
        {
            return Err(Error::TooBig);
        }
        Ok(())
    }

    /// Stores `item` by `op` and returns its new CAS. For [`StoreOp::Cas`], and for append and
    /// prepend when it is not 0, the item's CAS (see [`Item::set_cas`]) must match the present
    /// one.
    pub fn store(&self, item: &ItemRef<B>, op: StoreOp) -> Result<u64, Error> {
        self.counters.add(Counter::CmdSet, 1);
        self.check(item.key(), item.value().len())?;
        let now = self.now();
        let expected = item.cas();
        let result = self.write(item.key(), now, |current| {
            let live = match current {
                Current::Live(old) => Some(old),
                Current::Absent | Current::Dead => None,
            };
            match (op, live) {
                (StoreOp::Add, Some(_)) => Err(Error::NotStored),
                (StoreOp::Replace | StoreOp::Append | StoreOp::Prepend, None) => {
                    Err(Error::NotStored)
                }
                (StoreOp::Cas, None) => Err(Error::NotFound),
                (StoreOp::Cas, Some(old)) if old.cas() != expected => Err(Error::Exists),
                (StoreOp::Append | StoreOp::Prepend, Some(old))
                    if expected != 0 && old.cas() != expected =>
                {
                    Err(Error::Exists)
                }
                (StoreOp::Append | StoreOp::Prepend, Some(old)) => {
                    let (head, tail) = if op == StoreOp::Append {
                        (old.value(), item.value())
                    } else {
                        (item.value(), old.value())
                    };
                    self.check(item.key(), head.len() + tail.len())?;
                    let joined = Item::joined(item.key(), head, tail, old.flags(), old.exptime());
                    Ok(PayloadArc::new(joined))
                }
                _ => Ok(item.clone()),
            }
            .map(|new| self.stamp(new, now))
        });
        let counter = match (&result, op) {
            (Ok(_), StoreOp::Cas) => Some(Counter::CasHits),
            (Err(Error::NotFound), StoreOp::Cas) => Some(Counter::CasMisses),
            (Err(Error::Exists), StoreOp::Cas) => Some(Counter::CasBadval),
            _ => None,
        };
        if let Some(counter) = counter {
            self.counters.add(counter, 1);
        }
        result.map(|new| new.cas())
    }

    /// Runs `decide` on what `key` holds at `now`, under its shard lock: `Ok(item)` stores that
    /// item (stamped), an error leaves the key alone (and takes back a dead item's memory).
    pub(super) fn write(
        &self,
        key: &[u8],
        now: RelTime,
        decide: impl FnOnce(Current<'_, B>) -> Result<ItemRef<B>, Error>,
    ) -> Result<ItemRef<B>, Error> {
        let tries = if self.config.eviction { u32::MAX } else { 0 };
        let mut dead = false;
        let result = self.l2.update(NS, key, tries, |old| {
            let current = self.current(old, now);
            dead = matches!(current, Current::Dead);
            match decide(current) {
                Ok(new) => (Change::Put(entry(new.clone())), Ok(new)),
                Err(e) if dead => (Change::Remove, Err(e)),
                Err(e) => (Change::Keep, Err(e)),
            }
        });
        if dead {
            self.counters.add(Counter::Reclaimed, 1);
        }
        match result {
            Ok(Ok(new)) => {
                self.counters.add(Counter::TotalItems, 1);
                Ok(new)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(Error::NoMemory),
        }
    }

    /// Gives a new item its sequence number (and CAS) and store time, before it is published.
    pub(super) fn stamp(&self, item: ItemRef<B>, now: RelTime) -> ItemRef<B> {
        // Relaxed: only uniqueness and order per key matter, and writers of one key run this
        // under its shard lock; the number itself publishes nothing.
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        item.set_cas(if self.config.use_cas { seq } else { 0 });
        item.set_seq(seq);
        item.set_stored_at(now);
        item
    }

    fn current<'e>(&self, old: Option<&'e Entry<Item<B>>>, now: RelTime) -> Current<'e, B> {
        match old.and_then(|e| e.value.as_ref()) {
            None => Current::Absent,
            Some(item) if self.is_live(item, now) => Current::Live(item),
            Some(_) => Current::Dead,
        }
    }

    fn is_live(&self, item: &Item<B>, now: RelTime) -> bool {
        let exptime = item.exptime();
        if exptime != 0 && exptime <= now {
            return false;
        }
        // Relaxed (both): a flush publishes no data; a read that races it answers as if it
        // came just before.
        if item.seq() <= self.flushed_seq.load(Ordering::Relaxed) {
            return false;
        }
        let flush_at = self.flush_at.load(Ordering::Relaxed);
        !(flush_at != 0 && flush_at <= now && item.stored_at() < flush_at)
    }

    /// The live item of `key` (memcached's `get`). Finding a live item (or none) takes no lock
    /// and allocates nothing; finding an expired or flushed one takes its key's shard lock once,
    /// to take the memory back.
    pub fn get(&self, key: &[u8]) -> Option<ItemRef<B>> {
        let found = self.l2.read(NS, key, |entry| entry.value.clone()).flatten();
        match found {
            Some(item) if self.is_live(&item, self.now()) => {
                self.counters.add(Counter::GetHits, 1);
                Some(item)
            }
            Some(item) => {
                self.take_back(key, &item);
                self.counters.add(Counter::GetMisses, 1);
                None
            }
            None => {
                self.counters.add(Counter::GetMisses, 1);
                None
            }
        }
    }

    /// Removes a dead `item` of `key`, if the key still holds it.
    fn take_back(&self, key: &[u8], item: &ItemRef<B>) {
        let removed = self
            .l2
            .update(NS, key, 0, |old| match old.and_then(|e| e.value.as_ref()) {
                Some(held) if PayloadArc::ptr_eq(held, item) => (Change::Remove, true),
                _ => (Change::Keep, false),
            });
        if removed == Ok(true) {
            self.counters.add(Counter::Reclaimed, 1);
        }
    }

    /// Removes `key` if its CAS is `cas` (0: any).
    pub fn remove(&self, key: &[u8], cas: u64) -> Result<(), Error> {
        let now = self.now();
        let mut dead = false;
        let result = self
            .l2
            .update(NS, key, 0, |old| match self.current(old, now) {
                Current::Live(item) if cas == 0 || item.cas() == cas => (Change::Remove, Ok(())),
                Current::Live(_) => (Change::Keep, Err(Error::Exists)),
                Current::Dead => {
                    dead = true;
                    (Change::Remove, Err(Error::NotFound))
                }
                Current::Absent => (Change::Keep, Err(Error::NotFound)),
            });
        if dead {
            self.counters.add(Counter::Reclaimed, 1);
        }
        let result = result.unwrap_or(Err(Error::NotFound));
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
    /// reads the returned item).
    pub fn touch(&self, key: &[u8], exptime: RelTime) -> Option<ItemRef<B>> {
        let now = self.now();
        let mut dead = false;
        let result = self
            .l2
            .update(NS, key, 0, |old| match self.current(old, now) {
                Current::Live(item) => {
                    item.set_exptime(exptime);
                    (Change::Keep, Some(item.clone()))
                }
                Current::Dead => {
                    dead = true;
                    (Change::Remove, None)
                }
                Current::Absent => (Change::Keep, None),
            });
        if dead {
            self.counters.add(Counter::Reclaimed, 1);
        }
        let item = result.ok().flatten();
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

    /// Hides every item stored before now (`when` 0 or not in the future) or, from time
    /// `when` on, every item stored before `when`. A flush replaces a pending delayed one.
    pub fn flush(&self, when: RelTime) {
        self.counters.add(Counter::CmdFlush, 1);
        if when != 0 && when > self.now() {
            // Relaxed: see `is_live`.
            self.flush_at.store(when, Ordering::Relaxed);
            return;
        }
        // Relaxed (all three): see `is_live` and `stamp`.
        self.flush_at.store(0, Ordering::Relaxed);
        self.flushed_seq
            .store(self.seq.load(Ordering::Relaxed), Ordering::Relaxed);
        self.l2.purge(NS, None);
    }

    /// Takes back every expired or flushed item now (memcached's SCRUB), instead of when next
    /// touched; returns how many went. Readers holding one keep it until they let go.
    pub fn scrub(&self) -> u64 {
        let now = self.now();
        let mut removed = 0;
        self.l2.remove_where(|ns, entry| {
            let dead = ns == NS && entry.value.as_ref().is_some_and(|i| !self.is_live(i, now));
            removed += u64::from(dead);
            dead
        });
        self.counters.add(Counter::Reclaimed, removed);
        removed
    }

    /// The statistics now.
    pub fn stats(&self) -> Stats {
        let c = |counter| self.counters.get(counter);
        Stats {
            curr_items: self.l2.len() as u64,
            total_items: c(Counter::TotalItems),
            bytes: self.l2.used_bytes() as u64,
            engine_maxbytes: self.config.cache_size as u64,
            // Relaxed: a statistic's baseline; see `reset_stats`.
            evictions: self
                .l2
                .evictions()
                .saturating_sub(self.evictions_base.load(Ordering::Relaxed)),
            reclaimed: c(Counter::Reclaimed),
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
        // Relaxed: a statistic's baseline; nothing is published with it.
        self.evictions_base
            .store(self.l2.evictions(), Ordering::Relaxed);
    }

    /// Frees the memory of removed items that readers may no longer hold: call at shutdown,
    /// when no other thread uses the store, so that a leak checker finds nothing left.
    pub fn reclaim(&self) {
        self.l2.reclaim();
    }
}

fn entry<B: Bytes>(item: ItemRef<B>) -> Entry<Item<B>> {
    Entry {
        value: Some(item),
        stored_at: 0,
        // Expiry is the store's own (memcached's rules), not L2's.
        ttl: 0,
        resurrected: false,
    }
}
