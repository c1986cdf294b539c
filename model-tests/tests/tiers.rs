//! loom models of the cache tiers, each run on the real code (`check`) and on a deliberately
//! broken variant that the model must reject (`caught`).

#![cfg(mcb_loom)]

use mcb_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use mcb_core::sync::mutant::Mutant;
use mcb_core::sync::{thread, Arc, PayloadArc};
use mcb_core::tiers::{Cache, CallOptions, Clock, Level, Loaded, Options, L2};
use mcb_model_tests::{caught, check};

fn cache() -> Arc<Cache<u32>> {
    let l2 = L2::with_shards(1 << 12, 1).expect("valid");
    let opts = Options {
        clock: Clock::manual(),
        l1_slots: 4,
        l1_capacity: 4,
        ..Options::default()
    };
    Arc::new(Cache::new("model", PayloadArc::new(l2), opts).expect("valid"))
}

/// Joins `threads`; if one panicked, re-raises its panic after forgetting `locals`, because
/// loom aborts the process when an unwinding thread drops loom objects.
fn join_all<L>(threads: Vec<thread::JoinHandle<()>>, locals: L) {
    let mut failure = None;
    for thread in threads {
        if let Err(payload) = thread.join() {
            failure.get_or_insert(payload);
        }
    }
    if let Some(payload) = failure {
        std::mem::forget(locals);
        std::panic::resume_unwind(payload);
    }
}

fn set(cache: &Cache<u32>, key: &[u8], value: u32) {
    cache
        .set(key, &CallOptions::default(), Some(value))
        .expect("room");
}

fn peek(cache: &Cache<u32>, key: &[u8]) -> Option<u32> {
    cache.peek(key, false).and_then(|p| p.value.map(|v| *v))
}

/// A reader walks L2 while a writer unlinks the node it reads and inserts another: the reader
/// sees the old value or none, never freed memory, and no insert is lost.
fn l2_read_remove_insert() {
    let cache = cache();
    set(&cache, b"a", 1);
    let reader = {
        let cache = cache.clone();
        thread::spawn(move || {
            let seen = peek(&cache, b"a");
            assert!(matches!(seen, Some(1) | None), "read {seen:?}");
        })
    };
    let writer = {
        let cache = cache.clone();
        thread::spawn(move || {
            cache.delete(b"a");
            set(&cache, b"b", 2);
        })
    };
    set(&cache, b"c", 3);
    join_all(vec![reader, writer], cache.clone());
    assert_eq!(peek(&cache, b"a"), None, "deleted");
    assert_eq!(peek(&cache, b"b"), Some(2), "lost insert");
    assert_eq!(peek(&cache, b"c"), Some(3), "lost insert");
}

#[test]
fn tiers_l2_reclamation() {
    check(l2_read_remove_insert);
}

#[test]
fn tiers_l2_reclamation_catches_eager_free() {
    caught(
        Mutant::L2FreesEagerly,
        "L2 node used after free",
        l2_read_remove_insert,
    );
}

/// Two concurrent misses of one key: the loader runs exactly once and both get its value.
fn single_flight() {
    let cache = cache();
    let runs = Arc::new(AtomicUsize::new(0));
    let get = |cache: Arc<Cache<u32>>, runs: Arc<AtomicUsize>| {
        move || {
            let loader = || {
                // Relaxed: the count is read after every thread joined.
                runs.fetch_add(1, Ordering::Relaxed);
                Ok(Loaded::some(7))
            };
            let hit = cache
                .get(b"k", &CallOptions::default(), Some(loader))
                .expect("loom never times out a lock");
            assert_eq!(hit.value.as_deref(), Some(&7));
            assert!(
                matches!(hit.level, Level::L2 | Level::L3),
                "{:?}",
                hit.level
            );
        }
    };
    let threads = vec![
        thread::spawn(get(cache.clone(), runs.clone())),
        thread::spawn(get(cache, runs.clone())),
    ];
    join_all(threads, runs.clone());
    // Relaxed: joined.
    assert_eq!(runs.load(Ordering::Relaxed), 1, "the loader ran twice");
}

#[test]
fn tiers_single_flight() {
    check(single_flight);
}

#[test]
fn tiers_single_flight_catches_a_missing_recheck() {
    caught(
        Mutant::LoaderSkipsRecheck,
        "the loader ran twice",
        single_flight,
    );
}

/// A thread reads a key into its L1 while another thread sets it; once the set has returned
/// (observed through a flag), the reader's next get returns the new value.
fn l1_invalidation() {
    let cache = cache();
    set(&cache, b"k", 0);
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (cache, done) = (cache.clone(), done.clone());
        thread::spawn(move || {
            let none = None::<fn() -> Result<Loaded<u32>, String>>;
            let first = cache.get(b"k", &CallOptions::default(), none).unwrap();
            assert!(first.value.is_some());
            // Acquire: pairs with the writer's Release; the set happened before this get.
            if done.load(Ordering::Acquire) {
                let next = cache.get(b"k", &CallOptions::default(), none).unwrap();
                assert_eq!(next.value.as_deref(), Some(&1), "stale L1 read after a set");
            }
        })
    };
    set(&cache, b"k", 1);
    // Release: publishes "the set returned" to the reader.
    done.store(true, Ordering::Release);
    join_all(vec![reader], (cache, done));
}

#[test]
fn tiers_l1_invalidation() {
    check(l1_invalidation);
}

#[test]
fn tiers_l1_invalidation_catches_a_late_tag() {
    caught(
        Mutant::L1TagsAfterL2Read,
        "stale L1 read after a set",
        l1_invalidation,
    );
}
