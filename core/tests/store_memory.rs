//! The store keeps its memory limit under a flood of large values from many threads: a global
//! allocator counts the bytes allocated and not yet freed, and their peak may exceed
//! `cache_size` only by the items the writers hold in their hands (each thread allocates its
//! next item before storing it) and a fixed slack. Memory an item held counts until it is
//! really freed, so items replaced or evicted but parked for reclamation count too.
//!
//! One test per binary: the counter is process-wide.

use mcb_core::store::{Config, ManualClock, Store, StoreOp, PAGE_SIZE};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Barrier;

/// Forwards to the system allocator, counting live bytes and their peak.
struct LiveBytes;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged; the counters are atomics,
// which never allocate.
unsafe impl GlobalAlloc for LiveBytes {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed (both): counters read after the threads joined; only their sums matter.
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // Relaxed: see `alloc`.
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: LiveBytes = LiveBytes;

const THREADS: usize = 16;
const VALUE: usize = 900 << 10;

#[test]
fn a_flood_of_large_values_from_many_threads_stays_within_cache_size() {
    let cache_size = 16 * PAGE_SIZE;
    let config = Config {
        cache_size,
        ..Config::default()
    };
    let store = Store::new(config, Box::new(ManualClock::new(1))).expect("store");
    let value = vec![b'v'; VALUE];
    // Relaxed: read on this thread, before the flood starts.
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let start = Barrier::new(THREADS);
    mcb_core::sync::thread::scope(|s| {
        for t in 0..THREADS {
            let (store, value, start) = (&store, &value, &start);
            s.spawn(move || {
                start.wait();
                for round in 0..40 {
                    // Half the threads replace one shared key, half write keys of their own.
                    let key = if t % 2 == 0 {
                        "shared".to_string()
                    } else {
                        format!("key:{t}:{round}")
                    };
                    let item = store.item(key.as_bytes(), value, 0, 0).expect("item");
                    store.store(&item, StoreOp::Set).expect("stored");
                }
            });
        }
    });
    // Relaxed: the threads joined.
    let peak = PEAK.load(Ordering::Relaxed) - base;
    // Each writer holds the one item it has not stored yet; 1 MiB covers the threads' own
    // allocations. (Before retired bytes were charged, this peaked near 590 MB.)
    let bound = cache_size + THREADS * (VALUE + 4096) + PAGE_SIZE;
    assert!(
        peak <= bound,
        "peak live bytes {peak} over {bound} (cache_size {cache_size})"
    );
    let stats = store.stats();
    assert!(stats.bytes <= cache_size as u64, "{stats:?}");
    assert!(stats.evictions > 0, "the flood filled the cache: {stats:?}");
}
