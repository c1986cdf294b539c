//! A host's turn: gets on a thread whose host ends its turns (`store::end_turn`) hand out items
//! under one pin kept from the turn's first get to its end, with no counted hold (a get then
//! writes no hold count, and pins once per turn instead of once per get). The end of a turn
//! gives every such item not yet given back a counted hold, then unpins: an item that outlives
//! its turn (a large value still being sent) keeps its segment from reuse as a foreign host's
//! items do, and a thread waiting for its next turn holds no grace period up.
//!
//! A thread ends its turns once it has ended one: the first turn of a thread, and every turn
//! of a host that never calls `end_turn` (a foreign host), is served with counted holds.
//! Items handed out within a turn must be given back on the thread that got them (our host's
//! workers own their connections); each is recorded here with its store until it is given
//! back or its turn ends, and its token carries its record's number, so a give-back finds
//! its record at once, and one that finds none is of an item that has outlived its turn, and
//! lets its counted hold go.
//!
//! A record names its store by address only, never reads through it: the end of a turn asks
//! its caller for the store at that address (`end_turn`'s `with_store`), which the C
//! boundary can answer (memcached's engines outlive the items they hand out), and the store
//! cannot. Nothing here is `unsafe`: a caller that breaks the rules makes a host read another
//! item's bytes, never makes the store's own reads undefined behaviour (they are atomic:
//! `seg::memory`).
//!
//! One pin serves every store the thread reads: the std build's domain is the process's
//! collector (the loom models use one store).

use super::seg::{Engine, Loc};
use crate::sync::epoch::Pinned;
use crate::sync::mutant::{self, Mutant};
use std::cell::RefCell;

/// An item handed out in this turn: its store's address and its place.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Handed {
    store: usize,
    loc: Loc,
}

/// This thread's turn.
#[derive(Default)]
struct Turn {
    /// Whether this thread's host ends its turns (it has ended one).
    ends: bool,
    /// The turn's pin, from its first get.
    pin: Option<Pinned>,
    /// What the turn handed out, by the record number its token carries; `None` once given
    /// back (and taken off the end, so that a turn whose items all came back holds none).
    handed: Vec<Option<Handed>>,
}

#[cfg(not(mcb_loom))]
thread_local! {
    static TURN: RefCell<Turn> = RefCell::new(Turn::default());
}
#[cfg(mcb_loom)]
loom::thread_local! {
    static TURN: RefCell<Turn> = RefCell::new(Turn::default());
}

/// On a thread that ends its turns: runs `find` under the turn's pin (taken from `engine` on
/// the turn's first get), telling it the record number the item it hands out would take
/// (`None` when the turn holds `records` already: that item counts a hold of its own), and
/// records the item at the place `find` returns, if any, as `store`'s (its address:
/// `Store::address`). `None` on a thread that does not end its turns (or is exiting): the
/// caller counts a hold.
#[inline]
pub(super) fn pinned<R>(
    store: usize,
    engine: &Engine,
    records: usize,
    find: impl FnOnce(&Pinned, Option<usize>) -> Option<(R, Option<Loc>)>,
) -> Option<Option<R>> {
    TURN.try_with(|turn| {
        let mut turn = turn.borrow_mut();
        if !turn.ends {
            return None;
        }
        let turn = &mut *turn;
        let pin = turn.pin.get_or_insert_with(|| engine.pin());
        let record = Some(turn.handed.len()).filter(|&n| n < records);
        let found = find(pin, record).map(|(found, loc)| {
            if let Some(loc) = loc {
                turn.handed.push(Some(Handed { store, loc }));
            }
            found
        });
        Some(found)
    })
    .ok()
    .flatten()
}

/// Takes record `record` of this turn, of the item of `store` (its address) at `loc`, given
/// back now; `false` when there is none: the item outlived its turn, and has a counted hold to
/// let go. (A token of an earlier turn may find a record of this one with the same store and
/// place: it takes the record, and the item that record is of lets go of that token's hold in
/// its stead; both name one segment, so the counts come out the same.)
pub(super) fn given_back(store: usize, loc: Loc, record: usize) -> bool {
    TURN.try_with(|turn| {
        let mut turn = turn.borrow_mut();
        let turn = &mut *turn;
        let entry = turn.handed.get_mut(record)?;
        if *entry != Some(Handed { store, loc }) {
            return None;
        }
        *entry = None;
        // Numbers freed at the end are taken again (a turn of many single gets, or a
        // multi-get's items given back last first, or all of them given back).
        while turn.handed.last() == Some(&None) {
            turn.handed.pop();
        }
        Some(())
    })
    .ok()
    .flatten()
    .is_some()
}

/// Ends the calling thread's turn (and from now on, serves its gets by turns): `hold(store,
/// loc)` counts a hold on each item handed out since the turn began and not given back, then
/// the thread unpins ([`end_turn`](super::end_turn)).
pub(super) fn end(mut hold: impl FnMut(usize, Loc)) {
    let _ = TURN.try_with(|turn| {
        let mut turn = turn.borrow_mut();
        turn.ends = true;
        if mutant::active(Mutant::TurnEndUnpinsFirst) {
            turn.pin = None;
        }
        if !mutant::active(Mutant::TurnEndSkipsHolds) {
            for handed in turn.handed.iter().flatten() {
                // The hold is counted before the pin below goes, as a get's.
                hold(handed.store, handed.loc);
            }
        }
        turn.handed.clear();
        turn.pin = None;
    });
}
