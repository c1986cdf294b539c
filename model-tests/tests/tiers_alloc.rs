//! L1 and L2 hits allocate nothing, and a set allocates only its value's `PayloadArc` once the
//! store recycles its nodes: a global allocator counts this thread's allocations.

#![cfg(not(mcb_loom))] // real threads and std atomics

use mcb_core::sync::PayloadArc;
use mcb_core::tiers::{Cache, CallOptions, Clock, Level, Loaded, Options, Promotion, L2};
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
fn an_l2_hit_not_promoted_and_a_borrowing_read_allocate_nothing() {
    let l2 = PayloadArc::new(L2::with_shards(1 << 20, 4).unwrap());
    let opts = Options {
        l1_capacity: 1,
        promotion: Promotion::SecondHit,
        clock: Clock::manual(),
        ..Options::default()
    };
    let cache = Cache::new("unpromoted", l2, opts).unwrap();
    // Stored from another thread: this one's L1 holds neither key, and with one slot in its
    // table of hashes, reading them in turn never promotes.
    std::thread::scope(|s| {
        s.spawn(|| {
            cache.set(b"a", &CallOptions::default(), Some(1)).unwrap();
            cache.set(b"b", &CallOptions::default(), Some(2)).unwrap();
        });
    });
    level(&cache, b"a");
    let n = allocations(|| {
        for _ in 0..1000 {
            assert_eq!(level(&cache, b"b"), Level::L2);
            assert_eq!(level(&cache, b"a"), Level::L2);
            assert_eq!(cache.get_with(b"b", |v| *v), Ok((Some(2), Level::L2)));
            assert_eq!(cache.get_with(b"a", |v| *v), Ok((Some(1), Level::L2)));
        }
    });
    assert_eq!(n, 0, "allocations on unpromoted L2 hits");
}

/// Sets of new keys in a store of about 1,000 entries in one shard, full after the first
/// thousand: `set(k)` for keys `0..SETS`, then the allocations per set of `SETS..2 * SETS`.
const SETS: u64 = 20_000;

fn full_store(name: &str) -> Cache<u64> {
    let l2 = PayloadArc::new(L2::with_shards(160 * 1000, 1).unwrap());
    let opts = Options {
        l1_capacity: 16,
        clock: Clock::manual(),
        ..Options::default()
    };
    Cache::new(name, l2, opts).unwrap()
}

fn allocations_per_set(set: impl Fn(u64)) -> f64 {
    (0..SETS).for_each(&set);
    let n = allocations(|| (SETS..2 * SETS).for_each(&set));
    n as f64 / SETS as f64
}

/// A set of a new key into a full store, evicting: its value's `PayloadArc` (the caller's
/// value, shared from then on), and the node only until the store has recycled enough. The
/// epoch collector allocates a queue entry per batch it is handed (64 retired nodes), so the
/// count per set is a little over one.
#[test]
fn a_set_allocates_its_value_and_no_node_once_warm() {
    let cache = full_store("sets");
    let per_set = allocations_per_set(|k| {
        let _ = cache.set(&k.to_le_bytes(), &CallOptions::default(), Some(k));
    });
    eprintln!("allocations per set: {per_set:.3}");
    assert!(
        (1.0..1.05).contains(&per_set),
        "{per_set} allocations per set: the value's, and about one per 64 sets"
    );
}

/// The same sets of values the caller already shares (`set_shared`): nothing but the epoch
/// collector's (about two allocations per batch of 64 retired nodes: 0.034 a set).
#[test]
fn a_set_of_a_shared_value_allocates_only_the_collectors_share() {
    let cache = full_store("shared");
    let values: Vec<PayloadArc<u64>> = (0..2 * SETS).map(PayloadArc::new).collect();
    let per_set = allocations_per_set(|k| {
        let value = Some(values[k as usize].clone());
        let _ = cache.set_shared(&k.to_le_bytes(), &CallOptions::default(), value);
    });
    eprintln!("allocations per shared set: {per_set:.3}");
    assert!(
        per_set < 0.05,
        "{per_set} allocations per set of a shared value: about two per 64 sets"
    );
    let last = 2 * SETS - 1;
    let hit = cache.get_cached(&last.to_le_bytes()).unwrap();
    assert_eq!(hit.level, Level::L1, "the last set is in this thread's L1");
    let value = hit.value.expect("a value");
    assert!(
        PayloadArc::ptr_eq(&value, &values[last as usize]),
        "the caller's own"
    );
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

#[test]
fn hits_through_a_handle_allocate_nothing() {
    let cache = cache(16);
    cache.put(b"key", 7).unwrap();
    let local = cache.local();
    let none = None::<fn() -> Result<Loaded<u64>, String>>;
    let n = allocations(|| {
        for _ in 0..1000 {
            let hit = local.get(b"key", &CallOptions::default(), none).unwrap();
            assert_eq!(hit.level, Level::L1);
            assert_eq!(local.get_with(b"key", |v| *v), Ok((Some(7), Level::L1)));
        }
    });
    assert_eq!(n, 0, "allocations on L1 hits through a handle");
    // L2 reads not promoted (see the test above), through a handle.
    let l2 = PayloadArc::new(L2::with_shards(1 << 20, 4).unwrap());
    let opts = Options {
        l1_capacity: 1,
        promotion: Promotion::SecondHit,
        clock: Clock::manual(),
        ..Options::default()
    };
    let cache = Cache::new("unpromoted_local", l2, opts).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            cache.put(b"a", 1).unwrap();
            cache.put(b"b", 2).unwrap();
        });
    });
    let local = cache.local();
    assert_eq!(local.get_cached(b"a").unwrap().level, Level::L2);
    let n = allocations(|| {
        for _ in 0..1000 {
            assert_eq!(local.get_cached(b"b").unwrap().level, Level::L2);
            assert_eq!(local.get_with(b"a", |v| *v), Ok((Some(1), Level::L2)));
        }
    });
    assert_eq!(n, 0, "allocations on unpromoted L2 hits through a handle");
}
