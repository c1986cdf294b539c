//! Atomics and fences (the build's), and [`Ordered`], which keeps the steps of a handshake in
//! the SeqCst total order in both builds.

#[cfg(mcb_loom)]
use super::loom as build;
#[cfg(not(mcb_loom))]
use super::std as build;

pub use build::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// An atomic access that later accesses of other locations must follow in the SeqCst total
/// order (the steps of a Dekker handshake: a client's increment, then its load of the state;
/// a leaver's load of the state, then its loads of the stripes). Made by [`ordered`], it hands
/// its ordering to [`Ordered::then`], which makes the next access.
///
/// Under the C++20/Rust memory model two SeqCst accesses of different locations are ordered
/// by the SeqCst total order, so the std build emits nothing. loom does not model that
/// property of SeqCst accesses (tokio-rs/loom#180: it treats them as AcqRel), but it does
/// model SeqCst fences, so under loom `then` puts a SeqCst fence between the two accesses,
/// and only when both are SeqCst. The fence is tied to the accesses it completes: weakening
/// either one's ordering (say, a Relaxed increment) drops the fence, and the model then
/// checks the weaker code that the std build would run. Every access whose order with a
/// later one the code relies on goes through this, not only the store-load steps: loom
/// treats a SeqCst load as an acquire load, so two SeqCst loads need it too.
#[must_use = "the next access of the handshake goes through `then`"]
#[derive(Clone, Copy, Debug)]
pub struct Ordered(Ordering);

/// Makes the access `access` with `order` (it must use the ordering it is given) and returns
/// its result with the token that later accesses follow.
#[inline(always)]
pub fn ordered<R>(order: Ordering, access: impl FnOnce(Ordering) -> R) -> (R, Ordered) {
    (access(order), Ordered(order))
}

impl Ordered {
    /// Makes `access` (of another location, with `order`) after the access this token came
    /// from, in the SeqCst total order when both are SeqCst.
    #[inline(always)]
    pub fn then<R>(self, order: Ordering, access: impl FnOnce(Ordering) -> R) -> (R, Ordered) {
        build::fence_between(self.0, order);
        ordered(order, access)
    }
}
