//! mcb-memcached's library: everything but the command-line entry point (`main.rs`), so that
//! its doc tests (which check what must not compile) run.
//!
//! It loads an engine exactly as memcached's engine branch does (see [`engine`]), hands it the
//! server API ([`api`], [`conn`], [`config`]), and serves the binary ([`binary`]) and ASCII
//! ([`ascii`]) protocols over TCP or a unix socket ([`server`]: a listener and `-t` event-loop
//! [`worker`]s), with SASL PLAIN ([`sasl`]) and per-tenant counters ([`counters`]). Without `-E` it
//! runs our bucket engine: the `libbucket_engine.so` built with it ([`options::DEFAULT_ENGINE`]).

pub mod api;
pub mod ascii;
pub mod binary;
pub mod codec;
pub mod config;
pub mod conn;
pub mod counters;
pub mod engine;
pub mod io;
pub mod options;
pub mod sasl;
pub mod server;
pub mod session;
pub mod worker;
