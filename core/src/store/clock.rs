//! The host's clock, as the store reads it: the [`Clock`] trait, and a [`ManualClock`] for tests.

use super::item::RelTime;
use crate::sync::atomic::{AtomicU32, Ordering};
use crate::sync::Arc;

/// The host's clock, in seconds.
pub trait Clock: Send + Sync {
    /// The current time.
    fn now(&self) -> RelTime;
}

/// A clock that moves only when told to (tests); clones share the time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU32>);

impl ManualClock {
    /// A clock at `start`.
    pub fn new(start: RelTime) -> Self {
        Self(Arc::new(AtomicU32::new(start)))
    }

    /// Moves it forward.
    pub fn advance(&self, seconds: RelTime) {
        // Relaxed: the time publishes nothing; a test orders its own threads.
        self.0.fetch_add(seconds, Ordering::Relaxed);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> RelTime {
        // Relaxed: see `advance`.
        self.0.load(Ordering::Relaxed)
    }
}
