//! [`Cache`]: the seed's public API over L1 (this thread), L2 (shared) and L3 (the loader).
//!
//! A get hashes its key once (L1's index, the invalidation stripe and L2 all use that hash),
//! reads the process-wide coarse time (one load: see `clock`), finds this thread's L1 at the
//! cache's slot (see `l1`), and with options left at the cache's own resolves nothing: they were
//! resolved when the cache was made. On an L1 miss it reads L2 without a lock and promotes by
//! the cache's [`Promotion`](super::Promotion) rule. [`Cache::get_with`] reads without a clone.

use super::bulk;
use super::clock::{to_ms, Ticking};
use super::error::{BoxError, Error, LoaderError, StoreKind, Warning};
use super::l1::{self, L1};
use super::l2::{self as store, Entry, Probe, L2};
use super::namespace::Namespace;
use super::options::{Admission, CallOptions, Options, Promotion, Resolved};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::mutant::{self, Mutant};
use crate::sync::time::Duration;
use crate::sync::{Arc, PayloadArc};
use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

/// Where a value came from (the seed's `hit_lvl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Level {
    /// Not found and no loader to ask.
    Miss = -1,
    /// This thread's L1 (shared by the caches of one name on this thread).
    L1 = 1,
    /// The shared L2.
    L2 = 2,
    /// The loader.
    L3 = 3,
    /// A stale value, served because the loader failed or its lock timed out.
    Stale = 4,
}

/// A value (`None`: "no value", possibly a cached miss) and where it came from.
#[derive(Debug, PartialEq, Eq)]
pub struct Hit<T> {
    /// The value, shared with the cache (no copy).
    pub value: Option<PayloadArc<T>>,
    /// Where it came from.
    pub level: Level,
}

/// What a loader returns: a value or "no value", and how long to keep it.
#[derive(Debug)]
pub struct Loaded<T> {
    value: Option<T>,
    ttl: Option<Duration>,
    cache: bool,
}

impl<T> Loaded<T> {
    /// A value, kept for the ttl.
    pub fn some(value: T) -> Self {
        Self {
            value: Some(value),
            ttl: None,
            cache: true,
        }
    }

    /// "No value", kept for the neg_ttl (negative caching).
    pub fn none() -> Self {
        Self {
            value: None,
            ttl: None,
            cache: true,
        }
    }

    /// Keeps it for `ttl` instead of the (neg_)ttl; zero means forever.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Returns it without caching it (the seed's negative ttl).
    pub fn uncached(mut self) -> Self {
        self.cache = false;
        self
    }
}

/// What [`Cache::peek`] sees in L2.
#[derive(Debug, PartialEq, Eq)]
pub struct Peek<T> {
    /// Time left before it goes stale: `None` for never, zero once stale.
    pub remaining: Option<Duration>,
    /// How long ago it went stale (the seed's negative ttl): `None` while fresh.
    pub stale_for: Option<Duration>,
    /// The stored value (`None`: a cached miss).
    pub value: Option<PayloadArc<T>>,
    /// Whether it has expired (kept until evicted).
    pub stale: bool,
}

/// A loader for [`Cache::get_bulk`], which may run on another thread.
pub type BulkLoader<'a, T> = Box<dyn FnOnce() -> Result<Loaded<T>, BoxError> + Send + 'a>;

/// How many loaders [`Cache::get_bulk`] runs at a time (the seed's default).
pub const BULK_CONCURRENCY: usize = 3;

/// One operation of [`Cache::get_bulk`].
pub struct BulkOp<'a, T> {
    /// The key.
    pub key: &'a [u8],
    /// Per-call options.
    pub opts: CallOptions,
    /// The loader for a miss, if any.
    pub loader: Option<BulkLoader<'a, T>>,
}

impl<'a, T> BulkOp<'a, T> {
    /// A lookup of `key` with the cache's options and no loader.
    pub fn new(key: &'a [u8]) -> Self {
        Self {
            key,
            opts: CallOptions::default(),
            loader: None,
        }
    }

    /// With `loader` for a miss (its error may be of any type).
    pub fn loader<E: Into<BoxError>>(
        mut self,
        loader: impl FnOnce() -> Result<Loaded<T>, E> + Send + 'a,
    ) -> Self {
        self.loader = Some(Box::new(move || loader().map_err(Into::into)));
        self
    }

    /// With per-call options.
    pub fn opts(mut self, opts: CallOptions) -> Self {
        self.opts = opts;
        self
    }
}

impl<T> fmt::Debug for BulkOp<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BulkOp")
            .field("key", &self.key)
            .field("opts", &self.opts)
            .field("loader", &self.loader.is_some())
            .finish()
    }
}

/// How a value of L2 becomes what L1 keeps and callers get.
pub(crate) type IntoL1<T, V> =
    PayloadArc<dyn Fn(&PayloadArc<T>) -> Result<PayloadArc<V>, Error> + Send + Sync>;

/// A multi-level cache: an L1 per thread (shared by the caches of one name on that thread), L2
/// shared by every cache on the same [`L2`] (isolated by name), L3 a loader run by one caller at
/// a time per key. L2 keeps `T`; L1 keeps `V`, which is `T` unless the cache was made with
/// [`Cache::with_l1_type`] (the seed's `l1_serializer` turning, say, bytes into a parsed object).
pub struct Cache<T, V = T> {
    l2: PayloadArc<L2<T>>,
    ns: Arc<Namespace>,
    /// The separate store for cached misses, and this cache's namespace there.
    misses: Option<(PayloadArc<L2<T>>, Arc<Namespace>)>,
    opts: Options<T>,
    /// `opts` resolved for the calls that override none of them.
    defaults: Resolved,
    /// Where each thread keeps its L1 of this name, and how it makes it.
    slot: l1::Slot,
    shape: l1::Shape,
    into_l1: IntoL1<T, V>,
    /// Whether L1 keeps L2's values as they are (`V` is `T`, no transform): a borrowing read
    /// of L2 then hands out L2's own value.
    identity: bool,
    warnings: AtomicU64,
    /// Keeps the process-wide time ticking while the cache lives, on the system clock.
    _ticking: Option<Ticking>,
}

impl<T, V> fmt::Debug for Cache<T, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("name", &self.ns.name)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

/// What a read of L2 led to.
enum Read<T, V> {
    /// Nothing there.
    Absent,
    /// Answered.
    Fresh(Hit<V>),
    /// Expired but kept: a candidate for resurrection (raw, not transformed).
    Stale(Option<PayloadArc<T>>),
}

/// How one call turns values of L2 into values of L1: a per-call transform, or `None` for the
/// cache's own ([`IntoL1`], skipped where L1 keeps L2's values as they are).
type IntoL1Ref<'a, T, V> =
    Option<&'a (dyn Fn(&PayloadArc<T>) -> Result<PayloadArc<V>, Error> + Sync)>;

/// A miss that needs the loader.
struct Pending<'a, T, V> {
    /// The key's L2 hash (hashed once per operation: L1, stripe and L2 all use it).
    hash: u64,
    stale: Option<Option<PayloadArc<T>>>,
    opts: Resolved,
    into: IntoL1Ref<'a, T, V>,
}

impl<T: Send + Sync + 'static> Cache<T> {
    /// A cache named `name` over `l2`; caches with one name on one L2 share their entries.
    pub fn new(name: &str, l2: PayloadArc<L2<T>>, opts: Options<T>) -> Result<Self, Error> {
        let into_l1: IntoL1<T, T> = match opts.transform.clone() {
            Some(transform) => PayloadArc::new(move |v| transform(v).map_err(Error::Transform)),
            None => PayloadArc::new(|v| Ok(v.clone())),
        };
        let identity = opts.transform.is_none();
        let mut cache = Self::build(name, l2, opts, into_l1)?;
        cache.identity = identity;
        Ok(cache)
    }
}

impl<T: Send + Sync + 'static, V: Send + Sync + 'static> Cache<T, V> {
    /// A cache whose L1 keeps `into_l1`'s answer for each value of L2 (the seed's
    /// `l1_serializer`, with a type of its own): it runs on every promotion into L1, and its
    /// error is returned to the caller as [`Error::Transform`]. `opts.transform` must be unset.
    pub fn with_l1_type<E: Into<BoxError>>(
        name: &str,
        l2: PayloadArc<L2<T>>,
        opts: Options<T>,
        into_l1: impl Fn(&T) -> Result<V, E> + Send + Sync + 'static,
    ) -> Result<Self, Error> {
        if opts.transform.is_some() {
            return Err(Error::InvalidOption(
                "transform: with_l1_type takes the L1 transform",
            ));
        }
        let into_l1: IntoL1<T, V> = PayloadArc::new(move |v| transformed(into_l1(v)));
        Self::build(name, l2, opts, into_l1)
    }

    pub(crate) fn build(
        name: &str,
        l2: PayloadArc<L2<T>>,
        opts: Options<T>,
        into_l1: IntoL1<T, V>,
    ) -> Result<Self, Error> {
        let defaults = opts.validate()?;
        let ns = l2.namespace(name);
        Ok(Self {
            slot: l1::Slot::take::<V>(&ns),
            shape: l1::Shape {
                capacity: opts.l1_capacity,
                second_hit: opts.promotion == Promotion::SecondHit,
            },
            ns,
            misses: opts.miss_store.clone().map(|m| {
                let ns = m.namespace(name);
                (m, ns)
            }),
            l2,
            _ticking: opts.clock.keep_ticking(),
            opts,
            defaults,
            into_l1,
            identity: false,
            warnings: AtomicU64::new(0),
        })
    }

    /// A handle on this thread's L1 of this cache, for reads that skip finding it (about a
    /// quarter of an L1 hit's instructions): see [`Local`].
    pub fn local(&self) -> Local<'_, T, V> {
        Local {
            cache: self,
            l1: self.here(),
        }
    }

    /// The cache's name.
    pub fn name(&self) -> &str {
        &self.ns.name
    }

    /// How many warnings the cache raised (each also goes to [`Options::on_warning`]): a value
    /// that did not fit in L2, a stale value served or resurrected.
    pub fn warnings(&self) -> u64 {
        // Relaxed: a statistic; nothing is published with it.
        self.warnings.load(Ordering::Relaxed)
    }

    /// The value of `key`: from this thread's L1, else L2 (promoted into L1 with its remaining
    /// ttl), else from `loader`, run by one caller at a time per key and stored in L2 and L1.
    /// Without a loader a miss is `Ok` with level [`Level::Miss`]. The loader's error may be of
    /// any type; it comes back as [`Error::Loader`], its source kept.
    #[inline]
    pub fn get<F, E>(
        &self,
        key: &[u8],
        opts: &CallOptions,
        loader: Option<F>,
    ) -> Result<Hit<V>, Error>
    where
        F: FnOnce() -> Result<Loaded<T>, E>,
        E: Into<BoxError>,
    {
        self.get_into(&self.here(), key, opts, loader, None)
    }

    /// [`Cache::get`] with a transform of its own for what this call promotes into L1 (the
    /// seed's per-call `l1_serializer`): its answer is what L1 keeps and this call returns.
    pub fn get_transformed<F, E, E2>(
        &self,
        key: &[u8],
        opts: &CallOptions,
        loader: Option<F>,
        transform: impl Fn(&T) -> Result<V, E2> + Sync,
    ) -> Result<Hit<V>, Error>
    where
        F: FnOnce() -> Result<Loaded<T>, E>,
        E: Into<BoxError>,
        E2: Into<BoxError>,
    {
        self.transformed_into(&self.here(), key, opts, loader, transform)
    }

    /// [`Cache::get_transformed`] on `l1`, this thread's L1.
    fn transformed_into<F, E, E2>(
        &self,
        l1: &RefCell<L1<V>>,
        key: &[u8],
        opts: &CallOptions,
        loader: Option<F>,
        transform: impl Fn(&T) -> Result<V, E2> + Sync,
    ) -> Result<Hit<V>, Error>
    where
        F: FnOnce() -> Result<Loaded<T>, E>,
        E: Into<BoxError>,
        E2: Into<BoxError>,
    {
        let into = |v: &PayloadArc<T>| transformed(transform(v));
        self.get_into(l1, key, opts, loader, Some(&into))
    }

    /// [`Cache::get`] on `l1`, this thread's L1 (found by the caller: see [`Cache::local`]).
    #[inline(always)]
    fn get_into<F, E>(
        &self,
        l1: &RefCell<L1<V>>,
        key: &[u8],
        opts: &CallOptions,
        loader: Option<F>,
        into: IntoL1Ref<'_, T, V>,
    ) -> Result<Hit<V>, Error>
    where
        F: FnOnce() -> Result<Loaded<T>, E>,
        E: Into<BoxError>,
    {
        self.check(opts)?;
        let probe = self.l2.probe(self.ns.id, key);
        self.l2.prefetch(&probe);
        let now = self.now();
        let promote = match self.read_l1(l1, &probe, now, Option::clone) {
            Ok(value) => {
                return Ok(Hit {
                    value,
                    level: Level::L1,
                })
            }
            Err((promote, _)) => promote,
        };
        // The short way of an L2 hit not promoted, straight back (not through what a miss
        // needs to carry to the loader).
        if !promote && into.is_none() {
            if let Some((value, level)) = self.read_in_place(&probe, now, &mut Some(Option::clone))
            {
                return Ok(Hit { value, level });
            }
        }
        self.miss_l1(l1, key, &probe, now, promote, opts, loader, into)
    }

    /// [`Cache::get`] past an L1 miss and the short way: L2, then the loader.
    #[allow(clippy::too_many_arguments)] // get_into's own, split off to keep the hit path short
    fn miss_l1<F, E>(
        &self,
        l1: &RefCell<L1<V>>,
        key: &[u8],
        probe: &Probe<'_>,
        now: u64,
        promote: bool,
        opts: &CallOptions,
        loader: Option<F>,
        into: IntoL1Ref<'_, T, V>,
    ) -> Result<Hit<V>, Error>
    where
        F: FnOnce() -> Result<Loaded<T>, E>,
        E: Into<BoxError>,
    {
        match self.beyond_l1(l1, probe, now, promote, opts, into)? {
            Ok(hit) => Ok(hit),
            Err(pending) => match loader {
                Some(loader) => self.load(l1, key, pending, loader),
                None => Ok(Hit {
                    value: None,
                    level: Level::Miss,
                }),
            },
        }
    }

    /// [`Cache::get`] with the cache's options.
    pub fn get_or_load<E: Into<BoxError>>(
        &self,
        key: &[u8],
        loader: impl FnOnce() -> Result<Loaded<T>, E>,
    ) -> Result<Hit<V>, Error> {
        self.get(key, &CallOptions::default(), Some(loader))
    }

    /// [`Cache::get`] with the cache's options and no loader: L1 or L2, else [`Level::Miss`].
    pub fn get_cached(&self, key: &[u8]) -> Result<Hit<V>, Error> {
        self.get(
            key,
            &CallOptions::default(),
            None::<fn() -> Result<Loaded<T>, BoxError>>,
        )
    }

    /// Runs `read` on the value of `key` in this thread's L1 or in L2, without cloning it
    /// (a get hands out a shared value: two reference count changes, which two threads reading
    /// one key make each other wait for). Returns what `read` returned (`None` for a cached
    /// miss, which `read` does not see) and the level that answered, [`Level::Miss`] when none
    /// did. An L2 hit is promoted as by [`Cache::get`], and `read` then reads the copy L1 keeps;
    /// otherwise it reads L2's own value (transformed first if the cache transforms values),
    /// with this thread pinned to L2's epoch: keep it short.
    ///
    /// # Panics
    /// If `read` uses a cache of this name on this thread (its L1 is borrowed while `read` runs).
    #[inline]
    pub fn get_with<R>(
        &self,
        key: &[u8],
        read: impl FnOnce(&V) -> R,
    ) -> Result<(Option<R>, Level), Error> {
        self.read_with(&self.here(), key, read)
    }

    /// [`Cache::get_with`] on `l1`, this thread's L1.
    #[inline]
    fn read_with<R>(
        &self,
        l1: &RefCell<L1<V>>,
        key: &[u8],
        read: impl FnOnce(&V) -> R,
    ) -> Result<(Option<R>, Level), Error> {
        let probe = self.l2.probe(self.ns.id, key);
        self.l2.prefetch(&probe);
        let now = self.now();
        let read = |value: &Option<PayloadArc<V>>| value.as_deref().map(read);
        let (promote, read) = match self.read_l1(l1, &probe, now, read) {
            Ok(answer) => return Ok((answer, Level::L1)),
            Err(miss) => miss,
        };
        let mut read = Some(read);
        if !promote {
            if let Some(answer) = self.read_in_place(&probe, now, &mut read) {
                return Ok(answer);
            }
        }
        let read = read.take().expect("not read yet");
        match self.read_and_promote(l1, &probe, now, promote, None)? {
            Read::Fresh(hit) => Ok((read(&hit.value), hit.level)),
            Read::Stale(_) | Read::Absent => Ok((None, Level::Miss)),
        }
    }

    /// [`Cache::set`] of a value with the cache's options.
    pub fn put(&self, key: &[u8], value: T) -> Result<(), Error> {
        self.set(key, &CallOptions::default(), Some(value))
    }

    /// [`Cache::get_bulk_with`] [`BULK_CONCURRENCY`] loaders at a time.
    pub fn get_bulk(&self, ops: Vec<BulkOp<'_, T>>) -> Result<Vec<Result<Hit<V>, Error>>, Error> {
        self.get_bulk_with(ops, BULK_CONCURRENCY)
    }

    /// Answers `ops` in order: L1 and L2 hits at once, misses by their loaders, up to
    /// `concurrency` at a time (this thread included; fewer while the process's other bulk
    /// gets hold [`BULK_HELPERS_MAX`](super::BULK_HELPERS_MAX) helper threads). Every miss's
    /// loader runs. A value loaded on one of the call's helper threads lands in L2 and that
    /// thread's L1, so this thread's next get of it is an L2 hit.
    pub fn get_bulk_with(
        &self,
        ops: Vec<BulkOp<'_, T>>,
        concurrency: usize,
    ) -> Result<Vec<Result<Hit<V>, Error>>, Error> {
        if concurrency == 0 {
            return Err(Error::InvalidOption("concurrency must be > 0"));
        }
        let mut results: Vec<Option<Result<Hit<V>, Error>>> = Vec::with_capacity(ops.len());
        let mut jobs = Vec::new();
        let here = self.here();
        for (index, op) in ops.into_iter().enumerate() {
            results.push(
                match (self.lookup(&here, op.key, &op.opts, None), op.loader) {
                    (Ok(Ok(hit)), _) => Some(Ok(hit)),
                    (Err(err), _) => Some(Err(err)),
                    (Ok(Err(_)), None) => Some(Ok(Hit {
                        value: None,
                        level: Level::Miss,
                    })),
                    (Ok(Err(pending)), Some(loader)) => {
                        jobs.push((index, op.key, pending, loader));
                        None
                    }
                },
            );
        }
        // On the thread that runs it: that thread's L1.
        let loaded = bulk::run(jobs, concurrency, |(index, key, pending, loader)| {
            (index, self.load(&self.here(), key, pending, loader))
        });
        for (index, result) in loaded {
            results[index] = Some(result);
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every op answered"))
            .collect())
    }

    /// What L2 holds for `key` (remaining ttl, value, staleness), without running a loader or
    /// touching L1; a stale entry only when `stale` is set.
    pub fn peek(&self, key: &[u8], stale: bool) -> Option<Peek<T>> {
        let now = self.now();
        let probe = self.l2.probe(self.ns.id, key);
        let (entry, is_stale) = self.read_l2(&probe, now, |entry, _| Entry::clone(entry))?;
        if is_stale && !stale {
            return None;
        }
        let expires_at = entry.expires_at();
        Some(Peek {
            remaining: expires_at.map(|at| Duration::from_millis(at.saturating_sub(now))),
            stale_for: expires_at
                .filter(|_| is_stale)
                .map(|at| Duration::from_millis(now - at)),
            value: entry.value,
            stale: is_stale,
        })
    }

    /// Stores `value` (`None`: a cached miss) in L2 and this thread's L1, and invalidates the
    /// other threads' L1 copies. If L2 has no room after the tries, fails and leaves L1 alone.
    pub fn set(&self, key: &[u8], opts: &CallOptions, value: Option<T>) -> Result<(), Error> {
        self.set_shared(key, opts, value.map(PayloadArc::new))
    }

    /// [`Cache::set`] of a value the caller already shares: L2 keeps the caller's
    /// `PayloadArc` (and so does L1, unless the cache transforms values), so the set allocates
    /// nothing of its own once the store recycles its nodes.
    pub fn set_shared(
        &self,
        key: &[u8],
        opts: &CallOptions,
        value: Option<PayloadArc<T>>,
    ) -> Result<(), Error> {
        let opts = self.opts.resolve(opts)?;
        let hash = self.l2.hash(self.ns.id, key);
        let ttl = if value.is_some() {
            opts.ttl
        } else {
            opts.neg_ttl
        };
        let pending = Pending {
            hash,
            stale: None,
            opts,
            into: None,
        };
        self.store(&self.here(), key, &pending, value, ttl, false, true)
            .map(drop)
    }

    /// Removes `key` from L2 and this thread's L1, and invalidates the other threads' copies.
    pub fn delete(&self, key: &[u8]) {
        let probe = self.l2.probe(self.ns.id, key);
        let stripe = Namespace::stripe(probe.hash);
        self.l2.remove(self.ns.id, key, || {
            if !mutant::active(Mutant::DeleteSkipsBump) {
                self.ns.bump(stripe);
            }
        });
        if let Some((misses, ns)) = &self.misses {
            misses.remove(ns.id, key, || self.ns.bump(stripe));
        }
        self.here().borrow_mut().remove(&probe);
    }

    /// Removes every entry of this cache from L2 (other caches on the same store keep theirs)
    /// and every L1 copy. With `flush_expired`, also frees the expired entries of every cache
    /// on the store, as the seed's shared-dict `flush_expired` does.
    pub fn purge(&self, flush_expired: bool) {
        let expired_at = flush_expired.then(|| self.now());
        self.l2.purge(self.ns.id, expired_at);
        if let Some((misses, ns)) = &self.misses {
            misses.purge(ns.id, expired_at);
        }
        if !mutant::active(Mutant::PurgeSkipsBump) {
            self.ns.bump_all();
        }
        self.here().borrow_mut().clear();
    }

    /// Drops this thread's L1 copies that other threads' writes invalidated. Kept for parity
    /// with the seed: `get` already never returns such a copy.
    pub fn update(&self) {
        let generation = |stripe| self.ns.generation(stripe);
        self.here().borrow_mut().sweep(generation);
    }

    /// For property tests: checks the invariants of this thread's L1 (see `L1::validate`) and
    /// of the L2 stores (see [`L2::validate`]).
    ///
    /// # Panics
    /// On the first broken invariant.
    #[doc(hidden)]
    pub fn validate(&self) {
        self.here().borrow().validate();
        self.l2.validate();
        if let Some((misses, _)) = &self.misses {
            misses.validate();
        }
    }

    /// For property tests: the invalidation stripe of `key` (a write of a key drops every
    /// thread's L1 copies of the keys of its stripe).
    #[doc(hidden)]
    pub fn invalidation_stripe(&self, key: &[u8]) -> usize {
        Namespace::stripe(self.l2.hash(self.ns.id, key))
    }

    #[inline(always)]
    fn now(&self) -> u64 {
        self.opts.clock.now_ms()
    }

    /// This thread's L1 of this cache's name.
    #[inline(always)]
    fn here(&self) -> l1::Here<V> {
        l1::this_thread(&self.slot, self.shape)
    }

    /// This call's options: the cache's own, resolved when it was made, unless it overrides any.
    #[inline]
    fn resolve(&self, opts: &CallOptions) -> Result<Resolved, Error> {
        if *opts == CallOptions::default() {
            Ok(self.defaults)
        } else {
            self.opts.resolve(opts)
        }
    }

    /// A value of L2 on its way to a caller (and L1), through `into`.
    #[inline]
    fn to_l1(
        &self,
        value: Option<PayloadArc<T>>,
        into: IntoL1Ref<'_, T, V>,
    ) -> Result<Option<PayloadArc<V>>, Error> {
        match into {
            None if self.identity => Ok(identical(value)),
            None => value.map(|v| (self.into_l1)(&v)).transpose(),
            Some(into) => value.map(|v| into(&v)).transpose(),
        }
    }

    fn warn(&self, warning: Warning<'_>) {
        // Relaxed: a statistic.
        self.warnings.fetch_add(1, Ordering::Relaxed);
        if let Some(hook) = &self.opts.on_warning {
            hook(&warning);
        }
    }

    /// Checks a call's options, on every path, an L1 hit included (the seed lets an L1 hit
    /// through): nothing to check for the cache's own.
    #[inline(always)]
    fn check(&self, opts: &CallOptions) -> Result<(), Error> {
        if *opts != CallOptions::default() {
            self.opts.resolve(opts)?;
        }
        Ok(())
    }

    /// What `read` makes of this thread's L1 copy of `probe`'s key (read at `now`); on a miss,
    /// whether an L2 hit of the key goes into L1, and `read` back.
    #[inline(always)]
    fn read_l1<R, F: FnOnce(&Option<PayloadArc<V>>) -> R>(
        &self,
        l1: &RefCell<L1<V>>,
        probe: &Probe<'_>,
        now: u64,
        read: F,
    ) -> Result<R, (bool, F)> {
        let generation = |stripe| self.ns.generation(stripe);
        match l1.borrow_mut().get(probe, now, generation) {
            l1::Found::Hit(value) => Ok(read(value)),
            l1::Found::Miss { promote } => Err((promote, read)),
        }
    }

    /// L1 then L2: a hit, or what the loader needs to know.
    fn lookup<'a>(
        &self,
        l1: &RefCell<L1<V>>,
        key: &[u8],
        opts: &CallOptions,
        into: IntoL1Ref<'a, T, V>,
    ) -> Result<Result<Hit<V>, Pending<'a, T, V>>, Error> {
        self.check(opts)?;
        let probe = self.l2.probe(self.ns.id, key);
        let now = self.now();
        match self.read_l1(l1, &probe, now, Option::clone) {
            Ok(value) => Ok(Ok(Hit {
                value,
                level: Level::L1,
            })),
            Err((promote, _)) => self.beyond_l1(l1, &probe, now, promote, opts, into),
        }
    }

    /// L2 after an L1 miss (promoting by `promote`): a hit, or what the loader needs to know.
    fn beyond_l1<'a>(
        &self,
        l1: &RefCell<L1<V>>,
        probe: &Probe<'_>,
        now: u64,
        promote: bool,
        opts: &CallOptions,
        into: IntoL1Ref<'a, T, V>,
    ) -> Result<Result<Hit<V>, Pending<'a, T, V>>, Error> {
        if !promote && into.is_none() {
            if let Some((value, level)) = self.read_in_place(probe, now, &mut Some(Option::clone)) {
                return Ok(Ok(Hit { value, level }));
            }
        }
        let stale = match self.read_and_promote(l1, probe, now, promote, into)? {
            Read::Fresh(hit) => return Ok(Ok(hit)),
            Read::Stale(value) => Some(value),
            Read::Absent => None,
        };
        Ok(Err(Pending {
            hash: probe.hash,
            stale,
            opts: self.resolve(opts)?,
            into,
        }))
    }

    /// The short way for an L2 hit that is not promoted, in a cache whose L1 keeps L2's values
    /// as they are: `read` (taken out of its option) runs on the value stored, in place. `None`
    /// (and `read` left) when this takes no short way: another kind of cache, or the value
    /// store holds nothing fresh (then the miss store may, or a stale value is of use).
    #[inline]
    fn read_in_place<R>(
        &self,
        probe: &Probe<'_>,
        now: u64,
        read: &mut Option<impl FnOnce(&Option<PayloadArc<V>>) -> R>,
    ) -> Option<(R, Level)> {
        if !self.identity {
            return None;
        }
        self.l2
            .read_probed(probe, |entry, _| {
                let fresh = !entry.is_stale(now);
                fresh.then(|| {
                    let read = read.take().expect("read once");
                    (read(same(&entry.value)), level(entry))
                })
            })
            .flatten()
    }

    /// Reads L2 (`probe`'s key) and, if `promote`, keeps a fresh value in this thread's L1,
    /// tagged with the generation read before.
    fn read_and_promote(
        &self,
        l1: &RefCell<L1<V>>,
        probe: &Probe<'_>,
        now: u64,
        promote: bool,
        into: IntoL1Ref<'_, T, V>,
    ) -> Result<Read<T, V>, Error> {
        let stripe = Namespace::stripe(probe.hash);
        // Read before L2: a write that lands after it bumps past this tag, so the copy we are
        // about to keep can only be invalidated, never wrongly kept.
        let mut generation = promote.then(|| self.ns.generation(stripe));
        let found = self.read_l2(probe, now, |entry, long_key| Fetched {
            value: entry.value.clone(),
            expires_at: entry.expires_at(),
            level: level(entry),
            long_key: if promote { long_key.clone() } else { None },
        });
        if mutant::active(Mutant::L1TagsAfterL2Read) {
            generation = Some(self.ns.generation(stripe));
        }
        let fetched = match found {
            None => return Ok(Read::Absent),
            Some((fetched, true)) => return Ok(Read::Stale(fetched.value)),
            Some((fetched, false)) => fetched,
        };
        let value = match (fetched.expires_at, generation) {
            // No life left: served, not kept.
            (Some(at), _) if at <= now => self.to_l1(fetched.value, into)?,
            (expires_at, Some(generation)) => {
                let key = l1::Key::new(probe, fetched.long_key);
                let copy = (key, probe.hash);
                self.keep(l1, copy, fetched.value, expires_at, generation, into)?
            }
            (_, None) => self.to_l1(fetched.value, into)?,
        };
        Ok(Read::Fresh(Hit {
            value,
            level: fetched.level,
        }))
    }

    /// What `view` makes of the key's L2 entry, and whether the entry is stale: the value
    /// store's unless it is absent or stale and the miss store holds a fresher one (a miss
    /// cached after the value expired).
    #[inline]
    fn read_l2<R>(
        &self,
        probe: &Probe<'_>,
        now: u64,
        view: impl Fn(&Entry<T>, &Option<PayloadArc<[u8]>>) -> R,
    ) -> Option<(R, bool)> {
        let seen = |entry: &Entry<T>, key: &Option<PayloadArc<[u8]>>| {
            (view(entry, key), entry.is_stale(now))
        };
        let value = self.l2.read_probed(probe, seen);
        if value.as_ref().is_some_and(|(_, stale)| !stale) {
            return value;
        }
        let Some((misses, ns)) = &self.misses else {
            return value;
        };
        match misses.read_probed(&misses.probe(ns.id, probe.key), seen) {
            Some(miss) if value.is_none() || !miss.1 => Some(miss),
            _ => value,
        }
    }

    /// Transforms `value` and keeps it in this thread's L1 for `key` of L2 hash `hash`.
    fn keep(
        &self,
        l1: &RefCell<L1<V>>,
        (key, hash): (l1::Key, u64),
        value: Option<PayloadArc<T>>,
        expires_at: Option<u64>,
        generation: u64,
        into: IntoL1Ref<'_, T, V>,
    ) -> Result<Option<PayloadArc<V>>, Error> {
        let value = self.to_l1(value, into)?;
        let copy = value.clone();
        l1.borrow_mut()
            .insert(key, hash, copy, expires_at, generation);
        Ok(value)
    }

    /// Writes L2 then this thread's L1. A `set` (`strict`) fails when L2 is full, and
    /// invalidates the other threads' copies. A load does neither: if L2 is full the value
    /// is still kept in L1 (with a warning), and, as in the seed, other threads keep what
    /// their L1 holds until it expires.
    #[allow(clippy::too_many_arguments)]
    fn store(
        &self,
        l1: &RefCell<L1<V>>,
        key: &[u8],
        pending: &Pending<'_, T, V>,
        value: Option<PayloadArc<T>>,
        ttl: u64,
        resurrected: bool,
        strict: bool,
    ) -> Result<Option<PayloadArc<V>>, Error> {
        let now = self.now();
        let entry = Entry::new(value.clone(), now, ttl, resurrected);
        let (l2, ns, kind) = match &self.misses {
            Some((misses, ns)) => {
                // The key must not stay in the other store, where it could shadow this write.
                if value.is_some() {
                    misses.remove(ns.id, key, || ());
                    (&self.l2, self.ns.id, StoreKind::Values)
                } else {
                    self.l2.remove(self.ns.id, key, || ());
                    (misses, ns.id, StoreKind::Misses)
                }
            }
            None => (&self.l2, self.ns.id, StoreKind::Values),
        };
        let stripe = Namespace::stripe(pending.hash);
        // Read before the write, as in `read_and_promote`, for a load.
        let mut before = self.ns.generation(stripe);
        let admit = !strict && self.opts.admission == Admission::Frequency;
        let stored = l2.insert(ns, key, entry, pending.opts.tries, admit, || {
            let bump = strict && !mutant::active(Mutant::SetSkipsBump);
            bump.then(|| self.ns.bump(stripe))
        });
        if mutant::active(Mutant::StoreTagsAfterWrite) {
            before = self.ns.generation(stripe);
        }
        let generation = match stored {
            Ok(Some(bumped)) => bumped.unwrap_or(before),
            // Declined by the admission rule: kept in this thread's L1 only, as a load that
            // found L2 full, but without a warning (the rule chose).
            Ok(None) => before,
            Err(err) if strict => return Err(err),
            Err(_) => {
                self.warn(Warning::NoRoom {
                    key,
                    store: kind,
                    tries: pending.opts.tries,
                });
                before
            }
        };
        let expires_at = (ttl > 0).then(|| now.saturating_add(ttl));
        let probe = store::probe(self.ns.id, key, pending.hash);
        self.keep(
            l1,
            (l1::Key::new(&probe, None), pending.hash),
            value,
            expires_at,
            generation,
            pending.into,
        )
    }

    /// The miss path: take the key's lock, re-read L2, run the loader, store its result.
    fn load<F, E>(
        &self,
        l1: &RefCell<L1<V>>,
        key: &[u8],
        pending: Pending<'_, T, V>,
        loader: F,
    ) -> Result<Hit<V>, Error>
    where
        F: FnOnce() -> Result<Loaded<T>, E>,
        E: Into<BoxError>,
    {
        let held = self
            .ns
            .flights
            .acquire(key, pending.hash, &self.opts.clock, pending.opts.lock);
        // Another caller may have loaded it while we waited (or before our lock).
        if held.is_err() || !mutant::active(Mutant::LoaderSkipsRecheck) {
            let probe = store::probe(self.ns.id, key, pending.hash);
            let read = self.read_and_promote(l1, &probe, self.now(), true, pending.into)?;
            if let Read::Fresh(hit) = read {
                return Ok(hit);
            }
        }
        let _held = match held {
            Ok(held) => held,
            // Never run the loader beside the holder: serve the stale value or give up.
            Err(timeout) => {
                return match (&pending.stale, pending.opts.resurrect) {
                    (Some(stale), Some(_)) => {
                        self.warn(Warning::StaleOnLockTimeout { key });
                        Ok(Hit {
                            value: self.to_l1(stale.clone(), pending.into)?,
                            level: Level::Stale,
                        })
                    }
                    _ => Err(timeout),
                };
            }
        };
        let loaded = match panic::catch_unwind(AssertUnwindSafe(loader)) {
            Ok(Ok(loaded)) => loaded,
            Ok(Err(err)) => {
                let err = Error::Loader(LoaderError::new(err));
                return self.resurrect(l1, key, &pending, err);
            }
            // A panic is no answer to stand in for (the seed's callback threw): returned, and
            // the next get runs the loader again.
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic".to_owned());
                return Err(Error::LoaderPanicked(message));
            }
        };
        let value = loaded.value.map(PayloadArc::new);
        if !loaded.cache {
            return Ok(Hit {
                value: self.to_l1(value, pending.into)?,
                level: Level::L3,
            });
        }
        let default_ttl = if value.is_some() {
            pending.opts.ttl
        } else {
            pending.opts.neg_ttl
        };
        let ttl = loaded.ttl.map_or(default_ttl, to_ms);
        let value = self.store(l1, key, &pending, value, ttl, false, false)?;
        Ok(Hit {
            value,
            level: Level::L3,
        })
    }

    /// After a loader failure: puts a stale value back for resurrect_ttl (level 4) if there is
    /// one and resurrection is on, else returns `err`.
    fn resurrect(
        &self,
        l1: &RefCell<L1<V>>,
        key: &[u8],
        pending: &Pending<'_, T, V>,
        err: Error,
    ) -> Result<Hit<V>, Error> {
        let (Some(stale), Some(ttl)) = (&pending.stale, pending.opts.resurrect) else {
            return Err(err);
        };
        self.warn(Warning::Resurrected { key, error: &err });
        let value = self.store(l1, key, pending, stale.clone(), ttl, true, false)?;
        Ok(Hit {
            value,
            level: Level::Stale,
        })
    }
}

/// A handle on the calling thread's L1 of a cache ([`Cache::local`]), which its reads use
/// without looking it up in the thread's table of L1s; they read and write as the cache's own
/// do, with the cache's options by default.
///
/// It borrows its cache, so that the L1 still goes with the last cache of its name, and stays
/// on its thread (it is neither `Send` nor `Sync`). Handles and the cache's own reads may be
/// mixed freely on one thread, several handles too: each read borrows the L1 only while it
/// works on it. The one exception is [`Local::get_with`]'s reader, as [`Cache::get_with`]'s.
///
/// A handle cannot outlive its cache:
///
/// ```compile_fail,E0716
/// # use mcb_core::{sync::PayloadArc, tiers::{Cache, Options, L2}};
/// let l2 = PayloadArc::new(L2::<u64>::new(1 << 20).unwrap());
/// let local = Cache::new("c", l2, Options::default()).unwrap().local();
/// local.get_cached(b"k");
/// ```
///
/// nor go to another thread:
///
/// ```compile_fail,E0277
/// # use mcb_core::{sync::PayloadArc, tiers::{Cache, Options, L2}};
/// let l2 = PayloadArc::new(L2::<u64>::new(1 << 20).unwrap());
/// let cache = Cache::new("c", l2, Options::default()).unwrap();
/// let local = cache.local();
/// std::thread::scope(|s| s.spawn(move || local.get_cached(b"k")).join());
/// ```
pub struct Local<'c, T, V = T> {
    cache: &'c Cache<T, V>,
    l1: l1::Here<V>,
}

impl<T, V> fmt::Debug for Local<'_, T, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Local")
            .field("cache", self.cache)
            .finish_non_exhaustive()
    }
}

impl<T: Send + Sync + 'static, V: Send + Sync + 'static> Local<'_, T, V> {
    /// [`Cache::get`] through this thread's L1 as held.
    #[inline]
    pub fn get<F, E>(
        &self,
        key: &[u8],
        opts: &CallOptions,
        loader: Option<F>,
    ) -> Result<Hit<V>, Error>
    where
        F: FnOnce() -> Result<Loaded<T>, E>,
        E: Into<BoxError>,
    {
        self.cache.get_into(&self.l1, key, opts, loader, None)
    }

    /// [`Cache::get_transformed`] through this thread's L1 as held.
    pub fn get_transformed<F, E, E2>(
        &self,
        key: &[u8],
        opts: &CallOptions,
        loader: Option<F>,
        transform: impl Fn(&T) -> Result<V, E2> + Sync,
    ) -> Result<Hit<V>, Error>
    where
        F: FnOnce() -> Result<Loaded<T>, E>,
        E: Into<BoxError>,
        E2: Into<BoxError>,
    {
        self.cache
            .transformed_into(&self.l1, key, opts, loader, transform)
    }

    /// [`Cache::get_or_load`] through this thread's L1 as held.
    pub fn get_or_load<E: Into<BoxError>>(
        &self,
        key: &[u8],
        loader: impl FnOnce() -> Result<Loaded<T>, E>,
    ) -> Result<Hit<V>, Error> {
        self.get(key, &CallOptions::default(), Some(loader))
    }

    /// [`Cache::get_cached`] through this thread's L1 as held.
    #[inline]
    pub fn get_cached(&self, key: &[u8]) -> Result<Hit<V>, Error> {
        self.get(
            key,
            &CallOptions::default(),
            None::<fn() -> Result<Loaded<T>, BoxError>>,
        )
    }

    /// [`Cache::get_with`] through this thread's L1 as held.
    ///
    /// # Panics
    /// If `read` reads a cache of this name on this thread (its L1 is borrowed while `read`
    /// runs).
    #[inline]
    pub fn get_with<R>(
        &self,
        key: &[u8],
        read: impl FnOnce(&V) -> R,
    ) -> Result<(Option<R>, Level), Error> {
        self.cache.read_with(&self.l1, key, read)
    }
}

/// What a read of L2 copies out of an entry.
struct Fetched<T> {
    value: Option<PayloadArc<T>>,
    expires_at: Option<u64>,
    level: Level,
    /// The node's copy of a long key, when the value is to be kept in L1.
    long_key: Option<PayloadArc<[u8]>>,
}

/// The level of an L2 hit on `entry`: [`Level::Stale`] for one put back by resurrection.
fn level<T>(entry: &Entry<T>) -> Level {
    if entry.resurrected() {
        Level::Stale
    } else {
        Level::L2
    }
}

/// L2's `value` as L1's, for a cache whose `V` is its `T` (`Cache::identity`): a type check
/// the compiler resolves.
fn same<T: Any, V: Any>(value: &Option<PayloadArc<T>>) -> &Option<PayloadArc<V>> {
    (value as &dyn Any)
        .downcast_ref()
        .expect("an identity cache keeps T in L1")
}

/// [`same`] for an owned value.
fn identical<T: Any, V: Any>(value: Option<PayloadArc<T>>) -> Option<PayloadArc<V>> {
    let mut slot = Some(value);
    (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<Option<PayloadArc<V>>>>()
        .and_then(Option::take)
        .expect("an identity cache keeps T in L1")
}

/// A user transform's answer as the cache keeps it.
fn transformed<V, E: Into<BoxError>>(answer: Result<V, E>) -> Result<PayloadArc<V>, Error> {
    answer
        .map(PayloadArc::new)
        .map_err(|err| Error::Transform(err.into().to_string()))
}
