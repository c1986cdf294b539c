//! [`Striped`]: one value per stripe of threads, each on its own cache line.
//!
//! A counter or lock that every thread writes makes its cache line bounce between all cores.
//! Striping gives each thread the stripe of its [`thread_index`] (threads beyond the stripe
//! count share stripes), so threads on different stripes never write the same line; a rare
//! reader that needs the whole picture visits every stripe. The bucket's client count,
//! [`super::ReadMostly`] and the cache's L1s are built on it (the store's statistics, which a
//! thread writes with no locked instruction, on [`super::Counts`]).

#[cfg(mcb_loom)]
use super::loom as build;
#[cfg(not(mcb_loom))]
use super::std as build;
use build::{cpu_count, thread_index};
use crossbeam_utils::CachePadded;
use std::ops::Index;

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Striped<T> {
    stripes: Box<[CachePadded<T>]>,
}

impl<T> Striped<T> {
    /// Two stripes per CPU (threads usually outnumber CPUs), a power of two, at most 256;
    /// `init` makes each stripe's value.
    pub(crate) fn new(init: impl FnMut() -> T) -> Self {
        Self::with_stripes((cpu_count() * 2).next_power_of_two().min(256), init)
    }

    /// `stripes` stripes (at least one).
    pub(crate) fn with_stripes(stripes: usize, mut init: impl FnMut() -> T) -> Self {
        assert!(stripes > 0, "a striped value needs a stripe");
        Self {
            stripes: (0..stripes).map(|_| CachePadded::new(init())).collect(),
        }
    }

    /// The calling thread's stripe number (index the cell with it).
    #[inline]
    pub(crate) fn own_index(&self) -> usize {
        let (index, len) = (thread_index(), self.stripes.len());
        if len.is_power_of_two() {
            index & (len - 1)
        } else {
            index % len
        }
    }

    /// The calling thread's stripe.
    #[inline]
    pub(crate) fn own(&self) -> &T {
        &self[self.own_index()]
    }

    /// Every stripe, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.stripes.iter().map(|stripe| &**stripe)
    }
}

/// Stripe `index` (one [`Striped::own_index`] returned).
impl<T> Index<usize> for Striped<T> {
    type Output = T;

    #[inline]
    fn index(&self, index: usize) -> &T {
        &self.stripes[index]
    }
}

#[cfg(all(test, not(mcb_loom)))]
mod tests {
    use super::*;
    use crate::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_thread_keeps_its_stripe_and_any_count_of_stripes_works() {
        for stripes in [1, 3, 4] {
            let striped = Striped::with_stripes(stripes, || AtomicUsize::new(0));
            let own = striped.own_index();
            assert!(own < stripes);
            // Relaxed: one thread.
            striped.own().fetch_add(1, Ordering::Relaxed);
            assert_eq!(striped.own_index(), own, "stable for the thread");
            // Relaxed: one thread.
            let counts: Vec<usize> = striped.iter().map(|s| s.load(Ordering::Relaxed)).collect();
            assert_eq!(counts.iter().sum::<usize>(), 1);
            assert_eq!(counts[own], 1);
        }
        assert!(Striped::new(|| ()).iter().count().is_power_of_two());
    }
}
