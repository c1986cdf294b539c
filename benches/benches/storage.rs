//! The built-in storage engine's item store against the design of memcached's default engine
//! (one global cache lock around a hash map, item allocation included) and two real peers, as
//! ratios.
//!
//! - `storage_get90_set10_10k_keys`: 90% gets, 10% sets of 100-byte values over 10,000 keys,
//!   uniformly chosen, from 1, 2 and N threads at once; nothing is evicted;
//! - `storage_get50_set50_10k_keys`: the same with half sets;
//! - `storage_evicting_zipf0.99`: a cache-aside loop (a get; on a miss, a set of the key) over
//!   Zipf 0.99 keys, the cache sized for half the keys drawn (at our item size), from 1, 2 and N threads; then each side's
//!   hit ratio from one thread's pass over the trace (after a pass to warm up), fresh caches.
//!
//! The sides, each one call per operation:
//! - `ours`: what `mcb_ffi::storage` calls for each engine call (a get is a fetch: it takes a
//!   counted hold on the item's segment, as for a foreign host, and notes the access; a set
//!   allocates the item in a segment and stores it); `ours_pinned`: a get within a pin, without
//!   a hold or the access note (what a host that pins per turn gets);
//! - `global_lock` (`global_lock_lru` when evicting: a hit moves the item to the front, a set
//!   past the budget drops the back): memcached's design reduced to a get and a set;
//! - `quick_cache`: `quick_cache::sync::Cache` of byte keys and `Arc<[u8]>` values weighed in
//!   bytes (a get clones the `Arc`, a set allocates key and value);
//! - `segcache`: Pelikan's segment store (the `segcache` crate, merge eviction as in its paper;
//!   a get pins the item's segment, a set copies into a segment).
//!
//! Memory: ours and segcache get the cache's bytes (segcache's hash table comes on top);
//! the global lock and quick_cache a budget of that many bytes, each item weighed as key, value
//! and memcached's 56-byte item header. Every thread draws keys from its own fixed-seed
//! generator (or walks the shared trace from its own start).

use criterion::{BenchmarkId, Throughput};
use mcb_benches::{
    criterion, next_key, print_hit_ratios, print_ratios, results_dir, thread_counts, time_threads,
    wanted, zipf, Rng,
};
use mcb_core::store::{Config, ManualClock, Store, StoreOp};
use segcache::{Policy, Segcache};
use std::cell::Cell;
use std::collections::HashMap;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const KEYS: usize = 10_000;
const VALUE: [u8; 100] = [b'v'; 100];
/// What the peers without an item layout of their own charge an item beyond key and value:
/// memcached's item header with CAS.
const HEADER: usize = 56;
/// The keys the evicting regime's Zipf trace draws from.
const EVICTING_KEYS: usize = 1 << 20;
const ZIPF_S: f64 = 0.99;

type Hasher = foldhash::quality::RandomState;

/// memcached's default engine, reduced to what a get and a set do: under the one cache lock,
/// a get looks the item up (and, with a budget, moves it to the front of the LRU) and takes a
/// reference; a set allocates the item, gives it a CAS and links it (replacing the old one,
/// and dropping the LRU's back while over budget).
struct GlobalLock {
    cache: Mutex<Lru>,
}

/// What the cache lock guards: the items in a hash map (the same hash function as our
/// store's, foldhash, so the ratio compares designs, not hashers), an LRU list threaded
/// through them by index, and the CAS counter.
struct Lru {
    map: HashMap<Vec<u8>, usize, Hasher>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    /// Front (most recent) and back of the list; `NONE` when empty.
    head: usize,
    tail: usize,
    bytes: usize,
    /// `None`: never evicts (the non-evicting groups).
    budget: Option<usize>,
    last_cas: u64,
}

const NONE: usize = usize::MAX;

struct Node {
    key: Vec<u8>,
    item: Arc<SeedItem>,
    prev: usize,
    next: usize,
}

struct SeedItem {
    value: Box<[u8]>,
    #[allow(dead_code)] // read by nobody: the bench only moves items around
    cas: u64,
}

impl GlobalLock {
    fn new(budget: Option<usize>) -> Self {
        Self {
            cache: Mutex::new(Lru {
                map: HashMap::default(),
                nodes: Vec::new(),
                free: Vec::new(),
                head: NONE,
                tail: NONE,
                bytes: 0,
                budget,
                last_cas: 0,
            }),
        }
    }

    fn get(&self, key: &[u8]) -> Option<Arc<SeedItem>> {
        let mut lru = self.cache.lock().expect("not poisoned");
        let i = *lru.map.get(key)?;
        if lru.budget.is_some() {
            lru.unlink(i);
            lru.push_front(i);
        }
        Some(Arc::clone(&lru.nodes[i].item))
    }

    fn set(&self, key: &[u8], value: &[u8]) {
        let mut lru = self.cache.lock().expect("not poisoned");
        lru.last_cas += 1;
        let item = Arc::new(SeedItem {
            value: value.into(),
            cas: lru.last_cas,
        });
        if let Some(&i) = lru.map.get(key) {
            lru.bytes = lru.bytes + value.len() - lru.nodes[i].item.value.len();
            lru.nodes[i].item = item;
            lru.unlink(i);
            lru.push_front(i);
            return;
        }
        let node = Node {
            key: key.to_vec(),
            item,
            prev: NONE,
            next: NONE,
        };
        let i = match lru.free.pop() {
            Some(i) => {
                lru.nodes[i] = node;
                i
            }
            None => {
                lru.nodes.push(node);
                lru.nodes.len() - 1
            }
        };
        lru.map.insert(key.to_vec(), i);
        lru.bytes += weight(key, value.len());
        lru.push_front(i);
        while lru.budget.is_some_and(|b| lru.bytes > b) && lru.tail != NONE {
            lru.evict_back();
        }
    }
}

impl Lru {
    fn unlink(&mut self, i: usize) {
        let (prev, next) = (self.nodes[i].prev, self.nodes[i].next);
        match prev {
            NONE => self.head = next,
            p => self.nodes[p].next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => self.nodes[n].prev = prev,
        }
    }

    fn push_front(&mut self, i: usize) {
        self.nodes[i].prev = NONE;
        self.nodes[i].next = self.head;
        match self.head {
            NONE => self.tail = i,
            h => self.nodes[h].prev = i,
        }
        self.head = i;
    }

    fn evict_back(&mut self) {
        let i = self.tail;
        self.unlink(i);
        let key = std::mem::take(&mut self.nodes[i].key);
        self.bytes -= weight(&key, self.nodes[i].item.value.len());
        self.map.remove(&key);
        self.free.push(i);
    }
}

/// An item's charge where the side has no layout of its own.
fn weight(key: &[u8], value: usize) -> usize {
    key.len() + value + HEADER
}

#[derive(Clone)]
struct Bytes;

impl quick_cache::Weighter<Vec<u8>, Arc<[u8]>> for Bytes {
    fn weight(&self, key: &Vec<u8>, value: &Arc<[u8]>) -> u64 {
        weight(key, value.len()) as u64
    }
}

type Quick = quick_cache::sync::Cache<Vec<u8>, Arc<[u8]>, Bytes>;

fn quick(bytes: usize, items: usize) -> Quick {
    Quick::with_weighter(items, bytes as u64, Bytes)
}

/// Segcache of `bytes` in 1 MiB segments (as ours), its hash table sized for `items`.
fn segcache(bytes: usize, items: usize) -> Segcache {
    // Buckets of eight slots, one of them metadata: 2^power slots hold 7/8 of that.
    let power = (items * 8 / 7).next_power_of_two().trailing_zeros().max(16);
    Segcache::builder()
        .heap_size(bytes)
        .segment_size(1 << 20)
        .hash_power(power as u8)
        .eviction(Policy::Merge {
            max: 8,
            merge: 4,
            compact: 2,
        })
        .build()
        .expect("segcache")
}

fn ours(bytes: usize) -> Store {
    let config = Config {
        cache_size: bytes,
        ..Config::default()
    };
    Store::new(config, Box::new(ManualClock::new(1))).expect("store")
}

fn ours_set(store: &Store, key: &[u8]) {
    let item = store.item(key, &VALUE, 0, 0).expect("item");
    black_box(store.store(&item, StoreOp::Set).expect("stored"));
}

fn segcache_set(cache: &Segcache, key: &[u8]) {
    // An insert may fail while every segment is being merged or pinned: a miss to come.
    let _ = black_box(cache.insert(key, &VALUE[..], None, Duration::ZERO));
}

/// The four caches of one group, equal in memory.
struct Sides {
    ours: Store,
    global: GlobalLock,
    quick: Quick,
    seg: Segcache,
}

impl Sides {
    fn new(bytes: usize, items: usize, evicting: bool) -> Self {
        Self {
            ours: ours(bytes),
            global: GlobalLock::new(evicting.then_some(bytes)),
            quick: quick(bytes, items),
            seg: segcache(bytes, items),
        }
    }

    /// A get, then on a miss a set; whether it hit.
    fn get_or_set(&self, side: Side, key: &[u8]) -> bool {
        let hit = self.get(side, key);
        if !hit {
            self.set(side, key);
        }
        hit
    }

    fn get(&self, side: Side, key: &[u8]) -> bool {
        match side {
            Side::Ours => black_box(self.ours.fetch(key)).is_some(),
            Side::OursPinned => {
                let pin = self.ours.pin();
                let hit = self.ours.get_pinned(&pin, key).is_some();
                black_box(hit)
            }
            Side::Global => black_box(self.global.get(key)).is_some(),
            Side::Quick => black_box(self.quick.get(key)).is_some(),
            Side::Seg => black_box(self.seg.get(key)).is_some(),
        }
    }

    fn set(&self, side: Side, key: &[u8]) {
        match side {
            Side::Ours | Side::OursPinned => ours_set(&self.ours, key),
            Side::Global => self.global.set(key, &VALUE),
            Side::Quick => self.quick.insert(key.to_vec(), Arc::from(&VALUE[..])),
            Side::Seg => segcache_set(&self.seg, key),
        }
    }
}

/// Which of the [`Sides`] an operation goes to (ours twice: counted and pinned gets).
#[derive(Clone, Copy)]
enum Side {
    Ours,
    OursPinned,
    Global,
    Quick,
    Seg,
}

/// The caches of every side (ours, pinned, the global lock, quick_cache, segcache), by name.
const SIDES: [(&str, Side); 5] = [
    ("ours", Side::Ours),
    ("ours_pinned", Side::OursPinned),
    ("global_lock", Side::Global),
    ("quick_cache", Side::Quick),
    ("segcache", Side::Seg),
];

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

/// Times `op(side)` for every side from 1, 2 and N threads and prints each `ours...` side's
/// ratio to each other one.
fn group(
    c: &mut criterion::Criterion,
    results: &std::path::Path,
    group_name: &str,
    sides: &[(&str, Side)],
    op: impl Fn(Side) + Sync,
) {
    let mut group = c.benchmark_group(group_name);
    let mut pairs = Vec::new();
    for threads in thread_counts() {
        group.throughput(Throughput::Elements(threads as u64));
        for &(name, side) in sides {
            group.bench_with_input(BenchmarkId::new(name, threads), &threads, |b, &t| {
                b.iter_custom(|iters| time_threads(t, iters, || op(side)))
            });
        }
        let (ours, peers): (Vec<_>, Vec<_>) =
            sides.iter().partition(|(n, _)| n.starts_with("ours"));
        for (ours, _) in &ours {
            for (peer, _) in &peers {
                pairs.push((format!("{ours}/{threads}"), format!("{peer}/{threads}")));
            }
        }
    }
    group.finish();
    print_ratios(results, group_name, &pairs);
}

fn mixed(c: &mut criterion::Criterion, results: &std::path::Path) {
    let keys: Vec<Vec<u8>> = (0..KEYS).map(|i| format!("key:{i}").into_bytes()).collect();
    // Sized for the key set (about 1.3 MiB of items) with room to spare, as one would
    // configure a cache for it.
    let sides = Sides::new(8 << 20, KEYS, false);
    for key in &keys {
        for side in [Side::Ours, Side::Global, Side::Quick, Side::Seg] {
            sides.set(side, key);
        }
    }
    for (group_name, sets_per_10) in [
        ("storage_get90_set10_10k_keys", 1),
        ("storage_get50_set50_10k_keys", 5),
    ] {
        if !wanted(group_name) {
            continue;
        }
        group(c, results, group_name, &SIDES, |side| {
            let r = next();
            let key = &keys[(r >> 8) as usize % KEYS];
            if r % 10 < sets_per_10 {
                sides.set(side, key);
            } else {
                sides.get(side, key);
            }
        });
    }
}

fn evicting(c: &mut criterion::Criterion, results: &std::path::Path, quick_run: bool) {
    let group_name = "storage_evicting_zipf0.99";
    if !wanted(group_name) {
        return;
    }
    let draws = if quick_run { 1 << 14 } else { 1 << 21 };
    let trace = zipf(EVICTING_KEYS, ZIPF_S, draws, 44);
    let mut distinct = trace.clone();
    distinct.sort_unstable();
    distinct.dedup();
    // Half the keys the trace touches, at our item size (12-byte header, 11-byte keys, no
    // flags or expiry), in whole segments: the working set is twice the cache.
    let bytes = (distinct.len() / 2 * (12 + 12 + VALUE.len())).next_multiple_of(1 << 20);
    let keys: Vec<Vec<u8>> = (0..EVICTING_KEYS)
        .map(|i| format!("k{i:010}").into_bytes())
        .collect();
    let named = [
        ("ours", Side::Ours),
        ("global_lock_lru", Side::Global),
        ("quick_cache", Side::Quick),
        ("segcache", Side::Seg),
    ];
    let sides = Sides::new(bytes, distinct.len() / 2, true);
    group(c, results, group_name, &named, |side| {
        let key = &keys[next_key(&trace) as usize];
        sides.get_or_set(side, key);
    });
    let sides = Sides::new(bytes, distinct.len() / 2, true);
    let mut hits = [0usize; 4];
    for pass in 0..2 {
        for &k in &trace {
            for (h, &(_, side)) in hits.iter_mut().zip(&named) {
                let hit = sides.get_or_set(side, &keys[k as usize]);
                if pass == 1 {
                    *h += usize::from(hit);
                }
            }
        }
    }
    let workload = format!(
        "{group_name}, {} of {EVICTING_KEYS} keys drawn, {} MiB",
        distinct.len(),
        bytes >> 20
    );
    let names = named.map(|(name, _)| name);
    print_hit_ratios(&workload, "hit_ratio_evicting", &names, &hits, trace.len());
}

fn main() {
    let results = results_dir(env!("CARGO_TARGET_TMPDIR"));
    let mut c = criterion(&results);
    let quick_run = std::env::args().any(|a| a == "--test");
    mixed(&mut c, &results);
    evicting(&mut c, &results, quick_run);
    c.final_summary();
}
