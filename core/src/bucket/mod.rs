//! Buckets: the handle state machine, the registry, connection state and shutdown.
//!
//! The design is Couchbase's `bucket_engine.c` (the seed): every engine call counts itself into
//! the caller's bucket and out again; deleting a bucket moves it RUNNING to STOPPING; the last
//! call out moves it to STOPPED and starts a worker that destroys the engine, unlinks the name,
//! tells the deleting connection, waits for the last reference and frees the bucket. Unlike the
//! seed, an item the engine handed out keeps the engine (a [`Hold`]): the delete still completes
//! as the seed's does (the name is free, the deleter told, LIST no longer shows it), but while
//! a connection holds an item of the engine, the worker destroys it only once the last such
//! item came back (it can still be read, stamped and released), or at global destroy. The
//! proofs the seed wrote as comments are in `handle.rs` and `shutdown.rs`, with the one for
//! held items, and are checked by the loom models in `model-tests`.
//!
//! The folder, bottom up: `state`, `config`, `name` and `engine` (the [`Engine`] and [`Env`]
//! traits); `clients` (the striped count of calls inside) and `shutdown` (the coordinator of
//! the shutdown workers); `handle` (one bucket); `reference` ([`Ref`]); `registry` (the
//! buckets by name, the [`Lease`] of a call in flight and the [`Hold`] of an item handed out);
//! `held` (a connection's [`HeldItems`]); `connection`. `topkeys` stands apart.

mod clients;
mod config;
mod connection;
mod engine;
mod handle;
mod held;
pub mod name;
mod reference;
mod registry;
mod shutdown;
mod state;
pub mod topkeys;

pub use config::Config;
pub use connection::{Connection, Fate, ReserveError};
pub use engine::{Engine, Env};
pub use handle::Handle;
pub use held::HeldItems;
pub use reference::Ref;
pub use registry::{CreateError, DeleteError, Hold, Lease, Registry};
pub use state::State;
