//! Shared pieces of the benches: an engine whose calls cost nothing (so the bench measures the
//! bucket machinery, not the engine), a faithful model of the seed's design to compare against,
//! a multi-threaded timing helper, and the ratio report printed after each run.

use criterion::Criterion;
use mcb_core::bucket::{Engine, Env};
use std::cell::Cell;
use std::collections::HashMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

/// An engine whose proxied call does nothing.
#[derive(Debug, Default)]
pub struct NoopEngine;

impl NoopEngine {
    /// One proxied call.
    #[inline]
    pub fn call(&self) {
        black_box(self);
    }
}

impl Engine for NoopEngine {
    type Cookie = usize;

    fn initialize(&self, _config: &str) -> Result<(), String> {
        Ok(())
    }

    fn destroy(&self, _force: bool) {}
}

/// Loads [`NoopEngine`]s.
#[derive(Debug, Default)]
pub struct NoopEnv;

impl Env for NoopEnv {
    type Engine = NoopEngine;

    fn load(&self, _spec: &str) -> Result<NoopEngine, String> {
        Ok(NoopEngine)
    }

    fn notify_deleted(&self, _cookie: usize) {}
}

/// The seed's design, as `bucket_engine.c` has it: one shared `clients` counter per bucket
/// (`__sync_add_and_fetch`, a full barrier), the state read after counting in, and lookups in a
/// hash map under the global engines mutex with a shared `refcount`.
/// What the tiers bench and its profiling driver build the same way: our cache of `u64`
/// values under 8-byte keys, and one get of it.
pub mod tiers {
    use mcb_core::sync::PayloadArc;
    use mcb_core::tiers::{
        Admission, Cache, CallOptions, Level, Loaded, Local, Options, Promotion, L2,
    };
    use std::time::Duration;

    /// A get without a loader.
    pub type Load = fn() -> Result<Loaded<u64>, String>;

    /// Key `k` as bytes.
    pub fn key(k: u64) -> [u8; 8] {
        k.to_le_bytes()
    }

    /// An L2 of `capacity` bytes in `shards` shards.
    pub fn store(capacity: usize, shards: usize) -> PayloadArc<L2<u64>> {
        PayloadArc::new(L2::with_shards(capacity, shards).expect("valid"))
    }

    /// Our cache over `l2` with an L1 of `l1_capacity` entries, `promotion` and `admission`.
    pub fn ours_with(
        l2: PayloadArc<L2<u64>>,
        l1_capacity: usize,
        promotion: Promotion,
        admission: Admission,
    ) -> Cache<u64> {
        let opts = Options {
            l1_capacity,
            promotion,
            admission,
            // Forever, as the peers keep them: a group runs longer than the default 30 s,
            // after which every get would find a stale entry.
            ttl: Duration::ZERO,
            ..Options::default()
        };
        Cache::new("bench", l2, opts).expect("valid")
    }

    /// What one of our entries weighs in L2 (to size a store in entries).
    pub fn entry_weight() -> usize {
        let probe = store(1 << 20, 1);
        ours_with(probe.clone(), 1, Promotion::Always, Admission::Always)
            .set(&key(0), &CallOptions::default(), Some(0))
            .expect("room");
        probe.used_bytes()
    }

    /// The level that answered a get of key `k`.
    pub fn get(cache: &Cache<u64>, k: u64) -> Level {
        cache
            .get(&key(k), &CallOptions::default(), None::<Load>)
            .expect("no loader, no error")
            .level
    }

    /// A get of key `k` that loads it on a miss (a cache-aside loop through the cache's
    /// loader); whether it hit. (A full shard may decline or fail to keep the load: as a
    /// peer's insert that its policy rejects, the key is not kept.)
    pub fn get_or_load(cache: &Cache<u64>, k: u64) -> bool {
        let load = || Ok::<_, String>(Loaded::some(k));
        let got = cache.get(&key(k), &CallOptions::default(), Some(load));
        got.expect("loads").level != Level::L3
    }

    /// [`get`] through a handle on this thread's L1.
    pub fn get_local(local: &Local<'_, u64>, k: u64) -> Level {
        local
            .get(&key(k), &CallOptions::default(), None::<Load>)
            .expect("no loader, no error")
            .level
    }
}

pub mod seed {
    use super::*;

    const RUNNING: u8 = 1;
    const STOPPING: u8 = 2;

    /// The seed's `proxied_engine_handle_t`, reduced to what the call path touches.
    #[derive(Debug)]
    pub struct Handle {
        clients: AtomicI32,
        refcount: AtomicI32,
        state: AtomicU8,
        engine: NoopEngine,
    }

    impl Handle {
        fn new() -> Self {
            Self {
                clients: AtomicI32::new(0),
                refcount: AtomicI32::new(1),
                state: AtomicU8::new(RUNNING),
                engine: NoopEngine,
            }
        }

        /// `get_engine_handle`.
        #[inline]
        pub fn enter(&self) -> Option<&NoopEngine> {
            self.clients.fetch_add(1, Ordering::SeqCst);
            if self.state.load(Ordering::SeqCst) != RUNNING {
                self.leave();
                return None;
            }
            Some(&self.engine)
        }

        /// `release_engine_handle`.
        #[inline]
        pub fn leave(&self) {
            let now = self.clients.fetch_sub(1, Ordering::SeqCst) - 1;
            if now == 0 && self.state.load(Ordering::SeqCst) == STOPPING {
                unreachable!("benches never stop a bucket");
            }
        }

        /// `release_handle`.
        pub fn release(&self) {
            self.refcount.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// The seed's `engines` hash under `engines_mutex`.
    #[derive(Debug, Default)]
    pub struct Registry {
        engines: Mutex<HashMap<String, Arc<Handle>>>,
    }

    impl Registry {
        /// Adds a RUNNING bucket.
        pub fn create(&self, name: &str) -> Arc<Handle> {
            let handle = Arc::new(Handle::new());
            let mut engines = self.engines.lock().expect("not poisoned");
            engines.insert(name.to_owned(), Arc::clone(&handle));
            handle
        }

        /// `find_bucket`: lock, look up, `retain_handle`, unlock.
        pub fn find(&self, name: &str) -> Option<Arc<Handle>> {
            let engines = self.engines.lock().expect("not poisoned");
            let handle = engines.get(name)?;
            if handle.state.load(Ordering::SeqCst) != RUNNING {
                return None;
            }
            handle.refcount.fetch_add(1, Ordering::SeqCst);
            Some(Arc::clone(handle))
        }
    }
}

/// xorshift64* (Vigna): fast, and the same sequence for the same seed, so every run sees the
/// same keys. The seed must not be zero.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

/// The seed of the `i`-th of several generators drawn from `base` (one per connection or
/// thread): never zero, and a different one for each `i`. (`(base ^ i) | 1` gave 0 and 1 one
/// seed, 2 and 3 another: pairs of loadgen's connections sent the same keys in the same order,
/// which made the hit ratio of its cache-aside loop that of a trace with repeats a few
/// requests apart.)
pub fn stream_seed(base: u64, i: u64) -> u64 {
    (base ^ (i << 1)) | 1
}

impl Rng {
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// The next number as a float in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Thread counts to measure: 1, 2 and the machine's parallelism (deduplicated).
pub fn thread_counts() -> Vec<usize> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1, 2, n];
    counts.sort_unstable();
    counts.dedup();
    counts
}

/// Time for `iters` rounds in which each of `threads` threads runs `op` once, all starting
/// together; criterion divides by `iters`, so report throughput as `threads` elements.
pub fn time_threads(threads: usize, iters: u64, op: impl Fn() + Sync) -> Duration {
    let barrier = Barrier::new(threads + 1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..iters {
                    op();
                }
                barrier.wait();
            });
        }
        barrier.wait();
        let start = Instant::now();
        barrier.wait();
        start.elapsed()
    })
}

/// Where criterion keeps its results: under the bench's `CARGO_TARGET_TMPDIR` (which only bench
/// targets see, so they pass it in), where [`print_ratios`] can find them.
pub fn results_dir(target_tmpdir: &str) -> PathBuf {
    Path::new(target_tmpdir).join("criterion")
}

/// A criterion configured for short, CI-friendly runs that write to `results`.
pub fn criterion(results: &Path) -> Criterion {
    Criterion::default()
        .output_directory(results)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
        .configure_from_args()
}

/// Mean time per iteration of `group/bench`, from criterion's estimates of the last run.
fn mean_ns(results: &Path, group: &str, bench: &str) -> Option<f64> {
    let path = results.join(group).join(bench).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let mean = &text[text.find("\"mean\"")?..];
    let point = &mean[mean.find("\"point_estimate\":")? + "\"point_estimate\":".len()..];
    point.split([',', '}']).next()?.trim().parse().ok()
}

/// Prints, for each `(ours, theirs)` pair of benches in `group`, how many times faster ours
/// is (theirs' time over ours). Silent for pairs not measured in this run (e.g. `--test`).
pub fn print_ratios(results: &Path, group: &str, pairs: &[(String, String)]) {
    for (ours, theirs) in pairs {
        let ours_ns = mean_ns(results, group, ours);
        if let (Some(a), Some(b)) = (ours_ns, mean_ns(results, group, theirs)) {
            println!(
                "ratio {group}: {ours} is {:.2}x the speed of {theirs}",
                b / a
            );
        }
    }
}

/// `count` key indices in `0..n`, Zipf-distributed with exponent `s` (inverse of the CDF).
pub fn zipf(n: usize, s: f64, count: usize, seed: u64) -> Vec<u64> {
    let mut cdf: Vec<f64> = (1..=n).map(|rank| 1.0 / (rank as f64).powf(s)).collect();
    let mut sum = 0.0;
    for weight in &mut cdf {
        sum += *weight;
        *weight = sum;
    }
    let mut rng = Rng(seed);
    (0..count)
        .map(|_| {
            // One draw per key (drawn inside the search's predicate, each step would draw anew).
            let u = rng.unit() * sum;
            cdf.partition_point(|&c| c < u) as u64
        })
        .collect()
}

/// Where the next thread starts its walk (see [`next_key`]).
static WALK_STARTS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static CURSOR: Cell<usize> = Cell::new(
        // Relaxed: a counter; each thread only needs a value of its own.
        WALK_STARTS.fetch_add(0x9e37_79b9, Ordering::Relaxed),
    );
}

/// The next key of this thread's walk through `trace`; each thread starts at a place of its
/// own (all starting at 0, the threads of a bench row asked for the same keys in step).
pub fn next_key(trace: &[u64]) -> u64 {
    CURSOR.with(|c| {
        let i = c.get();
        c.set(i.wrapping_add(7919));
        trace[i % trace.len()]
    })
}

/// Prints each side's hit ratio (`hits` out of `requests`, in the order of `names`), then the
/// first side's against each other one, as ratios named `ratio_name`.
pub fn print_hit_ratios(
    workload: &str,
    ratio_name: &str,
    names: &[&str],
    hits: &[usize],
    requests: usize,
) {
    let ratio = |h: usize| h as f64 / requests as f64;
    for (name, &h) in names.iter().zip(hits) {
        println!("hit ratio {workload}: {name} {:.3}", ratio(h));
    }
    for (name, &h) in names.iter().zip(hits).skip(1) {
        println!(
            "ratio {ratio_name}: ours is {:.2}x the hit ratio of {name}",
            ratio(hits[0]) / ratio(h)
        );
    }
}

/// Whether the command line's filter (criterion's positional argument, a regex, here matched
/// as alternatives of plain substrings) leaves anything of `group` to run: a group's setup and
/// its untimed hit ratios are skipped with its benches, so that a profile of one row holds that
/// row alone.
pub fn wanted(group: &str) -> bool {
    wanted_by(group, std::env::args().skip(1))
}

/// criterion's options that take their value as the next argument (`--sample-size 10`): that
/// value is not a filter.
const VALUED_OPTIONS: [&str; 18] = [
    "--warm-up-time",
    "--measurement-time",
    "--sample-size",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--save-baseline",
    "-s",
    "--baseline",
    "-b",
    "--baseline-lenient",
    "--load-baseline",
    "--profile-time",
    "--output-format",
    "--color",
    "-c",
    "--plotting-backend",
];

/// [`wanted`] for the arguments `args` (the program's name left out).
fn wanted_by(group: &str, args: impl IntoIterator<Item = String>) -> bool {
    let mut filters = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if VALUED_OPTIONS.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filters.push(arg);
        }
    }
    let matches = |alternative: &str| {
        let f = alternative.trim_start_matches('^').trim_end_matches('$');
        group.contains(f) || f.starts_with(group)
    };
    filters.is_empty() || filters.iter().any(|f| f.split('|').any(matches))
}

#[cfg(test)]
mod tests {
    use super::{next_key, stream_seed, wanted_by, zipf};

    #[test]
    fn each_connection_and_thread_gets_keys_of_its_own() {
        let base = 0x51_7cc1_b727_220a;
        let seeds: std::collections::HashSet<u64> = (0..64).map(|i| stream_seed(base, i)).collect();
        assert_eq!(seeds.len(), 64);
        assert!(seeds.iter().all(|s| s & 1 == 1));
        let trace = |i| zipf(1000, 0.99, 64, stream_seed(base, i));
        assert_ne!(trace(0), trace(1));
        let positions: Vec<u64> = (0..1000).collect();
        let walk = || std::thread::scope(|s| s.spawn(|| next_key(&positions)).join().unwrap());
        assert_ne!(walk(), walk(), "two threads start their walks at one place");
    }

    fn wanted(group: &str, args: &str) -> bool {
        wanted_by(group, args.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn a_filter_selects_the_groups_it_names_and_option_values_are_not_filters() {
        assert!(wanted("tiers_levels", "--bench"));
        assert!(wanted("tiers_levels", "--bench tiers_levels/l1_hit"));
        assert!(wanted("tiers_levels", "--bench ^zipf|tiers_levels$"));
        assert!(!wanted("zipf_s0.9_100k_keys_read", "--bench tiers_levels"));
        // "10" and "1" are the options' values: as filters they would select every group whose
        // name holds them.
        assert!(!wanted(
            "zipf_s0.9_100k_keys_read",
            "--bench --sample-size 10 --warm-up-time 1 tiers_levels"
        ));
        assert!(wanted(
            "zipf_s0.9_100k_keys_read",
            "--bench --sample-size=10 zipf"
        ));
    }
}
