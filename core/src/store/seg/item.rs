//! An item where it lies ([`Item`]): its header read and written through a safe view of the
//! memory (every access atomic, see `memory`).

use super::index::Loc;
use super::layout::Shape;
use super::memory::Words;
use super::segments::Block;
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::sync::PayloadArc;
use std::fmt;

/// The meta word's bits: invalidated (served stale), recache token handed out, fetched, key
/// sent in base64 (memcached's `ITEM_KEY_BINARY`: `ms … b`); the last access time (seconds)
/// above them.
pub(crate) const STALE: u32 = 1;
pub(crate) const WON: u32 = 2;
pub(crate) const FETCHED: u32 = 4;
pub(crate) const KEY_BINARY: u32 = 8;
pub(crate) const ACCESS_SHIFT: u32 = 4;
/// The bits a note of an access keeps.
pub(crate) const KEPT: u32 = STALE | WON | KEY_BINARY;

/// The meta word's mark of a key sent in base64 (`key_binary`), or none.
pub(crate) fn key_mark(key_binary: bool) -> u32 {
    if key_binary {
        KEY_BINARY
    } else {
        0
    }
}

/// Where an item's bytes are (what [`Item::read`] and [`Item::write`] take).
#[derive(Clone)]
pub(crate) enum Place<'e> {
    /// In a segment: the segments' mapping, the location and its byte offset there.
    Seg {
        memory: &'e Words<AtomicU32>,
        loc: Loc,
        at: usize,
    },
    /// At the start of a block: a large object (with its location) or a detached allocation.
    Block {
        block: PayloadArc<Block>,
        loc: Option<Loc>,
    },
}

/// A location that names no item (a detached allocation's).
const NOWHERE: Loc = Loc {
    seg: u32::MAX,
    off: 0,
};

/// An item: where it is, and its length word as read (kept small: lookups move it around).
#[derive(Clone)]
pub(crate) struct Item<'e> {
    /// The segments' mapping (for an item in a segment).
    memory: Option<&'e Words<AtomicU32>>,
    /// The block it starts (a large object or a detached allocation).
    block: Option<PayloadArc<Block>>,
    /// Its byte offset in its words.
    at: usize,
    loc: Loc,
    /// Its shape, as its length word says (decoded once: every accessor needs it).
    shape: Shape,
}

impl fmt::Debug for Item<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Item")
            .field("loc", &self.loc())
            .field("shape", &self.shape())
            .finish()
    }
}

impl<'e> Item<'e> {
    #[inline]
    fn at_place(place: Place<'e>, shape: Shape) -> Self {
        match place {
            Place::Seg { memory, loc, at } => Self {
                memory: Some(memory),
                block: None,
                at,
                loc,
                shape,
            },
            Place::Block { block, loc } => Self {
                memory: None,
                block: Some(block),
                at: 0,
                loc: loc.unwrap_or(NOWHERE),
                shape,
            },
        }
    }

    /// The shape of the item at byte `at` of `memory` if its key is `key` (a lookup's probe:
    /// nothing is built for the items it passes over).
    #[inline]
    pub(crate) fn key_shape(
        memory: &Words<AtomicU32>,
        at: usize,
        cas: bool,
        key: &[u8],
    ) -> Option<Shape> {
        let shape = decode_at(memory, at, cas);
        (shape.klen() == key.len() && memory.eq_bytes(at + shape.key_at(), key)).then_some(shape)
    }

    /// The item in a segment at `loc` (byte `at` of `memory`) of `shape`.
    #[inline]
    pub(crate) fn in_segment(
        memory: &'e Words<AtomicU32>,
        loc: Loc,
        at: usize,
        shape: Shape,
    ) -> Self {
        Self::at_place(Place::Seg { memory, loc, at }, shape)
    }

    /// The item at `place`, as its header says (`cas`: the store keeps CAS words).
    #[inline]
    pub(crate) fn read(place: Place<'e>, cas: bool) -> Self {
        let shape = match &place {
            Place::Seg { memory, at, .. } => decode_at(memory, *at, cas),
            Place::Block { block, .. } => decode_at(&block.words, 0, cas),
        };
        Self::at_place(place, shape)
    }

    /// Writes a new item's header and key at `place` (a run the caller reserved): not
    /// published, meta and CAS words zero.
    pub(crate) fn write(
        place: Place<'e>,
        shape: Shape,
        key: &[u8],
        exptime: u32,
        flags: u32,
    ) -> Self {
        let (word, long) = shape.encode(false);
        let item = Self::at_place(place, shape);
        let (words, at) = item.words();
        // Relaxed (all the header words): published by the slot's Release store.
        item.word(0).store(word, Ordering::Relaxed);
        item.word(4).store(0, Ordering::Relaxed);
        if shape.cas {
            item.word(Shape::CAS_AT).store(0, Ordering::Relaxed);
            if shape.wide {
                item.word(Shape::CAS_AT + 4).store(0, Ordering::Relaxed);
            }
        }
        if shape.expiry {
            item.word(shape.expiry_at())
                .store(exptime, Ordering::Relaxed);
        }
        if shape.flags {
            item.word(shape.flags_at()).store(flags, Ordering::Relaxed);
        }
        if let Some(long) = long {
            item.word(shape.key_at() - 4).store(long, Ordering::Relaxed);
        }
        words.store_bytes(at + shape.key_at(), key);
        item
    }

    #[inline]
    fn words(&self) -> (&Words<AtomicU32>, usize) {
        // The segment first: most items are there.
        match (self.memory, &self.block) {
            (Some(memory), _) => (memory, self.at),
            (None, Some(block)) => (&block.words, 0),
            (None, None) => unreachable!("an item is in a segment or a block"),
        }
    }

    /// The header word at byte `offset` of the item.
    #[inline]
    fn word(&self, offset: usize) -> &AtomicU32 {
        let (words, at) = self.words();
        words.at((at + offset) / 4)
    }

    /// Its shape.
    #[inline]
    pub(crate) fn shape(&self) -> Shape {
        self.shape
    }

    /// The block it lies in, if not in a segment (a large object, a detached allocation).
    pub(crate) fn block(&self) -> Option<&PayloadArc<Block>> {
        self.block.as_ref()
    }

    /// Where it is (`None`: a detached allocation).
    #[inline]
    pub(crate) fn loc(&self) -> Option<Loc> {
        (self.loc != NOWHERE).then_some(self.loc)
    }

    /// Bytes it takes.
    pub(crate) fn size(&self) -> usize {
        self.shape.size()
    }

    /// Whether it was stored once (its bytes are then read by others and never change but
    /// for its meta and expiry words).
    #[inline]
    pub(crate) fn published(&self) -> bool {
        // Relaxed: set by the stamp before the slot's Release store (readers), or by this
        // thread (an allocation's owner).
        Shape::is_published(self.word(0).load(Ordering::Relaxed))
    }

    /// Whether its key is `key`.
    #[inline]
    pub(crate) fn key_is(&self, key: &[u8]) -> bool {
        let shape = self.shape();
        let (words, at) = self.words();
        shape.klen() == key.len() && words.eq_bytes(at + shape.key_at(), key)
    }

    /// Copies its key into `out` (at least 250 bytes); returns its length.
    pub(crate) fn key_into(&self, out: &mut [u8]) -> usize {
        let (words, at) = self.words();
        let n = self.shape.klen();
        words.load_bytes(at + self.shape.key_at(), &mut out[..n]);
        n
    }

    /// Copies the value's bytes `from..from + out.len()` into `out`.
    pub(crate) fn value_into(&self, from: usize, out: &mut [u8]) {
        let (words, at) = self.words();
        words.load_bytes(at + self.shape.value_at() + from, out);
    }

    /// Writes `bytes` at `from` in the value (an item the caller reserved, not published).
    pub(crate) fn write_value(&self, from: usize, bytes: &[u8]) {
        let (words, at) = self.words();
        words.store_bytes(at + self.shape.value_at() + from, bytes);
    }

    /// Zeroes the value (an allocation, before the host fills it).
    pub(crate) fn zero_value(&self) {
        let (words, at) = self.words();
        words.zero_bytes(at + self.shape.value_at(), self.shape.vlen());
    }

    /// Copies `len` value bytes of `source` from `from` to `to` in this one's value (an item
    /// the caller reserved).
    pub(crate) fn copy_value(&self, to: usize, source: &Item<'_>, from: usize, len: usize) {
        let (words, at) = self.words();
        let (src, src_at) = source.words();
        words.copy_from(
            at + self.shape.value_at() + to,
            src,
            src_at + source.shape().value_at() + from,
            len,
        );
    }

    /// Pointers to the key and the value, for the host (see `memory`'s docs).
    #[cfg(not(mcb_loom))]
    pub(crate) fn ptrs(&self) -> (*mut u8, *mut u8) {
        let (words, at) = self.words();
        (
            words.ptr(at + self.shape.key_at()),
            words.ptr(at + self.shape.value_at()),
        )
    }

    /// The client's flags.
    pub(crate) fn flags(&self) -> u32 {
        if self.shape.flags {
            // Relaxed: written before publication.
            self.word(self.shape.flags_at()).load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Its expiry (0: never).
    #[inline]
    pub(crate) fn exptime(&self) -> u32 {
        if self.shape.expiry {
            // Relaxed: a stand-alone value that touch changes in place; it orders nothing.
            self.word(self.shape.expiry_at()).load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Sets its expiry in place; false if it has no expiry word (and `exptime` is not 0):
    /// the caller rewrites the item.
    pub(crate) fn set_exptime(&self, exptime: u32) -> bool {
        if self.shape.expiry {
            // Relaxed: see `exptime`.
            self.word(self.shape.expiry_at())
                .store(exptime, Ordering::Relaxed);
            true
        } else {
            exptime == 0
        }
    }

    /// The meta word.
    #[inline]
    pub(crate) fn meta(&self) -> &AtomicU32 {
        self.word(4)
    }

    /// Its CAS (published), given its segment's base.
    pub(crate) fn cas(&self, base: u64) -> u64 {
        match (self.shape.cas, self.shape.wide) {
            (false, _) => 0,
            // Relaxed: written before publication.
            (true, false) => base + u64::from(self.word(Shape::CAS_AT).load(Ordering::Relaxed)),
            (true, true) => {
                // Relaxed (both): see above.
                let low = self.word(Shape::CAS_AT).load(Ordering::Relaxed);
                let high = self.word(Shape::CAS_AT + 4).load(Ordering::Relaxed);
                u64::from(low) | u64::from(high) << 32
            }
        }
    }

    /// The CAS an allocation's owner expects (kept in the meta and CAS words until it is
    /// stored; without CAS words only whether it is 0).
    pub(crate) fn expected_cas(&self) -> u64 {
        // Relaxed (both): the owner's own words.
        let low = self.word(4).load(Ordering::Relaxed);
        let high = if self.shape.cas {
            self.word(Shape::CAS_AT).load(Ordering::Relaxed)
        } else {
            0
        };
        u64::from(low) | u64::from(high) << 32
    }

    /// Sets the CAS an allocation's owner expects (memcached's `item_set_cas`); ignored once
    /// the item was stored.
    pub(crate) fn set_expected_cas(&self, cas: u64) {
        if self.published() {
            return;
        }
        // Relaxed (both): the owner's own words.
        if self.shape.cas {
            self.word(4).store(cas as u32, Ordering::Relaxed);
            self.word(Shape::CAS_AT)
                .store((cas >> 32) as u32, Ordering::Relaxed);
        } else {
            self.word(4).store(u32::from(cas != 0), Ordering::Relaxed);
        }
    }

    /// Stamps an unpublished item before its slot is published: its CAS (relative to `base`
    /// unless the item is wide; false if it does not fit: the caller rewrites it wide), its
    /// meta word, and the published bit.
    pub(crate) fn stamp(&self, cas: u64, base: u64, meta: u32) -> bool {
        debug_assert!(!self.published());
        // Relaxed (all): published by the slot's Release store.
        if self.shape.cas {
            if self.shape.wide {
                self.word(Shape::CAS_AT)
                    .store(cas as u32, Ordering::Relaxed);
                self.word(Shape::CAS_AT + 4)
                    .store((cas >> 32) as u32, Ordering::Relaxed);
            } else {
                match cas.checked_sub(base).map(u32::try_from) {
                    Some(Ok(delta)) => self.word(Shape::CAS_AT).store(delta, Ordering::Relaxed),
                    _ => return false,
                }
            }
        }
        self.meta().store(meta, Ordering::Relaxed);
        self.word(0)
            .store(self.shape.encode(true).0, Ordering::Relaxed);
        true
    }
}

/// The shape of the item at byte `at` of `words`.
#[inline]
fn decode_at(words: &Words<AtomicU32>, at: usize, cas: bool) -> Shape {
    // Relaxed (both): written before the item was published (the slot's Acquire load ordered
    // them) or by the reader itself (an allocation).
    let word = words.at(at / 4).load(Ordering::Relaxed);
    Shape::decode(word, cas, |long| {
        words.at((at + long) / 4).load(Ordering::Relaxed)
    })
    .0
}
