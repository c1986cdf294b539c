//! mcb-memcached's library: everything but the command-line entry point (`main.rs`), so that
//! its doc tests (which check what must not compile) run.
//!
//! It loads an engine exactly as memcached's engine branch does (see [`engine`]), hands it the
//! server API ([`api`], [`conn`], [`config`]), and serves the binary ([`binary`]) and ASCII
//! ([`ascii`]) protocols over TCP ([`server`]), with SASL PLAIN ([`sasl`]). Without `-E` it
//! runs our bucket engine: the `libbucket_engine.so` built with it ([`options::DEFAULT_ENGINE`]).
//!
//! Layers, each module using only those before it (`tests/module_graph.rs` checks it):
//! `options`, `config`, `io`, `sasl`, [`codec`] (how answers are encoded); the `api` tables and
//! [`conn`] (the cookie table), then [`api`] itself (the handle pointing at them); [`engine`];
//! [`session`] (what a protocol handler holds); [`binary`] and [`ascii`]; [`server`].

pub mod api;
pub mod ascii;
pub mod binary;
pub mod codec;
pub mod config;
pub mod conn;
pub mod engine;
pub mod io;
pub mod options;
pub mod sasl;
pub mod server;
pub mod session;
