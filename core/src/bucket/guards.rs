//! RAII forms of the handle's counts: a [`Ref`] releases its reference on drop, a [`Lease`]
//! leaves the engine on drop.

use super::handle::Handle;
use super::registry::Registry;
use super::{Engine, Env};
use crate::sync::Arc;
use std::fmt;
use std::ops::Deref;

/// One reference to a bucket; released on drop.
pub struct Ref<E: Engine>(Arc<Handle<E>>);

impl<E: Engine> Ref<E> {
    /// Takes a reference to `handle` if it is RUNNING.
    pub fn retain(handle: &Arc<Handle<E>>) -> Option<Self> {
        handle.retain().then(|| Self(Arc::clone(handle)))
    }

    /// Wraps a handle whose reference the caller already took.
    pub(crate) fn adopt(handle: Arc<Handle<E>>) -> Self {
        Self(handle)
    }

    /// Turns the reference into a bare handle whose reference the caller now tracks by hand
    /// (released with [`Handle::release`]).
    pub(crate) fn into_arc(self) -> Arc<Handle<E>> {
        let handle = Arc::clone(&self.0);
        handle.retain_again(); // replaces the one `self` gives back as it drops
        handle
    }

    /// The shared handle (for [`Registry::enter`]).
    pub fn arc(&self) -> &Arc<Handle<E>> {
        &self.0
    }
}

impl<E: Engine> Clone for Ref<E> {
    fn clone(&self) -> Self {
        self.0.retain_again();
        Self(Arc::clone(&self.0))
    }
}

impl<E: Engine> Deref for Ref<E> {
    type Target = Handle<E>;

    fn deref(&self) -> &Handle<E> {
        &self.0
    }
}

impl<E: Engine> Drop for Ref<E> {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl<E: Engine> fmt::Debug for Ref<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Ref").field(&self.0.name()).finish()
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

impl<V: Env> Lease<'_, V> {
    /// Keeps this call counted in the bucket after the lease ends, as a [`Hold`]: what an item
    /// the engine handed out keeps, so that the engine is destroyed only after the item went
    /// back to it, even if the bucket is deleted meanwhile (a DELETE waits for a hold as it
    /// waits for a call in flight). Allocates nothing.
    pub fn into_hold(self) -> Hold<V> {
        let hold = Hold {
            registry: self.registry.clone(),
            handle: Arc::clone(self.handle),
            stripe: self.stripe,
        };
        // The count moves to the hold, which counts out when dropped.
        std::mem::forget(self);
        hold
    }
}

/// A call kept open past its return (see [`Lease::into_hold`]): the bucket's engine stays
/// usable, whatever the bucket's state, until the hold is dropped.
pub struct Hold<V: Env> {
    registry: Registry<V>,
    handle: Arc<Handle<V::Engine>>,
    stripe: usize,
}

impl<V: Env> Hold<V> {
    /// The engine this hold keeps.
    pub fn engine(&self) -> &V::Engine {
        self.handle.engine_unguarded()
    }
}

impl<V: Env> Drop for Hold<V> {
    fn drop(&mut self) {
        self.registry.leave(&self.handle, self.stripe);
    }
}

impl<V: Env> fmt::Debug for Hold<V> {
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
