//! One test per behaviour of the seed's API (and where we go beyond it), on a manual clock.

// Tests drive the cache from real threads of their own; the rule is for the crate's code.
#![allow(clippy::disallowed_methods)]

use mcb_core::sync::atomic::{AtomicUsize, Ordering};
use mcb_core::sync::PayloadArc;
use mcb_core::tiers::*;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

type Load = Box<dyn FnOnce() -> Result<Loaded<String>, String>>;

const NONE: Option<Load> = None;

fn store(capacity: usize) -> PayloadArc<L2<String>> {
    PayloadArc::new(
        L2::with_shards(capacity, 1)
            .expect("valid")
            .weigh_with(String::len),
    )
}

/// Options for tests: the manual clock.
fn options(clock: &Clock) -> Options<String> {
    Options {
        clock: clock.clone(),
        ..Options::default()
    }
}

fn cache_with(edit: impl FnOnce(&mut Options<String>)) -> (Cache<String>, Clock) {
    let clock = Clock::manual();
    let mut opts = options(&clock);
    edit(&mut opts);
    (
        Cache::new("test", store(1 << 20), opts).expect("valid"),
        clock,
    )
}

fn cache() -> (Cache<String>, Clock) {
    cache_with(|_| ())
}

fn value(v: &str) -> Option<Load> {
    let v = v.to_owned();
    Some(Box::new(move || Ok(Loaded::some(v))))
}

fn fails() -> Option<Load> {
    Some(Box::new(|| Err("backend down".to_owned())))
}

fn must_not_run() -> Option<Load> {
    Some(Box::new(|| panic!("the loader must not run")))
}

fn get(
    cache: &Cache<String>,
    key: &str,
    loader: Option<Load>,
) -> Result<(Option<String>, Level), Error> {
    let hit = cache.get(key.as_bytes(), &CallOptions::default(), loader)?;
    Ok((hit.value.map(|v| (*v).clone()), hit.level))
}

type Got = Result<(Option<String>, Level), Error>;

fn got(v: &str, level: Level) -> Result<(Option<String>, Level), Error> {
    Ok((Some(v.to_owned()), level))
}

/// Runs `f` on a new thread (a fresh L1) and returns its result.
fn elsewhere<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    thread::scope(|s| s.spawn(f).join().expect("no panic"))
}

#[test]
fn defaults_are_the_seeds() {
    let opts = Options::<String>::default();
    assert_eq!(opts.ttl, Duration::from_secs(30));
    assert_eq!(opts.neg_ttl, Duration::from_secs(5));
    assert_eq!(opts.l1_capacity, 100);
    assert_eq!(opts.set_tries, 3);
    assert_eq!(opts.resurrect_ttl, None);
    assert_eq!(opts.lock, LockOptions::default());
    assert_eq!(opts.admission, Admission::Always);
}

#[test]
fn invalid_options_are_rejected_with_a_clear_error() {
    let bad = |edit: fn(&mut Options<String>)| {
        let mut opts = Options::default();
        edit(&mut opts);
        Cache::new("x", store(1024), opts).expect_err("invalid")
    };
    assert_eq!(
        bad(|o| o.l1_capacity = 0),
        Error::InvalidOption("l1_capacity must be > 0")
    );
    assert_eq!(
        bad(|o| o.set_tries = 0),
        Error::InvalidOption("set_tries must be >= 1")
    );
    assert_eq!(
        bad(|o| o.resurrect_ttl = Some(Duration::ZERO)),
        Error::InvalidOption("resurrect_ttl must be > 0 ms")
    );
    assert!(L2::<String>::with_shards(0, 1).is_err());
    assert!(L2::<String>::with_shards(10, 0).is_err());
    let (cache, _) = cache();
    let zero_tries = CallOptions {
        set_tries: Some(0),
        ..CallOptions::default()
    };
    assert!(cache.get(b"k", &zero_tries, value("v")).is_err());
    assert!(cache.set(b"k", &zero_tries, None).is_err());
    assert!(cache.get_bulk_with(Vec::new(), 0).is_err());
    assert_eq!(
        Error::LockTimeout.to_string(),
        "could not acquire the loader lock: timeout"
    );
}

#[test]
fn levels_l3_then_l1_then_l2_on_another_thread() {
    let (cache, _) = cache();
    assert_eq!(get(&cache, "k", NONE), Ok((None, Level::Miss)));
    assert_eq!(get(&cache, "k", value("v")), got("v", Level::L3));
    assert_eq!(get(&cache, "k", must_not_run()), got("v", Level::L1));
    elsewhere(|| {
        assert_eq!(get(&cache, "k", must_not_run()), got("v", Level::L2));
        assert_eq!(get(&cache, "k", must_not_run()), got("v", Level::L1));
    });
}

#[test]
fn misses_are_cached_for_neg_ttl() {
    let (cache, clock) = cache();
    let none: Option<Load> = Some(Box::new(|| Ok(Loaded::none())));
    assert_eq!(get(&cache, "k", none), Ok((None, Level::L3)));
    assert_eq!(get(&cache, "k", must_not_run()), Ok((None, Level::L1)));
    elsewhere(|| assert_eq!(get(&cache, "k", must_not_run()), Ok((None, Level::L2))));
    clock.advance(Duration::from_millis(5_001));
    assert_eq!(get(&cache, "k", value("v")), got("v", Level::L3));
}

#[test]
fn the_loader_overrides_the_ttl_or_skips_caching() {
    let (cache, clock) = cache();
    let short: Option<Load> = Some(Box::new(|| {
        Ok(Loaded::some("v".into()).ttl(Duration::from_secs(1)))
    }));
    assert_eq!(get(&cache, "k", short), got("v", Level::L3));
    assert_eq!(
        cache.peek(b"k", false).unwrap().remaining,
        Some(Duration::from_secs(1))
    );
    let long_miss: Option<Load> =
        Some(Box::new(|| Ok(Loaded::none().ttl(Duration::from_secs(60)))));
    assert_eq!(get(&cache, "m", long_miss), Ok((None, Level::L3)));
    clock.advance(Duration::from_secs(10));
    assert_eq!(
        get(&cache, "m", must_not_run()),
        Ok((None, Level::L1)),
        "neg ttl overridden"
    );
    assert_eq!(
        get(&cache, "k", value("w")),
        got("w", Level::L3),
        "ttl overridden to 1 s"
    );
    let uncached: Option<Load> = Some(Box::new(|| Ok(Loaded::some("u".into()).uncached())));
    assert_eq!(get(&cache, "u", uncached), got("u", Level::L3));
    assert!(cache.peek(b"u", true).is_none());
    assert_eq!(get(&cache, "u", NONE), Ok((None, Level::Miss)));
}

#[test]
fn loader_errors_and_panics_cache_nothing_and_release_the_lock() {
    let (cache, _) = cache();
    assert_eq!(
        get(&cache, "k", fails()),
        Err(Error::Loader("backend down".into()))
    );
    let boom: Option<Load> = Some(Box::new(|| panic!("boom")));
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let panicked = get(&cache, "k", boom);
    std::panic::set_hook(quiet);
    assert_eq!(panicked, Err(Error::LoaderPanicked("boom".into())));
    assert!(cache.peek(b"k", true).is_none());
    // The lock is free: a caller that would not wait at all still gets to load.
    let no_wait = CallOptions {
        lock: Some(LockOptions {
            timeout: Duration::ZERO,
            ..LockOptions::default()
        }),
        ..CallOptions::default()
    };
    let hit = cache.get(b"k", &no_wait, value("v")).expect("lock free");
    assert_eq!(hit.level, Level::L3);
}

#[test]
fn a_failed_load_resurrects_the_stale_value() {
    let (cache, clock) = cache_with(|o| {
        o.ttl = Duration::from_secs(1);
        o.resurrect_ttl = Some(Duration::from_secs(10));
    });
    assert_eq!(get(&cache, "k", value("old")), got("old", Level::L3));
    clock.advance(Duration::from_secs(2));
    assert_eq!(get(&cache, "k", fails()), got("old", Level::Stale));
    assert_eq!(cache.warnings(), 1);
    let peek = cache.peek(b"k", false).expect("resurrected");
    assert_eq!(
        (peek.remaining, peek.stale),
        (Some(Duration::from_secs(10)), false)
    );
    elsewhere(|| assert_eq!(get(&cache, "k", must_not_run()), got("old", Level::Stale)));
    // Without resurrection the error comes back.
    let (plain, clock) = cache_with(|o| o.ttl = Duration::from_secs(1));
    get(&plain, "k", value("old")).unwrap();
    clock.advance(Duration::from_secs(2));
    assert_eq!(
        get(&plain, "k", fails()),
        Err(Error::Loader("backend down".into()))
    );
}

/// Starts a loader for `key` on another thread that blocks until the returned sender fires;
/// returns once the loader runs (so its lock is held).
fn hold_lock<'s>(
    s: &'s thread::Scope<'s, '_>,
    cache: &'s Cache<String>,
    key: &'static str,
) -> (mpsc::Sender<()>, thread::ScopedJoinHandle<'s, Got>) {
    let (started_tx, started) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let holder = s.spawn(move || {
        let loader: Option<Load> = Some(Box::new(move || {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            Ok(Loaded::some("fresh".into()))
        }));
        get(cache, key, loader)
    });
    started.recv().unwrap();
    (release, holder)
}

#[test]
fn a_lock_timeout_serves_stale_or_fails_and_never_loads_beside_the_holder() {
    let (cache, clock) = cache_with(|o| {
        o.ttl = Duration::from_secs(1);
        o.resurrect_ttl = Some(Duration::from_secs(5));
        o.lock.timeout = Duration::ZERO;
    });
    get(&cache, "stale", value("old")).unwrap();
    clock.advance(Duration::from_secs(2));
    thread::scope(|s| {
        let (release, holder) = hold_lock(s, &cache, "stale");
        assert_eq!(
            get(&cache, "stale", must_not_run()),
            got("old", Level::Stale)
        );
        let (release2, holder2) = hold_lock(s, &cache, "cold");
        assert_eq!(get(&cache, "cold", must_not_run()), Err(Error::LockTimeout));
        release.send(()).unwrap();
        release2.send(()).unwrap();
        assert_eq!(holder.join().unwrap(), got("fresh", Level::L3));
        assert_eq!(holder2.join().unwrap(), got("fresh", Level::L3));
    });
    assert_eq!(
        get(&cache, "stale", must_not_run()),
        got("fresh", Level::L2)
    );
}

#[test]
fn an_expired_lock_is_taken_over() {
    let (cache, clock) = cache();
    thread::scope(|s| {
        let (release, holder) = hold_lock(s, &cache, "k");
        clock.advance(Duration::from_secs(31));
        assert_eq!(get(&cache, "k", value("mine")), got("mine", Level::L3));
        release.send(()).unwrap();
        holder.join().unwrap().unwrap();
    });
}

#[test]
fn an_expired_holders_release_leaves_the_new_holders_lock() {
    let (cache, clock) = cache_with(|o| o.lock.timeout = Duration::ZERO);
    thread::scope(|s| {
        let (release_old, old) = hold_lock(s, &cache, "k");
        clock.advance(Duration::from_secs(31));
        let (release_new, new) = hold_lock(s, &cache, "k");
        release_old.send(()).unwrap();
        assert_eq!(old.join().unwrap(), got("fresh", Level::L3));
        // The old holder stored its value: take it out, so that a get must ask for the lock.
        cache.delete(b"k");
        assert_eq!(get(&cache, "k", must_not_run()), Err(Error::LockTimeout));
        release_new.send(()).unwrap();
        assert_eq!(new.join().unwrap(), got("fresh", Level::L3));
    });
}

#[test]
fn concurrent_misses_run_the_loader_once_and_waiters_read_l2() {
    let (cache, _) = cache();
    let runs = AtomicUsize::new(0);
    let levels: Vec<Level> = thread::scope(|s| {
        let (release, holder) = hold_lock(s, &cache, "k");
        let waiters: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    let loader = || {
                        runs.fetch_add(1, Ordering::Relaxed);
                        Ok::<_, String>(Loaded::some("other".to_owned()))
                    };
                    cache
                        .get(b"k", &CallOptions::default(), Some(loader))
                        .unwrap()
                })
            })
            .collect();
        release.send(()).unwrap();
        assert_eq!(holder.join().unwrap(), got("fresh", Level::L3));
        waiters
            .into_iter()
            .map(|w| {
                let hit = w.join().unwrap();
                assert_eq!(hit.value.as_deref().map(String::as_str), Some("fresh"));
                hit.level
            })
            .collect()
    });
    // Relaxed: the scope joined every thread.
    assert_eq!(
        runs.load(Ordering::Relaxed),
        0,
        "waiters found the holder's value"
    );
    assert!(levels.iter().all(|l| *l == Level::L2), "{levels:?}");
}

#[test]
fn peek_reads_l2_only() {
    let (cache, clock) = cache();
    assert!(cache.peek(b"k", true).is_none());
    cache
        .set(b"k", &CallOptions::default(), Some("v".into()))
        .unwrap();
    clock.advance(Duration::from_secs(10));
    let peek = cache.peek(b"k", false).expect("fresh");
    assert_eq!(peek.remaining, Some(Duration::from_secs(20)));
    assert_eq!(peek.value.as_deref().map(String::as_str), Some("v"));
    assert!(!peek.stale);
    elsewhere(|| {
        cache.peek(b"k", false).unwrap();
        assert_eq!(
            get(&cache, "k", NONE),
            got("v", Level::L2),
            "peek left L1 alone"
        );
    });
    clock.advance(Duration::from_secs(21));
    assert!(cache.peek(b"k", false).is_none());
    let stale = cache.peek(b"k", true).expect("kept until evicted");
    assert_eq!((stale.remaining, stale.stale), (Some(Duration::ZERO), true));
    let forever = CallOptions {
        ttl: Some(Duration::ZERO),
        ..CallOptions::default()
    };
    cache.set(b"f", &forever, Some("v".into())).unwrap();
    assert_eq!(cache.peek(b"f", false).unwrap().remaining, None);
}

#[test]
fn writes_invalidate_other_threads_l1_without_update() {
    let (cache, _) = cache();
    let (to_reader, reader_rx) = mpsc::channel::<&str>();
    let (to_writer, writer_rx) = mpsc::channel::<()>();
    let cache = &cache;
    thread::scope(|s| {
        s.spawn(move || {
            assert_eq!(get(cache, "k", value("v0")), got("v0", Level::L3));
            assert_eq!(get(cache, "k", NONE), got("v0", Level::L1));
            to_writer.send(()).unwrap();
            assert_eq!(reader_rx.recv().unwrap(), "set");
            assert_eq!(get(cache, "k", NONE), got("v1", Level::L2));
            to_writer.send(()).unwrap();
            assert_eq!(reader_rx.recv().unwrap(), "deleted");
            assert_eq!(get(cache, "k", NONE), Ok((None, Level::Miss)));
            get(cache, "k", value("v2")).unwrap();
            to_writer.send(()).unwrap();
            assert_eq!(reader_rx.recv().unwrap(), "purged");
            assert_eq!(get(cache, "k", NONE), Ok((None, Level::Miss)));
        });
        writer_rx.recv().unwrap();
        cache
            .set(b"k", &CallOptions::default(), Some("v1".into()))
            .unwrap();
        assert_eq!(
            get(cache, "k", NONE),
            got("v1", Level::L1),
            "set writes this L1"
        );
        to_reader.send("set").unwrap();
        writer_rx.recv().unwrap();
        cache.delete(b"k");
        assert_eq!(get(cache, "k", NONE), Ok((None, Level::Miss)));
        to_reader.send("deleted").unwrap();
        writer_rx.recv().unwrap();
        cache.purge(false);
        to_reader.send("purged").unwrap();
    });
}

#[test]
fn update_is_accepted_and_changes_nothing_visible() {
    let (cache, _) = cache();
    get(&cache, "k", value("v0")).unwrap();
    elsewhere(|| {
        cache
            .set(b"k", &CallOptions::default(), Some("v1".into()))
            .unwrap()
    });
    cache.update();
    assert_eq!(get(&cache, "k", NONE), got("v1", Level::L2));
}

#[test]
fn purge_is_per_name_and_flush_expired_frees_stale_entries() {
    let l2 = store(1 << 20);
    let clock = Clock::manual();
    let a = Cache::new("a", l2.clone(), options(&clock)).unwrap();
    let b = Cache::new("b", l2.clone(), options(&clock)).unwrap();
    let short = CallOptions {
        ttl: Some(Duration::from_secs(1)),
        ..CallOptions::default()
    };
    // "old" first: a write invalidates the L1 copies of every key in its generation stripe, and
    // with random hash keys "old" may (1 in 16,384) share "k"'s stripe, which would turn the L1
    // hit below into an L2 hit.
    b.set(b"old", &short, Some("b".into())).unwrap();
    a.set(b"k", &CallOptions::default(), Some("a".into()))
        .unwrap();
    b.set(b"k", &CallOptions::default(), Some("b".into()))
        .unwrap();
    clock.advance(Duration::from_secs(2));
    a.purge(false);
    assert_eq!(get(&a, "k", NONE), Ok((None, Level::Miss)));
    assert_eq!(get(&b, "k", NONE), got("b", Level::L1));
    assert!(b.peek(b"old", true).is_some(), "stale, kept until evicted");
    a.purge(true);
    assert!(b.peek(b"old", true).is_none(), "flush_expired freed it");
    assert!(b.peek(b"k", false).is_some());
}

#[test]
fn names_isolate_exactly_and_one_name_shares() {
    let l2 = store(1 << 20);
    let clock = Clock::manual();
    let ab = Cache::new("ab", l2.clone(), options(&clock)).unwrap();
    let a = Cache::new("a", l2.clone(), options(&clock)).unwrap();
    let ab_again = Cache::new("ab", l2.clone(), options(&clock)).unwrap();
    ab.set(b"c", &CallOptions::default(), Some("ab+c".into()))
        .unwrap();
    assert_eq!(
        get(&a, "bc", NONE),
        Ok((None, Level::Miss)),
        "no ('ab','c') = ('a','bc')"
    );
    assert_eq!(get(&ab_again, "c", NONE), got("ab+c", Level::L1));
    assert_eq!(ab.name(), "ab");
}

#[test]
fn bulk_answers_in_order_and_runs_every_miss_loader() {
    let (cache, _) = cache();
    get(&cache, "l1", value("one")).unwrap();
    elsewhere(|| get(&cache, "l2", value("two")).unwrap());
    for concurrency in [1, 3, 16] {
        cache.purge(false);
        get(&cache, "l1", value("one")).unwrap();
        elsewhere(|| get(&cache, "l2", value("two")).unwrap());
        let runs = AtomicUsize::new(0);
        let runs = &runs;
        let keys: Vec<String> = (0..5).map(|i| format!("m{i}")).collect();
        let mut ops = vec![
            BulkOp {
                key: b"l1",
                opts: CallOptions::default(),
                loader: None,
            },
            BulkOp {
                key: b"l2",
                opts: CallOptions::default(),
                loader: None,
            },
            BulkOp {
                key: b"none",
                opts: CallOptions::default(),
                loader: None,
            },
            BulkOp {
                key: b"bad",
                opts: CallOptions::default(),
                loader: Some(Box::new(|| Err("nope".into()))),
            },
        ];
        for key in &keys {
            let ttl = (key == "m0").then_some(Duration::from_secs(7));
            ops.push(BulkOp {
                key: key.as_bytes(),
                opts: CallOptions {
                    ttl,
                    ..CallOptions::default()
                },
                loader: Some(Box::new(move || {
                    // Relaxed: counted after the bulk call returns (threads joined).
                    runs.fetch_add(1, Ordering::Relaxed);
                    Ok(Loaded::some(key.clone()))
                })),
            });
        }
        let results = cache.get_bulk_with(ops, concurrency).unwrap();
        let flat: Vec<_> = results
            .into_iter()
            .map(|r| r.map(|hit| (hit.value.map(|v| (*v).clone()), hit.level)))
            .collect();
        assert_eq!(flat[0], got("one", Level::L1));
        assert_eq!(flat[1], got("two", Level::L2));
        assert_eq!(flat[2], Ok((None, Level::Miss)));
        assert_eq!(flat[3], Err(Error::Loader("nope".into())));
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(flat[4 + i], got(key, Level::L3));
        }
        let remaining = |key: &str| cache.peek(key.as_bytes(), false).unwrap().remaining;
        assert_eq!(remaining("m0"), Some(Duration::from_secs(7)), "per-op ttl");
        assert_eq!(
            remaining("m1"),
            Some(Duration::from_secs(30)),
            "the cache's ttl"
        );
        // Relaxed: see above.
        assert_eq!(runs.load(Ordering::Relaxed), 5, "concurrency {concurrency}");
    }
}

#[test]
fn a_full_l2_fails_set_but_get_keeps_the_value_in_l1() {
    let clock = Clock::manual();
    let cache = Cache::new("t", store(300), options(&clock)).unwrap();
    let big = "x".repeat(400);
    let err = cache
        .set(b"k", &CallOptions::default(), Some(big.clone()))
        .unwrap_err();
    assert_eq!(err, Error::L2Full { tries: 3 });
    assert_eq!(
        get(&cache, "k", NONE),
        Ok((None, Level::Miss)),
        "set left L1 alone"
    );
    assert_eq!(get(&cache, "k", value(&big)), got(&big, Level::L3));
    assert_eq!(cache.warnings(), 1);
    assert_eq!(get(&cache, "k", NONE), got(&big, Level::L1));
    // A stored-nowhere value never leaves its lock held.
    let no_wait = CallOptions {
        lock: Some(LockOptions {
            timeout: Duration::ZERO,
            ..LockOptions::default()
        }),
        ..CallOptions::default()
    };
    elsewhere(|| {
        let hit = cache.get(b"k", &no_wait, value("again")).unwrap();
        assert_eq!(hit.level, Level::L3);
    });
}

#[test]
fn frequency_admission_declines_a_one_off_load_into_a_full_l2_but_serves_it() {
    for admission in [Admission::Always, Admission::Frequency] {
        let clock = Clock::manual();
        let opts = Options {
            admission,
            ..options(&clock)
        };
        // What an entry of a 2-byte key and a 10-byte value weighs (a node's size included).
        let probe = store(1 << 20);
        let probe_cache = Cache::new("p", probe.clone(), options(&clock)).unwrap();
        probe_cache
            .set(b"k0", &CallOptions::default(), Some("v".repeat(10)))
            .unwrap();
        let cache = Cache::new("t", store(10 * probe.used_bytes()), opts).unwrap();
        // Full with ten entries, each read three times from other threads (L2 hits).
        let keys: Vec<String> = (0..10).map(|i| format!("k{i}")).collect();
        for key in &keys {
            cache
                .set(
                    key.as_bytes(),
                    &CallOptions::default(),
                    Some("v".repeat(10)),
                )
                .unwrap();
        }
        for _ in 0..3 {
            for key in &keys {
                assert_eq!(
                    elsewhere(|| get(&cache, key, NONE)),
                    got(&"v".repeat(10), Level::L2)
                );
            }
        }
        let once = "o".repeat(10);
        assert_eq!(get(&cache, "once", value(&once)), got(&once, Level::L3));
        assert_eq!(
            get(&cache, "once", NONE),
            got(&once, Level::L1),
            "kept in L1"
        );
        let elsewhere_level = elsewhere(|| get(&cache, "once", NONE)).unwrap().1;
        let want = match admission {
            Admission::Always => Level::L2,
            Admission::Frequency => Level::Miss,
        };
        assert_eq!(elsewhere_level, want, "{admission:?}");
        assert_eq!(cache.warnings(), 0, "a declined load is no warning");
        // A set is stored whatever the rule.
        cache
            .set(b"set", &CallOptions::default(), Some(once.clone()))
            .unwrap();
        assert_eq!(
            elsewhere(|| get(&cache, "set", NONE)),
            got(&once, Level::L2)
        );
    }
}

#[test]
fn each_try_evicts_a_bounded_batch() {
    let clock = Clock::manual();
    let l2 = store(8 << 10);
    let cache = Cache::new("t", l2.clone(), options(&clock)).unwrap();
    for i in 0..100 {
        cache
            .set(
                format!("{i:03}").as_bytes(),
                &CallOptions::default(),
                Some("v".into()),
            )
            .unwrap();
    }
    let used = l2.used_bytes();
    // Full, but for what the writes evicted ahead (a sixteenth of the store at most, while
    // their retired entries were reclaimed).
    assert!(used >= (8 << 10) * 15 / 16 - 256, "full: {used}");
    // Needs about 15 evictions: one try (8) is not enough, four are.
    let big = "x".repeat(used / 4);
    let one = CallOptions {
        set_tries: Some(1),
        ..CallOptions::default()
    };
    assert_eq!(
        cache.set(b"big", &one, Some(big.clone())),
        Err(Error::L2Full { tries: 1 })
    );
    let four = CallOptions {
        set_tries: Some(4),
        ..CallOptions::default()
    };
    cache.set(b"big", &four, Some(big)).unwrap();
    assert!(l2.used_bytes() <= l2.capacity_bytes());
}

#[test]
fn promotion_keeps_the_remaining_ttl_and_zero_means_forever() {
    let (cache, clock) = cache();
    let ten = CallOptions {
        ttl: Some(Duration::from_secs(10)),
        ..CallOptions::default()
    };
    cache.set(b"k", &ten, Some("v".into())).unwrap();
    clock.advance(Duration::from_secs(4));
    elsewhere(|| {
        assert_eq!(get(&cache, "k", NONE), got("v", Level::L2));
        assert_eq!(get(&cache, "k", NONE), got("v", Level::L1));
        clock.advance(Duration::from_secs(6));
        // No life left: served from L2, not kept in L1.
        assert_eq!(get(&cache, "k", NONE), got("v", Level::L2));
        assert_eq!(get(&cache, "k", NONE), got("v", Level::L2));
        clock.advance(Duration::from_millis(1));
        assert_eq!(get(&cache, "k", NONE), Ok((None, Level::Miss)), "stale");
    });
    let forever = CallOptions {
        ttl: Some(Duration::ZERO),
        ..CallOptions::default()
    };
    cache.set(b"f", &forever, Some("v".into())).unwrap();
    clock.advance(Duration::from_secs(1 << 30));
    assert_eq!(get(&cache, "f", NONE), got("v", Level::L1));
    elsewhere(|| assert_eq!(get(&cache, "f", NONE), got("v", Level::L2)));
}

#[test]
fn the_transform_runs_on_every_promotion_and_its_error_is_returned() {
    let upper: Transform<String> = PayloadArc::new(|v: &PayloadArc<String>| {
        if v.as_str() == "reject" {
            Err("rejected".to_owned())
        } else {
            Ok(PayloadArc::new(v.to_uppercase()))
        }
    });
    let (cache, clock) = cache_with(|o| {
        o.transform = Some(upper);
        o.ttl = Duration::from_secs(1);
        o.resurrect_ttl = Some(Duration::from_secs(5));
        o.lock.timeout = Duration::ZERO;
    });
    assert_eq!(get(&cache, "k", value("v")), got("V", Level::L3));
    assert_eq!(get(&cache, "k", NONE), got("V", Level::L1));
    elsewhere(|| assert_eq!(get(&cache, "k", NONE), got("V", Level::L2)));
    assert_eq!(
        cache
            .peek(b"k", false)
            .unwrap()
            .value
            .as_deref()
            .map(String::as_str),
        Some("v")
    );
    clock.advance(Duration::from_secs(2));
    assert_eq!(
        get(&cache, "k", fails()),
        got("V", Level::Stale),
        "resurrected"
    );
    get(&cache, "s", value("s")).unwrap();
    clock.advance(Duration::from_secs(2));
    thread::scope(|s| {
        let (release, holder) = hold_lock(s, &cache, "s");
        assert_eq!(
            get(&cache, "s", must_not_run()),
            got("S", Level::Stale),
            "timeout path"
        );
        release.send(()).unwrap();
        holder.join().unwrap().unwrap();
    });
    assert_eq!(
        get(&cache, "r", value("reject")),
        Err(Error::Transform("rejected".into()))
    );
    assert_eq!(
        cache.set(b"r", &CallOptions::default(), Some("reject".into())),
        Err(Error::Transform("rejected".into()))
    );
}

#[test]
fn a_miss_store_keeps_negative_entries_apart() {
    let misses = store(1 << 16);
    let l2 = store(1 << 16);
    let (cache, _) = {
        let clock = Clock::manual();
        let mut opts = options(&clock);
        opts.miss_store = Some(misses.clone());
        (Cache::new("t", l2.clone(), opts).unwrap(), clock)
    };
    let none: Option<Load> = Some(Box::new(|| Ok(Loaded::none())));
    assert_eq!(get(&cache, "k", none), Ok((None, Level::L3)));
    assert_eq!((l2.used_bytes(), misses.used_bytes() > 0), (0, true));
    elsewhere(|| assert_eq!(get(&cache, "k", must_not_run()), Ok((None, Level::L2))));
    assert!(cache.peek(b"k", false).is_some());
    cache
        .set(b"k", &CallOptions::default(), Some("v".into()))
        .unwrap();
    assert_eq!(misses.used_bytes(), 0, "set cleared the miss");
    cache.delete(b"k");
    assert_eq!(l2.used_bytes(), 0);
}

#[test]
fn threads_hammering_a_small_store_never_see_another_keys_value() {
    let l2 = store(4 << 10);
    let cache = Cache::new("stress", l2.clone(), options(&Clock::manual())).unwrap();
    thread::scope(|s| {
        for t in 0..4u64 {
            let cache = &cache;
            s.spawn(move || {
                let mut x = t + 1;
                for _ in 0..5_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k = format!("k{}", x % 97);
                    match x % 5 {
                        0 => cache.delete(k.as_bytes()),
                        1 => cache
                            .set(k.as_bytes(), &CallOptions::default(), Some(k.clone()))
                            .unwrap(),
                        _ => {
                            let (v, _) = get(cache, &k, value(&k)).unwrap();
                            assert_eq!(v.as_deref(), Some(k.as_str()), "another key's value");
                        }
                    }
                }
            });
        }
    });
    assert!(l2.used_bytes() <= l2.capacity_bytes());
}

// Issue 13: mlcache behaviours that did not hold, and the API points.

#[test]
fn a_miss_cached_after_the_value_expired_answers_every_thread() {
    let misses = store(1 << 16);
    let clock = Clock::manual();
    let mut opts = options(&clock);
    opts.ttl = Duration::from_secs(1);
    opts.miss_store = Some(misses.clone());
    let cache = Cache::new("t", store(1 << 16), opts).unwrap();
    assert_eq!(get(&cache, "k", value("v")), got("v", Level::L3));
    clock.advance(Duration::from_secs(2));
    let none: Option<Load> = Some(Box::new(|| Ok(Loaded::none())));
    assert_eq!(get(&cache, "k", none), Ok((None, Level::L3)));
    assert_eq!(get(&cache, "k", must_not_run()), Ok((None, Level::L1)));
    elsewhere(|| assert_eq!(get(&cache, "k", must_not_run()), Ok((None, Level::L2))));
    assert_eq!(cache.peek(b"k", false).map(|p| p.value), Some(None));
}

#[test]
fn a_panicking_loader_never_resurrects_and_the_next_get_loads_again() {
    let (cache, clock) = cache_with(|o| {
        o.ttl = Duration::from_secs(1);
        o.resurrect_ttl = Some(Duration::from_secs(10));
    });
    get(&cache, "k", value("old")).unwrap();
    clock.advance(Duration::from_secs(2));
    let boom: Option<Load> = Some(Box::new(|| panic!("boom")));
    let quiet = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let panicked = get(&cache, "k", boom);
    std::panic::set_hook(quiet);
    assert_eq!(panicked, Err(Error::LoaderPanicked("boom".into())));
    assert_eq!(cache.warnings(), 0, "nothing served, nothing resurrected");
    assert!(cache.peek(b"k", true).unwrap().stale, "not written back");
    assert_eq!(get(&cache, "k", value("new")), got("new", Level::L3));
}

#[test]
fn caches_of_one_name_share_this_threads_l1_while_one_lives() {
    let l2 = store(1 << 20);
    let clock = Clock::manual();
    let first = Cache::new("shared", l2.clone(), options(&clock)).unwrap();
    first.put(b"k", "v".into()).unwrap();
    let second = Cache::new("shared", l2.clone(), options(&clock)).unwrap();
    drop(first);
    assert_eq!(get(&second, "k", NONE), got("v", Level::L1));
    let other = Cache::new("other", l2, options(&clock)).unwrap();
    assert_eq!(get(&other, "k", NONE), Ok((None, Level::Miss)));
}

/// mlcache keeps its LRUs in a weak table: they die with their instances.
#[test]
fn the_last_cache_of_a_name_takes_its_l1_copies_with_it() {
    let l2 = store(1 << 20);
    let clock = Clock::manual();
    let cache = || PayloadArc::new(Cache::new("gone", l2.clone(), options(&clock)).unwrap());
    // A thread that outlives the first cache: it reads "k" through the cache it is sent, and
    // lets go of that cache before it answers.
    let (ask, asked) = mpsc::channel::<PayloadArc<Cache<String>>>();
    let (answer, answers) = mpsc::channel();
    let helper = thread::spawn(move || {
        for cache in asked {
            let got = get(&cache, "k", NONE);
            drop(cache);
            answer.send(got).unwrap();
        }
    });
    let elsewhere = |cache: &PayloadArc<Cache<String>>| {
        ask.send(cache.clone()).unwrap();
        answers.recv().unwrap()
    };
    let first = cache();
    first.put(b"k", "v".into()).unwrap();
    assert_eq!(get(&first, "k", NONE), got("v", Level::L1));
    assert_eq!(elsewhere(&first), got("v", Level::L2));
    assert_eq!(elsewhere(&first), got("v", Level::L1), "kept in its L1");
    drop(first);
    let second = cache();
    assert_eq!(
        get(&second, "k", NONE),
        got("v", Level::L2),
        "a new L1 here"
    );
    assert_eq!(elsewhere(&second), got("v", Level::L2), "and there");
    assert_eq!(elsewhere(&second), got("v", Level::L1));
    drop(ask);
    helper.join().unwrap();
}

#[test]
fn l1_is_one_per_thread_whatever_the_number_of_threads() {
    let (cache, _) = cache();
    get(&cache, "k", value("v")).unwrap();
    // Many more threads than CPUs, one after the other: each starts with an empty L1.
    for _ in 0..64 {
        elsewhere(|| {
            assert_eq!(get(&cache, "k", NONE), got("v", Level::L2));
            assert_eq!(get(&cache, "k", NONE), got("v", Level::L1));
        });
    }
}

#[test]
fn a_write_invalidates_under_1_in_10_000_of_other_keys_copies() {
    const HELD: usize = 10_000;
    const WRITES: usize = 1_000;
    let (cache, _) = cache_with(|o| o.l1_capacity = HELD);
    let keys: Vec<String> = (0..HELD).map(|i| format!("held{i}")).collect();
    for k in &keys {
        get(&cache, k, value(k)).unwrap();
    }
    elsewhere(|| {
        for i in 0..WRITES {
            cache
                .put(format!("other{i}").as_bytes(), "w".into())
                .unwrap();
        }
    });
    let dropped = keys
        .iter()
        .filter(|k| get(&cache, k, NONE).unwrap().1 != Level::L1)
        .count();
    let rate = dropped as f64 / (HELD * WRITES) as f64;
    assert!(rate <= 1e-4, "{dropped} copies dropped: {rate} per write");
}

#[test]
fn per_call_options_are_checked_on_an_l1_hit_too() {
    let (cache, _) = cache();
    get(&cache, "k", value("v")).unwrap();
    assert_eq!(get(&cache, "k", NONE), got("v", Level::L1));
    let zero_tries = CallOptions {
        set_tries: Some(0),
        ..CallOptions::default()
    };
    assert_eq!(
        cache.get(b"k", &zero_tries, NONE),
        Err(Error::InvalidOption("set_tries must be >= 1"))
    );
}

#[test]
fn short_forms_for_the_common_calls() {
    let (cache, _) = cache();
    assert_eq!(cache.get_cached(b"k").unwrap().level, Level::Miss);
    let hit = cache
        .get_or_load(b"k", || Ok::<_, String>(Loaded::some("v".to_owned())))
        .unwrap();
    assert_eq!(
        (hit.value.as_deref().cloned(), hit.level),
        (Some("v".into()), Level::L3)
    );
    cache.put(b"k", "w".into()).unwrap();
    assert_eq!(
        cache.get_cached(b"k").unwrap().value.as_deref().unwrap(),
        "w"
    );
}

#[test]
fn a_loader_error_of_any_type_keeps_its_source() {
    let (cache, _) = cache();
    let err = cache
        .get_or_load(b"k", || {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "backend slow",
            ))
        })
        .unwrap_err();
    assert_eq!(err.to_string(), "loader failed: backend slow");
    let source = std::error::Error::source(&err).expect("the loader's error");
    let io = source
        .downcast_ref::<std::io::Error>()
        .expect("an io::Error");
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
}

#[test]
fn peek_says_how_long_ago_a_stale_entry_expired() {
    let (cache, clock) = cache_with(|o| o.ttl = Duration::from_secs(1));
    get(&cache, "k", value("v")).unwrap();
    assert_eq!(cache.peek(b"k", false).unwrap().stale_for, None);
    clock.advance(Duration::from_millis(3_500));
    let peek = cache.peek(b"k", true).unwrap();
    assert_eq!(
        (peek.remaining, peek.stale_for, peek.stale),
        (
            Some(Duration::ZERO),
            Some(Duration::from_millis(2_500)),
            true
        )
    );
}

#[test]
fn warnings_reach_the_hook_with_their_reason() {
    let seen = PayloadArc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let clock = Clock::manual();
    let mut opts = options(&clock);
    opts.ttl = Duration::from_secs(1);
    opts.resurrect_ttl = Some(Duration::from_secs(10));
    opts.on_warning = Some(PayloadArc::new(move |w: &Warning<'_>| {
        let line = match w {
            Warning::NoRoom { key, store, tries } => {
                format!("no room for {key:?} in {store:?} after {tries}")
            }
            Warning::Resurrected { key, error } => format!("resurrected {key:?}: {error}"),
            Warning::StaleOnLockTimeout { key } => format!("stale {key:?}"),
        };
        log.lock().unwrap().push(line);
    }));
    let cache = Cache::new("t", store(300), opts).unwrap();
    get(&cache, "k", value("old")).unwrap();
    clock.advance(Duration::from_secs(2));
    get(&cache, "k", fails()).unwrap();
    get(&cache, "big", value(&"x".repeat(1000))).unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            format!("resurrected {:?}: loader failed: backend down", b"k"),
            format!("no room for {:?} in Values after 3", b"big"),
        ]
    );
    assert_eq!(cache.warnings(), 2);
}

#[test]
fn the_lock_timeout_runs_on_the_caches_clock() {
    // 10 ms on a manual clock that never moves: a waiter waits for the holder however long it
    // takes in real time (the pause below only makes the old real-time timeout fire).
    let (cache, _) = cache_with(|o| o.lock.timeout = Duration::from_millis(10));
    thread::scope(|s| {
        let (release, holder) = hold_lock(s, &cache, "k");
        let waiter = s.spawn(|| get(&cache, "k", must_not_run()));
        thread::sleep(Duration::from_millis(50));
        release.send(()).unwrap();
        assert_eq!(holder.join().unwrap(), got("fresh", Level::L3));
        assert_eq!(waiter.join().unwrap(), got("fresh", Level::L2));
    });
    // And it does time out once the clock passes it. The lock never expires here: the clock
    // moves in 2 s steps while the waiter looks at it once a millisecond, so an expiry within
    // reach would let the waiter take the lock over instead.
    let (cache, clock) = cache_with(|o| {
        o.lock.timeout = Duration::from_secs(1);
        o.lock.expiry = Duration::from_secs(u32::MAX.into());
    });
    thread::scope(|s| {
        let (release, holder) = hold_lock(s, &cache, "k");
        let waiter = s.spawn(|| get(&cache, "k", must_not_run()));
        while !waiter.is_finished() {
            clock.advance(Duration::from_secs(2));
            thread::yield_now();
        }
        assert_eq!(waiter.join().unwrap(), Err(Error::LockTimeout));
        release.send(()).unwrap();
        holder.join().unwrap().unwrap();
    });
}

#[test]
fn get_bulk_runs_three_loaders_at_a_time_by_default() {
    let (cache, _) = cache();
    let running = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    let three = std::sync::Barrier::new(BULK_CONCURRENCY);
    let keys: Vec<String> = (0..6).map(|i| format!("k{i}")).collect();
    let ops = keys
        .iter()
        .map(|k| {
            let (running, most, three) = (&running, &most, &three);
            BulkOp::new(k.as_bytes()).loader(move || {
                // Relaxed: a gauge read after the threads joined.
                let now = running.fetch_add(1, Ordering::Relaxed) + 1;
                most.fetch_max(now, Ordering::Relaxed);
                if k.ends_with(['0', '2', '4']) {
                    // The first loader of each of the three runners: all three run at once.
                    three.wait();
                }
                running.fetch_sub(1, Ordering::Relaxed);
                Ok::<_, String>(Loaded::some(k.clone()))
            })
        })
        .collect();
    let results = cache.get_bulk(ops).unwrap();
    assert!(results
        .iter()
        .all(|r| r.as_ref().unwrap().level == Level::L3));
    // Relaxed: joined.
    assert_eq!(most.load(Ordering::Relaxed), BULK_CONCURRENCY);
}

#[test]
fn l1_keeps_a_type_of_its_own_made_by_the_transform() {
    let clock = Clock::manual();
    let parse = |s: &String| s.parse::<u64>();
    let numbers = Cache::with_l1_type("n", store(1 << 16), options(&clock), parse).unwrap();
    let hit = numbers
        .get_or_load(b"k", || Ok::<_, String>(Loaded::some("42".to_owned())))
        .unwrap();
    assert_eq!((hit.value.as_deref(), hit.level), (Some(&42u64), Level::L3));
    assert_eq!(numbers.get_cached(b"k").unwrap().level, Level::L1);
    elsewhere(|| {
        let hit = numbers.get_cached(b"k").unwrap();
        assert_eq!((hit.value.as_deref(), hit.level), (Some(&42u64), Level::L2));
    });
    assert_eq!(
        numbers
            .peek(b"k", false)
            .unwrap()
            .value
            .as_deref()
            .map(String::as_str),
        Some("42"),
        "L2 keeps the loaded type"
    );
    numbers.put(b"bad", "x".to_owned()).unwrap_err();
    assert!(matches!(
        numbers.get_cached(b"bad"),
        Err(Error::Transform(_))
    ));
    let mut opts = options(&clock);
    opts.transform = Some(PayloadArc::new(|v: &PayloadArc<String>| Ok(v.clone())));
    assert!(Cache::with_l1_type("n", store(1 << 16), opts, parse).is_err());
}

#[test]
fn one_l2_serves_caches_of_any_value_type() {
    let l2 = PayloadArc::new(L2::<AnyValue>::with_shards(1 << 16, 1).unwrap());
    let opts = || Options {
        clock: Clock::manual(),
        ..Options::default()
    };
    let names = Cache::<AnyValue, String>::of_type("names", l2.clone(), opts()).unwrap();
    let counts = Cache::<AnyValue, u64>::of_type("counts", l2.clone(), opts()).unwrap();
    let hit = names
        .get_or_load(b"k", || {
            Ok::<_, String>(Loaded::some(AnyValue::new("Ann".to_owned())))
        })
        .unwrap();
    assert_eq!(hit.value.as_deref().map(String::as_str), Some("Ann"));
    counts.put(b"k", AnyValue::new(7u64)).unwrap();
    elsewhere(|| {
        assert_eq!(
            names.get_cached(b"k").unwrap().value.as_deref().unwrap(),
            "Ann"
        );
        assert_eq!(counts.get_cached(b"k").unwrap().value.as_deref(), Some(&7));
    });
    assert_eq!(l2.len(), 2, "both in the one store");
    let confused = Cache::<AnyValue, u64>::of_type("names", l2, opts()).unwrap();
    assert!(matches!(
        confused.get_cached(b"k"),
        Err(Error::Transform(_))
    ));
}

#[test]
fn byte_like_values_weigh_their_length_by_default() {
    let l2 = PayloadArc::new(L2::<String>::with_shards(1 << 16, 1).unwrap());
    let cache = Cache::new("w", l2.clone(), options(&Clock::manual())).unwrap();
    cache.put(b"small", "x".to_owned()).unwrap();
    let small = l2.used_bytes();
    cache.put(b"large", "x".repeat(1000)).unwrap();
    assert_eq!(
        l2.used_bytes() - small,
        small + 999,
        "one more key byte, 999 more value bytes"
    );
}

#[test]
fn a_per_call_transform_makes_what_this_call_keeps_in_l1() {
    let (cache, _) = cache();
    let upper = |s: &String| Ok::<_, String>(s.to_uppercase());
    let hit = cache
        .get_transformed(b"k", &CallOptions::default(), value("abc"), upper)
        .unwrap();
    assert_eq!(
        (hit.value.as_deref().unwrap().as_str(), hit.level),
        ("ABC", Level::L3)
    );
    assert_eq!(get(&cache, "k", NONE), got("ABC", Level::L1));
    elsewhere(|| assert_eq!(get(&cache, "k", NONE), got("abc", Level::L2)));
    let refuse = |_: &String| Err::<String, _>("no");
    let refused = cache.get_transformed(b"r", &CallOptions::default(), value("x"), refuse);
    assert_eq!(refused, Err(Error::Transform("no".into())));
}

#[test]
fn get_with_reads_in_place_from_l1_and_l2() {
    let (cache, clock) = cache();
    let len = |v: &String| v.len();
    assert_eq!(cache.get_with(b"k", len), Ok((None, Level::Miss)));
    cache.put(b"k", "four".into()).unwrap();
    assert_eq!(cache.get_with(b"k", len), Ok((Some(4), Level::L1)));
    elsewhere(|| {
        assert_eq!(cache.get_with(b"k", len), Ok((Some(4), Level::L2)));
        assert_eq!(
            cache.get_with(b"k", len),
            Ok((Some(4), Level::L1)),
            "promoted"
        );
    });
    cache.set(b"none", &CallOptions::default(), None).unwrap();
    assert_eq!(
        cache.get_with(b"none", len),
        Ok((None, Level::L1)),
        "a cached miss"
    );
    clock.advance(Duration::from_secs(31));
    assert_eq!(cache.get_with(b"k", len), Ok((None, Level::Miss)), "stale");
    // Through a transform: L1's type.
    let parse = |s: &String| s.parse::<u64>();
    let numbers = Cache::with_l1_type("n", store(1 << 16), options(&clock), parse).unwrap();
    numbers.put(b"k", "42".into()).unwrap();
    elsewhere(|| assert_eq!(numbers.get_with(b"k", |n| n + 1), Ok((Some(43), Level::L2))));
}

#[test]
fn second_hit_promotes_what_a_thread_reads_again() {
    let (cache, _) = cache_with(|o| o.promotion = Promotion::SecondHit);
    cache.put(b"k", "v".into()).unwrap();
    assert_eq!(
        get(&cache, "k", NONE),
        got("v", Level::L1),
        "a set goes to L1"
    );
    elsewhere(|| {
        assert_eq!(
            get(&cache, "k", NONE),
            got("v", Level::L2),
            "read once: kept in L2"
        );
        assert_eq!(
            get(&cache, "k", NONE),
            got("v", Level::L2),
            "twice: promoted"
        );
        assert_eq!(get(&cache, "k", NONE), got("v", Level::L1));
        // The borrowing read of a value not promoted reads L2's own.
        let len = |v: &String| v.len();
        assert_eq!(cache.get_with(b"j", len), Ok((None, Level::Miss)));
        cache.put(b"j", "three".into()).unwrap();
        cache.delete(b"k");
        assert_eq!(get(&cache, "k", NONE), Ok((None, Level::Miss)));
    });
    // Another thread's delete invalidated this thread's copy: a miss, not a stale L1 read.
    assert_eq!(get(&cache, "k", NONE), Ok((None, Level::Miss)));
    elsewhere(|| {
        let len = |v: &String| v.len();
        assert_eq!(
            cache.get_with(b"j", len),
            Ok((Some(5), Level::L2)),
            "in place"
        );
        assert_eq!(
            cache.get_with(b"j", len),
            Ok((Some(5), Level::L2)),
            "promoted"
        );
        assert_eq!(cache.get_with(b"j", len), Ok((Some(5), Level::L1)));
    });
}

/// A thread that retired a batch and then idles (pinning no more) keeps none of its bytes: the
/// batch went to the collector's global queue at once, not to the thread's private bag, so
/// another writer of the shard that needs the room frees it and stores.
#[test]
fn a_batch_retired_by_an_idle_thread_frees_room_for_another_writer() {
    let clock = Clock::manual();
    let cache = &Cache::new("t", store(128 << 10), options(&clock)).unwrap();
    let (wake, idle) = mpsc::channel::<()>();
    let (retired, has_retired) = mpsc::channel::<()>();
    thread::scope(|s| {
        s.spawn(move || {
            let value = "v".repeat(1 << 10);
            let keys: Vec<String> = (0..64).map(|i| format!("{i:02}")).collect();
            for key in &keys {
                cache.put(key.as_bytes(), value.clone()).unwrap();
            }
            // The 64th retirement hands the batch (about 70 KiB) to the collector.
            for key in &keys {
                cache.delete(key.as_bytes());
            }
            retired.send(()).unwrap();
            idle.recv().unwrap();
        });
        has_retired.recv().unwrap();
        // Fits only once the idle thread's batch is freed.
        let stored = cache.put(b"big", "x".repeat(100 << 10));
        wake.send(()).unwrap();
        assert_eq!(stored, Ok(()), "the idle thread's batch kept the room");
    });
}

/// A value that counts the bytes it stands for while it lives, and their peak.
struct Counted(usize);

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

impl Counted {
    fn new(bytes: usize) -> Self {
        // Relaxed (both): one writer thread; read by it afterwards.
        let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
        PEAK.fetch_max(live, Ordering::Relaxed);
        Self(bytes)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        // Relaxed: see `new`.
        LIVE.fetch_sub(self.0, Ordering::Relaxed);
    }
}

/// A writer churning a full store: the values that live at once (stored, retired, or in a
/// batch whose grace period has not ended) never weigh more than the store's bound, plus the
/// one being written and the copy in the writer's L1 (of one entry); a batch's bytes stay
/// charged until its nodes are freed.
#[test]
fn the_peak_of_live_values_stays_within_the_bound_while_batches_are_freed() {
    const BOUND: usize = 256 << 10;
    const VALUE: usize = 1 << 12;
    let l2 = L2::with_shards(BOUND, 1)
        .expect("valid")
        .weigh_with(|v: &Counted| v.0);
    let opts = Options {
        clock: Clock::manual(),
        l1_capacity: 1,
        ..Options::default()
    };
    let cache = Cache::new("t", PayloadArc::new(l2), opts).unwrap();
    for i in 0..4000 {
        cache
            .put(format!("{i:04}").as_bytes(), Counted::new(VALUE))
            .unwrap();
    }
    // Relaxed: this thread's own counts.
    let peak = PEAK.load(Ordering::Relaxed);
    assert!(peak > BOUND / 2, "the store filled: {peak}");
    assert!(
        peak <= BOUND + 2 * VALUE,
        "{peak} bytes of values lived at once"
    );
}

fn get_local(
    local: &Local<'_, String>,
    key: &str,
    loader: Option<Load>,
) -> Result<(Option<String>, Level), Error> {
    let hit = local.get(key.as_bytes(), &CallOptions::default(), loader)?;
    Ok((hit.value.map(|v| (*v).clone()), hit.level))
}

#[test]
fn a_handle_reads_this_threads_l1_and_sees_other_threads_writes() {
    let (cache, _) = cache();
    let (to_reader, reader_rx) = mpsc::channel::<&str>();
    let (to_writer, writer_rx) = mpsc::channel::<()>();
    let cache = &cache;
    thread::scope(|s| {
        s.spawn(move || {
            let local = cache.local();
            assert_eq!(get_local(&local, "k", value("v0")), got("v0", Level::L3));
            assert_eq!(get_local(&local, "k", NONE), got("v0", Level::L1));
            assert_eq!(get(cache, "k", NONE), got("v0", Level::L1), "one L1");
            to_writer.send(()).unwrap();
            assert_eq!(reader_rx.recv().unwrap(), "set");
            assert_eq!(get_local(&local, "k", NONE), got("v1", Level::L2));
            assert_eq!(local.get_with(b"k", String::clone), got("v1", Level::L1));
            to_writer.send(()).unwrap();
            assert_eq!(reader_rx.recv().unwrap(), "deleted");
            assert_eq!(local.get_cached(b"k").unwrap().level, Level::Miss);
            let loaded = local.get_or_load(b"k", || Ok::<_, String>(Loaded::some("v2".into())));
            assert_eq!(loaded.unwrap().level, Level::L3);
            to_writer.send(()).unwrap();
            assert_eq!(reader_rx.recv().unwrap(), "purged");
            assert_eq!(local.get_with(b"k", String::clone), Ok((None, Level::Miss)));
        });
        writer_rx.recv().unwrap();
        cache.put(b"k", "v1".into()).unwrap();
        to_reader.send("set").unwrap();
        writer_rx.recv().unwrap();
        cache.delete(b"k");
        to_reader.send("deleted").unwrap();
        writer_rx.recv().unwrap();
        cache.purge(false);
        to_reader.send("purged").unwrap();
    });
}

#[test]
fn handles_and_the_caches_own_calls_mix_on_one_thread() {
    let (cache, _) = cache();
    let (first, second) = (cache.local(), cache.local());
    // A loader through one handle reads and writes through the other and the cache: the L1 is
    // not borrowed while a loader runs.
    let nested = first.get_or_load(b"a", || {
        assert_eq!(get_local(&second, "b", value("b")), got("b", Level::L3));
        cache.put(b"c", "c".into()).unwrap();
        assert_eq!(get(&cache, "c", NONE), got("c", Level::L1));
        Ok::<_, String>(Loaded::some("a".into()))
    });
    assert_eq!(nested.unwrap().level, Level::L3);
    for (key, v) in [("a", "a"), ("b", "b"), ("c", "c")] {
        assert_eq!(get_local(&first, key, NONE), got(v, Level::L1));
        assert_eq!(get_local(&second, key, NONE), got(v, Level::L1));
        assert_eq!(get(&cache, key, NONE), got(v, Level::L1));
    }
    // A borrowing read may use a cache of another name, not one of its own (documented).
    let other = Cache::new("other", store(1 << 16), options(&Clock::manual())).unwrap();
    other.put(b"o", "o".into()).unwrap();
    let read = first.get_with(b"a", |a| (a.clone(), get(&other, "o", NONE)));
    assert_eq!(
        read,
        Ok((Some(("a".into(), got("o", Level::L1))), Level::L1))
    );
    let reentered = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        first.get_with(b"a", |_| second.get_cached(b"b").map(drop))
    }));
    assert!(reentered.is_err(), "the reader re-entered its own L1");
    assert_eq!(get_local(&second, "b", NONE), got("b", Level::L1), "intact");
}

#[test]
fn a_handle_keeps_the_l1_lifetime_rule() {
    let l2 = store(1 << 20);
    let clock = Clock::manual();
    let first = Cache::new("handled", l2.clone(), options(&clock)).unwrap();
    let local = first.local();
    first.put(b"k", "v".into()).unwrap();
    assert_eq!(get_local(&local, "k", NONE), got("v", Level::L1));
    drop(local);
    drop(first);
    let second = Cache::new("handled", l2, options(&clock)).unwrap();
    let local = second.local();
    assert_eq!(
        get_local(&local, "k", NONE),
        got("v", Level::L2),
        "a new L1"
    );
    assert_eq!(get(&second, "k", NONE), got("v", Level::L1), "the handle's");
}
