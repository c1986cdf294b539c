//! mcb-memcached's library: everything but the command-line entry point (`main.rs`), so that
//! its doc tests (which check what must not compile) run.
//!
//! It loads an engine exactly as memcached's engine branch does (see [`engine`]), hands it the
//! server API ([`server_handle`], [`api`], [`conn`], [`config`]), and serves the binary
//! ([`binary`]) and ASCII ([`ascii`]) protocols over TCP or a unix socket ([`server`]: a
//! listener and `-t` event-loop [`worker`]s), with SASL PLAIN ([`sasl`]) and per-tenant
//! counters ([`counters`]). Without `-E` it runs our bucket engine: the `libbucket_engine.so`
//! built with it ([`options::DEFAULT_ENGINE`]).
//!
//! Layers, each module (and folder) using only those before it (`tests/module_graph.rs` checks
//! that no import cycle exists): [`options`] (memcached 1.6's command line, its `-o` keys in
//! `options::extended`), [`config`] (`parse_config`, and the engine configuration the command
//! line composes), [`process`] (privileges, daemon, pid file, limits), `sasl` (SASL and `-Y`
//! passwords), [`counters`], [`codec`] (how answers are encoded); the `api` tables and
//! [`conn`] (the cookie table and the cookies engine calls take), then [`server_handle`] (the
//! handle pointing at them); [`packet`] (whole binary requests for the engine); [`engine`];
//! [`io`] (buffers, values landing in their items, streaming held values); [`session`] (what a
//! protocol handler holds); `text` (the ASCII lines and numbers both command sets share);
//! [`stats`] (the stats groups in memcached's shape); [`ext`] (the engine calls that travel
//! through `unknown_command`); [`binary`] and [`ascii`] (parse, execute, compose); [`worker`]
//! (the event loops); [`server`].

pub mod api;
pub mod ascii;
pub mod binary;
pub mod codec;
pub mod config;
pub mod conn;
pub mod counters;
pub mod engine;
pub mod ext;
pub mod io;
pub mod options;
pub mod packet;
pub mod process;
pub mod sasl;
pub mod server;
pub mod server_handle;
pub mod session;
pub mod stats;
pub mod text;
pub mod worker;
