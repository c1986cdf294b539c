//! The std build of the shim: std's primitives, the real clock and CPU count, crossbeam's global
//! epoch collector. `loom.rs` exports the same names for `--cfg mcb_loom`.

/// Atomics and fences.
pub mod atomic {
    pub use std::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
        Ordering,
    };
}

/// What an access of a handshake needs after the one before it (see
/// [`Ordered::then_load`](super::atomic::Ordered::then_load)): nothing, since under the C++20/Rust memory
/// model two SeqCst accesses of different locations are ordered by the SeqCst total order.
#[inline(always)]
pub(super) fn fence_between(_first: atomic::Ordering, _next: atomic::Ordering) {}

pub use std::sync::Arc;

/// The locks the shim's non-poisoning [`Mutex`](super::Mutex) and [`Condvar`](super::Condvar)
/// wrap.
pub(super) mod raw {
    pub use std::sync::{Condvar, Mutex, MutexGuard};
}

/// Threads.
pub mod thread {
    pub use std::thread::{sleep, spawn, yield_now, Builder, JoinHandle, Scope};

    /// std's scoped threads. (The loom build runs each spawned closure at once on the calling
    /// thread, since loom's threads must be `'static`.)
    pub fn scope<'env, F, R>(f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        #[allow(clippy::disallowed_methods)] // the shim is the one caller
        std::thread::scope(f)
    }

    /// Whether the thread has ended (so its handle can be dropped without joining). (loom's
    /// handles cannot tell: there it says no, and the handle waits for its join.)
    pub fn has_ended<T>(handle: &JoinHandle<T>) -> bool {
        handle.is_finished()
    }
}

/// Time.
pub mod time {
    pub use std::time::{Duration, Instant};

    /// The monotonic clock. (Under loom it stands still: a model must not depend on time
    /// passing, and a clock that moves would make its runs differ.)
    pub fn now() -> Instant {
        #[allow(clippy::disallowed_methods)] // the shim is the one caller
        Instant::now()
    }

    /// Milliseconds on the monotonic clock, read coarsely: on Linux the time of the last timer
    /// tick (`CLOCK_MONOTONIC_COARSE`, 1 to 4 ms old, a few nanoseconds a read where a precise
    /// read costs tens); elsewhere from [`now`]. (Under loom it stands still, as [`now`] does.)
    pub fn coarse_ms() -> u64 {
        #[cfg(target_os = "linux")]
        {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: `ts` is a valid, writable timespec for the call; CLOCK_MONOTONIC_COARSE
            // exists on every Linux the crate runs on (2.6.32 and later), so it cannot fail.
            #[allow(unsafe_code)]
            unsafe {
                libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts)
            };
            // Both fields are non-negative for a monotonic clock.
            (ts.tv_sec as u64) * 1_000 + (ts.tv_nsec as u64) / 1_000_000
        }
        #[cfg(not(target_os = "linux"))]
        {
            static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            let origin = *ORIGIN.get_or_init(now);
            u64::try_from(now().saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
        }
    }
}

/// `UnsafeCell` with loom's closure-based access, so loom can check every access.
#[derive(Debug, Default)]
pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

impl<T> UnsafeCell<T> {
    pub const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// A field read through `&self` and changed only through `&mut self`, like a plain field. In the
/// std build it is the value itself. Under loom each access is recorded, and [`Watched::get_mut`]
/// (which the owner's destructor calls) counts as a write: a model then reports a read that does
/// not happen before the owner is freed (a use after a concurrent free, which loom does not see
/// for a plain field, since it tracks no memory but its own cells).
#[derive(Debug, Default)]
pub struct Watched<T>(T);

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

/// How many CPUs to size per-CPU structures for. (Under loom 1, or `MCB_LOOM_CPUS`.)
pub fn cpu_count() -> usize {
    #[allow(clippy::disallowed_methods)] // the shim is the one caller
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A small number that is stable for the calling thread and differs between the first threads
/// that ask: threads use it to pick a stripe of a [`Striped`](super::Striped) structure.
#[inline]
pub(super) fn thread_index() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    INDEX.with(|slot| {
        let mut index = slot.get();
        if index == usize::MAX {
            // Relaxed: only uniqueness of the ticket matters; nothing is published with it.
            index = NEXT.fetch_add(1, Ordering::Relaxed);
            slot.set(index);
        }
        index
    })
}

/// The claim flags of [`Counts`](super::Counts): flag `n` is set while a thread holds slot
/// number `n`. 256 of them, the most slots a `Counts` has.
pub(super) type Claims = &'static [atomic::AtomicBool];

pub(super) fn claims() -> Claims {
    static CLAIMS: [atomic::AtomicBool; 256] = [const { atomic::AtomicBool::new(false) }; 256];
    &CLAIMS
}

/// Epoch-based reclamation (crossbeam-epoch) behind one type, so loom models can free what a
/// structure retired when the structure goes.
pub mod epoch {
    pub use crossbeam_epoch::{unprotected, Atomic, Guard, Shared};

    /// The reclamation domain of one data structure: crossbeam's global collector, whose pin
    /// is a thread-local operation and allocates nothing. (Under loom each domain has a
    /// collector of its own: the global one does not survive loom's teardown at the end of each
    /// execution, and a private one frees everything retired when it drops.)
    #[derive(Debug, Default)]
    pub struct Domain;

    impl Domain {
        /// Frees what this domain retired as far as the collector can now (used at shutdown,
        /// when no other thread is pinned, so a leak checker sees nothing left).
        pub fn flush(&self) {
            // Each flush moves this thread's garbage to the global queue and advances the
            // epoch at most once; garbage is freed two epochs after it was retired.
            for _ in 0..4 {
                self.pin().flush();
            }
        }

        /// A domain for structures pinned several times per operation: `Domain::default()`.
        /// (Under loom it keeps one participant per model thread, and must then be dropped
        /// inside the model.)
        pub fn per_thread() -> Self {
            Self
        }

        /// Pins the current thread: what it loads stays allocated until the guard drops.
        #[inline]
        pub fn pin(&self) -> Pinned {
            crossbeam_epoch::pin()
        }
    }

    /// A pinned thread (see [`Domain::pin`]).
    pub type Pinned = Guard;

    /// Whether the calling thread is pinned (a grace period it waits for would wait for it).
    pub fn is_pinned() -> bool {
        crossbeam_epoch::is_pinned()
    }
}
