//! The threads of bulk gets, bounded process-wide: a test binary of its own, so that no other
//! test's bulk get holds helpers meanwhile.

// Tests drive the cache from real threads of their own; the rule is for the crate's code.
#![allow(clippy::disallowed_methods)]

use mcb_core::sync::atomic::{AtomicUsize, Ordering};
use mcb_core::sync::PayloadArc;
use mcb_core::tiers::*;
use std::collections::HashSet;
use std::sync::Mutex;
use std::thread;
use std::time::Duration;

/// Loaders running now, the most seen at once, and the threads they ran on.
#[derive(Default)]
struct Gauge {
    running: AtomicUsize,
    most: AtomicUsize,
    threads: Mutex<HashSet<thread::ThreadId>>,
}

impl Gauge {
    /// Runs `misses` loaders in one bulk get of `concurrency` on `cache`, each a few ms long.
    fn bulk(&self, cache: &Cache<String>, caller: usize, misses: usize, concurrency: usize) {
        let keys: Vec<String> = (0..misses).map(|i| format!("c{caller}k{i}")).collect();
        let ops = keys
            .iter()
            .map(|key| {
                BulkOp::new(key.as_bytes()).loader(move || {
                    // Relaxed (all three): a gauge, read after the threads joined.
                    let now = self.running.fetch_add(1, Ordering::Relaxed) + 1;
                    self.most.fetch_max(now, Ordering::Relaxed);
                    self.threads.lock().unwrap().insert(thread::current().id());
                    thread::sleep(Duration::from_millis(2));
                    self.running.fetch_sub(1, Ordering::Relaxed);
                    Ok::<_, String>(Loaded::some(key.clone()))
                })
            })
            .collect();
        let results = cache.get_bulk_with(ops, concurrency).unwrap();
        assert_eq!(results.len(), misses);
        for (key, result) in keys.iter().zip(results) {
            let hit = result.unwrap();
            assert_eq!(hit.level, Level::L3);
            assert_eq!(hit.value.as_deref(), Some(key));
        }
    }

    fn most(&self) -> usize {
        // Relaxed: see `bulk`.
        self.most.load(Ordering::Relaxed)
    }
}

#[test]
fn bulk_gets_run_at_most_the_process_bound_of_helper_threads() {
    let l2 = PayloadArc::new(L2::new(8 << 20).unwrap().weigh_with(String::len));
    let cache = Cache::new("bulk", l2, Options::default()).unwrap();

    // One call asking for 10,000 at once: its own thread and the bound's helpers, no more.
    let one = Gauge::default();
    one.bulk(&cache, 0, 500, 10_000);
    let threads = one.threads.lock().unwrap().len();
    assert!(
        one.most() <= BULK_HELPERS_MAX + 1 && threads <= BULK_HELPERS_MAX + 1,
        "{} loaders at once on {threads} threads",
        one.most()
    );
    assert!(one.most() > 1, "the call had no helpers");

    // Four calls at once, each asking for 100: the bound is shared, each caller runs beside it
    // (and the first call gave its helpers back, or these would get none).
    let four = Gauge::default();
    thread::scope(|s| {
        for caller in 1..=4 {
            let (four, cache) = (&four, &cache);
            s.spawn(move || four.bulk(cache, caller, 100, 100));
        }
    });
    assert!(
        four.most() <= BULK_HELPERS_MAX + 4,
        "{} loaders at once",
        four.most()
    );
    assert!(four.most() > 4, "the calls had no helpers");
}
