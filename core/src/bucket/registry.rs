//! The registry: bucket names to handles, the default bucket, and the shutdown of both.
//!
//! Lookups read an immutable snapshot of the name map through `sync::ReadMostly`: a thread
//! takes only its own stripe's lock, so lookups share no lock and no written cache line.
//! Writers (create, unlink, destroy: admin operations) serialise on one mutex, copy the map,
//! change the copy and publish it to every stripe; the old map is freed when the last stripe
//! lets go of it.
//!
//! Creating a bucket reserves its name in the map first (state NULL, invisible to `find`) and
//! then loads and initialises the engine with no lock held: a slow engine warming up blocks
//! neither lookups, nor calls, nor the creation of other buckets, and a second create of the
//! same name answers "exists" at once.
//!
//! A call in flight is a [`Lease`] that [`Registry::enter`] hands out; dropping it counts the
//! call out through the registry, which starts the bucket's shutdown when that call was the
//! last one out of a deleted bucket. An item the engine handed out keeps a [`Hold`] (made from
//! the lease of the call that handed it out): not a call, so a delete completes without it,
//! but the engine is destroyed only after the last hold is dropped, or at global destroy.
//!
//! # A delete, step by step
//! The bucket stops taking calls at once (STOPPING). Once the last call is out (STOPPED), its
//! shutdown worker destroys the engine if no item of it is held (the seed's order), unlinks the
//! name (free for a new CREATE, which gets a bucket of its own), and tells the deleting
//! connection. If items are held, the worker then waits for the last one to come back, or for
//! global destroy, and destroys the engine then. Last it waits for the last reference (the
//! connections still attached get the seed's answers meanwhile) and frees the bucket.

use super::config::Config;
use super::engine::{Engine, Env};
use super::handle::Handle;
use super::name::{self, NameError};
use super::reference::Ref;
use super::shutdown::Shutdown;
use super::state::State;
use crate::sync::atomic::{AtomicBool, Ordering};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{thread, Arc, Condvar, Mutex, ReadMostly};
use std::collections::HashMap;
use std::fmt;
use std::ops::Deref;

type Map<E> = HashMap<Box<str>, Arc<Handle<E>>>;

/// Why a bucket could not be created.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum CreateError {
    /// The name is not a valid bucket name.
    InvalidName(NameError),
    /// A bucket of that name exists (in the given state).
    Exists(State),
    /// The engine could not be loaded.
    Load(String),
    /// The engine refused its configuration.
    Init(String),
    /// Global shutdown has begun.
    ShuttingDown,
}

impl fmt::Display for CreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CreateError::InvalidName(e) => write!(f, "Invalid bucket name: {e}"),
            CreateError::Exists(state) => write!(f, "Bucket exists: {state}"),
            CreateError::Load(why) => write!(f, "Failed to load engine: {why}"),
            CreateError::Init(why) => write!(f, "Failed to initialize instance: {why}"),
            CreateError::ShuttingDown => f.write_str("Shutting down"),
        }
    }
}

impl std::error::Error for CreateError {}

/// Why a bucket could not be deleted.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DeleteError {
    /// No RUNNING bucket has that name (the seed's "Not found.").
    NotFound,
}

impl fmt::Display for DeleteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Not found.")
    }
}

impl std::error::Error for DeleteError {}

/// The set of buckets of one bucket engine instance. Cheap to clone (a shared pointer).
pub struct Registry<V: Env> {
    inner: Arc<Inner<V>>,
}

struct Inner<V: Env> {
    env: V,
    config: Config,
    buckets: ReadMostly<Map<V::Engine>>,
    /// Serialises writers of `buckets`; `true` once global destroy has closed the registry.
    writer: Mutex<bool>,
    /// Broadcast (under `writer`) when a bucket being created starts or fails.
    created: Condvar,
    /// Shutdown workers, joined by global destroy.
    workers: Mutex<Vec<thread::JoinHandle<()>>>,
    shutdown: Arc<Shutdown>,
    default: Option<Arc<Handle<V::Engine>>>,
    destroyed: AtomicBool,
}

impl<V: Env> Clone for Registry<V> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<V: Env> fmt::Debug for Registry<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl<V: Env> Registry<V> {
    /// A registry for `config`; loads and initialises the unnamed default bucket when
    /// `config.default_bucket` is set.
    pub fn new(env: V, config: Config) -> Result<Self, CreateError> {
        let shutdown = Arc::new(Shutdown::default());
        let default = if config.default_bucket {
            let engine = env.load(&config.engine).map_err(CreateError::Load)?;
            let handle = Handle::new("", engine, Arc::clone(&shutdown));
            if let Err(why) = handle
                .engine_unguarded()
                .initialize(&config.default_bucket_config)
            {
                handle.engine_unguarded().destroy(false);
                return Err(CreateError::Init(why));
            }
            handle.start();
            Some(Arc::new(handle))
        } else {
            None
        };
        Ok(Self {
            inner: Arc::new(Inner {
                env,
                config,
                buckets: ReadMostly::new(Map::new()),
                writer: Mutex::new(false),
                created: Condvar::new(),
                workers: Mutex::new(Vec::new()),
                shutdown,
                default,
                destroyed: AtomicBool::new(false),
            }),
        })
    }

    /// The configuration this registry was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The unnamed default bucket, if configured (used by connections attached to no bucket).
    pub fn default_bucket(&self) -> Option<&Arc<Handle<V::Engine>>> {
        self.inner.default.as_ref()
    }

    /// A reference to the RUNNING bucket called `name` (the seed's `find_bucket`).
    pub fn find(&self, name: &str) -> Option<Ref<V::Engine>> {
        self.inner.read(|map| map.get(name).and_then(Ref::retain))
    }

    /// References to every RUNNING bucket (the seed's `list_buckets`).
    pub fn list(&self) -> Vec<Ref<V::Engine>> {
        self.inner
            .read(|map| map.values().filter_map(Ref::retain).collect())
    }

    /// Every bucket in the map with its state, RUNNING or not (for the admin's `bucket` stats).
    pub fn states(&self) -> Vec<(String, State)> {
        self.inner.read(|map| {
            map.values()
                .map(|h| (h.name().to_owned(), h.state()))
                .collect()
        })
    }

    /// Creates bucket `name` with the engine `spec` and its `config`, and returns a reference.
    pub fn create(
        &self,
        name: &str,
        spec: &str,
        config: &str,
    ) -> Result<Ref<V::Engine>, CreateError> {
        let name = name::validate(name.as_bytes()).map_err(CreateError::InvalidName)?;
        if mutant::active(Mutant::CreateChecksOutsideLock) {
            if let Some(state) = self.inner.read(|map| map.get(name).map(|h| h.state())) {
                return Err(CreateError::Exists(state));
            }
        }
        let engine = self.inner.env.load(spec).map_err(CreateError::Load)?;
        let handle = Arc::new(Handle::new(name, engine, Arc::clone(&self.inner.shutdown)));
        self.inner.reserve_name(&handle)?;

        if let Err(why) = handle.engine_unguarded().initialize(config) {
            handle.engine_unguarded().destroy(false);
            self.inner.unlink(&handle);
            self.inner.created.notify_all();
            return Err(CreateError::Init(why));
        }
        // Start under the writer lock, so that global destroy either sees it RUNNING (and
        // destroys it) or closed the registry first (and we destroy it here).
        {
            let closed = self.inner.writer.lock();
            self.inner.created.notify_all();
            if !*closed {
                handle.start();
                handle.retain_again();
                return Ok(Ref::adopt(Arc::clone(&handle)));
            }
        }
        handle.engine_unguarded().destroy(false);
        handle.mark_freed();
        Err(CreateError::ShuttingDown)
    }

    /// Waits while bucket `name` is being created by someone else (state NULL in the map), so
    /// that a connection asking for it gets it once it runs (the seed created under its global
    /// lock, so a second connection simply waited).
    pub fn wait_for_creation(&self, name: &str) {
        let mut closed = self.inner.writer.lock();
        while !*closed
            && self
                .inner
                .buckets
                .read(|map| map.get(name).is_some_and(|h| h.state() == State::Null))
        {
            closed = self.inner.created.wait(closed);
        }
    }

    /// Starts deleting bucket `name` on behalf of `cookie` (the seed's DELETE): the bucket stops
    /// taking calls now; once the last call left, a worker unlinks the name and tells `cookie`
    /// through [`Env::notify_deleted`], and destroys the engine before that, or, while items of
    /// it are held, after the last one came back (see the module docs).
    pub fn delete(
        &self,
        name: &str,
        cookie: <V::Engine as Engine>::Cookie,
        force: bool,
    ) -> Result<(), DeleteError> {
        let bucket = self.find(name).ok_or(DeleteError::NotFound)?;
        let outcome = bucket.request_stop(cookie, force);
        if outcome.start_shutdown {
            self.start_shutdown(Arc::clone(bucket.arc()));
        }
        if outcome.stopped {
            Ok(())
        } else {
            Err(DeleteError::NotFound)
        }
    }

    /// Counts a client into `handle` if it is RUNNING (the seed's `get_engine_handle`).
    #[inline]
    pub fn enter<'a>(&'a self, handle: &'a Arc<Handle<V::Engine>>) -> Option<Lease<'a, V>> {
        match handle.enter() {
            Ok(stripe) => Some(Lease::new(self, handle, stripe)),
            Err(start_shutdown) => {
                if start_shutdown {
                    self.start_shutdown(Arc::clone(handle));
                }
                None
            }
        }
    }

    /// Counts a client out of `handle` (explicit form of dropping a [`Lease`]).
    #[inline]
    pub(crate) fn leave(&self, handle: &Arc<Handle<V::Engine>>, stripe: usize) {
        if handle.leave(stripe) {
            self.start_shutdown(Arc::clone(handle));
        }
    }

    /// Spawns the worker that shuts `handle` down (the seed's `engine_shutdown_thread`).
    fn start_shutdown(&self, handle: Arc<Handle<V::Engine>>) {
        let inner = Arc::clone(&self.inner);
        let worker = thread::spawn(move || inner.shut_down(handle));
        let mut workers = self.inner.workers.lock();
        workers.retain(|w| !thread::has_ended(w));
        workers.push(worker);
    }

    /// Waits until every bucket shutdown started so far has ended (each ends once its last
    /// reference is gone, or global destroy began).
    pub fn join_shutdowns(&self) {
        let workers = std::mem::take(&mut *self.inner.workers.lock());
        for worker in workers {
            // A worker that panicked has nothing left to wait for.
            let _ = worker.join();
        }
    }

    /// Global destroy: stops waiting workers (one waiting for held items destroys its engine
    /// now), waits for them, then destroys every engine left (the seed's `bucket_destroy`).
    /// Idempotent. The host calls it once no connection makes calls any more; connections that
    /// still hold references or items keep the memory alive, never an engine.
    pub fn destroy(&self) {
        let inner = &self.inner;
        // AcqRel: the first caller alone proceeds; a later caller sees all of its work.
        if inner.destroyed.swap(true, Ordering::AcqRel) {
            return;
        }
        inner.shutdown.begin_global();
        // Workers now end without waiting (or skip, when they had not begun).
        self.join_shutdowns();
        let left: Vec<_> = {
            let mut closed = inner.writer.lock();
            *closed = true;
            // `take` leaves a map that owns no allocation behind.
            inner.write(|map| std::mem::take(map).into_values().collect())
        };
        for handle in left.iter().chain(inner.default.iter()) {
            if handle.claim_for_destroy() {
                handle.engine_unguarded().destroy(false);
            }
        }
        // The map's references (the default bucket's is the registry's own, kept with it).
        left.iter().for_each(|h| h.release());
    }
}

impl<V: Env> Inner<V> {
    /// Runs `f` on the current name map.
    fn read<R>(&self, f: impl FnOnce(&Map<V::Engine>) -> R) -> R {
        self.buckets.read(f)
    }

    /// Replaces the map with a changed copy; the caller holds the writer lock.
    fn write<R>(&self, f: impl FnOnce(&mut Map<V::Engine>) -> R) -> R {
        let mut next = Map::clone(&self.buckets.current());
        let result = f(&mut next);
        self.buckets.replace(next);
        result
    }

    /// Puts `handle` in the map under its name unless the name is taken.
    fn reserve_name(&self, handle: &Arc<Handle<V::Engine>>) -> Result<(), CreateError> {
        let closed = self.writer.lock();
        if *closed {
            return Err(CreateError::ShuttingDown);
        }
        let existing = if mutant::active(Mutant::CreateChecksOutsideLock) {
            None // the broken variant checked before taking the lock
        } else {
            self.read(|map| map.get(handle.name()).map(|h| h.state()))
        };
        if let Some(state) = existing {
            drop(closed);
            // As the seed: the loser's engine was loaded but never initialised.
            handle.engine_unguarded().destroy(true);
            return Err(CreateError::Exists(state));
        }
        self.write(|map| map.insert(handle.name().into(), Arc::clone(handle)));
        Ok(())
    }

    /// Removes `handle` from the map if it is still there, dropping the map's reference.
    fn unlink(&self, handle: &Arc<Handle<V::Engine>>) {
        let removed = {
            let _writer = self.writer.lock();
            let linked = self.read(|map| {
                map.get(handle.name())
                    .is_some_and(|h| Arc::ptr_eq(h, handle))
            });
            linked && self.write(|map| map.remove(handle.name()).is_some())
        };
        if removed {
            handle.release();
        }
    }

    /// The shutdown worker for one bucket (see "A delete, step by step").
    fn shut_down(&self, handle: Arc<Handle<V::Engine>>) {
        if !self.shutdown.worker_begin() {
            return; // global destroy began first and destroys it with the rest
        }
        let destroy = || handle.engine_unguarded().destroy(handle.force_shutdown());
        // No hold is counted after STOPPED, so a count seen at zero stays zero (handle.rs).
        let held = handle.is_held() && !mutant::active(Mutant::DestroyIgnoresHolds);
        if !held {
            destroy();
        }
        // Unlink first, so the name can be created again while references drain.
        self.unlink(&handle);
        if let Some(cookie) = handle.take_pending_delete() {
            self.env.notify_deleted(cookie);
        }
        if held {
            self.shutdown.wait_while(|| handle.is_held());
            destroy();
        }
        self.shutdown.wait_while(|| handle.is_referenced());
        handle.mark_freed();
        drop(handle);
        self.shutdown.worker_end();
    }
}

/// A call in flight inside a RUNNING bucket; dereferences to the engine and leaves on drop.
/// While it lives, the bucket cannot reach STOPPED, so its engine cannot be destroyed.
pub struct Lease<'a, V: Env> {
    registry: &'a Registry<V>,
    handle: &'a Arc<Handle<V::Engine>>,
    stripe: usize,
}

impl<'a, V: Env> Lease<'a, V> {
    pub(crate) fn new(
        registry: &'a Registry<V>,
        handle: &'a Arc<Handle<V::Engine>>,
        stripe: usize,
    ) -> Self {
        Self {
            registry,
            handle,
            stripe,
        }
    }

    /// The bucket this call is in.
    pub fn handle(&self) -> &Handle<V::Engine> {
        self.handle
    }
}

impl<'a, V: Env> Lease<'a, V> {
    /// Ends this call, keeping its engine as a [`Hold`]: what an item the engine handed out
    /// keeps, so that the engine is destroyed only after the item went back to it, even if the
    /// bucket is deleted meanwhile (the delete completes without waiting for it; see the
    /// module docs). Allocates nothing.
    pub fn into_hold(self) -> Hold<V::Engine> {
        Hold {
            handle: Arc::clone(self.into_counted()),
        }
    }

    /// Ends this call with one more hold counted on its bucket, which the caller gives back
    /// with [`Handle::unhold`] and keeps the handle for until then (a [`Hold`], or a record in
    /// [`HeldItems`](super::HeldItems)).
    pub(crate) fn into_counted(self) -> &'a Arc<Handle<V::Engine>> {
        let handle = self.handle;
        if mutant::active(Mutant::HoldCountedAfterLeave) {
            drop(self);
            handle.hold();
            return handle;
        }
        // Counted while the call is still inside: the shutdown worker, which starts only
        // after the last call left, sees it (see "Held items" in handle.rs).
        handle.hold();
        drop(self);
        handle
    }
}

/// An item's hold on the engine that handed it out (see [`Lease::into_hold`]): the engine
/// stays usable, whatever the bucket's state, until the hold is dropped (or global destroy).
/// Not a call in flight: the bucket may stop, and its delete complete, while holds are out.
pub struct Hold<E: Engine> {
    handle: Arc<Handle<E>>,
}

impl<E: Engine> Hold<E> {
    /// The engine this hold keeps.
    pub fn engine(&self) -> &E {
        self.handle.engine_unguarded()
    }
}

impl<E: Engine> Drop for Hold<E> {
    fn drop(&mut self) {
        self.handle.unhold();
    }
}

impl<E: Engine> fmt::Debug for Hold<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Hold").field(&self.handle.name()).finish()
    }
}

impl<V: Env> Deref for Lease<'_, V> {
    type Target = V::Engine;

    #[inline]
    fn deref(&self) -> &V::Engine {
        self.handle.engine_unguarded()
    }
}

impl<V: Env> Drop for Lease<'_, V> {
    #[inline]
    fn drop(&mut self) {
        self.registry.leave(self.handle, self.stripe);
    }
}

impl<V: Env> fmt::Debug for Lease<'_, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Lease").field(&self.handle.name()).finish()
    }
}
