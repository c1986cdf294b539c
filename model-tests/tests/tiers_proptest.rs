//! Random sequences of get/set/delete/purge/peek/time steps, issued by several workers (each
//! on its own thread, so each with its own L1), checked against a sequential model of the
//! semantics: a get returns what the model's L2 holds while it is fresh, and runs the loader
//! otherwise; a level-1 answer is only allowed if this worker read or wrote that very version,
//! and is required when it did and no write of a key of the same invalidation stripe came since
//! (L1 is per thread, shared by the worker's two caches of one name, and a write drops only its
//! stripe's copies). After every step the cache's structures pass their invariant walkers
//! (`Cache::validate`). `the_model_catches_an_l1_that_is_not_shared_by_name` runs the model on
//! a deliberately wrong twin (another name) and expects it to fail.

#![cfg(not(mcb_loom))]

use mcb_core::sync::PayloadArc;
use mcb_core::tiers::{Cache, CallOptions, Clock, Level, Loaded, Options, L2};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

const WORKERS: usize = 3;
const KEYS: &[&[u8]] = &[b"a", b"b", b"c", b"d"];
const TTL_MS: u64 = 30_000;
const NEG_TTL_MS: u64 = 5_000;

#[derive(Clone, Debug)]
enum Op {
    /// The loader answers a fresh value, or "no value"; through the worker's second cache of
    /// the same name when `twin`.
    Get {
        worker: usize,
        key: usize,
        none: bool,
        twin: bool,
    },
    /// `ttl_s` 0 means forever.
    Set {
        worker: usize,
        key: usize,
        value: Option<u32>,
        ttl_s: u64,
    },
    Delete {
        worker: usize,
        key: usize,
    },
    Purge {
        worker: usize,
    },
    Peek {
        worker: usize,
        key: usize,
        stale: bool,
    },
    Advance {
        ms: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let worker = 0..WORKERS;
    let key = 0..KEYS.len();
    prop_oneof![
        4 => (worker.clone(), key.clone(), proptest::bool::weighted(0.2), any::<bool>())
            .prop_map(|(worker, key, none, twin)| Op::Get { worker, key, none, twin }),
        2 => (worker.clone(), key.clone(), proptest::option::of(0u32..1000), 0u64..40)
            .prop_map(|(worker, key, value, ttl_s)| Op::Set { worker, key, value, ttl_s }),
        1 => (worker.clone(), key.clone()).prop_map(|(worker, key)| Op::Delete { worker, key }),
        1 => worker.clone().prop_map(|worker| Op::Purge { worker }),
        1 => (worker, key, any::<bool>()).prop_map(|(worker, key, stale)| Op::Peek { worker, key, stale }),
        2 => prop_oneof![0u64..2_000, Just(5_000), Just(30_000)].prop_map(|ms| Op::Advance { ms }),
    ]
}

/// What the model's L2 holds for a key.
#[derive(Clone, Copy, Debug)]
struct Entry {
    value: Option<u32>,
    stored_at: u64,
    ttl: u64,
    version: u64,
}

impl Entry {
    fn expires_at(&self) -> Option<u64> {
        (self.ttl > 0).then(|| self.stored_at + self.ttl)
    }

    fn is_fresh(&self, now: u64) -> bool {
        self.expires_at().is_none_or(|at| now <= at)
    }
}

#[derive(Default)]
struct Model {
    l2: HashMap<usize, Entry>,
    /// The version of a key each worker last kept in its L1.
    seen: HashMap<(usize, usize), u64>,
    versions: u64,
}

impl Model {
    /// A set or delete of `key`: every worker's copies of the other keys of its stripe go.
    fn invalidate_stripe_of(&mut self, key: usize, stripes: &[usize]) {
        self.seen
            .retain(|&(_, k), _| k == key || stripes[k] != stripes[key]);
    }

    fn write(&mut self, worker: usize, key: usize, value: Option<u32>, now: u64, ttl: u64) {
        self.versions += 1;
        let entry = Entry {
            value,
            stored_at: now,
            ttl,
            version: self.versions,
        };
        self.l2.insert(key, entry);
        self.seen.insert((worker, key), self.versions);
    }
}

type Job<'a> = Box<dyn FnOnce() + Send + 'a>;

/// Runs `ops` against caches named "prop"; the twin (the second cache of each `Get { twin }`)
/// is named `twin_name`.
fn run(ops: &[Op], twin_name: &str) -> Result<(), TestCaseError> {
    let clock = Clock::manual();
    let opts = || Options {
        clock: clock.clone(),
        ttl: Duration::from_millis(TTL_MS),
        neg_ttl: Duration::from_millis(NEG_TTL_MS),
        ..Options::default()
    };
    let l2 = PayloadArc::new(L2::with_shards(1 << 20, 2).expect("valid"));
    let cache = Cache::<u32>::new("prop", l2.clone(), opts()).expect("valid");
    let twin = Cache::<u32>::new(twin_name, l2, opts()).expect("valid");
    let stripes: Vec<usize> = KEYS.iter().map(|k| cache.invalidation_stripe(k)).collect();
    let (cache, twin) = (&cache, &twin);
    thread::scope(|scope| {
        let workers: Vec<mpsc::Sender<Job<'_>>> = (0..WORKERS)
            .map(|_| {
                let (tx, rx) = mpsc::channel::<Job<'_>>();
                scope.spawn(move || rx.into_iter().for_each(|job| job()));
                tx
            })
            .collect();
        // Runs `f` on `worker`'s thread and waits for its answer.
        fn on<'a, R: Send + 'a>(
            workers: &[mpsc::Sender<Job<'a>>],
            worker: usize,
            f: impl FnOnce() -> R + Send + 'a,
        ) -> R {
            let (tx, rx) = mpsc::channel();
            workers[worker]
                .send(Box::new(move || tx.send(f()).expect("answer")))
                .expect("worker alive");
            rx.recv().expect("worker answered")
        }
        let mut model = Model::default();
        let mut next_value = 1_000_000u32;
        for op in ops {
            let now = clock.now_ms();
            match *op {
                Op::Get {
                    worker,
                    key,
                    none,
                    twin: use_twin,
                } => {
                    next_value += 1;
                    let loaded = (!none).then_some(next_value);
                    let via = if use_twin { twin } else { cache };
                    let hit = on(&workers, worker, move || {
                        let loader =
                            move || Ok::<_, String>(loaded.map_or_else(Loaded::none, Loaded::some));
                        via.get(KEYS[key], &CallOptions::default(), Some(loader))
                    })
                    .expect("no error without failing loaders");
                    let got = hit.value.as_deref().copied();
                    match model.l2.get(&key).copied().filter(|e| e.is_fresh(now)) {
                        Some(entry) => {
                            prop_assert_eq!(got, entry.value, "fresh value, {:?}", op);
                            let kept = model.seen.get(&(worker, key)) == Some(&entry.version)
                                && entry.expires_at().is_none_or(|at| at > now);
                            prop_assert!(
                                !kept || hit.level == Level::L1,
                                "this thread's L1 lost a valid copy: {:?} answered {:?}",
                                op,
                                hit.level
                            );
                            match hit.level {
                                Level::L1 => prop_assert_eq!(
                                    model.seen.get(&(worker, key)).copied(),
                                    Some(entry.version),
                                    "L1 answered a version this worker never kept: {:?}",
                                    op
                                ),
                                Level::L2 => {
                                    if entry.expires_at().is_none_or(|at| at > now) {
                                        model.seen.insert((worker, key), entry.version);
                                    }
                                }
                                other => prop_assert!(false, "level {:?} for a fresh key", other),
                            }
                        }
                        None => {
                            prop_assert_eq!(hit.level, Level::L3, "{:?}", op);
                            prop_assert_eq!(got, loaded);
                            let ttl = if loaded.is_some() { TTL_MS } else { NEG_TTL_MS };
                            model.write(worker, key, loaded, now, ttl);
                        }
                    }
                }
                Op::Set {
                    worker,
                    key,
                    value,
                    ttl_s,
                } => {
                    let opts = CallOptions {
                        ttl: Some(Duration::from_secs(ttl_s)),
                        neg_ttl: Some(Duration::from_secs(ttl_s)),
                        ..CallOptions::default()
                    };
                    on(&workers, worker, move || cache.set(KEYS[key], &opts, value)).expect("room");
                    model.invalidate_stripe_of(key, &stripes);
                    model.write(worker, key, value, now, ttl_s * 1000);
                }
                Op::Delete { worker, key } => {
                    on(&workers, worker, move || cache.delete(KEYS[key]));
                    model.invalidate_stripe_of(key, &stripes);
                    model.l2.remove(&key);
                }
                Op::Purge { worker } => {
                    on(&workers, worker, move || cache.purge(false));
                    model.l2.clear();
                    model.seen.clear();
                }
                Op::Peek { worker, key, stale } => {
                    let peek = on(&workers, worker, move || cache.peek(KEYS[key], stale));
                    let want = model.l2.get(&key).filter(|e| stale || e.is_fresh(now));
                    match (peek, want) {
                        (None, None) => {}
                        (Some(peek), Some(entry)) => {
                            prop_assert_eq!(peek.value.as_deref().copied(), entry.value);
                            prop_assert_eq!(peek.stale, !entry.is_fresh(now));
                            let remaining = entry
                                .expires_at()
                                .map(|at| Duration::from_millis(at.saturating_sub(now)));
                            prop_assert_eq!(peek.remaining, remaining);
                        }
                        (peek, want) => {
                            prop_assert!(false, "peek {:?}, model {:?} ({:?})", peek, want, op)
                        }
                    }
                }
                Op::Advance { ms } => clock.advance(Duration::from_millis(ms)),
            }
            // The worker's L1 and the L2's linked lists, sizes and indexes after every step.
            if let Op::Get { worker, .. } = *op {
                on(&workers, worker, move || cache.validate());
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn tiers_match_the_sequential_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops, "prop")?;
    }
}

#[test]
fn the_model_catches_an_l1_that_is_not_shared_by_name() {
    let load = |twin| Op::Get {
        worker: 0,
        key: 0,
        none: false,
        twin,
    };
    let ops = [load(false), load(true)];
    run(&ops, "prop").expect("one name, one L1 per thread");
    assert!(
        run(&ops, "another name").is_err(),
        "the model accepted a twin with an L1 of its own"
    );
}
