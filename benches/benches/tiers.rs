//! The cache tiers: ours against moka and quick_cache, as ratios.
//!
//! - `tiers_levels`: one get answered by this thread's L1, by L2, and by the loader (a new key
//!   each time), next to a get from moka and quick_cache.
//! - `zipf_s0.9_100k_keys_read`: reads of Zipf-distributed keys from 1, 2 and N threads, every
//!   cache holding all keys.
//! - `single_flight_64_misses`: 64 threads miss one key at once; the loader must run once.
//! - The hit ratio of a Zipf workload with a one-pass scan mixed in, at one capacity: our L2
//!   (S3-FIFO), plain LRU (our L1 alone), moka (TinyLFU) and quick_cache (CLOCK-Pro-like).

use criterion::{BenchmarkId, Throughput};
use mcb_benches::{criterion, print_ratios, results_dir, thread_counts, time_threads, Rng};
use mcb_core::sync::PayloadArc;
use mcb_core::tiers::{Cache, CallOptions, Level, Loaded, Options, L2};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const KEYS: usize = 100_000;
const ZIPF_S: f64 = 0.9;

type Load = fn() -> Result<Loaded<u64>, String>;

/// `count` key indices in `0..n`, Zipf-distributed with exponent `s` (inverse of the CDF).
fn zipf(n: usize, s: f64, count: usize, seed: u64) -> Vec<u64> {
    let mut cdf: Vec<f64> = (1..=n).map(|rank| 1.0 / (rank as f64).powf(s)).collect();
    let mut sum = 0.0;
    for weight in &mut cdf {
        sum += *weight;
        *weight = sum;
    }
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| cdf.partition_point(|&c| c < rng.unit() * sum) as u64)
        .collect()
}

fn key(k: u64) -> [u8; 8] {
    k.to_le_bytes()
}

fn store(capacity: usize, shards: usize) -> PayloadArc<L2<u64>> {
    PayloadArc::new(L2::with_shards(capacity, shards).expect("valid"))
}

fn ours(l2: PayloadArc<L2<u64>>, l1_capacity: usize) -> Cache<u64> {
    let opts = Options {
        l1_capacity,
        ..Options::default()
    };
    Cache::new("bench", l2, opts).expect("valid")
}

fn get(cache: &Cache<u64>, k: u64) -> Level {
    cache
        .get(&key(k), &CallOptions::default(), None::<Load>)
        .expect("no loader, no error")
        .level
}

fn levels(c: &mut criterion::Criterion, results: &std::path::Path) {
    let group_name = "tiers_levels";
    let mut group = c.benchmark_group(group_name);
    group.throughput(Throughput::Elements(1));
    let l1 = ours(store(64 << 20, 1), 16);
    l1.set(&key(1), &CallOptions::default(), Some(1))
        .expect("room");
    group.bench_function("l1_hit", |b| b.iter(|| black_box(get(&l1, 1))));
    // One L1 slot, two keys read in turn: every get is an L2 hit and a promotion.
    let l2 = ours(store(64 << 20, 1), 1);
    for k in [1, 2] {
        l2.set(&key(k), &CallOptions::default(), Some(k))
            .expect("room");
    }
    let flip = Cell::new(1);
    group.bench_function("l2_hit", |b| {
        b.iter(|| {
            flip.set(3 - flip.get());
            black_box(get(&l2, flip.get()))
        })
    });
    let misses = ours(store(64 << 20, 1), 100);
    let next = Cell::new(0u64);
    group.bench_function("miss_with_loader", |b| {
        b.iter(|| {
            next.set(next.get() + 1);
            let loader = || Ok::<_, String>(Loaded::some(7));
            let hit = misses.get(&key(next.get()), &CallOptions::default(), Some(loader));
            black_box(hit.expect("loads"))
        })
    });
    let moka = moka::sync::Cache::<u64, PayloadArc<u64>>::new(1024);
    moka.insert(1, PayloadArc::new(1));
    group.bench_function("moka_hit", |b| b.iter(|| black_box(moka.get(&1))));
    let quick = quick_cache::sync::Cache::<u64, PayloadArc<u64>>::new(1024);
    quick.insert(1, PayloadArc::new(1));
    group.bench_function("quick_cache_hit", |b| b.iter(|| black_box(quick.get(&1))));
    group.finish();
    let pairs = [
        ("l1_hit", "l2_hit"),
        ("l1_hit", "miss_with_loader"),
        ("l1_hit", "moka_hit"),
        ("l1_hit", "quick_cache_hit"),
        ("l2_hit", "moka_hit"),
        ("l2_hit", "quick_cache_hit"),
    ];
    let pairs: Vec<_> = pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    print_ratios(results, group_name, &pairs);
}

thread_local! {
    static CURSOR: Cell<usize> = const { Cell::new(0) };
}

/// The next key of this thread's walk through `trace`.
fn next_key(trace: &[u64]) -> u64 {
    CURSOR.with(|c| {
        let i = c.get();
        c.set(i.wrapping_add(7919));
        trace[i % trace.len()]
    })
}

fn zipf_reads(c: &mut criterion::Criterion, results: &std::path::Path) {
    let trace = zipf(KEYS, ZIPF_S, 1 << 16, 42);
    let cache = ours(store(256 << 20, 16), 1000);
    let moka = moka::sync::Cache::<u64, PayloadArc<u64>>::new(KEYS as u64);
    let quick = quick_cache::sync::Cache::<u64, PayloadArc<u64>>::new(KEYS);
    for k in 0..KEYS as u64 {
        cache
            .set(&key(k), &CallOptions::default(), Some(k))
            .expect("room");
        moka.insert(k, PayloadArc::new(k));
        quick.insert(k, PayloadArc::new(k));
    }
    moka.run_pending_tasks();
    let group_name = "zipf_s0.9_100k_keys_read";
    let mut group = c.benchmark_group(group_name);
    let mut pairs = Vec::new();
    for threads in thread_counts() {
        group.throughput(Throughput::Elements(threads as u64));
        let trace = &trace;
        group.bench_with_input(BenchmarkId::new("ours", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_threads(t, iters, || {
                    black_box(get(&cache, next_key(trace)));
                })
            })
        });
        group.bench_with_input(BenchmarkId::new("moka", threads), &threads, |b, &t| {
            b.iter_custom(|iters| {
                time_threads(t, iters, || {
                    black_box(moka.get(&next_key(trace)));
                })
            })
        });
        group.bench_with_input(
            BenchmarkId::new("quick_cache", threads),
            &threads,
            |b, &t| {
                b.iter_custom(|iters| {
                    time_threads(t, iters, || {
                        black_box(quick.get(&next_key(trace)));
                    })
                })
            },
        );
        for peer in ["moka", "quick_cache"] {
            pairs.push((format!("ours/{threads}"), format!("{peer}/{threads}")));
        }
    }
    group.finish();
    print_ratios(results, group_name, &pairs);
}

/// Runs `round` on 64 threads released together, `iters` times; returns the time spent.
fn sixty_four_at_once(iters: u64, round: impl Fn(u64) + Sync) -> Duration {
    let mut total = Duration::ZERO;
    for i in 0..iters {
        let barrier = Barrier::new(64);
        let start = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..64 {
                s.spawn(|| {
                    barrier.wait();
                    round(i);
                });
            }
        });
        total += start.elapsed();
    }
    total
}

fn single_flight(c: &mut criterion::Criterion, results: &std::path::Path) {
    let group_name = "single_flight_64_misses";
    let mut group = c.benchmark_group(group_name);
    group.sample_size(10);
    group.throughput(Throughput::Elements(64));
    let slow_load = || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_micros(200) {
            std::hint::spin_loop();
        }
    };
    let cache = ours(store(64 << 20, 4), 100);
    let loads = AtomicUsize::new(0);
    let round = AtomicU64::new(0);
    group.bench_function("ours", |b| {
        b.iter_custom(|iters| {
            let base = round.fetch_add(iters, Ordering::Relaxed);
            let before = loads.load(Ordering::Relaxed);
            let spent = sixty_four_at_once(iters, |i| {
                let loader = || {
                    loads.fetch_add(1, Ordering::Relaxed);
                    slow_load();
                    Ok::<_, String>(Loaded::some(i))
                };
                let hit = cache.get(&key(base + i), &CallOptions::default(), Some(loader));
                assert_eq!(hit.expect("loads").value.as_deref(), Some(&i));
            });
            let ran = loads.load(Ordering::Relaxed) - before;
            assert_eq!(ran as u64, iters, "one load per key");
            spent
        })
    });
    let moka = moka::sync::Cache::<u64, u64>::new(1 << 20);
    group.bench_function("moka", |b| {
        b.iter_custom(|iters| {
            let base = round.fetch_add(iters, Ordering::Relaxed);
            sixty_four_at_once(iters, |i| {
                let value = moka.get_with(base + i, || {
                    slow_load();
                    i
                });
                assert_eq!(value, i);
            })
        })
    });
    group.finish();
    print_ratios(results, group_name, &[("ours".into(), "moka".into())]);
}

/// Hit ratios (not times) on Zipf reads with a one-pass scan of cold keys in the middle, each
/// cache holding `capacity` entries; a miss inserts the key.
fn hit_ratios(quick_run: bool) {
    let (requests, scan, capacity) = if quick_run {
        (20_000, 5_000, 1_000)
    } else {
        (400_000, 50_000, 5_000)
    };
    let mut trace = zipf(KEYS, ZIPF_S, requests, 7);
    let cold = (0..scan as u64).map(|k| KEYS as u64 + k);
    trace.splice(requests / 2..requests / 2, cold);

    // Our L2: one shard sized to `capacity` entries; one L1 slot, so L1 hits are negligible.
    let probe = store(1 << 20, 1);
    ours(probe.clone(), 1)
        .set(&key(0), &CallOptions::default(), Some(0))
        .expect("room");
    let per_entry = probe.used_bytes();
    let s3fifo = ours(store(per_entry * capacity, 1), 1);
    // Plain LRU: our L1 alone (an L2 too small for anything keeps loads in L1 only).
    let lru = ours(store(1, 1), capacity);
    let moka = moka::sync::Cache::<u64, u64>::new(capacity as u64);
    let quick = quick_cache::sync::Cache::<u64, u64>::new(capacity);
    let mut hits = [0usize; 4];
    for &k in &trace {
        let load = || Ok::<_, String>(Loaded::some(k));
        let opts = CallOptions::default();
        if s3fifo.get(&key(k), &opts, Some(load)).expect("loads").level != Level::L3 {
            hits[0] += 1;
        }
        if lru.get(&key(k), &opts, Some(load)).expect("loads").level == Level::L1 {
            hits[1] += 1;
        }
        if moka.get(&k).is_some() {
            hits[2] += 1;
        } else {
            moka.insert(k, k);
        }
        if quick.get(&k).is_some() {
            hits[3] += 1;
        } else {
            quick.insert(k, k);
        }
    }
    let names = ["ours (L2, S3-FIFO)", "LRU", "moka", "quick_cache"];
    let ratio = |h: usize| h as f64 / trace.len() as f64;
    for (name, h) in names.iter().zip(hits) {
        println!(
            "hit ratio zipf_s0.9_100k_keys+scan, capacity {capacity}: {name} {:.3}",
            ratio(h)
        );
    }
    for (name, h) in names.iter().zip(hits).skip(1) {
        println!(
            "ratio hit_ratio: ours is {:.2}x the hit ratio of {name}",
            ratio(hits[0]) / ratio(h)
        );
    }
}

fn main() {
    let results = results_dir(env!("CARGO_TARGET_TMPDIR"));
    let mut c = criterion(&results);
    levels(&mut c, &results);
    zipf_reads(&mut c, &results);
    single_flight(&mut c, &results);
    hit_ratios(std::env::args().any(|a| a == "--test"));
    c.final_summary();
}
