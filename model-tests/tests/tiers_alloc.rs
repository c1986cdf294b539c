//! L1 and L2 hits allocate nothing: a global allocator counts this thread's allocations.

#![cfg(not(mcb_loom))] // real threads and std atomics

use mcb_core::sync::PayloadArc;
use mcb_core::tiers::{Cache, CallOptions, Clock, Level, Loaded, Options, L2};
use mcb_testkit::alloc::{allocations_during as allocations, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

fn cache(l1_capacity: usize) -> Cache<u64> {
    let l2 = PayloadArc::new(L2::with_shards(1 << 20, 4).unwrap());
    let opts = Options {
        l1_capacity,
        clock: Clock::manual(),
        ..Options::default()
    };
    Cache::new("alloc", l2, opts).unwrap()
}

fn level(cache: &Cache<u64>, key: &[u8]) -> Level {
    let none = None::<fn() -> Result<Loaded<u64>, String>>;
    cache.get(key, &CallOptions::default(), none).unwrap().level
}

#[test]
fn an_l1_hit_allocates_nothing() {
    let cache = cache(16);
    cache.set(b"key", &CallOptions::default(), Some(7)).unwrap();
    assert_eq!(level(&cache, b"key"), Level::L1);
    let n = allocations(|| {
        for _ in 0..1000 {
            assert_eq!(level(&cache, b"key"), Level::L1);
        }
    });
    assert_eq!(n, 0, "allocations on L1 hits");
}

#[test]
fn an_l2_hit_and_its_promotion_allocate_nothing() {
    // One L1 slot and two keys read in turn: every get misses L1, hits L2 and promotes,
    // evicting the other key.
    let cache = cache(1);
    cache.set(b"a", &CallOptions::default(), Some(1)).unwrap();
    cache.set(b"b", &CallOptions::default(), Some(2)).unwrap();
    for _ in 0..4 {
        level(&cache, b"a");
        level(&cache, b"b");
    }
    let n = allocations(|| {
        for _ in 0..1000 {
            assert_eq!(level(&cache, b"a"), Level::L2);
            assert_eq!(level(&cache, b"b"), Level::L2);
        }
    });
    assert_eq!(n, 0, "allocations on L2 hits");
}

#[test]
fn the_counter_sees_allocations() {
    let cache = cache(16);
    let n = allocations(|| cache.set(b"new", &CallOptions::default(), Some(1)).unwrap());
    assert!(
        n > 0,
        "a miss path allocates (the key), so the counter works"
    );
}
