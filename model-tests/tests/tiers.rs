//! loom models of the cache tiers, each run on the real code (`check`) and on a deliberately
//! broken variant that the model must reject (`caught`).

#![cfg(mcb_loom)]

use mcb_core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use mcb_core::sync::mutant::Mutant;
use mcb_core::sync::{thread, Arc, PayloadArc};
use mcb_core::tiers::{Cache, CallOptions, Clock, Level, Loaded, Options, L2};
use mcb_model_tests::{caught, check, check_batched};

fn cache() -> Arc<Cache<u32>> {
    let l2 = L2::with_shards(1 << 12, 1).expect("valid");
    named(&PayloadArc::new(l2), "model")
}

/// A cache named `name` on `l2` (caches of one name share each thread's L1).
fn named(l2: &PayloadArc<L2<u32>>, name: &str) -> Arc<Cache<u32>> {
    let opts = Options {
        clock: Clock::manual(),
        l1_capacity: 4,
        ..Options::default()
    };
    Arc::new(Cache::new(name, l2.clone(), opts).expect("valid"))
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
/// sees the old value or none, never freed or reused memory (the models' collector frees a
/// retired node as soon as no thread is pinned: see `mcb_core::sync::epoch`; a reused node
/// counts a new life), reads the key being inserted as absent or whole, and no insert is lost.
fn l2_read_remove_insert() {
    let cache = cache();
    set(&cache, b"a", 1);
    let reader = {
        let cache = cache.clone();
        thread::spawn(move || {
            let seen = peek(&cache, b"a");
            assert!(matches!(seen, Some(1) | None), "read {seen:?}");
            let seen = peek(&cache, b"b");
            assert!(matches!(seen, Some(2) | None), "read {seen:?}");
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

/// In models every retired node goes to the collector at once (a batch of one), so the
/// handover runs while the reader may still hold the node: freeing the batch there, without
/// the grace period, is caught.
#[test]
fn tiers_l2_reclamation_catches_a_batch_freed_at_handover() {
    caught(
        Mutant::L2FreesBatchAtHandover,
        "L2 node used after free",
        l2_read_remove_insert,
    );
}

/// Recycled nodes are reused by the next writes: recycling a batch when it is handed over,
/// without the grace period, lets the writer of `b` reuse the node of `a` while its reader
/// holds it ("reused while read"), or the models' collector marks the end of `a`'s grace
/// period on the node's new life, which `b`'s reader then finds ("used after free").
#[test]
fn tiers_l2_reclamation_catches_recycling_at_handover() {
    caught(
        Mutant::L2RecyclesAtHandover,
        "L2 node ",
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
                Ok::<_, String>(Loaded::some(7))
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

#[test]
fn tiers_single_flight_catches_a_lost_wake_up() {
    caught(Mutant::FlightCountsSleepersFirst, "deadlock", single_flight);
}

/// A thread reads a key into its L1 while another thread writes it (`write`, named `what`);
/// once the write has returned (observed through a flag), the reader's next get returns what
/// L2 holds: no other thread's L1 copy outlives a set, a delete or a purge.
fn l1_invalidation_by(
    what: &'static str,
    write: fn(&Cache<u32>),
) -> impl Fn() + Sync + Send + 'static {
    move || {
        let cache = cache();
        reader_races_write(what, [cache.clone(), cache.clone(), cache], write);
    }
}

/// The race of `l1_invalidation_by`, with `caches` the reader's cache for its first get, its
/// cache for the next one and the writer's (one cache, or several of one name).
fn reader_races_write(what: &str, caches: [Arc<Cache<u32>>; 3], write: fn(&Cache<u32>)) {
    let [first, next, writer] = caches;
    set(&writer, b"k", 0);
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let done = done.clone();
        let what = what.to_owned();
        thread::spawn(move || {
            let none = None::<fn() -> Result<Loaded<u32>, String>>;
            // Before the write, this keeps the value in the reader's L1; after it, a miss.
            first.get(b"k", &CallOptions::default(), none).unwrap();
            // Acquire: pairs with the writer's Release; the write happened before this get.
            if done.load(Ordering::Acquire) {
                let got = next.get(b"k", &CallOptions::default(), none).unwrap();
                assert_eq!(
                    got.value.as_deref().copied(),
                    peek(&next, b"k"),
                    "stale L1 read after a {what}"
                );
            }
        })
    };
    write(&writer);
    // Release: publishes "the write returned" to the reader.
    done.store(true, Ordering::Release);
    join_all(vec![reader], (writer, done));
}

fn l1_invalidation() -> impl Fn() + Sync + Send + 'static {
    l1_invalidation_by("set", |cache| set(cache, b"k", 1))
}

#[test]
fn tiers_l1_invalidation() {
    check_batched(l1_invalidation());
}

#[test]
fn tiers_l1_invalidation_catches_a_late_tag() {
    caught(
        Mutant::L1TagsAfterL2Read,
        "stale L1 read after a set",
        l1_invalidation(),
    );
}

fn l1_invalidation_by_delete() -> impl Fn() + Sync + Send + 'static {
    l1_invalidation_by("delete", |cache| cache.delete(b"k"))
}

#[test]
fn tiers_l1_invalidation_by_delete() {
    check_batched(l1_invalidation_by_delete());
}

#[test]
fn tiers_l1_invalidation_by_delete_catches_a_missing_bump() {
    caught(
        Mutant::DeleteSkipsBump,
        "stale L1 read after a delete",
        l1_invalidation_by_delete(),
    );
}

fn l1_invalidation_by_purge() -> impl Fn() + Sync + Send + 'static {
    l1_invalidation_by("purge", |cache| cache.purge(false))
}

#[test]
fn tiers_l1_invalidation_by_purge() {
    check_batched(l1_invalidation_by_purge());
}

#[test]
fn tiers_l1_invalidation_by_purge_catches_a_missing_bump() {
    caught(
        Mutant::PurgeSkipsBump,
        "stale L1 read after a purge",
        l1_invalidation_by_purge(),
    );
}

/// A thread loads a missing key (the loader path keeps the value in its L1) while another
/// thread sets it; once the set has returned, the loader thread's next get returns what L2
/// holds (its own loaded value if its L2 write came last, else the set's).
fn l1_load_races_set() {
    let cache = cache();
    let done = Arc::new(AtomicBool::new(false));
    let loader_thread = {
        let (cache, done) = (cache.clone(), done.clone());
        thread::spawn(move || {
            let loader = || Ok::<_, String>(Loaded::some(0));
            let loaded = cache.get(b"k", &CallOptions::default(), Some(loader));
            assert!(loaded.expect("loom never times out a lock").value.is_some());
            // Acquire: pairs with the writer's Release; the set happened before this get.
            if done.load(Ordering::Acquire) {
                let none = None::<fn() -> Result<Loaded<u32>, String>>;
                let next = cache.get(b"k", &CallOptions::default(), none).unwrap();
                assert_eq!(
                    next.value.as_deref().copied(),
                    peek(&cache, b"k"),
                    "stale L1 copy of a load after a set"
                );
            }
        })
    };
    set(&cache, b"k", 1);
    // Release: publishes "the set returned" to the loader thread.
    done.store(true, Ordering::Release);
    join_all(vec![loader_thread], (cache, done));
}

#[test]
fn tiers_l1_load_races_set() {
    check_batched(l1_load_races_set);
}

#[test]
fn tiers_l1_load_races_set_catches_a_late_tag() {
    caught(
        Mutant::StoreTagsAfterWrite,
        "stale L1 copy of a load after a set",
        l1_load_races_set,
    );
}

/// L1 is per thread and shared by the caches of one name: a reader fills its L1 through one
/// cache while a writer sets the key through a second cache of that name; once the set has
/// returned, the reader's next get through a third one returns what L2 holds.
fn l1_shared_by_name() {
    let l2 = PayloadArc::new(L2::with_shards(1 << 12, 1).expect("valid"));
    let caches = [named(&l2, "n"), named(&l2, "n"), named(&l2, "n")];
    reader_races_write("set through another cache of the name", caches, |cache| {
        set(cache, b"k", 1)
    });
}

#[test]
fn tiers_l1_shared_by_name() {
    check_batched(l1_shared_by_name);
}

#[test]
fn tiers_l1_shared_by_name_catches_a_set_without_bump() {
    caught(
        Mutant::SetSkipsBump,
        "stale L1 read after a set through another cache of the name",
        l1_shared_by_name,
    );
}

/// A cache's L1 copies die with the last cache of its name (mlcache keeps its LRUs in a weak
/// table): a thread reads a key into its L1 through one cache of a name and lets go of it while
/// another thread drops its own; once both are gone (observed through a flag), a cache made
/// afterwards under that name finds nothing in the thread's L1.
fn l1_dies_with_its_last_cache() {
    let l2 = PayloadArc::new(L2::with_shards(1 << 12, 1).expect("valid"));
    let first = named(&l2, "n");
    set(&first, b"k", 1);
    let dropped = Arc::new(AtomicBool::new(false));
    let reader = {
        let (l2, first, dropped) = (l2.clone(), first.clone(), dropped.clone());
        thread::spawn(move || {
            let none = None::<fn() -> Result<Loaded<u32>, String>>;
            // An L2 hit, kept in this thread's L1.
            first.get(b"k", &CallOptions::default(), none).unwrap();
            drop(first);
            // Acquire: pairs with the Release below; the other cache was dropped before this.
            let both_gone = dropped.load(Ordering::Acquire);
            let second = named(&l2, "n");
            let got = second.get(b"k", &CallOptions::default(), none).unwrap();
            if both_gone {
                assert_ne!(got.level, Level::L1, "an L1 copy outlived its caches");
            }
        })
    };
    drop(first);
    // Release: publishes "this thread's cache is gone" to the reader.
    dropped.store(true, Ordering::Release);
    join_all(vec![reader], (l2, dropped));
}

#[test]
fn tiers_l1_dies_with_its_last_cache() {
    check(l1_dies_with_its_last_cache);
}

#[test]
fn tiers_l1_dies_with_its_last_cache_catches_a_slot_kept_alive() {
    caught(
        Mutant::L1SlotOutlivesItsCaches,
        "an L1 copy outlived its caches",
        l1_dies_with_its_last_cache,
    );
}
