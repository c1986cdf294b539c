//! The built-in storage engine's item store against the design of memcached's default engine
//! (one global cache lock around a hash map, item allocation included), as ratios.
//!
//! - `storage_get90_set10_10k_keys`: 90% gets, 10% sets of 100-byte values over 10,000 keys,
//!   uniformly chosen, from 1, 2 and N threads at once;
//! - `storage_get50_set50_10k_keys`: the same with half sets.
//!
//! Each operation is one call of the store's Rust API: `ours` is what `mcb_ffi::storage` calls
//! for each engine call (a get takes a counted hold on the item's segment, as for a foreign
//! host), `ours_pinned` a get within a pin and without a hold (what a host that pins per turn
//! gets); every thread draws keys from its own fixed-seed generator.

use criterion::{BenchmarkId, Throughput};
use mcb_benches::{criterion, print_ratios, results_dir, thread_counts, time_threads, Rng};
use mcb_core::store::{Config, ManualClock, Store, StoreOp};
use std::cell::Cell;
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const KEYS: usize = 10_000;
const VALUE: [u8; 100] = [b'v'; 100];

/// memcached's default engine, reduced to what a get and a set do: under the one cache lock,
/// a get looks the item up and takes a reference; a set allocates the item, gives it a CAS and
/// links it (replacing the old one).
#[derive(Default)]
struct GlobalLock {
    cache: Mutex<Cache>,
}

/// What the cache lock guards: the items and the CAS counter. The same hash function as our
/// store's (foldhash), so the ratio compares designs, not hashers.
#[derive(Default)]
struct Cache {
    items: HashMap<Vec<u8>, Arc<SeedItem>, foldhash::quality::RandomState>,
    last_cas: u64,
}

struct SeedItem {
    #[allow(dead_code)] // read by nobody: the bench only moves items around
    value: Box<[u8]>,
    #[allow(dead_code)]
    cas: u64,
}

impl GlobalLock {
    fn get(&self, key: &[u8]) -> Option<Arc<SeedItem>> {
        self.cache
            .lock()
            .expect("not poisoned")
            .items
            .get(key)
            .cloned()
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        let mut cache = self.cache.lock().expect("not poisoned");
        cache.last_cas += 1;
        let item = Arc::new(SeedItem {
            value: value.into(),
            cas: cache.last_cas,
        });
        cache.items.insert(key.to_vec(), item);
    }
}

thread_local! {
    static RNG: Cell<Option<Rng>> = const { Cell::new(None) };
}

/// This thread's next pseudo-random number (each thread seeded once from a fixed sequence, so
/// runs repeat).
fn next() -> u64 {
    static SEEDS: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    RNG.with(|cell| {
        // Relaxed: only distinct seeds matter.
        let mut rng = cell
            .take()
            .unwrap_or_else(|| Rng(SEEDS.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed) | 1));
        let x = rng.next_u64();
        cell.set(Some(rng));
        x
    })
}

fn main() {
    let results = results_dir(env!("CARGO_TARGET_TMPDIR"));
    let mut c = criterion(&results);
    let keys: Vec<Vec<u8>> = (0..KEYS).map(|i| format!("key:{i}").into_bytes()).collect();
    // Sized for the key set (about 3 MiB of items) with room to spare, as one would configure
    // a cache for it; L2's bucket arrays scale with the capacity.
    let config = Config {
        cache_size: 8 << 20,
        ..Config::default()
    };
    let ours = Store::new(config, Box::new(ManualClock::new(1))).expect("store");
    let theirs = GlobalLock::default();
    for key in &keys {
        let item = ours.item(key, &VALUE, 0, 0).expect("item");
        ours.store(&item, StoreOp::Set).expect("stored");
        theirs.set(key, &VALUE);
    }

    for (group_name, sets_per_10) in [
        ("storage_get90_set10_10k_keys", 1),
        ("storage_get50_set50_10k_keys", 5),
    ] {
        let mut group = c.benchmark_group(group_name);
        let mut pairs = Vec::new();
        for threads in thread_counts() {
            group.throughput(Throughput::Elements(threads as u64));
            group.bench_with_input(BenchmarkId::new("ours", threads), &threads, |b, &t| {
                b.iter_custom(|iters| {
                    time_threads(t, iters, || {
                        let r = next();
                        let key = &keys[(r >> 8) as usize % KEYS];
                        if r % 10 < sets_per_10 {
                            let item = ours.item(key, &VALUE, 0, 0).expect("item");
                            black_box(ours.store(&item, StoreOp::Set).expect("stored"));
                        } else {
                            black_box(ours.get(key));
                        }
                    })
                })
            });
            group.bench_with_input(
                BenchmarkId::new("ours_pinned", threads),
                &threads,
                |b, &t| {
                    b.iter_custom(|iters| {
                        time_threads(t, iters, || {
                            let r = next();
                            let key = &keys[(r >> 8) as usize % KEYS];
                            if r % 10 < sets_per_10 {
                                let item = ours.item(key, &VALUE, 0, 0).expect("item");
                                black_box(ours.store(&item, StoreOp::Set).expect("stored"));
                            } else {
                                let pin = ours.pin();
                                black_box(ours.get_pinned(&pin, key).is_some());
                            }
                        })
                    })
                },
            );
            group.bench_with_input(
                BenchmarkId::new("global_lock", threads),
                &threads,
                |b, &t| {
                    b.iter_custom(|iters| {
                        time_threads(t, iters, || {
                            let r = next();
                            let key = &keys[(r >> 8) as usize % KEYS];
                            if r % 10 < sets_per_10 {
                                theirs.set(key, &VALUE);
                            } else {
                                black_box(theirs.get(key));
                            }
                        })
                    })
                },
            );
            pairs.push((format!("ours/{threads}"), format!("global_lock/{threads}")));
            pairs.push((
                format!("ours_pinned/{threads}"),
                format!("global_lock/{threads}"),
            ));
        }
        group.finish();
        print_ratios(&results, group_name, &pairs);
    }

    c.final_summary();
}
