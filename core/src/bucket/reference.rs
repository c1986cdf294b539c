//! [`Ref`]: the RAII form of a reference to a bucket, released on drop. (The RAII form of a
//! call in flight, the [`Lease`](super::Lease), is the registry's.)

use super::engine::Engine;
use super::handle::Handle;
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

    /// The shared handle (for [`Registry::enter`](super::Registry::enter)).
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
