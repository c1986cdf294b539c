//! The call path (enter, call, leave) allocates nothing: counted by a global allocator, per
//! thread, so other tests running in parallel do not disturb the count.

#![cfg(not(mcb_loom))] // real threads; the loom build runs tests/bucket.rs

use mcb_core::bucket::{Config, Connection, Registry};
use mcb_model_tests::fixtures::TestEnv;
use mcb_testkit::alloc::{allocations_during, Counting};

#[global_allocator]
static GLOBAL: Counting = Counting;

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
