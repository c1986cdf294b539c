//! L1 and L2 hits allocate nothing: a global allocator counts this thread's allocations.

use mcb_core::sync::PayloadArc;
use mcb_core::tiers::{Cache, CallOptions, Clock, Level, Loaded, Options, L2};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialised thread-local,
// which itself never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

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
