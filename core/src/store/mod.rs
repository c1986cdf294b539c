//! memcached's item semantics over the shared cache tier: the store behind the built-in storage
//! engine, in plain Rust (`ffi::storage` maps memcached's engine interface onto it).
//!
//! - Items live in an [`L2`]: reads take no lock (crossbeam-epoch), writes
//!   take their key's shard lock, eviction is S3-FIFO, so an item read recently outlives
//!   untouched items stored before it and the oldest untouched items go first.
//! - Every write that depends on what a key holds (ADD, REPLACE, APPEND, PREPEND, CAS, remove
//!   with CAS, incr/decr, touch) decides under that key's shard lock ([`L2`]'s `update`), so
//!   concurrent updates of one key never lose one another.
//! - Items are [`ItemRef`]s (reference counted): a caller keeps reading an item after the store
//!   replaced, removed, evicted or flushed it.
//! - CAS values come from one counter: unique and increasing (zero when `use_cas` is off).
//! - Time is the host's, in seconds ([`RelTime`], memcached's `rel_time_t`), read from a
//!   [`Clock`]; expiry times are absolute on that clock (the caller converts what clients send,
//!   as memcached's `realtime` does). Expired and flushed items are invisible at once and their
//!   memory is taken back when next touched ("reclaimed") or evicted.
//! - `cache_size` bounds the bytes of all items; like memcached, which allocates whole 1 MiB
//!   slab pages, a smaller cache still holds one page, so that any item up to `item_size_max`
//!   can be stored while eviction is on.
//!
//! The folder, bottom up: `item` (an item and its bytes), `config`, `error` and `clock` (what a
//! store is made with), `stats` (striped counters), `commands` (the [`Store`] and the classic
//! commands), `meta` (the meta commands and incr/decr).
//!
//! [`L2`]: crate::tiers::L2

mod clock;
mod commands;
mod config;
mod error;
mod item;
mod meta;
mod stats;

pub use clock::{Clock, ManualClock};
pub use commands::{Store, StoreOp};
pub use config::{Config, KEY_MAX, PAGE_SIZE};
pub use error::Error;
pub use item::{Bytes, Item, ItemRef, RelTime, ITEM_OVERHEAD};
pub use meta::{Counted, Delta, Fetch, Fetched, Token};
pub use stats::Stats;
