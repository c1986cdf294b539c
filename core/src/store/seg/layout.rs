//! How an item lies in a segment: one contiguous run, 4-byte aligned, of a header, the key and
//! the value, the header only as long as the item needs.
//!
//! | word | what | when |
//! | --- | --- | --- |
//! | length word | key length (8 bits), value length (20 bits; all ones: a fifth word holds it), and four bits: has an expiry, has flags, wide CAS, published | always |
//! | meta word | the meta commands' state (stale, token won, fetched, key sent in base64) and the last access time (seconds), changed in place (atomic) | always |
//! | CAS | 4 bytes: the CAS less its segment's base; wide: the whole 8 bytes | when the store uses CAS |
//! | expiry | host seconds, changed in place by touch (atomic) | when not 0 |
//! | flags | the client's 32 bits | when not 0 |
//! | long value length | 32 bits | when the value has 2^20 - 1 bytes or more (large objects) |
//!
//! A 12-byte key with a 100-byte value takes 124 bytes with CAS (a 12-byte header) and 120
//! without. Until an allocated item is stored, its meta and CAS words hold the CAS its owner
//! expects (`item_set_cas`); the store stamps both before publishing the item.

/// Bytes of the longest header: what `item_size_max` counts per item beyond key and value.
pub(crate) const MAX_HEADER: usize = 28;

const KEY_BITS: u32 = 8;
const VALUE_BITS: u32 = 20;
const VALUE_SHIFT: u32 = KEY_BITS;
/// A value length field of all ones: the length is in the long-length word.
const VALUE_LONG: u32 = (1 << VALUE_BITS) - 1;
const HAS_EXPIRY: u32 = 1 << 28;
const HAS_FLAGS: u32 = 1 << 29;
const WIDE_CAS: u32 = 1 << 30;
const PUBLISHED: u32 = 1 << 31;

/// The shape of one item: the lengths and which optional words it has (12 bytes: items are
/// passed around by value on the lookup path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Value bytes.
    pub value_len: u32,
    /// Key bytes (1 to 250).
    pub key_len: u8,
    /// Whether the store keeps CAS values (a store-wide setting, not a header bit).
    pub cas: bool,
    /// The CAS is 8 bytes, not an offset from the segment's base.
    pub wide: bool,
    /// Has an expiry word.
    pub expiry: bool,
    /// Has a flags word.
    pub flags: bool,
}

impl Shape {
    /// An item of `klen` key and `vlen` value bytes, with the optional words its expiry and
    /// flags need.
    pub(crate) fn new(klen: usize, vlen: usize, cas: bool, exptime: u32, flags: u32) -> Self {
        Self {
            key_len: klen as u8,
            value_len: vlen as u32,
            cas,
            wide: false,
            expiry: exptime != 0,
            flags: flags != 0,
        }
    }

    /// Key bytes.
    #[inline]
    pub(crate) fn klen(&self) -> usize {
        usize::from(self.key_len)
    }

    /// Value bytes.
    #[inline]
    pub(crate) fn vlen(&self) -> usize {
        self.value_len as usize
    }

    #[inline]
    fn long(&self) -> bool {
        self.value_len >= VALUE_LONG
    }

    /// Where the CAS word lies.
    pub(crate) const CAS_AT: usize = 8;

    #[inline]
    fn cas_len(&self) -> usize {
        match (self.cas, self.wide) {
            (false, _) => 0,
            (true, false) => 4,
            (true, true) => 8,
        }
    }

    /// Where the expiry word lies (when it has one).
    #[inline]
    pub(crate) fn expiry_at(&self) -> usize {
        Self::CAS_AT + self.cas_len()
    }

    /// Where the flags word lies (when it has one).
    #[inline]
    pub(crate) fn flags_at(&self) -> usize {
        self.expiry_at() + 4 * usize::from(self.expiry)
    }

    #[inline]
    fn long_at(&self) -> usize {
        self.flags_at() + 4 * usize::from(self.flags)
    }

    /// Where the key starts.
    #[inline]
    pub(crate) fn key_at(&self) -> usize {
        self.long_at() + 4 * usize::from(self.long())
    }

    /// Where the value starts.
    #[inline]
    pub(crate) fn value_at(&self) -> usize {
        self.key_at() + self.klen()
    }

    /// Bytes the item takes, a multiple of 4.
    #[inline]
    pub(crate) fn size(&self) -> usize {
        (self.value_at() + self.vlen() + 3) & !3
    }

    /// The length word, and the long-length word when it needs one.
    pub(crate) fn encode(&self, published: bool) -> (u32, Option<u32>) {
        let vfield = if self.long() {
            VALUE_LONG
        } else {
            self.value_len
        };
        let mut word = u32::from(self.key_len) | vfield << VALUE_SHIFT;
        for (on, bit) in [
            (self.expiry, HAS_EXPIRY),
            (self.flags, HAS_FLAGS),
            (self.wide, WIDE_CAS),
            (published, PUBLISHED),
        ] {
            if on {
                word |= bit;
            }
        }
        (word, self.long().then_some(self.value_len))
    }

    /// Whether a length word says its item was published.
    #[inline]
    pub(crate) fn is_published(word: u32) -> bool {
        word & PUBLISHED != 0
    }

    /// The shape a length word says (the long length read by `long` when it has one), and
    /// whether the item was published.
    #[inline]
    pub(crate) fn decode(word: u32, cas: bool, long: impl FnOnce(usize) -> u32) -> (Self, bool) {
        let mut shape = Self {
            key_len: (word & ((1 << KEY_BITS) - 1)) as u8,
            value_len: (word >> VALUE_SHIFT) & VALUE_LONG,
            cas,
            wide: word & WIDE_CAS != 0,
            expiry: word & HAS_EXPIRY != 0,
            flags: word & HAS_FLAGS != 0,
        };
        if shape.value_len == VALUE_LONG {
            shape.value_len = long(shape.long_at());
        }
        (shape, word & PUBLISHED != 0)
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_small_item_with_cas_has_a_twelve_byte_header() {
        let shape = Shape::new(12, 100, true, 0, 0);
        assert_eq!((shape.key_at(), shape.size()), (12, 124));
        assert_eq!(Shape::new(12, 100, false, 0, 0).size(), 120);
        let full = Shape {
            wide: true,
            ..Shape::new(250, 5 << 20, true, 9, 9)
        };
        assert_eq!(full.key_at(), MAX_HEADER);
    }

    #[test]
    fn the_length_word_round_trips() {
        for shape in [
            Shape::new(1, 0, true, 0, 0),
            Shape::new(250, VALUE_LONG as usize - 1, false, 1, 0),
            Shape {
                wide: true,
                ..Shape::new(7, 3 << 20, true, 5, 6)
            },
        ] {
            for published in [false, true] {
                let (word, long) = shape.encode(published);
                let decoded = Shape::decode(word, shape.cas, |at| {
                    assert_eq!(at + 4, shape.key_at());
                    long.expect("a long length")
                });
                assert_eq!(decoded, (shape, published));
            }
        }
    }
}
