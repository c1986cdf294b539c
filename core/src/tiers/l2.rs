//! L2: one byte-bounded store shared by every cache (the seed's `lua_shared_dict`).
//!
//! Shards of fixed bucket arrays whose chains readers walk without a lock: nodes are published
//! with Release stores and reclaimed through crossbeam-epoch, so a reader pinned before a node
//! was unlinked may still read it. Writers (insert, remove, purge, eviction) take the shard's
//! mutex, which also guards its S3-FIFO policy ([`super::s3fifo`]). Entries keep their expiry
//! until evicted, so stale values stay readable for `peek(stale)` and resurrection.
//! Keys are `(namespace id, key bytes)`: caches are isolated by name exactly.

use super::error::Error;
use super::namespace::Namespace;
use super::s3fifo::{touch, Policy, Tracked};
use crate::sync::atomic::{AtomicU8, Ordering};
use crate::sync::epoch::{self, Atomic, Domain, Guard, Owned, Shared};
use crate::sync::{Arc, Mutex, PayloadArc};
use crossbeam_utils::CachePadded;
use std::fmt;
use std::hash::BuildHasher;

/// Random keys against hash flooding (foldhash: per-instance random seeds, several times
/// faster than SipHash on short keys, which it dominated on every L2 read); fixed ones in
/// models, which must replay exactly.
#[cfg(not(mcb_loom))]
type Hasher = foldhash::quality::RandomState;
#[cfg(mcb_loom)]
type Hasher = std::hash::BuildHasherDefault<std::hash::DefaultHasher>;

/// How many entries one try evicts at most before giving up (the seed's shared dict evicts a
/// bounded batch per `set`; `set_tries` repeats it).
const EVICTIONS_PER_TRY: usize = 8;

/// What L2 keeps for a key.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    /// `None` caches a miss.
    pub value: Option<PayloadArc<T>>,
    /// Clock time of the write (ms).
    pub stored_at: u64,
    /// Time to live (ms); zero means forever.
    pub ttl: u64,
    /// Put back by resurrection: hits on it report level 4.
    pub resurrected: bool,
}

impl<T> Clone for Entry<T> {
    fn clone(&self) -> Self {
        Self {
            value: self.value.clone(),
            ..*self
        }
    }
}

impl<T> Entry<T> {
    /// When it stops being fresh; `None` for never.
    pub fn expires_at(&self) -> Option<u64> {
        (self.ttl > 0).then(|| self.stored_at.saturating_add(self.ttl))
    }

    /// Expired (but still readable as a stale value).
    pub fn is_stale(&self, now: u64) -> bool {
        self.expires_at().is_some_and(|at| now > at)
    }
}

/// What [`L2::update`] does with a key.
#[derive(Debug)]
pub(crate) enum Change<T> {
    /// Leave it as it is.
    Keep,
    /// Store this entry (replacing what the key held).
    Put(Entry<T>),
    /// Remove the key.
    Remove,
}

/// A copy of what a read found.
#[derive(Debug)]
pub(crate) struct Found<T> {
    pub key: PayloadArc<[u8]>,
    pub entry: Entry<T>,
}

struct Node<T> {
    hash: u64,
    ns: u32,
    key: PayloadArc<[u8]>,
    entry: Entry<T>,
    /// Its slot in the shard's policy, fixed before the node is published.
    slot: u32,
    freq: AtomicU8,
    next: Atomic<Node<T>>,
    /// Set when the node counts as freed, so that models see a use after free as a panic.
    #[cfg(mcb_loom)]
    freed: crate::sync::atomic::AtomicBool,
}

impl<T> Node<T> {
    /// In a model, fails if this node was freed while a reader still held it.
    fn check_live(&self) {
        #[cfg(mcb_loom)]
        assert!(
            // SeqCst: test instrumentation only; the strongest order finds the bug soonest.
            !self.freed.load(Ordering::SeqCst),
            "L2 node used after free"
        );
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
    fn freq(&self) -> &AtomicU8 {
        // SAFETY: a node leaves the policy (under the shard mutex) before it is unlinked and
        // retired, and the policy is only used under that mutex: a NodeRef in the policy points
        // to a live node.
        unsafe { &(*self.0).freq }
    }
}

struct Shard<T> {
    buckets: Box<[Atomic<Node<T>>]>,
    policy: Mutex<Policy<NodeRef<T>>>,
}

/// The shared store: bounded by bytes, read without locks, evicting by S3-FIFO.
pub struct L2<T> {
    shards: Box<[CachePadded<Shard<T>>]>,
    hasher: Hasher,
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

impl<T: Send + Sync> L2<T> {
    /// A store of `capacity_bytes`, sharded by the CPU count (shards of at least 64 KiB).
    pub fn new(capacity_bytes: usize) -> Result<Self, Error> {
        let by_cpu = (crate::sync::cpu_count() * 4).next_power_of_two();
        Self::with_shards(capacity_bytes, by_cpu.min(capacity_bytes >> 16).max(1))
    }

    /// A store of `capacity_bytes` split evenly over `shards`; a value larger than one shard
    /// cannot be stored. Each entry weighs its key, a fixed overhead and `size_of::<T>()`
    /// unless [`L2::weigh_with`] says otherwise.
    pub fn with_shards(capacity_bytes: usize, shards: usize) -> Result<Self, Error> {
        if capacity_bytes == 0 {
            return Err(Error::InvalidOption("L2 capacity must be > 0 bytes"));
        }
        if shards == 0 || shards > capacity_bytes {
            return Err(Error::InvalidOption("L2 shards must be in 1..=capacity"));
        }
        let per_shard = capacity_bytes / shards;
        let buckets = (per_shard / 256).clamp(16, 1 << 16).next_power_of_two();
        let shards = (0..shards)
            .map(|_| {
                CachePadded::new(Shard {
                    buckets: (0..buckets).map(|_| Atomic::null()).collect(),
                    policy: Mutex::new(Policy::new(per_shard)),
                })
            })
            .collect();
        Ok(Self {
            shards,
            hasher: Hasher::default(),
            weigher: Box::new(|_| std::mem::size_of::<T>()),
            namespaces: Mutex::new(Vec::new()),
            domain: Domain::per_thread(),
        })
    }

    /// Weighs values with `weigher` (bytes) instead of `size_of::<T>()`.
    pub fn weigh_with(mut self, weigher: impl Fn(&T) -> usize + Send + Sync + 'static) -> Self {
        self.weigher = Box::new(weigher);
        self
    }

    /// The byte bound.
    pub fn capacity_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.policy.lock().capacity()).sum()
    }

    /// Bytes in use.
    pub fn used_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.policy.lock().used()).sum()
    }

    /// Entries stored (live or stale).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.policy.lock().len()).sum()
    }

    /// Whether no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries evicted to make room since the store was made.
    pub fn evictions(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.policy.lock().evictions())
            .sum()
    }

    /// Frees what this store retired as far as the epoch collector can now: for shutdown, when
    /// no other thread reads the store, so that a leak checker finds nothing left behind.
    pub fn reclaim(&self) {
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
        self.hasher.hash_one((ns, key))
    }

    fn shard(&self, hash: u64) -> &Shard<T> {
        &self.shards[(hash as usize) % self.shards.len()]
    }

    /// Reads `key` without a lock; the copy shares the value.
    pub(crate) fn get(&self, ns: u32, key: &[u8]) -> Option<Found<T>> {
        self.read(ns, key, |key, entry| Found {
            key: key.clone(),
            entry: entry.clone(),
        })
    }

    /// Reads `key` without a lock, handing `f` the stored key and entry (which it may only
    /// borrow for the call: what it keeps, it clones).
    pub(crate) fn read<R>(
        &self,
        ns: u32,
        key: &[u8],
        f: impl FnOnce(&PayloadArc<[u8]>, &Entry<T>) -> R,
    ) -> Option<R> {
        let hash = self.hash(ns, key);
        let guard = self.domain.pin();
        let (_, found) = find(self.shard(hash).bucket(hash), &guard, |n| {
            n.hash == hash && n.ns == ns && *n.key == *key
        });
        // SAFETY: `found` was loaded under `guard` from a link of the shard; a node is retired
        // only after it is unlinked, and the epoch frees it only once every guard pinned
        // before the unlink is gone.
        let node = unsafe { found.as_ref() }?;
        touch(&node.freq);
        let answer = f(&node.key, &node.entry);
        node.check_live();
        Some(answer)
    }

    /// Stores `entry` for `key`, evicting up to `tries` batches to make room; `published` runs
    /// under the shard lock right after the entry becomes visible, so that writers of one key
    /// run it in the order of their writes. On failure the key holds nothing.
    pub(crate) fn insert<R>(
        &self,
        ns: u32,
        key: &[u8],
        entry: Entry<T>,
        tries: u32,
        published: impl FnOnce() -> R,
    ) -> Result<R, Error> {
        self.write(ns, key, tries, false, |_| Change::Put(entry), published)
    }

    /// Read-modify-write of one key under its shard lock: `decide` sees what the key holds (if
    /// anything) and says what to do with it, so that concurrent updates of one key (memcached's
    /// incr, CAS, append) never lose one another. Returns `decide`'s answer, or an error when a
    /// [`Change::Put`] found no room after `tries` eviction batches, in which case the key keeps
    /// what it held.
    pub(crate) fn update<R>(
        &self,
        ns: u32,
        key: &[u8],
        tries: u32,
        decide: impl FnOnce(Option<&Entry<T>>) -> (Change<T>, R),
    ) -> Result<R, Error> {
        let mut answer = None;
        self.write(
            ns,
            key,
            tries,
            true,
            |old| {
                let (change, r) = decide(old);
                answer = Some(r);
                change
            },
            || (),
        )?;
        Ok(answer.expect("decide ran"))
    }

    /// `insert` and `update`: the change `decide` picks, under the shard lock.
    fn write<R>(
        &self,
        ns: u32,
        key: &[u8],
        tries: u32,
        keep_on_failure: bool,
        decide: impl FnOnce(Option<&Entry<T>>) -> Change<T>,
        published: impl FnOnce() -> R,
    ) -> Result<R, Error> {
        let hash = self.hash(ns, key);
        let shard = self.shard(hash);
        let bucket = shard.bucket(hash);
        let mut policy = shard.policy.lock();
        let guard = self.domain.pin();
        let (link, old) = find(bucket, &guard, |n| {
            n.hash == hash && n.ns == ns && *n.key == *key
        });
        // SAFETY: as in `get`; besides, only writers retire nodes and we hold the shard lock.
        let old_ref = unsafe { old.as_ref() };
        let entry = match decide(old_ref.map(|n| &n.entry)) {
            Change::Keep => return Ok(published()),
            Change::Remove => {
                if let Some(n) = old_ref {
                    policy.remove(n.slot);
                    unlink(link, old, &guard);
                }
                return Ok(published());
            }
            Change::Put(entry) => entry,
        };
        let weight = self.weight(key, &entry);
        if let Some(old) = old_ref {
            policy.remove(old.slot);
        }
        let mut tries_made = 0;
        'tries: while !policy.fits(weight) && tries_made < tries {
            tries_made += 1;
            for _ in 0..EVICTIONS_PER_TRY {
                // Nothing left to evict: more tries cannot help.
                let Some(victim) = policy.evict() else {
                    break 'tries;
                };
                let victim = Shared::from(victim.0);
                // SAFETY: the victim was in the policy, hence linked and live (lock held).
                let vhash = unsafe { victim.deref() }.hash;
                unlink(link_to(shard.bucket(vhash), victim, &guard), victim, &guard);
                if policy.fits(weight) {
                    break;
                }
            }
        }
        let (entry, weight, outcome) = if policy.fits(weight) {
            (entry, weight, Ok(()))
        } else {
            match old_ref {
                // The old entry fitted before and nothing was added since: it fits again.
                Some(n) if keep_on_failure => (
                    n.entry.clone(),
                    self.weight(key, &n.entry),
                    Err(Error::L2Full { tries }),
                ),
                Some(_) => {
                    unlink(link_to(bucket, old, &guard), old, &guard);
                    return Err(Error::L2Full { tries });
                }
                None => return Err(Error::L2Full { tries }),
            }
        };
        let mut node = Owned::new(Node {
            hash,
            ns,
            key: key.into(),
            entry,
            slot: 0,
            freq: AtomicU8::new(0),
            next: Atomic::null(),
            #[cfg(mcb_loom)]
            freed: crate::sync::atomic::AtomicBool::new(false),
        });
        node.slot = policy.insert(NodeRef(&*node), hash, weight);
        let link = if old.is_null() {
            bucket
        } else {
            link_to(bucket, old, &guard)
        };
        let successor = if old.is_null() {
            // Relaxed: links change only under the shard lock, which we hold.
            link.load(Ordering::Relaxed, &guard)
        } else {
            // SAFETY: `old` is still linked (out of the policy, so no eviction touched it).
            // Relaxed: links change only under the shard lock, which we hold.
            unsafe { old.deref() }.next.load(Ordering::Relaxed, &guard)
        };
        // Relaxed: the node is still private; the Release below publishes this store.
        node.next.store(successor, Ordering::Relaxed);
        // Release: pairs with the Acquire loads in `find`; publishes the node's fields.
        link.store(node, Ordering::Release);
        if !old.is_null() {
            retire(&guard, old);
        }
        outcome.map(|()| published())
    }

    /// What an entry costs against the byte bound.
    fn weight(&self, key: &[u8], entry: &Entry<T>) -> usize {
        std::mem::size_of::<Node<T>>() + key.len() + entry.value.as_deref().map_or(0, &self.weigher)
    }

    /// Removes `key`; `removed` runs under the shard lock after the removal, as in `insert`.
    pub(crate) fn remove<R>(&self, ns: u32, key: &[u8], removed: impl FnOnce() -> R) -> R {
        let hash = self.hash(ns, key);
        let shard = self.shard(hash);
        let mut policy = shard.policy.lock();
        let guard = self.domain.pin();
        let (link, node) = find(shard.bucket(hash), &guard, |n| {
            n.hash == hash && n.ns == ns && *n.key == *key
        });
        // SAFETY: as in `insert`.
        if let Some(n) = unsafe { node.as_ref() } {
            policy.remove(n.slot);
            unlink(link, node, &guard);
        }
        removed()
    }

    /// Removes every entry of namespace `ns`, and with `expired_at` also every entry of any
    /// namespace that is stale at that time (the seed's `flush_expired`).
    pub(crate) fn purge(&self, ns: u32, expired_at: Option<u64>) {
        for shard in self.shards.iter() {
            let mut policy = shard.policy.lock();
            let guard = self.domain.pin();
            for bucket in shard.buckets.iter() {
                let mut link = bucket;
                loop {
                    // Acquire: pairs with the Release stores in `insert` and `unlink`, as in `find`.
                    let cur = link.load(Ordering::Acquire, &guard);
                    // SAFETY: as in `insert`.
                    let Some(node) = (unsafe { cur.as_ref() }) else {
                        break;
                    };
                    if node.ns == ns || expired_at.is_some_and(|now| node.entry.is_stale(now)) {
                        policy.remove(node.slot);
                        unlink(link, cur, &guard);
                    } else {
                        link = &node.next;
                    }
                }
            }
        }
    }
}

impl<T> Shard<T> {
    fn bucket(&self, hash: u64) -> &Atomic<Node<T>> {
        // High bits: the low ones chose the shard.
        &self.buckets[(hash >> 32) as usize % self.buckets.len()]
    }
}

/// Walks a chain to the first node `wanted` accepts; returns the link that points to it (or
/// the last link) and the node (or null).
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

/// Unlinks `node` (pointed to by `link`, lock held) and retires it.
fn unlink<T>(link: &Atomic<Node<T>>, node: Shared<'_, Node<T>>, guard: &Guard) {
    // SAFETY: `node` is linked and the shard lock is held, so it is live.
    // Relaxed: links change only under the shard lock, which the caller holds.
    let next = unsafe { node.deref() }.next.load(Ordering::Relaxed, guard);
    // Release: pairs with the Acquire in `find`; a reader that skips the node through this
    // link still sees the (older, already published) successor fully.
    link.store(next, Ordering::Release);
    retire(guard, node);
}

/// Frees an unlinked node once no reader can hold it.
fn retire<T>(guard: &Guard, node: Shared<'_, Node<T>>) {
    #[cfg(mcb_loom)]
    if crate::sync::mutant::active(crate::sync::mutant::Mutant::L2FreesEagerly) {
        // SAFETY: still allocated (the free below is deferred); this marks it as freed now.
        unsafe { node.deref() }
            .freed
            // SeqCst: test instrumentation, as in `check_live`.
            .store(true, Ordering::SeqCst);
    }
    #[cfg(mcb_loom)]
    {
        // SAFETY: still allocated (the free below is deferred).
        let node = unsafe { node.deref() };
        epoch::mark_freed_when_unpinned(&node.freed);
    }
    // SAFETY: the node is unreachable from every bucket (unlinked under the shard lock) and out
    // of the policy, so only readers pinned before the unlink can hold it; the epoch defers the
    // free until they unpin.
    unsafe { guard.defer_destroy(node) };
}

impl<T> Drop for L2<T> {
    fn drop(&mut self) {
        // SAFETY: `&mut self`: no reader or writer is left, so nothing needs protection.
        let guard = unsafe { epoch::unprotected() };
        for shard in self.shards.iter() {
            for bucket in shard.buckets.iter() {
                // Relaxed: exclusive access (`&mut self`).
                let mut cur = bucket.load(Ordering::Relaxed, guard);
                while !cur.is_null() {
                    // SAFETY: exclusive access; every linked node is owned by the chain once.
                    let node = unsafe { cur.into_owned() };
                    // Relaxed: exclusive access.
                    cur = node.next.load(Ordering::Relaxed, guard);
                }
            }
        }
    }
}
