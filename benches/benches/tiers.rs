//! The cache tiers: ours against moka and quick_cache, as ratios.
//!
//! Like with like: every side is keyed by the same 8-byte keys as bytes (ours takes `&[u8]`,
//! the peers `Box<[u8]>` keys looked up by `&[u8]`), and every side hands back a shared value
//! (`PayloadArc<u64>`, cloned on a hit: one reference count increment, and its decrement when the
//! caller drops it). What one operation does on each side:
//!
//! - ours, `get`: hash the key once; look in this thread's L1 (a hash index and an LRU; the
//!   key's invalidation generation compared); on an L1 miss, read L2 without a lock (pinned to
//!   the epoch) and, by the cache's admission rule, promote the value into L1.
//! - ours, an L2 hit not promoted (the `l2_read` row): the L1 miss, then the L2 read.
//! - ours through a handle on this thread's L1 (`Cache::local`, the `_local` rows): the same,
//!   but the L1 is the handle's, not looked up in the thread's table of L1s on each get (the
//!   handle is made once, before the timed loop, as a caller keeps it).
//! - quick_cache `get`: hash the key, take its shard's read lock, probe, clone, unlock.
//! - moka `get`: hash the key, probe its lock-free map, clone, and record the read in its
//!   buffers for the policy (applied later, in batches).
//! - a miss that inserts (the evicting regime): ours `set` (into L2, evicting by S3-FIFO under the
//!   shard lock, and into this thread's L1), quick_cache and moka `insert` (a boxed key copy).
//!
//! The groups:
//! - `tiers_levels`: one get answered by this thread's L1 (`l1_hit`; `l1_hit_borrowed` by
//!   `get_with`, no clone; `l1_hit_local` through a handle), by L2 with a promotion into L1 and an L1 eviction (`l2_hit`, the
//!   seed's rule), by L2 without a promotion (`l2_read`, the second-hit rule; `l2_read_local`
//!   through a handle), and by the loader
//!   (a new key each time), next to a hit of moka and quick_cache.
//! - `zipf_s0.9_100k_keys_read`: reads of Zipf-distributed keys from 1, 2 and N threads, every
//!   cache holding all keys.
//! - `zipf_s0.9_100k_keys_evicting`: the same reads where every cache holds half the keys; a
//!   miss inserts the key (ops/s: ours a get with a loader, frequency admission on, the peers a
//!   get and an insert), then the hit ratio of each side on the same trace (ours also with
//!   every load kept, the seed's rule).
//! - `single_flight_64_misses`: 64 threads miss one key at once; the loader must run once.
//! - The hit ratio of a Zipf workload with a one-pass scan mixed in, at one capacity: our L2
//!   (S3-FIFO, with frequency admission and with every load kept), plain LRU (our L1 alone),
//!   moka (TinyLFU) and quick_cache (CLOCK-Pro-like).

use criterion::{BenchmarkId, Throughput};
use mcb_benches::tiers::{entry_weight, get, get_local, get_or_load, key, ours_with, store};
use mcb_benches::{
    criterion, next_key, print_hit_ratios, print_ratios, results_dir, thread_counts, time_threads,
    wanted, zipf,
};
use mcb_core::sync::PayloadArc;
use mcb_core::tiers::{Admission, Cache, CallOptions, Level, Loaded, Promotion, L2};
use std::cell::Cell;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

const KEYS: usize = 100_000;
const ZIPF_S: f64 = 0.9;
/// Entries each thread's L1 holds in the Zipf groups.
const L1_ENTRIES: usize = 1000;

/// The peers, keyed by bytes as ours is.
type Quick = quick_cache::sync::Cache<Box<[u8]>, PayloadArc<u64>>;
type Moka = moka::sync::Cache<Box<[u8]>, PayloadArc<u64>>;

fn boxed(k: u64) -> Box<[u8]> {
    Box::new(key(k))
}

/// Our cache with the seed's options (every L2 hit promoted into L1).
fn ours(l2: PayloadArc<L2<u64>>, l1_capacity: usize) -> Cache<u64> {
    ours_with(l2, l1_capacity, Promotion::Always, Admission::Always)
}

fn levels(c: &mut criterion::Criterion, results: &std::path::Path) {
    let group_name = "tiers_levels";
    let mut group = c.benchmark_group(group_name);
    group.throughput(Throughput::Elements(1));
    let l1 = ours(store(64 << 20, 1), 16);
    l1.set(&key(1), &CallOptions::default(), Some(1))
        .expect("room");
    group.bench_function("l1_hit", |b| b.iter(|| black_box(get(&l1, 1))));
    let local = l1.local();
    group.bench_function("l1_hit_local", |b| {
        b.iter(|| black_box(get_local(&local, 1)))
    });
    // The borrowing read: no clone of the shared value.
    group.bench_function("l1_hit_borrowed", |b| {
        b.iter(|| black_box(l1.get_with(&key(1), |v| *v).expect("no error")))
    });
    // One L1 slot, two keys read in turn: every get is an L2 hit, a promotion and an eviction.
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
    // An L2 hit that is not promoted: one L1 slot with the second-hit rule, whose table of
    // hashes keeps one, and two keys read in turn, stored from another thread (so never in this
    // thread's L1): each get misses L1, forgets the other key's hash and reads L2.
    let unpromoted = ours_with(
        store(64 << 20, 1),
        1,
        Promotion::SecondHit,
        Admission::Always,
    );
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in [1, 2] {
                unpromoted.put(&key(k), k).expect("room");
            }
        });
    });
    group.bench_function("l2_read", |b| {
        b.iter(|| {
            flip.set(3 - flip.get());
            let level = get(&unpromoted, flip.get());
            debug_assert_eq!(level, Level::L2);
            black_box(level)
        })
    });
    let local = unpromoted.local();
    group.bench_function("l2_read_local", |b| {
        b.iter(|| {
            flip.set(3 - flip.get());
            let level = get_local(&local, flip.get());
            debug_assert_eq!(level, Level::L2);
            black_box(level)
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
    let moka = Moka::new(1024);
    moka.insert(boxed(1), PayloadArc::new(1));
    group.bench_function("moka_hit", |b| b.iter(|| black_box(moka.get(&key(1)[..]))));
    let quick = Quick::new(1024);
    quick.insert(boxed(1), PayloadArc::new(1));
    group.bench_function("quick_cache_hit", |b| {
        b.iter(|| black_box(quick.get(&key(1)[..])))
    });
    group.finish();
    let pairs = [
        ("l1_hit", "l2_hit"),
        ("l1_hit", "miss_with_loader"),
        ("l1_hit", "moka_hit"),
        ("l1_hit", "quick_cache_hit"),
        ("l1_hit_borrowed", "quick_cache_hit"),
        ("l1_hit_local", "quick_cache_hit"),
        ("l2_hit", "quick_cache_hit"),
        ("l2_read", "moka_hit"),
        ("l2_read", "quick_cache_hit"),
        ("l2_read_local", "quick_cache_hit"),
    ];
    let pairs: Vec<_> = pairs
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    print_ratios(results, group_name, &pairs);
}

/// The sides of a Zipf group by name, each timed on its operation from 1, 2 and N threads;
/// the ratios compare each side named `ours...` with each peer.
type Sides<'a> = [(&'a str, &'a (dyn Fn(u64) + Sync))];

fn zipf_group(
    c: &mut criterion::Criterion,
    results: &std::path::Path,
    group_name: &str,
    trace: &[u64],
    sides: &Sides<'_>,
) {
    let mut group = c.benchmark_group(group_name);
    let mut pairs = Vec::new();
    for threads in thread_counts() {
        group.throughput(Throughput::Elements(threads as u64));
        for &(name, op) in sides {
            group.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &t| {
                b.iter_custom(|iters| time_threads(t, iters, || op(next_key(trace))))
            });
        }
        let ours = sides.iter().filter(|(n, _)| n.starts_with("ours"));
        for (name, _) in ours {
            for peer in ["moka", "quick_cache"] {
                pairs.push((format!("{name}/{threads}"), format!("{peer}/{threads}")));
            }
        }
    }
    group.finish();
    print_ratios(results, group_name, &pairs);
}

fn zipf_reads(c: &mut criterion::Criterion, results: &std::path::Path) {
    let trace = zipf(KEYS, ZIPF_S, 1 << 16, 42);
    // Two caches, each on a store of its own with room for every key (a tenth to spare, as the
    // peers get exactly what they hold): one promotes on a second L1 miss, one (the seed's
    // rule) on every L2 hit.
    let room = || store(entry_weight() * KEYS * 11 / 10, 16);
    let second_hit = ours_with(room(), L1_ENTRIES, Promotion::SecondHit, Admission::Always);
    let always = ours(room(), L1_ENTRIES);
    let moka = Moka::new(KEYS as u64);
    let quick = Quick::new(KEYS);
    for k in 0..KEYS as u64 {
        for cache in [&second_hit, &always] {
            cache.put(&key(k), k).expect("room");
        }
        moka.insert(boxed(k), PayloadArc::new(k));
        quick.insert(boxed(k), PayloadArc::new(k));
    }
    moka.run_pending_tasks();
    let sides: [(&str, &(dyn Fn(u64) + Sync)); 4] = [
        ("ours", &|k| {
            black_box(get(&second_hit, k));
        }),
        ("ours_promote_always", &|k| {
            black_box(get(&always, k));
        }),
        ("moka", &|k| {
            black_box(moka.get(&key(k)[..]));
        }),
        ("quick_cache", &|k| {
            black_box(quick.get(&key(k)[..]));
        }),
    ];
    zipf_group(c, results, "zipf_s0.9_100k_keys_read", &trace, &sides);
}

/// The evicting regime: each cache holds half the distinct keys of the trace; a miss inserts
/// the key (ours: a get with a loader, whose value L2 keeps by frequency admission, as moka's
/// TinyLFU does; `ours_every_load` keeps every loaded value, the seed's rule, and is only in
/// the hit ratios).
struct Evicting {
    ours: Cache<u64>,
    ours_every_load: Cache<u64>,
    moka: Moka,
    quick: Quick,
}

impl Evicting {
    fn new(weight: usize, capacity: usize) -> Self {
        let ours = |admission| {
            ours_with(
                store(weight * capacity, 16),
                L1_ENTRIES,
                Promotion::SecondHit,
                admission,
            )
        };
        Self {
            ours: ours(Admission::Frequency),
            ours_every_load: ours(Admission::Always),
            moka: Moka::new(capacity as u64),
            quick: Quick::new(capacity),
        }
    }

    fn moka(&self, k: u64) -> bool {
        let hit = self.moka.get(&key(k)[..]).is_some();
        if !hit {
            self.moka.insert(boxed(k), PayloadArc::new(k));
        }
        hit
    }

    fn quick(&self, k: u64) -> bool {
        let hit = self.quick.get(&key(k)[..]).is_some();
        if !hit {
            self.quick.insert(boxed(k), PayloadArc::new(k));
        }
        hit
    }
}

fn zipf_evicting(c: &mut criterion::Criterion, results: &std::path::Path, quick_run: bool) {
    let trace = zipf(KEYS, ZIPF_S, if quick_run { 1 << 14 } else { 1 << 20 }, 43);
    let mut distinct = trace.clone();
    distinct.sort_unstable();
    distinct.dedup();
    let capacity = distinct.len() / 2;
    let weight = entry_weight();
    let group_name = "zipf_s0.9_100k_keys_evicting";
    let caches = Evicting::new(weight, capacity);
    let sides: [(&str, &(dyn Fn(u64) + Sync)); 3] = [
        ("ours", &|k| {
            black_box(get_or_load(&caches.ours, k));
        }),
        ("moka", &|k| {
            black_box(caches.moka(k));
        }),
        ("quick_cache", &|k| {
            black_box(caches.quick(k));
        }),
    ];
    zipf_group(c, results, group_name, &trace, &sides);
    // Hit ratios on one thread, fresh caches: a pass over the trace to warm up, then one
    // counted.
    let caches = Evicting::new(weight, capacity);
    let mut hits = [0usize; 4];
    for pass in 0..2 {
        for &k in &trace {
            let hit = [
                get_or_load(&caches.ours, k),
                get_or_load(&caches.ours_every_load, k),
                caches.moka(k),
                caches.quick(k),
            ];
            if pass == 1 {
                for (h, hit) in hits.iter_mut().zip(hit) {
                    *h += usize::from(hit);
                }
            }
        }
        caches.moka.run_pending_tasks();
    }
    let workload = format!("{group_name}, {} keys, capacity {capacity}", distinct.len());
    let names = ["ours", "ours_every_load", "moka", "quick_cache"];
    print_hit_ratios(&workload, "hit_ratio_evicting", &names, &hits, trace.len());
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
    let moka = moka::sync::Cache::<Box<[u8]>, u64>::new(1 << 20);
    group.bench_function("moka", |b| {
        b.iter_custom(|iters| {
            let base = round.fetch_add(iters, Ordering::Relaxed);
            sixty_four_at_once(iters, |i| {
                let value = moka.get_with(boxed(base + i), || {
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

    // Our L2: one shard sized to `capacity` entries; one L1 slot, so L1 hits are negligible;
    // with frequency admission and with the seed's rule (every load kept).
    let s3fifo = |admission| {
        let l2 = store(entry_weight() * capacity, 1);
        ours_with(l2, 1, Promotion::Always, admission)
    };
    let (admitting, every_load) = (s3fifo(Admission::Frequency), s3fifo(Admission::Always));
    // Plain LRU: our L1 alone (an L2 too small for anything keeps loads in L1 only).
    let lru = ours(store(1, 1), capacity);
    let moka = Moka::new(capacity as u64);
    let quick = Quick::new(capacity);
    let mut hits = [0usize; 5];
    for &k in &trace {
        let load = || Ok::<_, String>(Loaded::some(k));
        let opts = CallOptions::default();
        for (cache, hits) in [&admitting, &every_load].into_iter().zip(&mut hits) {
            *hits += usize::from(get_or_load(cache, k));
        }
        if lru.get(&key(k), &opts, Some(load)).expect("loads").level == Level::L1 {
            hits[2] += 1;
        }
        if moka.get(&key(k)[..]).is_some() {
            hits[3] += 1;
        } else {
            moka.insert(boxed(k), PayloadArc::new(k));
        }
        if quick.get(&key(k)[..]).is_some() {
            hits[4] += 1;
        } else {
            quick.insert(boxed(k), PayloadArc::new(k));
        }
    }
    let names = [
        "ours (L2, S3-FIFO, admission)",
        "ours (L2, S3-FIFO, every load)",
        "LRU",
        "moka",
        "quick_cache",
    ];
    let workload = format!("zipf_s0.9_100k_keys+scan, capacity {capacity}");
    print_hit_ratios(&workload, "hit_ratio", &names, &hits, trace.len());
}

fn main() {
    let results = results_dir(env!("CARGO_TARGET_TMPDIR"));
    let mut c = criterion(&results);
    let quick_run = std::env::args().any(|a| a == "--test");
    if wanted("tiers_levels") {
        levels(&mut c, &results);
    }
    if wanted("zipf_s0.9_100k_keys_read") {
        zipf_reads(&mut c, &results);
    }
    if wanted("zipf_s0.9_100k_keys_evicting") {
        zipf_evicting(&mut c, &results, quick_run);
    }
    if wanted("single_flight_64_misses") {
        single_flight(&mut c, &results);
    }
    if wanted("hit_ratio_zipf_scan") {
        hit_ratios(quick_run);
    }
    c.final_summary();
}
