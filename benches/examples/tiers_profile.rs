//! Runs N reads of one path of the cache tiers, or of quick_cache's hit, for instruction
//! counts: run a path at two counts under callgrind and divide the difference of the totals
//! by the difference of the counts (the setup cancels out). The paths are those of
//! `benches/tiers.rs` (same keys, values and options):
//!
//!     cargo build --release -p mcb-benches --example tiers_profile
//!     valgrind --tool=callgrind --dump-instr=no target/release/examples/tiers_profile l1_hit 100000
//!
//! Paths: `l1_hit`, `l1_hit_borrowed`, `l2_hit` (a promotion into a full L1 of one slot),
//! `l2_read`, `zipf` (Zipf 0.9 over 100k keys, the second-hit rule, 1000 L1 entries), each but
//! `l1_hit_borrowed` and `l2_hit` also through a handle on this thread's L1 (`Cache::local`,
//! made before the loop): `l1_hit_local`, `l2_read_local`, `zipf_local`; `quick_cache_hit`,
//! `quick_cache_zipf`; `evicting` and `quick_cache_evicting`, the bench's evicting regime
//! (ours a get that loads on a miss, frequency admission on; quick_cache a get and an insert
//! on a miss; over a Zipf trace of twice the cache's entries), after a pass over the trace to
//! fill the cache.

use mcb_benches::tiers::{entry_weight, get, get_local, get_or_load, key, ours_with, store};
use mcb_benches::zipf;
use mcb_core::sync::PayloadArc;
use mcb_core::tiers::{Admission, Cache, Level, Promotion};
use std::hint::black_box;

const KEYS: usize = 100_000;

type Quick = quick_cache::sync::Cache<Box<[u8]>, PayloadArc<u64>>;

fn ours(capacity: usize, shards: usize, l1_capacity: usize, promotion: Promotion) -> Cache<u64> {
    ours_with(
        store(capacity, shards),
        l1_capacity,
        promotion,
        Admission::Always,
    )
}

/// `n` gets of keys 1 and 2 in turn, each answered by L2 (through a handle with `local`).
fn alternate_in_l2(cache: &Cache<u64>, n: usize, local: bool) {
    let handle = cache.local();
    for i in 0..n {
        let k = black_box(1 + (i as u64 & 1));
        let level = if local {
            get_local(&handle, k)
        } else {
            get(cache, k)
        };
        assert_eq!(level, Level::L2);
    }
}

/// The evicting regime's trace (the bench's), and the entries a cache holds: half its keys.
fn evicting_trace() -> (Vec<u64>, usize) {
    let trace = zipf(KEYS, 0.9, 1 << 20, 43);
    let mut distinct = trace.clone();
    distinct.sort_unstable();
    distinct.dedup();
    (trace, distinct.len() / 2)
}

/// A pass over `trace` to fill the cache, then `n` of its operations (`op`: a get, and on a
/// miss a load or an insert).
fn evicting(trace: &[u64], n: usize, op: impl Fn(u64)) {
    trace.iter().for_each(|&k| op(k));
    trace.iter().cycle().take(n).for_each(|&k| op(k));
}

/// The keys of the Zipf paths, in the order the bench's threads read them.
fn trace() -> impl Iterator<Item = u64> {
    let trace = zipf(KEYS, 0.9, 1 << 16, 42);
    (0..).map(move |i: usize| trace[i.wrapping_mul(7919) % trace.len()])
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a path");
    let n: usize = args
        .next()
        .map_or(1_000_000, |n| n.parse().expect("a count"));
    match path.as_str() {
        "l1_hit" | "l1_hit_borrowed" | "l1_hit_local" => {
            let cache = ours(64 << 20, 1, 16, Promotion::Always);
            cache.put(&key(1), 1).expect("room");
            let local = cache.local();
            for _ in 0..n {
                if path == "l1_hit" {
                    black_box(get(&cache, black_box(1)));
                } else if path == "l1_hit_local" {
                    black_box(get_local(&local, black_box(1)));
                } else {
                    black_box(
                        cache
                            .get_with(&key(black_box(1)), |v| *v)
                            .expect("no error"),
                    );
                }
            }
        }
        "l2_hit" => {
            let cache = ours(64 << 20, 1, 1, Promotion::Always);
            for k in [1, 2] {
                cache.put(&key(k), k).expect("room");
            }
            alternate_in_l2(&cache, n, false);
        }
        "l2_read" | "l2_read_local" => {
            let cache = ours(64 << 20, 1, 1, Promotion::SecondHit);
            std::thread::scope(|s| {
                s.spawn(|| {
                    for k in [1, 2] {
                        cache.put(&key(k), k).expect("room");
                    }
                });
            });
            alternate_in_l2(&cache, n, path == "l2_read_local");
        }
        "zipf" | "zipf_local" => {
            let cache = ours(256 << 20, 16, 1000, Promotion::SecondHit);
            for k in 0..KEYS as u64 {
                cache.put(&key(k), k).expect("room");
            }
            std::thread::scope(|s| {
                // Another thread's L1 is the one filled by the puts: read from a fresh one.
                s.spawn(|| {
                    let local = cache.local();
                    for k in trace().take(n) {
                        if path == "zipf" {
                            black_box(get(&cache, k));
                        } else {
                            black_box(get_local(&local, k));
                        }
                    }
                });
            });
        }
        "quick_cache_hit" | "quick_cache_zipf" => {
            let quick = Quick::new(KEYS);
            for k in 0..KEYS as u64 {
                quick.insert(Box::new(key(k)), PayloadArc::new(k));
            }
            if path == "quick_cache_hit" {
                for _ in 0..n {
                    black_box(quick.get(&key(black_box(1))[..]));
                }
            } else {
                for k in trace().take(n) {
                    black_box(quick.get(&key(k)[..]));
                }
            }
        }
        "evicting" => {
            let (trace, capacity) = evicting_trace();
            let l2 = store(entry_weight() * capacity, 16);
            let cache = ours_with(l2, 1000, Promotion::SecondHit, Admission::Frequency);
            evicting(&trace, n, |k| {
                black_box(get_or_load(&cache, k));
            });
        }
        "quick_cache_evicting" => {
            let (trace, capacity) = evicting_trace();
            let quick = Quick::new(capacity);
            evicting(&trace, n, |k| {
                if quick.get(&key(k)[..]).is_none() {
                    quick.insert(Box::new(key(k)), PayloadArc::new(k));
                }
            });
        }
        other => panic!("unknown path {other}"),
    }
}
