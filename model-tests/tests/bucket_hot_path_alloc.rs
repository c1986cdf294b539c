//! The call path (enter, call, leave) allocates nothing: counted by a global allocator, per
//! thread, so other tests running in parallel do not disturb the count.

#![cfg(not(mcb_loom))] // real threads; the loom build runs tests/bucket.rs

use mcb_core::bucket::{Config, Connection, Registry};
use mcb_model_tests::fixtures::TestEnv;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards every call to the system allocator unchanged; only counts on the side.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn enter_call_leave_does_not_allocate() {
    let registry = Registry::new(
        TestEnv::new(),
        Config {
            engine: "test.so".into(),
            default_bucket: true,
            ..Config::default()
        },
    )
    .expect("registry");
    let bucket = registry.create("hot", "test.so", "").expect("create");
    let conn = Connection::attached(registry.find("hot"));
    let unattached = Connection::attached(None);
    // The first call on a thread picks its stripe; that is start-up, not the call path.
    assert_eq!(conn.enter(&registry).expect("running").call(), 1);

    let n = allocations_during(|| {
        for _ in 0..10_000 {
            conn.enter(&registry).expect("running").call();
            conn.try_enter(&registry).expect("running").call();
            registry.enter(bucket.arc()).expect("running").call();
            unattached.enter(&registry).expect("default bucket").call();
        }
    });
    assert_eq!(n, 0, "the call path allocated {n} times");

    // Lookups by name do not allocate either; listing does (the counter itself works).
    assert_eq!(allocations_during(|| drop(registry.find("hot"))), 0);
    assert!(allocations_during(|| drop(registry.list())) > 0);
}
