//! An item as the store hands it out ([`ItemRef`]): a view of an item where it lies in its
//! segment (or large object), and what keeps it readable there.
//!
//! A held item stays readable after the store replaced, deleted, evicted or flushed it: a
//! counted hold keeps its segment from reuse (`Store::get`, what a foreign host gets); a pinned
//! one needs no count, the pin itself delays reuse (`Store::get_pinned`, within a turn of our
//! host); an allocation holds its segment as a writer until it is let go, and the store may
//! link it in place. The bytes are read by copying (every access to segment memory is
//! atomic); the C boundary reads them through raw pointers instead ([`ItemRef::raw_parts`]).

use super::seg::{Engine, Item, ACCESS_SHIFT, FETCHED, KEPT, KEY_BINARY, MAX_HEADER, STALE, WON};
use crate::sync::atomic::Ordering;
use std::fmt;

/// As memcached's `ITEM_UPDATE_INTERVAL`: an item's access time is rewritten by a fetch only
/// once it is this many seconds old.
pub(crate) const ACCESS_UPDATE: RelTime = 60;

/// Seconds on the host's clock (memcached's `rel_time_t`); an expiry of 0 means never.
pub type RelTime = u32;

/// Bytes an item may cost beyond its key and value (its longest header), counted against
/// `item_size_max`. A small item's header is shorter: 12 bytes with CAS, 8 without.
pub const ITEM_OVERHEAD: usize = MAX_HEADER;

/// What keeps a handed-out item readable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hold {
    /// An allocation: a writer on its segment until let go.
    Writer,
    /// A counted hold on its segment.
    Counted,
    /// The caller's pin (nothing to let go).
    Pinned,
}

/// An item handed out by the store (see the module docs). Letting it go (drop) gives its hold
/// back.
pub struct ItemRef<'s> {
    /// The segments the item lies in (its hold is theirs).
    pub(crate) engine: &'s Engine,
    pub(crate) item: Item<'s>,
    pub(crate) hold: Hold,
}

impl fmt::Debug for ItemRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ItemRef")
            .field("key", &String::from_utf8_lossy(&self.key()))
            .field("nbytes", &self.value_len())
            .field("flags", &self.flags())
            .field("exptime", &self.exptime())
            .field("cas", &self.cas())
            .field("hold", &self.hold)
            .finish()
    }
}

impl Drop for ItemRef<'_> {
    fn drop(&mut self) {
        let engine = self.engine;
        match self.hold {
            Hold::Writer => engine.drop_writer(&self.item),
            Hold::Counted => engine.unhold(&self.item),
            Hold::Pinned => {}
        }
    }
}

impl<'s> ItemRef<'s> {
    /// The key's length.
    pub fn key_len(&self) -> usize {
        self.item.shape().klen()
    }

    /// The key (a copy).
    pub fn key(&self) -> Vec<u8> {
        let mut key = [0; 256];
        let n = self.item.key_into(&mut key);
        key[..n].to_vec()
    }

    /// The value's length.
    pub fn value_len(&self) -> usize {
        self.item.shape().vlen()
    }

    /// The value (a copy).
    pub fn value(&self) -> Vec<u8> {
        let mut value = vec![0; self.value_len()];
        self.item.value_into(0, &mut value);
        value
    }

    /// Copies the value's bytes from `from` into `out`.
    pub fn value_into(&self, from: usize, out: &mut [u8]) {
        self.item.value_into(from, out);
    }

    /// Pointers to the key and value bytes, for the C boundary: the host reads them while it
    /// holds the item, and fills an allocation's value before storing it (memcached's engine
    /// interface). Making them is safe; using them is the C boundary's contract.
    #[cfg(not(mcb_loom))]
    pub fn raw_parts(&self) -> (*const u8, *mut u8) {
        let (key, value) = self.item.ptrs();
        (key.cast_const(), value)
    }

    /// The flags, as stored.
    pub fn flags(&self) -> u32 {
        self.item.flags()
    }

    /// When it expires (host seconds; 0: never).
    pub fn exptime(&self) -> RelTime {
        self.item.exptime()
    }

    /// Its CAS: the expected one before a store (as the caller set it), its unique one after.
    pub fn cas(&self) -> u64 {
        if self.item.published() {
            self.engine.cas_of(&self.item)
        } else {
            self.item.expected_cas()
        }
    }

    /// Sets the CAS a store of this allocation expects (memcached's `item_set_cas`); ignored
    /// on an item already stored.
    pub fn set_cas(&self, cas: u64) {
        self.item.set_expected_cas(cas);
    }

    /// Bytes it takes in its segment.
    pub fn size(&self) -> usize {
        self.item.size()
    }

    /// Whether the item was invalidated (served stale until recached).
    pub fn is_stale(&self) -> bool {
        self.meta_bits() & STALE != 0
    }

    /// Whether its key came in base64 (stored by `ms … b`): memcached's meta commands then
    /// answer the key in base64, whatever the request's `b`.
    pub fn key_binary(&self) -> bool {
        self.meta_bits() & KEY_BINARY != 0
    }

    fn meta_bits(&self) -> u32 {
        if !self.item.published() {
            return 0;
        }
        // Relaxed: flags set before publication or by a lone RMW; they order no data.
        self.item.meta().load(Ordering::Relaxed)
    }

    /// Takes the recache token: true for the one caller that found it free.
    pub fn take_token(&self) -> bool {
        if !self.item.published() {
            return false;
        }
        if crate::sync::mutant::active(crate::sync::mutant::Mutant::TokenCheckThenTake) {
            // Relaxed (both): the broken form the loom model must catch.
            let bits = self.item.meta().load(Ordering::Relaxed);
            if bits & WON != 0 {
                return false;
            }
            self.item.meta().store(bits | WON, Ordering::Relaxed);
            return true;
        }
        // Relaxed: the RMW alone makes one winner (all RMWs of one atomic are totally
        // ordered); the token publishes no other data.
        self.item.meta().fetch_or(WON, Ordering::Relaxed) & WON == 0
    }

    pub(crate) fn token_taken(&self) -> bool {
        self.meta_bits() & WON != 0
    }

    /// Whether it was fetched before, and when it was last accessed (stored, if never).
    pub fn access(&self) -> (bool, RelTime) {
        access_of(self.meta_bits())
    }

    /// Notes a fetch at `now`; returns what [`ItemRef::access`] said before it. As memcached,
    /// the access time is rewritten only once it is a minute old, and the fetched mark once,
    /// so that a hot item's fetches only read it.
    pub fn note_access(&self, now: RelTime) -> (bool, RelTime) {
        if !self.item.published() {
            return (false, 0);
        }
        let meta = self.item.meta();
        // Relaxed: as in `meta_bits`.
        let before = access_of(meta.load(Ordering::Relaxed));
        let stale_time = now.saturating_sub(before.1) >= ACCESS_UPDATE;
        if !before.0 || stale_time {
            let at = if stale_time { now } else { before.1 };
            // Relaxed (both): statistics of the item; the token bits are kept by the RMW.
            let _ = meta.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |word| {
                Some(word & KEPT | FETCHED | at << ACCESS_SHIFT)
            });
        }
        before
    }

    /// Whether it lies in a segment, not in memory of its own (large objects, detached
    /// allocations).
    pub fn in_segment(&self) -> bool {
        self.item.block().is_none()
    }
}

/// What a meta word says of the item's accesses: fetched before, and when last accessed.
fn access_of(word: u32) -> (bool, RelTime) {
    (word & FETCHED != 0, word >> ACCESS_SHIFT)
}
