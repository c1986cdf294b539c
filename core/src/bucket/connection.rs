//! What the bucket engine keeps per host connection (the seed's `engine_specific_t`): the bucket
//! it is attached to and its reservations. (The engine's own per-connection word, a C pointer,
//! is kept by the bucket engine's FFI layer, next to this.)
//!
//! The host owns a connection's state and frees it when told to: [`Connection::disconnect`] and
//! [`Connection::release`] return [`Fate::Free`] to exactly one caller, the last of "the
//! connection closed" and "the last reservation went", in whatever order they come. Unlike the
//! seed, a disconnect while reserved still drops the connection's own reference (the seed kept
//! it, so the bucket could never finish shutting down), and the last release frees the state
//! (the seed leaked it).

use super::engine::{Engine, Env};
use super::handle::Handle;
use super::reference::Ref;
use super::registry::{CreateError, Lease, Registry};
use super::state::State;
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::sync::mutant::{self, Mutant};
use crate::sync::{Arc, Watched};
use std::fmt;

/// The "still connected" bit of the reservation word (the seed's `ES_CONNECTED_FLAG`).
const CONNECTED: u32 = 1 << 31;

/// Who frees a connection's state.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[must_use = "the caller told to free the state must free it"]
pub enum Fate {
    /// Others still use it.
    Keep,
    /// This caller was the last user: free it now.
    Free,
}

/// Why a reservation was refused or could not be returned.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReserveError {
    /// The connection is attached to no bucket and there is no default bucket.
    NoBucket,
    /// The bucket is not RUNNING.
    NotRunning,
    /// `release` without a matching `reserve`.
    NotReserved,
    /// The connection cannot switch buckets while reserved.
    Reserved,
}

impl fmt::Display for ReserveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReserveError::NoBucket => "connection has no bucket",
            ReserveError::NotRunning => "bucket is not running",
            ReserveError::NotReserved => "connection is not reserved",
            ReserveError::Reserved => "connection is reserved",
        })
    }
}

impl std::error::Error for ReserveError {}

/// One host connection's bucket state.
pub struct Connection<E: Engine> {
    /// The attached bucket; while connected, the connection holds one reference to it. Watched:
    /// under loom a read of it that does not happen before the state is freed is reported.
    bucket: Watched<Option<Arc<Handle<E>>>>,
    /// `CONNECTED` while the host connection is open, plus one per reservation.
    reserved: AtomicU32,
}

impl<E: Engine> fmt::Debug for Connection<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connection")
            .field("bucket", &self.bucket().map(|h| h.name()))
            .field("reserved", &self.reservations())
            .finish_non_exhaustive()
    }
}

impl<E: Engine> Connection<E> {
    /// A new connection (ON_CONNECT): attached to the configured default bucket name (created
    /// when missing and `auto_create` allows), else to the unnamed default bucket, if any.
    pub fn connect<V: Env<Engine = E>>(registry: &Registry<V>) -> Self {
        let config = registry.config();
        let bucket = match &config.default_bucket_name {
            Some(name) => find_or_create(registry, name, &config.default_bucket_config),
            None => registry.default_bucket().and_then(Ref::retain),
        };
        Self::attached(bucket)
    }

    /// A connection attached to `bucket` (or to none).
    pub fn attached(bucket: Option<Ref<E>>) -> Self {
        Self {
            bucket: Watched::new(bucket.map(Ref::into_arc)),
            reserved: AtomicU32::new(CONNECTED),
        }
    }

    /// The attached bucket, if any.
    pub fn bucket(&self) -> Option<&Arc<Handle<E>>> {
        self.bucket.get().as_ref()
    }

    /// The user authenticated (ON_AUTH): attach to the bucket named by the user, creating it
    /// with `config` when missing and allowed. A user without a bucket ends up attached to none
    /// (and so uses the default bucket), as in the seed.
    pub fn authenticate<V: Env<Engine = E>>(
        &mut self,
        registry: &Registry<V>,
        user: &str,
        config: Option<&str>,
    ) -> Result<(), ReserveError> {
        self.check_unreserved()?;
        let bucket = find_or_create(registry, user, config.unwrap_or(""));
        self.attach(bucket)
    }

    /// SELECT: attach to the RUNNING bucket `name`. If there is none, the connection is left
    /// attached to no bucket (the seed's behaviour) and `Ok(false)` is returned.
    pub fn select<V: Env<Engine = E>>(
        &mut self,
        registry: &Registry<V>,
        name: &str,
    ) -> Result<bool, ReserveError> {
        self.check_unreserved()?;
        let bucket = registry.find(name);
        let found = bucket.is_some();
        self.attach(bucket)?;
        Ok(found)
    }

    /// Attaches to `bucket` (or to none), dropping the previous bucket's reference. Refused
    /// while reserved: reservations hold the bucket they were taken on.
    pub fn attach(&mut self, bucket: Option<Ref<E>>) -> Result<(), ReserveError> {
        self.check_unreserved()?;
        let old = std::mem::replace(self.bucket.get_mut(), bucket.map(Ref::into_arc));
        if let Some(old) = old {
            old.release();
        }
        Ok(())
    }

    /// Switching buckets is refused while reserved (checked before any side effect).
    fn check_unreserved(&self) -> Result<(), ReserveError> {
        match self.reservations() {
            0 => Ok(()),
            _ => Err(ReserveError::Reserved),
        }
    }

    /// Detaches from `handle` if attached to it (a connection deleting its own bucket).
    pub fn detach_from(&mut self, handle: &Handle<E>) -> Result<(), ReserveError> {
        match self.bucket() {
            Some(mine) if std::ptr::eq(Arc::as_ptr(mine), handle) => self.attach(None),
            _ => Ok(()),
        }
    }

    /// The bucket this connection's calls go to: its own, else the unnamed default.
    fn target<'a, V: Env<Engine = E>>(
        &'a self,
        registry: &'a Registry<V>,
    ) -> Option<&'a Arc<Handle<E>>> {
        self.bucket().or(registry.default_bucket())
    }

    /// Enters the connection's bucket for one call (the seed's `get_engine_handle`): `None`
    /// means the caller gets ENGINE_DISCONNECT.
    #[inline]
    pub fn enter<'a, V: Env<Engine = E>>(
        &'a self,
        registry: &'a Registry<V>,
    ) -> Option<Lease<'a, V>> {
        registry.enter(self.target(registry)?)
    }

    /// Enters only the attached bucket, never the default (the seed's `try_get_engine_handle`,
    /// used by release, item info, set-cas, reset-stats, errinfo and the like).
    #[inline]
    pub fn try_enter<'a, V: Env<Engine = E>>(
        &'a self,
        registry: &'a Registry<V>,
    ) -> Option<Lease<'a, V>> {
        registry.enter(self.bucket()?)
    }

    /// Number of reservations held.
    pub fn reservations(&self) -> u32 {
        // Acquire: pairs with the AcqRel updates; a snapshot for decisions made by the owner.
        self.reserved.load(Ordering::Acquire) & !CONNECTED
    }

    /// Reserves the connection (the seed's `reserve_cookie`): it, and a reference to its bucket,
    /// outlive a disconnect until [`Connection::release`].
    pub fn reserve<V: Env<Engine = E>>(&self, registry: &Registry<V>) -> Result<(), ReserveError> {
        let target = self.target(registry).ok_or(ReserveError::NoBucket)?;
        if !target.retain() {
            return Err(ReserveError::NotRunning);
        }
        // AcqRel: one order of all updates of the word, so exactly one caller sees it reach 0.
        self.reserved.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Returns one reservation (the seed's `release_cookie`). After this call returns `Keep`
    /// the caller must not touch the connection again: a concurrent last user may free it.
    pub fn release<V: Env<Engine = E>>(
        &self,
        registry: &Registry<V>,
    ) -> Result<Fate, ReserveError> {
        // Everything needed after the decrement is taken before it.
        let target = self.target(registry).cloned();
        let mut word = self.reserved.load(Ordering::Acquire);
        loop {
            if word & !CONNECTED == 0 {
                return Err(ReserveError::NotReserved);
            }
            // AcqRel: as in `reserve`; Acquire also makes the freer see all other users' work.
            let order = mutant::ordering(
                Mutant::ReleaseCasRelaxed,
                Ordering::AcqRel,
                Ordering::Relaxed,
            );
            match self
                .reserved
                .compare_exchange_weak(word, word - 1, order, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(now) => word = now,
            }
        }
        if let Some(target) = target {
            target.release();
        }
        Ok(if word - 1 == 0 {
            Fate::Free
        } else {
            Fate::Keep
        })
    }

    /// The host connection closed (ON_DISCONNECT): forwards the event to the attached bucket's
    /// engine, drops the connection's reference, and says whether to free the state now.
    /// After `Keep`, the caller must not touch the connection again.
    pub fn disconnect<V: Env<Engine = E>>(
        &self,
        registry: &Registry<V>,
        cookie: E::Cookie,
    ) -> Fate {
        if let Some(engine) = self.try_enter(registry) {
            engine.disconnect(cookie);
        }
        let late = mutant::active(Mutant::DisconnectReleasesLate);
        if !late {
            self.release_bucket();
        }
        // AcqRel: as in `release`. After this a concurrent release may free the state.
        let before = self.reserved.fetch_sub(CONNECTED, Ordering::AcqRel);
        if late {
            self.release_bucket();
        }
        debug_assert!(before & CONNECTED != 0, "disconnected twice");
        if before == CONNECTED || mutant::active(Mutant::DisconnectIgnoresReservations) {
            Fate::Free
        } else {
            Fate::Keep
        }
    }

    /// Drops the connection's own reference to its bucket.
    fn release_bucket(&self) {
        if let Some(bucket) = self.bucket() {
            bucket.release();
        }
    }
}

impl<E: Engine> Drop for Connection<E> {
    /// A host that drops a connection without disconnecting it must not pin its bucket forever.
    /// (The free's mutable access to `bucket` is what loom checks every user's reads against.)
    fn drop(&mut self) {
        // Relaxed: `&mut self`, nobody else can touch the word.
        let connected = self.reserved.load(Ordering::Relaxed) & CONNECTED != 0;
        if let (true, Some(bucket)) = (connected, &*self.bucket.get_mut()) {
            bucket.release();
        }
    }
}

/// The seed's connect/auth lookup: the RUNNING bucket `name`, or a new one if allowed. A bucket
/// another connection is still creating is waited for (the seed created under its global lock,
/// so there the second connection simply waited), then used.
fn find_or_create<V: Env>(
    registry: &Registry<V>,
    name: &str,
    config: &str,
) -> Option<Ref<V::Engine>> {
    loop {
        if let Some(bucket) = registry.find(name) {
            return Some(bucket);
        }
        let settings = registry.config();
        if !settings.auto_create {
            return None;
        }
        match registry.create(name, &settings.engine, config) {
            Ok(bucket) => return Some(bucket),
            // Someone else is creating it: wait, then look again.
            Err(CreateError::Exists(State::Null)) => registry.wait_for_creation(name),
            // Someone else created it meanwhile: look again.
            Err(CreateError::Exists(State::Running)) => {}
            Err(_) => return None,
        }
    }
}
