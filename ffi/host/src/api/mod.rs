//! The tables of the server API every engine gets from `get_server_api`, with memcached's
//! meaning, one module per table: [`server_core`] (clock, expiry conversion, version, hash,
//! `parse_config`, shutdown, the host's own settings), [`stat`] (per-engine stats blocks),
//! [`extension`] (extensions and the current logger, ours being [`logger`]), [`callback`]
//! (connection events), [`log`] (the log API) and, for v2.5.1, [`hooks`] (allocator hooks).
//! The cookie table is [`crate::conn`]'s, and the handle pointing at them all is
//! [`crate::server_handle`]'s: this folder is below both.
//!
//! Each table module keeps its own state.

pub mod callback;
pub mod extension;
#[cfg(not(feature = "engine-pu"))]
pub mod hooks;
pub mod log;
pub mod logger;
pub mod server_core;
pub mod stat;
