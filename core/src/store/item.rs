//! One memcached item: key, value bytes, flags, expiry and CAS, shared by reference count so
//! that whoever holds an item (the host, between `get` and `release`) reads it safely after the
//! store replaced, deleted, evicted or flushed it.
//!
//! The value is written once, before the item is stored: memcached's `allocate` hands the host
//! an item whose value it then fills through a pointer ([`Item::value_ptr`]). After
//! [`Store::store`](super::Store::store) nothing writes the bytes again: updates (append,
//! incr...) make a new item. Expiry and CAS are atomics because `touch` and `item_set_cas`
//! change them in place, as memcached's own items do.

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use crate::sync::PayloadArc;
use std::fmt;
use std::ptr::NonNull;

/// Seconds on the host's clock (memcached's `rel_time_t`); an expiry of 0 means never.
pub type RelTime = u32;

/// A shared item: what the store keeps and what `get` hands out.
pub type ItemRef = PayloadArc<Item>;

/// Bytes an item costs beyond its key and value, charged against `cache_size` and counted
/// against `item_size_max`.
pub const ITEM_OVERHEAD: usize = std::mem::size_of::<Item>();

/// A memcached item.
pub struct Item {
    /// Key then value, in one allocation: a `Box<[u8]>` taken apart, so that the host may
    /// write the value through a pointer before the item is stored (a `Box` would claim unique
    /// access to its bytes).
    bytes: NonNull<[u8]>,
    nkey: usize,
    flags: u32,
    exptime: AtomicU32,
    cas: AtomicU64,
    /// When it was stored (host seconds), for delayed flushes.
    stored_at: AtomicU32,
    /// The store's sequence number for it (its CAS when CAS is on), for immediate flushes.
    seq: AtomicU64,
}

// SAFETY: the item owns its value's bytes (freed once, on drop); they are only written through
// `value_ptr` before the item is stored, by the one caller that allocated it (the contract of
// `value_ptr`); every other field is immutable or atomic.
#[allow(unsafe_code)]
unsafe impl Sync for Item {}
// SAFETY: as for `Sync`: no thread affinity anywhere in an item.
#[allow(unsafe_code)]
unsafe impl Send for Item {}

impl Item {
    /// An item holding `value`.
    pub fn new(key: &[u8], value: &[u8], flags: u32, exptime: RelTime) -> Self {
        let mut bytes = Vec::with_capacity(key.len() + value.len());
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(value);
        Self::from_bytes(bytes.into_boxed_slice(), key.len(), flags, exptime)
    }

    /// An item of `nbytes` zeroed value bytes, to be filled through [`Item::value_ptr`].
    pub fn zeroed(key: &[u8], nbytes: usize, flags: u32, exptime: RelTime) -> Self {
        let mut bytes = vec![0; key.len() + nbytes];
        bytes[..key.len()].copy_from_slice(key);
        Self::from_bytes(bytes.into_boxed_slice(), key.len(), flags, exptime)
    }

    /// An item whose value is `head` followed by `tail` (append and prepend).
    pub(crate) fn joined(
        key: &[u8],
        head: &[u8],
        tail: &[u8],
        flags: u32,
        exptime: RelTime,
    ) -> Self {
        let mut bytes = Vec::with_capacity(key.len() + head.len() + tail.len());
        bytes.extend_from_slice(key);
        bytes.extend_from_slice(head);
        bytes.extend_from_slice(tail);
        Self::from_bytes(bytes.into_boxed_slice(), key.len(), flags, exptime)
    }

    fn from_bytes(bytes: Box<[u8]>, nkey: usize, flags: u32, exptime: RelTime) -> Self {
        Self {
            bytes: NonNull::from(Box::leak(bytes)),
            nkey,
            flags,
            exptime: AtomicU32::new(exptime),
            cas: AtomicU64::new(0),
            stored_at: AtomicU32::new(0),
            seq: AtomicU64::new(0),
        }
    }

    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.all()[..self.nkey]
    }

    fn all(&self) -> &[u8] {
        #[allow(unsafe_code)]
        // SAFETY: the bytes live as long as the item; the value part is written only before
        // the item is shared (see `value_ptr`), so no write overlaps this borrow.
        unsafe {
            self.bytes.as_ref()
        }
    }

    /// The value.
    pub fn value(&self) -> &[u8] {
        &self.all()[self.nkey..]
    }

    /// The value's first byte, writable: the host fills an allocated item through it.
    ///
    /// Creating the pointer is safe; writing through it is allowed only to the holder of a
    /// freshly allocated item, before the item is stored and while no other reference reads
    /// its value (memcached's contract between `allocate` and `store`), and within
    /// `value().len()` bytes.
    pub fn value_ptr(&self) -> *mut u8 {
        // In bounds: `nkey` is at most the length of the bytes.
        self.bytes.as_ptr().cast::<u8>().wrapping_add(self.nkey)
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
        self.bytes.len() + ITEM_OVERHEAD
    }
}

impl Drop for Item {
    fn drop(&mut self) {
        #[allow(unsafe_code)]
        // SAFETY: `bytes` came from `Box::leak` in `from_bytes` and is freed only here, once.
        drop(unsafe { Box::from_raw(self.bytes.as_ptr()) });
    }
}

impl fmt::Debug for Item {
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
