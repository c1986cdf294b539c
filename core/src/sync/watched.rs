//! A plain field whose reads loom checks against its owner's destructor.

/// A field read through `&self` and changed only through `&mut self`, like a plain field. In the
/// std build it is the value itself. Under loom each access is recorded, and [`Watched::get_mut`]
/// (which the owner's destructor calls) counts as a write: a model then reports a read that does
/// not happen before the owner is freed (a use after a concurrent free, which loom does not see
/// for a plain field, since it tracks no memory but its own cells).
#[cfg(not(mcb_loom))]
#[derive(Debug, Default)]
pub struct Watched<T>(T);

#[cfg(not(mcb_loom))]
impl<T> Watched<T> {
    pub const fn new(value: T) -> Self {
        Self(value)
    }

    #[inline(always)]
    pub fn get(&self) -> &T {
        &self.0
    }

    #[inline(always)]
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

/// See the std build's docs.
#[cfg(mcb_loom)]
#[derive(Debug)]
pub struct Watched<T>(loom::cell::UnsafeCell<T>);

// SAFETY: `&Watched<T>` hands out only `&T` (a mutable access needs `&mut Watched<T>`), so
// sharing it is sharing `&T`.
#[cfg(mcb_loom)]
#[allow(unsafe_code)]
unsafe impl<T: Sync> Sync for Watched<T> {}

#[cfg(mcb_loom)]
#[allow(unsafe_code)]
impl<T> Watched<T> {
    pub fn new(value: T) -> Self {
        Self(loom::cell::UnsafeCell::new(value))
    }

    /// The value; loom records a read now.
    pub fn get(&self) -> &T {
        // SAFETY: the only mutable access is `get_mut`, through `&mut self`, which the borrow
        // checker keeps apart from every `&T` handed out here.
        self.0.with(|p| unsafe { &*p })
    }

    /// The value, mutably; loom records a write now.
    pub fn get_mut(&mut self) -> &mut T {
        // SAFETY: `&mut self` is the only access to the value while the result lives.
        self.0.with_mut(|p| unsafe { &mut *p })
    }
}
