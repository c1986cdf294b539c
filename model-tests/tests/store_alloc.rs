//! What the store's hot paths allocate, counted by a global allocator (this thread only): a
//! get of a live item allocates nothing (also in our host's turns), and neither does a set: its item is a run in a
//! segment, and its slot a word of the index. What allocates, rarely, is the retirement of a
//! whole segment (one deferred function and, per segment, one flush of the collector's bag),
//! so sets allocate a few times per segment they fill, not per item.

#![cfg(not(mcb_loom))] // real threads and std atomics

use mcb_core::store::{end_turn, Config, ManualClock, Store, StoreOp};
use mcb_testkit::alloc::{allocations_during as allocations, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn set(store: &Store, key: &[u8]) {
    let item = store.item(key, b"value", 0, 0).expect("item");
    store.store(&item, StoreOp::Set).expect("stored");
}

/// One test, gets first: a pin runs a collection now and then, which may pop another thread's
/// retired batch from the collector's global queue and allocate for it; no set may run in this
/// process (another test, on another thread) before or while the gets are counted.
#[test]
fn a_get_allocates_nothing_and_a_set_nothing_but_per_segment() {
    let config = Config {
        cache_size: 4 << 20,
        ..Config::default()
    };
    let store = Store::new(config, Box::new(ManualClock::new(1))).expect("store");
    let keys: Vec<String> = (0..100).map(|i| format!("key:{i}")).collect();
    for key in &keys {
        set(&store, key.as_bytes());
    }
    // The thread's first pin registers it with the epoch collector (an allocation, once).
    assert!(store.get(keys[0].as_bytes()).is_some());
    let n = allocations(|| {
        for _ in 0..10 {
            for key in &keys {
                assert!(store.get(key.as_bytes()).is_some());
                let pin = store.pin();
                assert!(store.get_pinned(&pin, key.as_bytes()).is_some());
            }
        }
    });
    assert_eq!(n, 0, "allocations in 2000 gets");

    // Gets in our host's turns (`end_turn`), as a multi-get makes them: every key handed out,
    // then every key given back, then the turn's end. The first such turn sizes this thread's
    // record of what is out.
    let end = || end_turn(|_, count| count(&store));
    let turn = || {
        let tokens: [u64; 100] =
            std::array::from_fn(|i| store.fetch_token(keys[i].as_bytes()).expect("a hit"));
        tokens
            .into_iter()
            .for_each(|token| store.release_token(token));
        end();
    };
    end();
    turn();
    let n = allocations(|| (0..10).for_each(|_| turn()));
    assert_eq!(n, 0, "allocations in 10 turns of 100 gets");

    // 200,000 sets of 40-byte items over 100 keys: about 8 MiB written, twice the cache, so
    // segments fill, die (every item replaced) and are reused.
    let sets = 200_000;
    let n = allocations(|| {
        for i in 0..sets {
            set(&store, keys[i % 100].as_bytes());
        }
    });
    let segments = sets * 40 / (1 << 20);
    assert!(
        n <= 4 * segments + 8,
        "{n} allocations in {sets} sets ({segments} segments filled)"
    );
    assert!(store.stats().curr_items == 100);
}
