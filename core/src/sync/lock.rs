//! [`Mutex`] and [`Condvar`] over the build's own, without poisoning: a panic in one caller
//! must not wedge every tenant afterwards (the data they guard is kept consistent by its users).

#[cfg(mcb_loom)]
use super::loom as build;
#[cfg(not(mcb_loom))]
use super::std as build;
use build::raw;
use std::sync::PoisonError;
use std::time::Duration;

/// A mutex that ignores poisoning (the data it guards is kept consistent by its users).
#[derive(Debug, Default)]
pub struct Mutex<T>(raw::Mutex<T>);

/// Guard returned by [`Mutex::lock`].
pub type MutexGuard<'a, T> = raw::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    /// `const` in the std build, so that a `static` can hold one (loom's is not: a loom static
    /// is a `loom::lazy_static!`, made anew for each execution of a model).
    #[cfg(not(mcb_loom))]
    pub const fn new(value: T) -> Self {
        Self(raw::Mutex::new(value))
    }

    #[cfg(mcb_loom)]
    pub fn new(value: T) -> Self {
        Self(raw::Mutex::new(value))
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A condition variable paired with [`Mutex`].
#[derive(Debug, Default)]
pub struct Condvar(raw::Condvar);

impl Condvar {
    pub fn new() -> Self {
        Self(raw::Condvar::new())
    }

    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits at most `dur`; returns the guard and whether the wait timed out.
    /// (loom never times out: a model must not depend on a timeout to make progress.)
    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> (MutexGuard<'a, T>, bool) {
        let (guard, res) = self
            .0
            .wait_timeout(guard, dur)
            .unwrap_or_else(PoisonError::into_inner);
        (guard, res.timed_out())
    }

    pub fn notify_one(&self) {
        self.0.notify_one();
    }

    pub fn notify_all(&self) {
        self.0.notify_all();
    }
}
