//! The ghost: S3-FIFO's record of keys evicted before anyone read them, as a direct-mapped
//! table of 16-bit tags of their hashes. A key stored again while its tag is there was evicted
//! too soon (it is wanted again within about a cache's worth of writes): it starts as read, so
//! that the eviction of its segment keeps it in the main queue instead of dropping it once more.
//!
//! A hint and nothing more: a tag another key overwrote, or a race between two threads on one
//! entry, only changes which queue an item goes to (so the loom models' tiny stores, which
//! have none, lose no proof).

use super::index::Hash;
use crate::sync::atomic::{AtomicU16, Ordering};

pub(crate) struct Ghost {
    tags: Box<[AtomicU16]>,
}

impl Ghost {
    /// A ghost of `entries` tags (rounded up to a power of two); none for 0.
    pub(crate) fn new(entries: usize) -> Self {
        let entries = Self::bytes_for(entries) / 2;
        Self {
            tags: (0..entries).map(|_| AtomicU16::new(0)).collect(),
        }
    }

    /// Bytes the table of `entries` tags takes (beside the store's budget).
    fn bytes_for(entries: usize) -> usize {
        match entries {
            0 => 0,
            n => n.next_power_of_two() * 2,
        }
    }

    /// The entry of `hash` and the tag it keeps there: hash bits other than those that choose
    /// the entry (the low bits) and the index's tag (the top 16), never 0 (an empty entry).
    fn entry(&self, hash: Hash) -> Option<(&AtomicU16, u16)> {
        let entry = self
            .tags
            .get(hash.0 as usize & self.tags.len().wrapping_sub(1))?;
        Some((entry, ((hash.0 >> 32) as u16).max(1)))
    }

    /// Records that the key of `hash` was evicted unread.
    pub(crate) fn remember(&self, hash: Hash) {
        if let Some((entry, tag)) = self.entry(hash) {
            // Relaxed: a hint; it publishes nothing.
            entry.store(tag, Ordering::Relaxed);
        }
    }

    /// Whether the key of `hash` was evicted unread lately; forgets it if so.
    pub(crate) fn recall(&self, hash: Hash) -> bool {
        let Some((entry, tag)) = self.entry(hash) else {
            return false;
        };
        // Relaxed (both): a hint, as in `remember`.
        let found = entry.load(Ordering::Relaxed) == tag;
        if found {
            entry.store(0, Ordering::Relaxed);
        }
        found
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_key_is_recalled_once_and_others_are_not() {
        let ghost = Ghost::new(1000);
        assert_eq!((Ghost::bytes_for(1000), Ghost::bytes_for(0)), (2048, 0));
        let (a, b) = (Hash(0x1234_5678_9abc_0001), Hash(0x1234_5679_9abc_0001));
        assert!(!ghost.recall(a));
        ghost.remember(a);
        assert!(!ghost.recall(b), "another tag at the same entry");
        assert!(ghost.recall(a));
        assert!(!ghost.recall(a), "forgotten once recalled");
        ghost.remember(a);
        ghost.remember(b);
        assert!(!ghost.recall(a), "overwritten by a later key of its entry");
        assert!(ghost.recall(b));
        let none = Ghost::new(0);
        none.remember(a);
        assert!(!none.recall(a), "no ghost, no recall");
    }
}
