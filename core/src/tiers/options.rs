//! Cache options (the seed's `new` options) and per-call overrides (its `get`/`set` options).

use super::clock::{to_ms, Clock};
use super::error::{Error, Warning};
use super::flight::LockOptions;
use super::l2::L2;
use crate::sync::PayloadArc;
use std::fmt;
use std::time::Duration;

/// The L1 transform (the seed's `l1_serializer`): runs when a value is promoted into L1; its
/// result is what L1 keeps and what the caller gets, its error is returned to the caller.
pub type Transform<T> =
    PayloadArc<dyn Fn(&PayloadArc<T>) -> Result<PayloadArc<T>, String> + Send + Sync>;

/// Receives the cache's warnings (the seed logs them), each with its reason.
pub type WarningHook = PayloadArc<dyn Fn(&Warning<'_>) + Send + Sync>;

/// Which L2 hits a thread keeps in its L1.
///
/// In-process, an L2 read costs about what a promotion saves: promoting every L2 hit into a
/// small L1 evicts as often as it promotes, and lets keys read once push out the hot ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Promotion {
    /// Every L2 hit (the seed's rule: an L2 hit is set into the worker's LRU).
    #[default]
    Always,
    /// A key's second L1 miss on this thread within about `l1_capacity` misses (a table of
    /// that many hashes per L1, as TinyLFU's doorkeeper): keys read once stay in L2, so that
    /// L1 holds what this thread reads again and again. A copy that L1 dropped as stale or
    /// invalidated is read back at once; values loaded or set on this thread go to its L1 as
    /// with `Always`. On Zipf-distributed reads (s = 0.9) over 100 times the L1's capacity it
    /// keeps about 45% of the reads in L1 (`Always`: 34%) and promotes on 2% of them (66%).
    SecondHit,
}

/// Which loaded values a full L2 keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Admission {
    /// Every one (the seed's rule: a loaded value is set into the shared dict, evicting).
    #[default]
    Always,
    /// TinyLFU's rule: a loaded value of a key L2 does not hold, into a shard within an eighth
    /// of full, is kept only if its key was asked for more often lately than the entry the
    /// shard would evict first (requests counted in a sketch of eight to sixteen bytes per
    /// entry, beside the budget; reads counted when eviction looks at an entry, and the
    /// victim's reads since then added to its count). The caller gets its value either way,
    /// and this thread's L1 keeps it; `set` always stores.
    /// On Zipf 0.9 over twice the cache it keeps 0.902-0.904 of the reads (`Always`: 0.868,
    /// moka 0.895); on Zipf with a one-pass scan 0.517-0.526 (`Always`: 0.522).
    Frequency,
}

/// How a [`Cache`](super::Cache) behaves; `Default` gives the seed's defaults.
pub struct Options<T> {
    /// Entries in each thread's L1 for this name (the seed's `lru_size`, default 100). Caches
    /// of one name share a thread's L1: the first to use it on a thread sizes it.
    pub l1_capacity: usize,
    /// Which L2 hits go to L1 (default: every one, as in the seed). Caches of one name share a
    /// thread's L1: the first to use it on a thread picks its rule.
    pub promotion: Promotion,
    /// Which loaded values a full L2 keeps (default: every one, as in the seed).
    pub admission: Admission,
    /// Time to live of values (default 30 s); zero means forever.
    pub ttl: Duration,
    /// Time to live of cached misses (default 5 s); zero means forever.
    pub neg_ttl: Duration,
    /// When set, a stale value is served and put back for this long when its loader fails or
    /// its lock times out. Zero is rejected.
    pub resurrect_ttl: Option<Duration>,
    /// The per-key loader lock.
    pub lock: LockOptions,
    /// Tries to make room in a full L2 before giving up (the seed's `shm_set_tries`, default 3).
    pub set_tries: u32,
    /// Runs on every promotion into L1.
    pub transform: Option<Transform<T>>,
    /// A separate L2 for cached misses (the seed's `shm_miss`).
    pub miss_store: Option<PayloadArc<L2<T>>>,
    /// The time source, of ttls and of the lock's timeout and expiry.
    pub clock: Clock,
    /// Receives every warning; without one they are only counted
    /// ([`Cache::warnings`](super::Cache::warnings)).
    pub on_warning: Option<WarningHook>,
}

impl<T> Default for Options<T> {
    fn default() -> Self {
        Self {
            l1_capacity: 100,
            promotion: Promotion::Always,
            admission: Admission::Always,
            ttl: Duration::from_secs(30),
            neg_ttl: Duration::from_secs(5),
            resurrect_ttl: None,
            lock: LockOptions::default(),
            set_tries: 3,
            transform: None,
            miss_store: None,
            clock: Clock::system(),
            on_warning: None,
        }
    }
}

impl<T> fmt::Debug for Options<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("l1_capacity", &self.l1_capacity)
            .field("promotion", &self.promotion)
            .field("admission", &self.admission)
            .field("ttl", &self.ttl)
            .field("neg_ttl", &self.neg_ttl)
            .field("resurrect_ttl", &self.resurrect_ttl)
            .field("lock", &self.lock)
            .field("set_tries", &self.set_tries)
            .field("transform", &self.transform.is_some())
            .field("miss_store", &self.miss_store.is_some())
            .field("clock", &self.clock)
            .field("on_warning", &self.on_warning.is_some())
            .finish()
    }
}

/// Per-call overrides of the cache's options; `None` keeps the cache's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// Overrides [`Options::ttl`].
    pub ttl: Option<Duration>,
    /// Overrides [`Options::neg_ttl`].
    pub neg_ttl: Option<Duration>,
    /// Overrides [`Options::resurrect_ttl`].
    pub resurrect_ttl: Option<Duration>,
    /// Overrides [`Options::set_tries`].
    pub set_tries: Option<u32>,
    /// Overrides [`Options::lock`].
    pub lock: Option<LockOptions>,
}

/// One call's options, in clock milliseconds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Resolved {
    pub ttl: u64,
    pub neg_ttl: u64,
    pub resurrect: Option<u64>,
    pub tries: u32,
    pub lock: LockOptions,
}

impl<T> Options<T> {
    /// Rejects the options the seed rejects, and the zero resurrect ttl it lets through;
    /// resolves them for calls without overrides (once, when the cache is made).
    pub(crate) fn validate(&self) -> Result<Resolved, Error> {
        if self.l1_capacity == 0 {
            return Err(Error::InvalidOption("l1_capacity must be > 0"));
        }
        self.resolve(&CallOptions::default())
    }

    /// This call's options: the overrides, else the cache's.
    pub(crate) fn resolve(&self, call: &CallOptions) -> Result<Resolved, Error> {
        let tries = call.set_tries.unwrap_or(self.set_tries);
        if tries == 0 {
            return Err(Error::InvalidOption("set_tries must be >= 1"));
        }
        let resurrect = call.resurrect_ttl.or(self.resurrect_ttl).map(to_ms);
        if resurrect == Some(0) {
            return Err(Error::InvalidOption("resurrect_ttl must be > 0 ms"));
        }
        Ok(Resolved {
            ttl: to_ms(call.ttl.unwrap_or(self.ttl)),
            neg_ttl: to_ms(call.neg_ttl.unwrap_or(self.neg_ttl)),
            resurrect,
            tries,
            lock: call.lock.unwrap_or(self.lock),
        })
    }
}
