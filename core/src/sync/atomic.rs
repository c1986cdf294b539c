//! Atomics and fences (the build's), and [`Ordered`], which keeps the steps of a handshake in
//! the SeqCst total order in both builds.

#[cfg(mcb_loom)]
use super::loom as build;
#[cfg(not(mcb_loom))]
use super::std as build;

pub use build::atomic::{
    fence, AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};

/// An atomic access that later accesses of other locations must follow in the SeqCst total
/// order (the steps of a Dekker handshake: a client's increment, then its load of the state;
/// a leaver's load of the state, then its loads of the stripes). Made by [`Ordered::fetch_add`],
/// [`Ordered::fetch_sub`], [`Ordered::store`] or [`Ordered::load`], it remembers the ordering of the access it made,
/// and [`Ordered::then_load`] makes the next access.
///
/// Under the C++20/Rust memory model two SeqCst accesses of different locations are ordered
/// by the SeqCst total order, so the std build emits nothing. loom does not model that
/// property of SeqCst accesses (tokio-rs/loom#180: it treats them as AcqRel), but it does
/// model SeqCst fences, so under loom `then_load` puts a SeqCst fence between the two accesses,
/// and only when both are SeqCst. The fence is tied to the accesses it completes: the shim
/// itself makes each access with the one ordering it is given (the caller names the atomic and
/// the ordering, never the access), so weakening either one's ordering (say, a Relaxed
/// increment) drops the fence, and the model then checks the weaker code that the std build
/// would run. Every access whose order with a later one the code relies on goes through this,
/// not only the store-load steps: loom treats a SeqCst load as an acquire load, so two SeqCst
/// loads need it too.
#[must_use = "the next access of the handshake goes through `then_load`"]
#[derive(Clone, Copy, Debug)]
pub struct Ordered(Ordering);

/// The atomics a handshake step can access: the build's integer atomics. Sealed: the shim
/// makes the access itself, with the ordering the step was given.
pub trait Step: sealed::Sealed {
    /// The integer it holds.
    type Value: Copy;
    #[doc(hidden)]
    fn step_load(&self, order: Ordering) -> Self::Value;
    #[doc(hidden)]
    fn step_store(&self, v: Self::Value, order: Ordering);
    #[doc(hidden)]
    fn step_fetch_add(&self, v: Self::Value, order: Ordering) -> Self::Value;
    #[doc(hidden)]
    fn step_fetch_sub(&self, v: Self::Value, order: Ordering) -> Self::Value;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! step {
    ($($atomic:ident => $value:ty),*) => {$(
        impl sealed::Sealed for $atomic {}
        impl Step for $atomic {
            type Value = $value;
            #[inline(always)]
            fn step_load(&self, order: Ordering) -> $value {
                self.load(order)
            }
            #[inline(always)]
            fn step_store(&self, v: $value, order: Ordering) {
                self.store(v, order)
            }
            #[inline(always)]
            fn step_fetch_add(&self, v: $value, order: Ordering) -> $value {
                self.fetch_add(v, order)
            }
            #[inline(always)]
            fn step_fetch_sub(&self, v: $value, order: Ordering) -> $value {
                self.fetch_sub(v, order)
            }
        }
    )*};
}
step!(AtomicU8 => u8, AtomicU32 => u32, AtomicU64 => u64, AtomicUsize => usize);

impl Ordered {
    /// `atomic.fetch_add(v, order)`, as the first step of a handshake: returns the value before
    /// with the token the next step follows.
    #[inline(always)]
    pub fn fetch_add<A: Step>(atomic: &A, v: A::Value, order: Ordering) -> (A::Value, Self) {
        (atomic.step_fetch_add(v, order), Self(order))
    }

    /// `atomic.fetch_sub(v, order)`, as the first step of a handshake (see [`Self::fetch_add`]).
    #[inline(always)]
    pub fn fetch_sub<A: Step>(atomic: &A, v: A::Value, order: Ordering) -> (A::Value, Self) {
        (atomic.step_fetch_sub(v, order), Self(order))
    }

    /// `atomic.store(v, order)`, as the first step of a handshake (see [`Self::fetch_add`]).
    #[inline(always)]
    pub fn store<A: Step>(atomic: &A, v: A::Value, order: Ordering) -> Self {
        atomic.step_store(v, order);
        Self(order)
    }

    /// `atomic.load(order)`, as the first step of a handshake (see [`Self::fetch_add`]).
    #[inline(always)]
    pub fn load<A: Step>(atomic: &A, order: Ordering) -> (A::Value, Self) {
        (atomic.step_load(order), Self(order))
    }

    /// `atomic.load(order)` (another location) after the access this token came from, in the
    /// SeqCst total order when both are SeqCst.
    #[inline(always)]
    pub fn then_load<A: Step>(self, atomic: &A, order: Ordering) -> (A::Value, Self) {
        build::fence_between(self.0, order);
        Self::load(atomic, order)
    }
}
