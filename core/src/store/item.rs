//! One memcached item: key, value bytes, flags, expiry and CAS, shared by reference count so
//! that whoever holds an item (the host, between `get` and `release`) reads it safely after the
//! store replaced, deleted, evicted or flushed it.
//!
//! The key and value bytes live in a [`Bytes`] of the caller's choice: plain `Box<[u8]>` by
//! default. memcached's `allocate` hands its host an item whose value the host then fills in
//! place through a pointer; that contract belongs to the C boundary, which brings a `Bytes` of
//! its own that allows it (`ffi`'s storage engine), so nothing here writes through a shared
//! item. Updates (append, incr...) make a new item. Expiry and CAS are atomics because `touch`
//! and `item_set_cas` change them in place, as memcached's own items do.

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::PayloadArc;
use std::fmt;

/// Seconds on the host's clock (memcached's `rel_time_t`); an expiry of 0 means never.
pub type RelTime = u32;

/// A shared item: what the store keeps and what `get` hands out.
pub type ItemRef<B = Box<[u8]>> = PayloadArc<Item<B>>;

/// Bytes an item costs beyond its key and value, charged against `cache_size` and counted
/// against `item_size_max`.
pub const ITEM_OVERHEAD: usize = std::mem::size_of::<Item>();

/// Where an item keeps its key and value: one buffer, built once by the store.
pub trait Bytes: Send + Sync + Sized + 'static {
    /// `prefix` followed by `zeros` zero bytes (an allocated item, before its value is filled).
    fn zeroed(prefix: &[u8], zeros: usize) -> Self;
    /// The concatenation of `parts`.
    fn joined(parts: &[&[u8]]) -> Self;
    /// All the bytes.
    fn bytes(&self) -> &[u8];
}

impl Bytes for Box<[u8]> {
    fn zeroed(prefix: &[u8], zeros: usize) -> Self {
        let mut bytes = vec![0; prefix.len() + zeros];
        bytes[..prefix.len()].copy_from_slice(prefix);
        bytes.into_boxed_slice()
    }

    fn joined(parts: &[&[u8]]) -> Self {
        parts.concat().into_boxed_slice()
    }

    fn bytes(&self) -> &[u8] {
        self
    }
}

/// A memcached item. `repr(C)`: what a get's liveness check reads (expiry, sequence number,
/// store time) comes first, in the cache line of the reference count the get takes.
#[repr(C)]
pub struct Item<B = Box<[u8]>> {
    /// The store's sequence number for it (its CAS when CAS is on), for immediate flushes.
    seq: AtomicU64,
    exptime: AtomicU32,
    /// When it was stored (host seconds), for delayed flushes.
    stored_at: AtomicU32,
    cas: AtomicU64,
    flags: u32,
    /// The meta commands' state (kept by the `meta` module): stale, recache token handed out,
    /// fetched, and the last access time.
    pub(crate) stampede: AtomicU32,
    nkey: usize,
    /// Key then value.
    bytes: B,
}

impl<B: Bytes> Item<B> {
    /// An item holding `value`.
    pub fn new(key: &[u8], value: &[u8], flags: u32, exptime: RelTime) -> Self {
        Self::from_bytes(B::joined(&[key, value]), key.len(), flags, exptime)
    }

    /// An item of `nbytes` zeroed value bytes (what `allocate` hands out).
    pub fn zeroed(key: &[u8], nbytes: usize, flags: u32, exptime: RelTime) -> Self {
        Self::from_bytes(B::zeroed(key, nbytes), key.len(), flags, exptime)
    }

    /// An item whose value is `head` followed by `tail` (append and prepend).
    pub(crate) fn joined(
        key: &[u8],
        head: &[u8],
        tail: &[u8],
        flags: u32,
        exptime: RelTime,
    ) -> Self {
        Self::from_bytes(B::joined(&[key, head, tail]), key.len(), flags, exptime)
    }

    fn from_bytes(bytes: B, nkey: usize, flags: u32, exptime: RelTime) -> Self {
        Self {
            bytes,
            nkey,
            flags,
            exptime: AtomicU32::new(exptime),
            cas: AtomicU64::new(0),
            stored_at: AtomicU32::new(0),
            seq: AtomicU64::new(0),
            stampede: AtomicU32::new(0),
        }
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.all()[..self.nkey]
    }

    fn all(&self) -> &[u8] {
        self.bytes.bytes()
    }

    /// Where the key and value live (the key's length is where the value starts).
    pub fn storage(&self) -> &B {
        &self.bytes
    }

    /// The value.
    pub fn value(&self) -> &[u8] {
        &self.all()[self.nkey..]
    }

    /// The flags, as stored.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// When it expires (host seconds; 0: never).
    pub fn exptime(&self) -> RelTime {
        // Relaxed: a stand-alone value (touch changes it); nothing is published with it.
        self.exptime.load(Ordering::Relaxed)
    }

    pub(crate) fn set_exptime(&self, exptime: RelTime) {
        // Relaxed: see `exptime`.
        self.exptime.store(exptime, Ordering::Relaxed);
    }

    /// Its CAS: the expected one before a store (set by the caller), its unique one after.
    pub fn cas(&self) -> u64 {
        // Relaxed: a stand-alone value; a stored item's CAS was written before the store
        // published the item (L2's Release/Acquire links carry it to readers).
        self.cas.load(Ordering::Relaxed)
    }

    /// Sets the CAS (memcached's `item_set_cas`, before storing with a CAS).
    pub fn set_cas(&self, cas: u64) {
        // Relaxed: see `cas`.
        self.cas.store(cas, Ordering::Relaxed);
    }

    pub(crate) fn stored_at(&self) -> RelTime {
        // Relaxed: written before the item is published, like the CAS.
        self.stored_at.load(Ordering::Relaxed)
    }

    pub(crate) fn set_stored_at(&self, now: RelTime) {
        // Relaxed: see `stored_at`.
        self.stored_at.store(now, Ordering::Relaxed);
    }

    pub(crate) fn seq(&self) -> u64 {
        // Relaxed: written before the item is published, like the CAS.
        self.seq.load(Ordering::Relaxed)
    }

    pub(crate) fn set_seq(&self, seq: u64) {
        // Relaxed: see `seq`.
        self.seq.store(seq, Ordering::Relaxed);
    }

    /// Bytes charged for it: key, value and [`ITEM_OVERHEAD`].
    pub fn size(&self) -> usize {
        self.all().len() + ITEM_OVERHEAD
    }
}

impl<B: Bytes> fmt::Debug for Item<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Item")
            .field("key", &String::from_utf8_lossy(self.key()))
            .field("nbytes", &self.value().len())
            .field("flags", &self.flags)
            .field("exptime", &self.exptime())
            .field("cas", &self.cas())
            .finish()
    }
}
