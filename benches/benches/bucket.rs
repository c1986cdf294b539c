//! The bucket call path and lookups: ours against the seed's design, as ratios.
//!
//! - `enter_leave_hot_bucket`: one call's enter + leave on one bucket from 1, 2 and N threads
//!   at once (the seed's single shared `clients` counter against our per-thread stripes).
//! - `find_by_name`: a lookup by name from 1, 2 and N threads (the seed's global mutex around
//!   the hash map against our epoch-protected snapshot).

use criterion::{BenchmarkId, Throughput};
use mcb_benches::{
    criterion, print_ratios, results_dir, seed, thread_counts, time_threads, NoopEnv,
};
use mcb_core::bucket::{Config, Registry};

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

    let group_name = "enter_leave_hot_bucket";
    let mut group = c.benchmark_group(group_name);
    let mut pairs = Vec::new();
    for threads in thread_counts() {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_with_input(BenchmarkId::new("ours", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_threads(t, iters, || ours.enter(hot.arc()).expect("running").call())
            })
        });
        group.bench_with_input(BenchmarkId::new("seed", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_threads(t, iters, || {
                    seed_hot.enter().expect("running").call();
                    seed_hot.leave();
                })
            })
        });
        pairs.push((format!("ours/{threads}"), format!("seed/{threads}")));
    }
    group.finish();
    print_ratios(&results, group_name, &pairs);

    let group_name = "find_by_name";
    let mut group = c.benchmark_group(group_name);
    let mut pairs = Vec::new();
    for threads in thread_counts() {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_with_input(BenchmarkId::new("ours", threads), &threads, |b, &t| {
            b.iter_custom(|iters| time_threads(t, iters, || drop(ours.find("d").expect("d"))))
        });
        group.bench_with_input(BenchmarkId::new("seed", threads), &threads, |b, &t| {
            b.iter_custom(|iters| time_threads(t, iters, || theirs.find("d").expect("d").release()))
        });
        pairs.push((format!("ours/{threads}"), format!("seed/{threads}")));
    }
    group.finish();
    print_ratios(&results, group_name, &pairs);

    c.final_summary();
}
