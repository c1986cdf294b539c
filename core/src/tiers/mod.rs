//! Cache tiers with lua-resty-mlcache's semantics, for threads instead of nginx workers.
//!
//! The modules, bottom up (each uses only those above it in this list):
//!
//! - `error`, `clock`: the errors and warnings; the [`Clock`] ttls are read on (the system one
//!   a process-wide coarse time that a background thread ticks while a cache on it lives, so
//!   that a get reads the time with one load).
//! - `weigh`: what a value weighs against L2's byte bound by default, and [`AnyValue`], so that
//!   one L2 serves caches of different value types.
//! - `sketch`, `s3fifo`: L2's eviction policy, per shard, and the count of requests its
//!   frequency admission goes by.
//! - `flight`: the per-key lock that lets one caller at a time run a loader (L3), and its
//!   [`LockOptions`].
//! - `namespace`: what the caches of one name share (invalidation generations, loader locks).
//! - `l2`: one byte-bounded store shared by every cache, with lock-free reads (crossbeam-epoch)
//!   and S3-FIFO eviction; entries keep their expiry so that stale values can be read back, and
//!   nodes are recycled after their grace period. It keeps the namespaces of the caches over it.
//! - `l1`: a fixed-capacity LRU per thread and cache name, kept with the thread: caches of one
//!   name share it while one of them lives, as mlcache's instances of one name share one LRU
//!   per worker (and it dies with the last of them). A thread finds it at its cache's slot.
//! - `options`: a cache's [`Options`] (among them the [`Promotion`] rule of L2 hits into L1
//!   and the [`Admission`] rule of loaded values into L2) and the per-call [`CallOptions`].
//! - `bulk`: the threads a bulk get runs its loaders on, bounded process-wide.
//! - `cache`: [`Cache`], the seed's public API (`get`, `peek`, `set`, `delete`, `purge`,
//!   `update`, `get_bulk`) over the three levels, [`Cache::get_with`], a read without a
//!   clone, and [`Local`], a handle on this thread's L1 for reads that skip looking it up.
//! - `any`: [`Cache::of_type`], a cache of one value type over an L2 of [`AnyValue`]s.
//!
//! Times come from a [`Clock`] that tests move by hand, so every ttl rule is tested without
//! sleeping.

mod any;
mod bulk;
mod cache;
#[allow(unsafe_code)] // the ticker's fork hook
mod clock;
mod error;
mod flight;
#[allow(unsafe_code)] // each thread's table of L1s, erased to their slot's value type
mod l1;
#[allow(unsafe_code)] // epoch-protected reads and reclamation
mod l2;
mod namespace;
mod options;
#[allow(unsafe_code)] // the policy's handles on L2 nodes (`Tracked::freq`)
mod s3fifo;
mod sketch;
mod weigh;

pub use bulk::BULK_HELPERS_MAX;
pub use cache::{BulkLoader, BulkOp, Cache, Hit, Level, Loaded, Local, Peek, BULK_CONCURRENCY};
pub use clock::Clock;
pub use error::{BoxError, Error, LoaderError, StoreKind, Warning};
pub use flight::LockOptions;
pub use l2::L2;
pub use options::{Admission, CallOptions, Options, Promotion, Transform, WarningHook};
pub use weigh::AnyValue;
