//! What the store's hot paths allocate, counted by a global allocator (this thread only): a
//! get of a live item allocates nothing; a set of a short key allocates the item (its header
//! and its bytes) and L2's node, which holds the key inline (no copy of its own), plus, once per
//! batch of retired nodes, the collector's queue entry.

#![cfg(not(mcb_loom))] // real threads and std atomics

use mcb_core::store::{Config, ManualClock, Store, StoreOp};
use mcb_testkit::alloc::{allocations_during as allocations, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn store() -> Store {
    let store = Store::new(Config::default(), Box::new(ManualClock::new(1))).expect("store");
    for i in 0..100 {
        set(&store, i);
    }
    store
}

fn set(store: &Store, i: usize) {
    let item = store
        .item(format!("key:{i}").as_bytes(), b"value", 0, 0)
        .expect("item");
    store.store(&item, StoreOp::Set).expect("stored");
}

/// One test, gets first: a pin runs a collection now and then, which may pop another thread's
/// retired batch from the collector's global queue and, once per 64 such pops, allocate a queue
/// entry for the popped nodes. Sets retire batches, so no set may run in this process (another
/// test, on another thread) before or while the gets are counted.
#[test]
fn a_get_allocates_nothing_and_a_set_its_item_and_node() {
    let store = store();
    let keys: Vec<String> = (0..100).map(|i| format!("key:{i}")).collect();
    let n = allocations(|| {
        for _ in 0..10 {
            for key in &keys {
                assert!(store.get(key.as_bytes()).is_some());
            }
        }
    });
    assert_eq!(n, 0, "allocations in 1000 gets");

    let sets = 6400;
    let n = allocations(|| {
        for i in 0..sets {
            let item = store
                .item(keys[i % 100].as_bytes(), b"value", 0, 0)
                .expect("item");
            store.store(&item, StoreOp::Set).expect("stored");
        }
    });
    assert!(n <= sets * 3 + sets / 32, "{n} allocations in {sets} sets");
}
