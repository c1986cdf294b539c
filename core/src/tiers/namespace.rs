//! What the caches of one name share besides their L2 entries: the invalidation generations
//! that keep every thread's L1 honest, and the loader locks. (Each thread's L1 for the name
//! lives with the thread: see `l1::this_thread`.)

use super::flight::Flights;
use crate::sync::atomic::{AtomicU64, Ordering};

/// Generation stripes: a write bumps its key's stripe, which invalidates the L1 copies of the
/// keys in that stripe (in every thread) and nothing else. With 2^14 stripes a write drops
/// about 1 in 16,384 of the other keys' copies (the `false_invalidation` test measures it),
/// for 128 KiB per name; the counters are not padded: a write touches one, a hit reads one.
#[cfg(not(mcb_loom))]
const STRIPES: usize = 1 << 14;
#[cfg(mcb_loom)]
const STRIPES: usize = 2;

/// One cache name within an L2 store.
#[derive(Debug)]
pub(crate) struct Namespace {
    pub id: u32,
    pub name: Box<str>,
    generations: Box<[AtomicU64]>,
    pub flights: Flights,
}

impl Namespace {
    pub(crate) fn new(id: u32, name: &str) -> Self {
        Self {
            id,
            name: name.into(),
            generations: (0..STRIPES).map(|_| AtomicU64::new(0)).collect(),
            flights: Flights::new(),
        }
    }

    /// The stripe of a key, from its L2 hash (high bits: the low ones pick the L2 shard).
    #[inline]
    pub(crate) fn stripe(hash: u64) -> usize {
        (hash >> 40) as usize % STRIPES
    }

    /// The stripe's current generation.
    #[inline]
    pub(crate) fn generation(&self, stripe: usize) -> u64 {
        // Acquire: pairs with the Release in `bump`; a thread that sees a bump also sees the L2
        // write before it, so a promotion tagged with this generation read newer data.
        self.generations[stripe].load(Ordering::Acquire)
    }

    /// Invalidates the stripe's L1 copies; returns the new generation.
    pub(crate) fn bump(&self, stripe: usize) -> u64 {
        // Release: pairs with the Acquire in `generation`; publishes the L2 write made before.
        self.generations[stripe].fetch_add(1, Ordering::Release) + 1
    }

    /// Invalidates every L1 copy (purge).
    pub(crate) fn bump_all(&self) {
        for stripe in 0..STRIPES {
            self.bump(stripe);
        }
    }
}
