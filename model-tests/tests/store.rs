//! loom models of the segment store (`mcb_core::store`), each run on the real code (`check`)
//! and on a deliberately broken variant it must reject (`caught`): a slot published before its
//! item's bytes, a segment reused under a pinned reader, an eviction racing a get and a set of
//! the same key, a counted hold racing the reuse of its segment (also one let go on another
//! thread than the one that took it), a host's turn's items (read within the turn, and one
//! that outlives it) racing it too, and a reader racing a slot's
//! move to its other index bucket (on the index alone: `store::index_model`); and the store's
//! statistics (`sync::Counts`, which the store counts with): a count of a thread that exited
//! is kept when another takes its slot, and a reset is never undone.
//!
//! The stores are tiny (64-byte segments, one index bucket) and filled before the model's
//! threads start, so that one write of a thread is what evicts and reuses a segment. A store
//! operation is many modelled steps, so these models allow loom more branches per execution
//! than its default (`LOOM_MAX_BRANCHES`, which a run may still set).

#![cfg(mcb_loom)]

use mcb_core::store::index_model::{Keys, FIRST_UNTIL};
use mcb_core::store::{end_turn, Config, ManualClock, Store, StoreOp};
use mcb_core::sync::atomic::{AtomicBool, Ordering};
use mcb_core::sync::mutant::Mutant;
use mcb_core::sync::{thread, Arc, Counts};
use mcb_model_tests::{caught, check as check_one};

/// How loom rejects a broken variant that lets a reader's read of an item's bytes and a
/// write of them (the item's own, or a reuse's) happen in no order: the segment's bytes record
/// their accesses in the loom build (`seg/memory.rs`), and loom reports the race itself,
/// before the model's check of the value read can fail.
const BYTES_RACE: &str = "Causality violation: Concurrent read and write accesses";

/// Runs a model on the real code with room for the store's many steps.
fn check<F: Fn() + Sync + Send + 'static>(model: F) {
    more_branches();
    check_one(model);
}

/// Raises loom's branch bound for these models (and their broken variants' child processes).
fn more_branches() {
    if std::env::var_os("LOOM_MAX_BRANCHES").is_none() {
        std::env::set_var("LOOM_MAX_BRANCHES", "20000");
    }
}

/// Three 64-byte segments (each holds three 20-byte items: a 12-byte header, a 1-byte key and
/// a 6-byte value), one index bucket, one lane.
fn tiny_store() -> Arc<Store> {
    let config = Config {
        cache_size: 256,
        item_size_max: 64,
        segment_size: 64,
        lanes: 1,
        ..Config::default()
    };
    Arc::new(Store::new(config, Box::new(ManualClock::new(1))).expect("a tiny store"))
}

fn set(store: &Store, key: &[u8], value: &[u8]) {
    let item = store.item(key, value, 0, 0).expect("room");
    store.store(&item, StoreOp::Set).expect("stored");
}

/// A writer stores a key while a reader gets it: the reader sees nothing or the whole item
/// (its value's second word included), never a slot whose item is not written yet.
fn slot_after_bytes() {
    let store = tiny_store();
    let writer = {
        let store = store.clone();
        thread::spawn(move || set(&store, b"k", b"abcdef"))
    };
    if let Some(item) = store.get(b"k") {
        assert_eq!(item.value(), b"abcdef", "an item read before its bytes");
    }
    writer.join().expect("writer");
}

#[test]
fn store_publishes_a_slot_after_its_item() {
    check(slot_after_bytes);
}

#[test]
fn store_publishes_a_slot_after_its_item_catches_a_relaxed_slot_store() {
    more_branches();
    caught(Mutant::SlotPublishedRelaxed, BYTES_RACE, slot_after_bytes);
}

/// Two segments (one index bucket): `k` and two more keys in the first, three in the second,
/// so that the next write must evict the first segment (`k`'s) and reuse it.
fn full_store() -> Arc<Store> {
    let config = Config {
        cache_size: 192,
        item_size_max: 64,
        segment_size: 64,
        lanes: 1,
        ..Config::default()
    };
    let store = Arc::new(Store::new(config, Box::new(ManualClock::new(1))).expect("a tiny store"));
    set(&store, b"k", b"aaaaaa");
    for key in [b"1", b"2", b"3", b"4", b"5"] {
        set(&store, key, b"......");
    }
    store
}

/// A pinned reader reads `k` while a writer's store evicts `k`'s segment and reuses it: the
/// reader reads `k` whole (the segment is reused only after the reader unpinned).
fn reuse_after_grace() {
    let store = full_store();
    let writer = {
        let store = store.clone();
        thread::spawn(move || set(&store, b"6", b"zzzzzz"))
    };
    {
        let pin = store.pin();
        if let Some(item) = store.get_pinned(&pin, b"k") {
            assert_eq!(item.value(), b"aaaaaa", "a segment reused under a reader");
        };
    }
    writer.join().expect("writer");
}

#[test]
fn store_reuses_a_segment_after_its_grace_period() {
    check(reuse_after_grace);
}

#[test]
fn store_reuses_a_segment_after_its_grace_period_catches_reuse_without_grace() {
    more_branches();
    caught(Mutant::ReuseSkipsGrace, BYTES_RACE, reuse_after_grace);
}

/// Spawns a writer whose store of `6` evicts `k`'s segment (in `full_store`) and tries to
/// reuse it (room may be short while `k`'s segment is held), first counting a miss if
/// `miss_first` (which takes a slot number before the model's other threads can, in some
/// executions), and raising the flag it returns when done.
fn evicting_writer(
    store: &Arc<Store>,
    miss_first: bool,
) -> (thread::JoinHandle<()>, Arc<AtomicBool>) {
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (store, done) = (store.clone(), done.clone());
        thread::spawn(move || {
            if miss_first {
                assert!(store.get(b"x").is_none());
            }
            let _ = store
                .item(b"6", b"zzzzzz", 0, 0)
                .and_then(|item| store.store(&item, StoreOp::Set));
            // Release: pairs with `read_and_let_go`'s Acquire load.
            done.store(true, Ordering::Release);
        })
    };
    (writer, done)
}

/// Reads the held `k` and lets it go, after a look at the writer's `done` flag, so that loom
/// tries the writer first (its reduction otherwise misses that order: the writer's own reads
/// of the segment come between the reader's reads and the writer's writes). Whatever the look
/// reads, the hold must keep the bytes.
fn read_and_let_go(store: &Store, token: u64, done: &AtomicBool) {
    // Acquire: see above.
    let _ = done.load(Ordering::Acquire);
    store.with_token(token, |item| {
        assert_eq!(item.value(), b"aaaaaa", "a held item's segment reused");
    });
    store.release_token(token);
}

/// A reader holds `k` by a counted hold (as a foreign host does) and reads it after it
/// unpinned, while a writer's store evicts `k`'s segment and tries to reuse it: the hold keeps
/// the segment from reuse until it is let go (the writer may then give up).
fn hold_blocks_reuse() {
    let store = full_store();
    let token = store.into_token(store.get(b"k").expect("k is stored"));
    let (writer, done) = evicting_writer(&store, false);
    read_and_let_go(&store, token, &done);
    writer.join().expect("writer");
}

#[test]
fn store_counted_hold_blocks_reuse() {
    check(hold_blocks_reuse);
}

#[test]
fn store_counted_hold_blocks_reuse_catches_reuse_ignoring_holds() {
    more_branches();
    caught(Mutant::ReuseSkipsHolds, BYTES_RACE, hold_blocks_reuse);
}

/// Our host's turns (`end_turn`): the main thread ends a first turn, so that its gets come
/// pinned by its turns, then gets `k` in a turn while a writer's store evicts `k`'s segment
/// and tries to reuse it, and reads `k` and lets it go: before its turn ends, or (with
/// `outlived`) after.
fn turn_model(outlived: bool) {
    let store = full_store();
    let end = || end_turn(|_, count| count(&store));
    end();
    let token = store.fetch_token(b"k").expect("k is stored");
    let (writer, done) = evicting_writer(&store, false);
    if outlived {
        end();
    }
    read_and_let_go(&store, token, &done);
    if !outlived {
        end();
    }
    writer.join().expect("writer");
}

/// `k` read and let go within its turn: the turn's pin keeps its segment until the turn ends,
/// with no counted hold.
fn turn_pins_its_items() {
    turn_model(false);
}

#[test]
fn store_turn_pins_the_items_it_hands_out() {
    check(turn_pins_its_items);
}

#[test]
fn store_turn_pins_the_items_it_hands_out_catches_reuse_without_grace() {
    more_branches();
    caught(Mutant::ReuseSkipsGrace, BYTES_RACE, turn_pins_its_items);
}

/// An item still out when its turn ends (a large value still being sent): the turn ends (and
/// unpins) before the main thread reads `k` and lets it go; the end of the turn counts a hold
/// on `k`'s segment, which keeps it from reuse.
fn item_outlives_its_turn() {
    turn_model(true);
}

#[test]
fn store_item_outliving_its_turn_blocks_reuse() {
    check(item_outlives_its_turn);
}

#[test]
fn store_item_outliving_its_turn_blocks_reuse_catches_an_end_of_turn_that_unpins_first() {
    more_branches();
    caught(
        Mutant::TurnEndUnpinsFirst,
        BYTES_RACE,
        item_outlives_its_turn,
    );
}

#[test]
fn store_item_outliving_its_turn_blocks_reuse_catches_an_end_of_turn_without_holds() {
    more_branches();
    caught(
        Mutant::TurnEndSkipsHolds,
        BYTES_RACE,
        item_outlives_its_turn,
    );
}

/// A hold taken on one thread and let go on another (a host may release an item on another
/// thread than the one that got it), racing the reuse of its segment: `k` is held by a helper
/// thread, which hands its token to the main thread, which reads `k` and lets it go; the
/// writer evicts `k`'s segment meanwhile (maybe before the helper finds it). The writer
/// counts a miss first, so that in some executions the helper's hold counts in the shared row
/// of `Tally` (and in a row of its own in the others).
fn hold_let_go_elsewhere() {
    let store = full_store();
    let (writer, done) = evicting_writer(&store, true);
    // The writer may have evicted `k` (unread) before the helper looks.
    let token = {
        let store = store.clone();
        thread::spawn(move || store.get(b"k").map(|item| store.into_token(item)))
            .join()
            .expect("helper")
    };
    if let Some(token) = token {
        read_and_let_go(&store, token, &done);
    }
    writer.join().expect("writer");
}

#[test]
fn store_hold_let_go_on_another_thread_blocks_reuse() {
    check(hold_let_go_elsewhere);
}

#[test]
fn store_hold_let_go_on_another_thread_blocks_reuse_catches_a_sum_without_the_shared_row() {
    more_branches();
    caught(
        Mutant::TallySkipsSharedRow,
        BYTES_RACE,
        hold_let_go_elsewhere,
    );
}

/// The other way round: the main thread holds `k` and hands its token to a helper thread,
/// which reads `k` and lets it go while the writer evicts `k`'s segment. The writer counts a
/// miss first, so that in some executions the helper has no slot number and lets the hold go
/// in the shared row.
fn hold_let_go_by_another_thread() {
    let store = full_store();
    let token = store.into_token(store.get(b"k").expect("k is stored"));
    let (writer, done) = evicting_writer(&store, true);
    let helper = {
        let store = store.clone();
        thread::spawn(move || read_and_let_go(&store, token, &done))
    };
    helper.join().expect("helper");
    writer.join().expect("writer");
}

#[test]
fn store_hold_taken_here_and_let_go_by_another_thread_blocks_reuse() {
    check(hold_let_go_by_another_thread);
}

#[test]
fn store_hold_taken_here_and_let_go_by_another_thread_blocks_reuse_catches_reuse_ignoring_holds() {
    more_branches();
    caught(
        Mutant::ReuseSkipsHolds,
        BYTES_RACE,
        hold_let_go_by_another_thread,
    );
}

/// Three segments: `k` in the first (its other items replaced since), the second full, the
/// third holding an allocation of `k`'s new value (not stored yet: it keeps that segment from
/// eviction) and full; the allocation as a token.
fn store_with_new_k() -> (Arc<Store>, u64) {
    let config = Config {
        cache_size: 256,
        item_size_max: 64,
        segment_size: 64,
        lanes: 1,
        ..Config::default()
    };
    let store = Arc::new(Store::new(config, Box::new(ManualClock::new(1))).expect("a tiny store"));
    set(&store, b"k", b"aaaaaa");
    for key in [b"1", b"2", b"3", b"4", b"5"] {
        set(&store, key, b"......");
    }
    let new = store.item(b"k", b"bbbbbb", 0, 0).expect("room");
    let token = store.into_token(new);
    set(&store, b"1", b"......");
    set(&store, b"2", b"......");
    (store, token)
}

/// One writer's store evicts `k`'s segment while another stores `k` anew (its allocation, in
/// place) and a reader gets it: the reader sees the old value, the new one or none, and once
/// both are done `k` holds the new value (the eviction unlinks only the slot that names the
/// evicted item).
fn eviction_races_get_and_set() {
    let (store, new_k) = store_with_new_k();
    let setter = {
        let store = store.clone();
        thread::spawn(move || {
            store.with_token(new_k, |item| {
                store.store(item, StoreOp::Set).expect("stored")
            });
            store.release_token(new_k);
        })
    };
    let evictor = {
        let store = store.clone();
        thread::spawn(move || set(&store, b"6", b"zzzzzz"))
    };
    if let Some(item) = store.get(b"k") {
        let value = item.value();
        assert!(value == b"aaaaaa" || value == b"bbbbbb", "read {value:?}");
    }
    evictor.join().expect("evictor");
    setter.join().expect("setter");
    let value = store.get(b"k").map(|item| item.value());
    assert_eq!(
        value.as_deref(),
        Some(&b"bbbbbb"[..]),
        "a set lost to an eviction"
    );
}

#[test]
fn store_eviction_races_a_get_and_a_set() {
    check(eviction_races_get_and_set);
}

#[test]
fn store_eviction_races_a_get_and_a_set_catches_unlinking_by_key() {
    more_branches();
    caught(
        Mutant::EvictionUnlinksByKey,
        "a set lost to an eviction",
        eviction_races_get_and_set,
    );
}

/// Keys `key0`, `key1`, ... chosen by their two buckets in an index of four buckets of eight
/// slots, maybe doubling (the loom build's hasher is fixed): `k` goes to bucket 0, its second
/// choice, since its first (`to`) holds `FIRST_UNTIL` keys by then; fifteen keys of buckets 0
/// and 1 then fill both, so that inserting `x`, of the same two, must move `k`'s slot to
/// bucket `to`.
struct Displacing {
    keys: Vec<Vec<u8>>,
    /// Old buckets moved to the doubled table before the keys are inserted (0: no doubling).
    migrated: usize,
    fill: Vec<usize>,
    k: usize,
    x: usize,
}

/// The keys for a table of four buckets (`k` to bucket 3), or for one doubling from four to
/// eight, half done: its buckets 0, 1, 4 and 5 (those split from the old 0 and 1) are in use,
/// and `k`'s slot moves to bucket 5 within the new table.
fn displacing(doubling: bool) -> Displacing {
    let (table, to, migrated) = if doubling { (8, 5, 2) } else { (4, 3, 0) };
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| format!("key{i}").into_bytes()).collect();
    let choices: &[(usize, usize)] = &keys
        .iter()
        .map(|k| Keys::choices(k, table))
        .collect::<Vec<_>>();
    let with = |want: &dyn Fn((usize, usize)) -> bool| {
        (0..choices.len())
            .filter(|&i| want(choices[i]))
            .collect::<Vec<_>>()
    };
    let mut ks = with(&|c| c == (to, 0));
    assert!(ks.len() > FIRST_UNTIL, "keys of buckets {to} and 0");
    ks.truncate(FIRST_UNTIL + 1);
    let k = ks[FIRST_UNTIL];
    let mut pair = with(&|c| c == (0, 1) || c == (1, 0));
    assert!(pair.len() >= 16, "keys of buckets 0 and 1");
    pair.truncate(16);
    let x = pair.pop().expect("x");
    let fill = ks.into_iter().chain(pair).collect();
    Displacing {
        keys,
        migrated,
        fill,
        k,
        x,
    }
}

/// A writer inserts `x`, moving `k`'s slot from bucket 0 to `to`, while a reader looks `k` up
/// (`to` first, then 0): the reader finds `k`, which a miss between the two probes would lose
/// without its retry.
fn reader_races_a_move(keys: &Displacing) {
    let index = Arc::new(Keys::new(4, keys.keys.clone()));
    if keys.migrated > 0 {
        index.grow(keys.migrated);
    }
    for &i in &keys.fill {
        assert!(index.insert(i), "key{i} evicted a slot");
    }
    let writer = {
        let (index, x) = (index.clone(), keys.x);
        thread::spawn(move || assert!(index.insert(x), "x evicted a slot"))
    };
    assert!(index.find(keys.k), "a reader missed a moving slot");
    writer.join().expect("writer");
    assert_eq!(
        index.moves(),
        1,
        "the insert moved no slot: the model proves nothing"
    );
    assert!(index.find(keys.k) && index.find(keys.x));
}

#[test]
fn store_reader_never_misses_a_moving_slot() {
    let keys = displacing(false);
    check(move || reader_races_a_move(&keys));
}

#[test]
fn store_reader_never_misses_a_moving_slot_catches_a_miss_without_retry() {
    more_branches();
    let keys = displacing(false);
    caught(
        Mutant::FindSkipsMoveCheck,
        "a reader missed a moving slot",
        move || reader_races_a_move(&keys),
    );
}

#[test]
fn store_reader_never_misses_a_slot_moving_during_a_doubling() {
    let keys = displacing(true);
    check(move || reader_races_a_move(&keys));
}

#[test]
fn store_reader_never_misses_a_slot_moving_during_a_doubling_catches_a_miss_without_retry() {
    more_branches();
    let keys = displacing(true);
    caught(
        Mutant::FindSkipsMoveCheck,
        "a reader missed a moving slot",
        move || reader_races_a_move(&keys),
    );
}

/// Two threads count once each and exit (a loom model has two slots: the second may take the
/// slot the first gave back, and goes on from its count): both counts are kept.
fn counts_outlive_their_threads() {
    let counts = Arc::new(Counts::<1>::new());
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let counts = counts.clone();
            thread::spawn(move || counts.add(0, 1))
        })
        .collect();
    for counter in threads {
        counter.join().expect("counter");
    }
    assert_eq!(counts.get(0), 2, "a count lost with its thread");
}

#[test]
fn store_counts_outlive_their_threads() {
    check(counts_outlive_their_threads);
}

#[test]
fn store_counts_outlive_their_threads_catches_a_relaxed_release_of_a_slot() {
    caught(
        Mutant::ClaimReleasedRelaxed,
        "a count lost with its thread",
        counts_outlive_their_threads,
    );
}

/// A thread counts twice, raising a flag between its counts, while this one resets the
/// counter and a third reads it: a count made before the reset (the first, when this thread
/// saw the flag) never comes back, and no read falls below the reset's baseline.
fn reset_is_not_undone() {
    let counts = Arc::new(Counts::<1>::new());
    let first = Arc::new(AtomicBool::new(false));
    let counter = {
        let (counts, first) = (counts.clone(), first.clone());
        thread::spawn(move || {
            counts.add(0, 1);
            // Release: pairs with the Acquire load below.
            first.store(true, Ordering::Release);
            counts.add(0, 1);
        })
    };
    let reader = {
        let counts = counts.clone();
        thread::spawn(move || assert!(counts.get(0) <= 2, "a read below the reset's baseline"))
    };
    // Acquire: see above.
    let seen = first.load(Ordering::Acquire);
    counts.reset();
    counter.join().expect("counter");
    reader.join().expect("reader");
    let after = counts.get(0);
    assert!(after <= 2 - u64::from(seen), "a reset undone: {after}");
}

#[test]
fn store_reset_is_not_undone() {
    check(reset_is_not_undone);
}

#[test]
fn store_reset_is_not_undone_catches_a_reset_that_zeroes_the_cells() {
    caught(
        Mutant::ResetZeroesCells,
        "a reset undone",
        reset_is_not_undone,
    );
}
