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
use super::seg::{Block, Engine, Item, Loc, Place, MAX_OFFSET, MAX_SEGMENTS};
use super::turn;
use crate::sync::{Mutex, PayloadArc};
use std::fmt;

const BLOCK: u64 = 1 << 63;
const HOLD_SHIFT: u32 = 61;
/// With `Hold::Pinned`: an item a turn handed out (see `store::turn`), which may outlive it.
const TURN: u64 = 1 << 60;
const SEG_SHIFT: u32 = 20;
/// With `TURN`: the number of the turn's record of the item, above the segment's.
const RECORD_SHIFT: u32 = SEG_SHIFT + MAX_SEGMENTS.trailing_zeros();
/// The most items a turn records (more count holds of their own).
pub(crate) const TURN_RECORDS: usize = 1 << (TURN.trailing_zeros() - RECORD_SHIFT);
const _: () = assert!(MAX_OFFSET <= 1 << SEG_SHIFT && TURN_RECORDS >= 1024);

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

impl Blocks {
    /// The token of `item`, whose hold now goes with the token (see the module docs).
    pub(crate) fn token_of(&self, item: ItemRef<'_>) -> u64 {
        let hold = item.hold;
        let token = match (item.item.block(), item.item.loc()) {
            (None, Some(loc)) => {
                hold_bits(hold) << HOLD_SHIFT | u64::from(loc.seg) << SEG_SHIFT | u64::from(loc.off)
            }
            (block, loc) => {
                let block = block.expect("an item out of the segments lies in a block");
                let mut slots = self.slots.lock();
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

    /// The token of `item`, pinned by this thread's turn, which records it as `record` (below
    /// [`TURN_RECORDS`]): see `store::turn`.
    pub(crate) fn turn_token_of(&self, item: ItemRef<'_>, record: usize) -> u64 {
        debug_assert!(item.hold == Hold::Pinned && item.item.block().is_none());
        debug_assert!(record < TURN_RECORDS);
        self.token_of(item) | TURN | (record as u64) << RECORD_SHIFT
    }

    /// The item of `token` (from [`Blocks::token_of`], not released) in `engine`'s segments
    /// or this table; with `take`, its slot here is given back (memcached's `release`).
    pub(crate) fn token_item<'s>(
        &self,
        engine: &'s Engine,
        use_cas: bool,
        token: u64,
        take: bool,
    ) -> ItemRef<'s> {
        let (item, hold) = if token & BLOCK != 0 {
            let slot = (token & !BLOCK) as usize;
            let mut slots = self.slots.lock();
            let (block, loc, hold) = if take {
                let entry = slots.held[slot].take().expect("a held token");
                slots.free.push(slot);
                entry
            } else {
                slots.held[slot].clone().expect("a held token")
            };
            drop(slots);
            let place = Place::Block { block, loc };
            (Item::read(place, use_cas), hold)
        } else {
            let (loc, hold) = in_segment(token);
            (engine.item_at(loc).expect("a segment item"), hold)
        };
        ItemRef { engine, item, hold }
    }

    /// Gives back `token`'s hold (memcached's `release`) to the store at `store` (a turn's
    /// record names it so: `Store::address`). An item in the segments is not read: the token
    /// names its segment and its hold.
    pub(crate) fn release(&self, store: usize, engine: &Engine, use_cas: bool, token: u64) {
        if token & BLOCK != 0 {
            drop(self.token_item(engine, use_cas, token, true));
            return;
        }
        match in_segment(token) {
            (loc, Hold::Writer) => engine.drop_writer_at(loc),
            (loc, Hold::Counted) => engine.unhold_at(loc),
            (loc, Hold::Pinned) if token & TURN != 0 => {
                let record = (token & (TURN - 1)) >> RECORD_SHIFT;
                if !turn::given_back(store, loc, record as usize) {
                    engine.unhold_at(loc);
                }
            }
            (_, Hold::Pinned) => {}
        }
    }
}

/// The location and hold of a token that names an item in the segments (no `BLOCK` bit).
fn in_segment(token: u64) -> (Loc, Hold) {
    let loc = Loc {
        seg: ((token >> SEG_SHIFT) as usize & (MAX_SEGMENTS - 1)) as u32,
        off: (token & ((1 << SEG_SHIFT) - 1)) as u32,
    };
    (loc, hold_of(token >> HOLD_SHIFT & 3))
}
