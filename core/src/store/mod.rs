//! memcached's item semantics over segments: the store behind the built-in storage engine, in
//! plain Rust (`ffi::storage` maps memcached's engine interface onto it).
//!
//! - The cache's memory is `cache_size` bytes of fixed-size segments (1 MiB), taken from the OS
//!   once and reused, never handed to malloc: an item is one contiguous run in a segment (a
//!   12-byte header with CAS, the key, the value), written where its writer's lane appends.
//!   Items larger than a segment are large objects, charged at their size. The index (tagged
//!   8-byte slots in 64-byte buckets) is charged to `cache_size` too, and grows with the item
//!   count up to a sixteenth of it.
//! - Reads take no lock and write no shared line but a clear frequency bit; every write that
//!   depends on what a key holds (ADD, REPLACE, APPEND, PREPEND, CAS, remove with CAS,
//!   incr/decr, touch) decides under that key's bucket locks, so concurrent updates of one key
//!   never lose one another.
//! - Eviction takes whole segments, oldest first, keeping the small items read since they were
//!   written (copied forward); a segment whose items all died is reused without eviction. A
//!   segment is reused only after a grace period of its own (one per segment, not per item)
//!   and once no counted hold is left on it; its bytes stay charged until then.
//! - Items are [`ItemRef`]s: a caller keeps reading an item after the store replaced, removed,
//!   evicted or flushed it, by a counted hold ([`Store::get`]) or within a pin
//!   ([`Store::get_pinned`]).
//! - CAS values come from one counter: unique and increasing (zero when `use_cas` is off).
//! - Time is the host's, in seconds ([`RelTime`], memcached's `rel_time_t`), read from a
//!   [`Clock`]; expiry times are absolute on that clock (the caller converts what clients send,
//!   as memcached's `realtime` does). Expired items are invisible at once and taken back when
//!   next touched ("reclaimed"), by SCRUB or with their segment; a flush unlinks everything.
//!
//! The folder, bottom up: `seg` (the segment store: memory, index, segments, eviction),
//! `config`, `error` and `clock` (what a store is made with), `item` (a handed-out item),
//! `stats` (per-thread counters), `commands` (the [`Store`] and the classic commands), `meta` (the
//! meta commands and incr/decr), `token` (items as tokens for the C boundary).

mod clock;
mod commands;
mod config;
mod error;
mod item;
mod meta;
mod seg;
mod stats;
mod token;
mod turn;

pub use clock::{Clock, ManualClock};
pub use commands::{end_turn, Pin, Store, StoreOp};
pub use config::{Config, KEY_MAX, PAGE_SIZE};
pub use error::Error;
pub use item::{ItemRef, RelTime, ITEM_OVERHEAD};
pub use meta::{Counted, Delta, Fetch, Fetched, Token};
pub use stats::Stats;

/// The hooks the loom models drive (loom builds only): a test harness, not API.
#[cfg(mcb_loom)]
#[doc(hidden)]
pub use seg::index_model;
