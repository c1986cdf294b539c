//! Buckets: the handle state machine, the registry, connection state and shutdown.
//!
//! The design is Couchbase's `bucket_engine.c` (the seed): every engine call counts itself into
//! the caller's bucket and out again; deleting a bucket moves it RUNNING to STOPPING; the last
//! call out moves it to STOPPED and starts a worker that destroys the engine, unlinks the name,
//! tells the deleting connection, waits for the last reference and frees the bucket. The proofs
//! the seed wrote as comments are in `handle.rs` and `shutdown.rs`, and are checked by the loom
//! models in `model-tests`.
//!
//! The folder, bottom up: `state`, `config`, `name` and `engine` (the [`Engine`] and [`Env`]
//! traits); `clients` (the striped count of calls inside) and `shutdown` (the coordinator of
//! the shutdown workers); `handle` (one bucket); `reference` ([`Ref`]); `registry` (the
//! buckets by name, and the [`Lease`] and [`Hold`] of a call in flight); `connection`.
//! `topkeys` stands apart.

mod clients;
mod config;
mod connection;
mod engine;
mod handle;
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
pub use reference::Ref;
pub use registry::{CreateError, DeleteError, Hold, Lease, Registry};
pub use state::State;
