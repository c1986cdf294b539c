//! The engine-independent heart of the multi-tenant memcached engine.
//!
//! - [`bucket`]: the bucket handle state machine, the registry of buckets, connection state and
//!   the shutdown of deleted buckets (the design of Couchbase's `bucket_engine.c`).
//! - [`tiers`]: multi-level cache tiers with lua-resty-mlcache's semantics (an L1 per thread
//!   and cache name, a shared lock-free L2, a single-flight loader).
//! - [`store`]: memcached's item semantics (the built-in storage engine) over the L2 tier.
//! - [`sync`]: the std/loom shim every shared-state module goes through.
//!
//! Nothing here knows about C or the memcached wire protocol; `ffi` maps those onto this crate.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bucket;
mod linked_slab;
pub mod store;
pub mod sync;
pub mod tiers;
