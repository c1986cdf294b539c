//! Cache tiers with lua-resty-mlcache's semantics, for threads instead of nginx workers.
//!
//! - `l1`: a fixed-capacity LRU per thread and cache name, kept with the thread: caches of one
//!   name share it, as mlcache's instances of one name share one LRU per worker.
//! - `l2`: one byte-bounded store shared by every cache, with lock-free reads (crossbeam-epoch)
//!   and S3-FIFO eviction; entries keep their expiry so that stale values can be read back.
//! - `any`: [`AnyValue`], so that one L2 serves caches of different value types.
//! - `flight`: the per-key lock that lets one caller at a time run a loader (L3).
//! - `cache`: [`Cache`], the seed's public API (`get`, `peek`, `set`, `delete`, `purge`,
//!   `update`, `get_bulk`) over the three levels.
//!
//! Times come from a [`Clock`] that tests move by hand, so every ttl rule is tested without
//! sleeping.

mod any;
mod cache;
mod clock;
mod error;
mod flight;
mod l1;
#[allow(unsafe_code)] // epoch-protected reads and reclamation
mod l2;
mod namespace;
mod options;
#[allow(unsafe_code)] // the policy's handles on L2 nodes (`Tracked::freq`)
mod s3fifo;
mod weigh;

pub use any::AnyValue;
pub use cache::{BulkLoader, BulkOp, Cache, Hit, Level, Loaded, Peek, BULK_CONCURRENCY};
pub use clock::Clock;
pub use error::{BoxError, Error, LoaderError, StoreKind, Warning};
pub use l2::L2;
// For the memcached item store (`crate::store`), which builds on L2 directly.
pub(crate) use l2::{Change, Entry};
pub use options::{CallOptions, LockOptions, Options, Transform, WarningHook};
