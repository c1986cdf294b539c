//! Items as 64-bit tokens, for the C boundary: memcached's engine interface hands the host an
//! opaque `item *` for each allocated or fetched item and takes it back on every later call
//! (`store`, `get_item_info`, `item_set_cas`, `release`), so the boundary passes a token where
//! a pointer would go. A token names an item in a segment by its location and hold; one in
//! memory of its own (a large object, a detached allocation) by a slot of a small table here,
//! which keeps that memory alive until the token is released.
//!
//! A token is never 0. Turning a made-up token back into an item cannot break memory safety
//! (every access to the store's memory is atomic and bounds-checked), only the counts of
//! holds: the boundary passes back exactly the tokens it was given, each released once.

use super::item::{Hold, ItemRef};
use super::seg::{Block, Item, Loc, Place};
use super::Store;
use crate::sync::{Mutex, PayloadArc};
use std::fmt;

const BLOCK: u64 = 1 << 63;
const HOLD_SHIFT: u32 = 61;
const SEG_SHIFT: u32 = 20;

fn hold_bits(hold: Hold) -> u64 {
    match hold {
        Hold::Writer => 1,
        Hold::Counted => 2,
        Hold::Pinned => 3,
    }
}

fn hold_of(bits: u64) -> Hold {
    match bits {
        1 => Hold::Writer,
        2 => Hold::Counted,
        _ => Hold::Pinned,
    }
}

/// Items in memory of their own that the host holds, by slot.
#[derive(Default)]
pub(crate) struct Blocks {
    slots: Mutex<Slots>,
}

/// A held block: the block, its location (large objects) and the hold.
type Held = (PayloadArc<Block>, Option<Loc>, Hold);

#[derive(Default)]
struct Slots {
    held: Vec<Option<Held>>,
    free: Vec<usize>,
}

impl fmt::Debug for Blocks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Blocks")
    }
}

impl Store {
    /// The token of `item`, whose hold now goes with the token (see the module docs).
    pub fn into_token(&self, item: ItemRef<'_>) -> u64 {
        let hold = item.hold;
        let token = match (item.item.block(), item.item.loc()) {
            (None, Some(loc)) => {
                hold_bits(hold) << HOLD_SHIFT | u64::from(loc.seg) << SEG_SHIFT | u64::from(loc.off)
            }
            (block, loc) => {
                let block = block.expect("an item out of the segments lies in a block");
                let mut slots = self.blocks.slots.lock();
                let entry = Some((PayloadArc::clone(block), loc, hold));
                let slot = match slots.free.pop() {
                    Some(slot) => {
                        slots.held[slot] = entry;
                        slot
                    }
                    None => {
                        slots.held.push(entry);
                        slots.held.len() - 1
                    }
                };
                BLOCK | slot as u64
            }
        };
        // The hold went with the token.
        let mut item = item;
        item.hold = Hold::Pinned;
        token
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
        drop(self.token_item(token, true));
    }

    fn token_item(&self, token: u64, take: bool) -> ItemRef<'_> {
        let (item, hold) = if token & BLOCK != 0 {
            let slot = (token & !BLOCK) as usize;
            let mut slots = self.blocks.slots.lock();
            let (block, loc, hold) = if take {
                let entry = slots.held[slot].take().expect("a held token");
                slots.free.push(slot);
                entry
            } else {
                slots.held[slot].clone().expect("a held token")
            };
            drop(slots);
            let place = Place::Block { block, loc };
            (Item::read(place, self.config().use_cas), hold)
        } else {
            let loc = Loc {
                seg: ((token >> SEG_SHIFT) & ((1 << (HOLD_SHIFT - SEG_SHIFT)) - 1)) as u32,
                off: (token & ((1 << SEG_SHIFT) - 1)) as u32,
            };
            let item = self.engine.item_at(loc).expect("a segment item");
            (item, hold_of(token >> HOLD_SHIFT & 3))
        };
        ItemRef {
            store: self,
            item,
            hold,
        }
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;
    use crate::store::{Config, ManualClock, StoreOp};

    #[test]
    fn tokens_round_trip_for_segment_items_and_large_ones() {
        let config = Config {
            item_size_max: 4 << 20,
            ..Config::default()
        };
        let store = Store::new(config, Box::new(ManualClock::new(1))).unwrap();
        let small = store.item(b"small", b"v", 0, 0).unwrap();
        let large = store.item(b"large", &vec![7; 2 << 20], 0, 0).unwrap();
        assert!(small.in_segment() && !large.in_segment());
        for item in [small, large] {
            let key = item.key();
            let token = store.into_token(item);
            assert_ne!(token, 0);
            store.with_token(token, |item| {
                assert_eq!(item.key(), key);
                store.store(item, StoreOp::Set).unwrap();
            });
            store.release_token(token);
            let got = store.get(&key).unwrap();
            let token = store.into_token(got);
            store.with_token(token, |item| assert_eq!(item.key(), key));
            store.release_token(token);
        }
        assert_eq!(store.get(b"large").unwrap().value_len(), 2 << 20);
    }
}
