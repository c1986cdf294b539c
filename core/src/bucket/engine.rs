//! What a bucket needs from its surroundings: the storage [`Engine`] it serves and the [`Env`]
//! that loads engines and tells connections that their delete completed.

use std::fmt;

/// The storage engine behind one bucket. The proxied calls (get, store, ...) are the
/// implementor's own methods, reached through a [`Lease`](super::Lease); this trait holds what
/// the bucket's life needs.
pub trait Engine: Send + Sync + 'static {
    /// How the host names a connection (memcached's cookie).
    type Cookie: Copy + Send + Sync + fmt::Debug + 'static;

    /// Prepares the engine with its configuration string. Runs once, with no lock held.
    fn initialize(&self, config: &str) -> Result<(), String>;

    /// Shuts the engine down. Runs once, when no call is inside and none can enter, and no item
    /// the engine handed out is still held (unless global destroy came first).
    fn destroy(&self, force: bool);

    /// A connection attached to this bucket closed (the engine's ON_DISCONNECT callback, for
    /// engines that registered one). Runs inside a lease.
    fn disconnect(&self, _cookie: Self::Cookie) {}
}

/// What the registry needs from its surroundings: how to load engines, how to tell a host
/// connection that its delete completed.
pub trait Env: Send + Sync + 'static {
    /// The engines this environment loads.
    type Engine: Engine;

    /// Loads (but does not initialise) the engine named by `spec`.
    fn load(&self, spec: &str) -> Result<Self::Engine, String>;

    /// The delete requested by `cookie` completed (memcached's `notify_io_complete`).
    fn notify_deleted(&self, cookie: <Self::Engine as Engine>::Cookie);
}
