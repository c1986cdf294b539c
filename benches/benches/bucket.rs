//! The bucket call path and lookups: ours against the seed's design, as ratios, from 1, 2 and
//! N threads at once on one bucket.
//!
//! - `enter_leave_hot_bucket`: one call's enter + leave (the seed's single shared `clients`
//!   counter against our per-thread stripes).
//! - `get_and_release_hot_bucket`: what a get through the bucket engine costs the bucket layer,
//!   the get's call and then its item's release. Ours enters and leaves, records the item in
//!   the thread's `HeldItems` (as the bucket engine does per connection: a hold counted in
//!   this thread's row, the bucket's `Arc` kept by the list from the first get on), and at the
//!   release calls the engine and gives the hold back; the seed enters and leaves twice, for
//!   the get and for the release (and a third time for the item's info, left out here; it
//!   keeps nothing for the item, which is why its engine could go while an item was out).
//! - `find_by_name`: a lookup by name (the seed's global mutex around the hash map against our
//!   epoch-protected snapshot).

use criterion::{BenchmarkId, Criterion, Throughput};
use mcb_benches::{
    criterion, print_ratios, results_dir, seed, thread_counts, time_threads, NoopEngine, NoopEnv,
};
use mcb_core::bucket::{Config, HeldItems, Registry};
use std::cell::RefCell;
use std::path::Path;

thread_local! {
    /// Each bench thread's list of held items, as a connection's in the bucket engine.
    static HELD: RefCell<HeldItems<NoopEngine>> = const { RefCell::new(HeldItems::new()) };
}

/// One group: `ours` and `seed` from each thread count, and their ratios.
fn group(
    c: &mut Criterion,
    results: &Path,
    name: &str,
    ours: impl Fn() + Sync,
    seed: impl Fn() + Sync,
) {
    let mut group = c.benchmark_group(name);
    let mut pairs = Vec::new();
    for threads in thread_counts() {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_with_input(BenchmarkId::new("ours", threads), &threads, |b, &t| {
            b.iter_custom(|iters| time_threads(t, iters, &ours))
        });
        group.bench_with_input(BenchmarkId::new("seed", threads), &threads, |b, &t| {
            b.iter_custom(|iters| time_threads(t, iters, &seed))
        });
        pairs.push((format!("ours/{threads}"), format!("seed/{threads}")));
    }
    group.finish();
    print_ratios(results, name, &pairs);
}

fn main() {
    let results = results_dir(env!("CARGO_TARGET_TMPDIR"));
    let mut c = criterion(&results);
    let ours = Registry::new(NoopEnv, Config::default()).expect("registry");
    let hot = ours.create("hot", "noop", "").expect("create");
    let theirs = seed::Registry::default();
    let seed_hot = theirs.create("hot");
    for name in ["a", "b", "c", "d", "e", "f", "g"] {
        drop(ours.create(name, "noop", "").expect("create"));
        theirs.create(name);
    }
    let seed_call = || {
        seed_hot.enter().expect("running").call();
        seed_hot.leave();
    };

    group(
        &mut c,
        &results,
        "enter_leave_hot_bucket",
        || ours.enter(hot.arc()).expect("running").call(),
        seed_call,
    );
    group(
        &mut c,
        &results,
        "get_and_release_hot_bucket",
        || {
            HELD.with_borrow_mut(|held| {
                let lease = ours.enter(hot.arc()).expect("running");
                lease.call();
                held.add(1, lease);
                held.release(1, NoopEngine::call);
            })
        },
        || {
            seed_call();
            seed_call();
        },
    );
    group(
        &mut c,
        &results,
        "find_by_name",
        || drop(ours.find("d").expect("d")),
        || theirs.find("d").expect("d").release(),
    );

    c.final_summary();
}
