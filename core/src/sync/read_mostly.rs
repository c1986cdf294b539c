//! A read-mostly value: readers take only their own stripe's lock, writers replace every stripe.
//!
//! The scheme of a distributed reader lock ("brlock", as Linux had): each stripe holds a copy of
//! the same `Arc<T>` behind its own mutex (a [`Striped`] value), and a thread reads through its
//! own stripe, so readers on different threads never share a written cache line and never wait
//! for each other. A writer (writers are serialised by their caller) swaps the new value
//! into each stripe in turn; a reader sees the old value or the new one, and once the writer
//! has passed every stripe, only the new one. The old value is freed when the last stripe lets
//! go of it: no deferred reclamation, so nothing is left behind for a leak checker at exit.

use super::lock::Mutex;
#[cfg(mcb_loom)]
use super::loom as build;
#[cfg(not(mcb_loom))]
use super::std as build;
use super::striped::Striped;
use build::Arc;

/// See the module docs.
#[derive(Debug)]
pub struct ReadMostly<T> {
    stripes: Striped<Mutex<Arc<T>>>,
}

impl<T> ReadMostly<T> {
    pub fn new(value: T) -> Self {
        let value = Arc::new(value);
        Self {
            stripes: Striped::new(|| Mutex::new(Arc::clone(&value))),
        }
    }

    /// Runs `f` on the current value, holding only this thread's stripe.
    pub fn read<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let value = self.stripes.own().lock();
        f(&value)
    }

    /// The current value (for a writer building the next one).
    pub fn current(&self) -> Arc<T> {
        Arc::clone(&self.stripes.own().lock())
    }

    /// Publishes `value` to every stripe. Callers serialise their writes.
    pub fn replace(&self, value: T) {
        let value = Arc::new(value);
        for stripe in self.stripes.iter() {
            *stripe.lock() = Arc::clone(&value);
        }
    }
}
