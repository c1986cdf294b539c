//! The one place `core` takes its shared-state primitives from.
//!
//! Built normally, these are std's types; built with `RUSTFLAGS="--cfg mcb_loom"` they are loom's,
//! so the loom models in `model-tests` run the real code (the shape follows tokio's `loom` module).
//! Mutexes here do not poison: a panic in one caller must not wedge every tenant afterwards.
//! A test (core/tests/sync_shim_only.rs) and a clippy `disallowed-methods` rule (core/clippy.toml)
//! keep the rest of the crate on this path. The items mirror std's API of the same name and are
//! documented there.
//!
//! The hooks the loom models drive (the deliberate bugs of `mutant`) are public only in loom
//! builds, and hidden from the docs even there: they are a test harness, not API.

#![allow(missing_docs)]

#[cfg(mcb_loom)]
#[doc(hidden)]
pub mod mutant;
#[cfg(not(mcb_loom))]
#[allow(dead_code)] // some variants are named only on loom-only code paths
pub(crate) mod mutant;
mod read_mostly;
mod striped;
mod watched;

pub use read_mostly::ReadMostly;
pub(crate) use striped::Striped;
pub(crate) use watched::Watched;

#[cfg(not(mcb_loom))]
use std::sync as imp;

#[cfg(mcb_loom)]
use loom::sync as imp;

pub use imp::Arc;
use std::sync::PoisonError;

/// std's `Arc` in every build, for immutable payloads (cached values and keys) whose reference
/// count is part of no protocol a model checks: loom's `Arc` would make every value clone a
/// modelled atomic and report values still parked in the epoch collector's garbage as leaks.
pub use std::sync::Arc as PayloadArc;

/// Atomics and fences.
pub mod atomic {
    #[cfg(mcb_loom)]
    pub use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
    pub use std::sync::atomic::Ordering;
    #[cfg(not(mcb_loom))]
    pub use std::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
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
    // The std build needs no fence, so it never reads the ordering.
    pub struct Ordered(#[cfg_attr(not(mcb_loom), allow(dead_code))] Ordering);

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
            #[cfg(mcb_loom)]
            if self.0 == Ordering::SeqCst
                && order == Ordering::SeqCst
                && !super::mutant::active(super::mutant::Mutant::NoStoreLoadFence)
            {
                fence(Ordering::SeqCst);
            }
            ordered(order, access)
        }
    }
}

/// Threads.
pub mod thread {
    #[cfg(mcb_loom)]
    pub use loom::thread::{spawn, yield_now, JoinHandle};
    #[cfg(not(mcb_loom))]
    pub use std::thread::sleep;
    #[cfg(not(mcb_loom))]
    pub use std::thread::{spawn, yield_now, JoinHandle};

    #[cfg(mcb_loom)]
    pub use inline::Scope;
    #[cfg(not(mcb_loom))]
    pub use std::thread::Scope;

    /// std's scoped threads. loom has none (its threads must be `'static`), so under loom a
    /// scope runs each spawned closure at once on the calling thread: a model then explores the
    /// work itself, not the helper threads that would share it out.
    pub fn scope<'env, F, R>(f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        #[cfg(mcb_loom)]
        {
            f(&Scope::default())
        }
        #[cfg(not(mcb_loom))]
        {
            #[allow(clippy::disallowed_methods)] // the shim is the one caller
            std::thread::scope(f)
        }
    }

    #[cfg(mcb_loom)]
    mod inline {
        use std::marker::PhantomData;

        /// A scope whose threads are the caller (see [`super::scope`]).
        #[derive(Debug, Default)]
        pub struct Scope<'scope, 'env: 'scope>(PhantomData<(&'scope mut &'scope (), &'env ())>);

        impl<'scope> Scope<'scope, '_> {
            /// Runs `f` now, on this thread.
            pub fn spawn<F: FnOnce() + Send + 'scope>(&'scope self, f: F) {
                f();
            }
        }
    }

    /// Whether the thread has ended (so its handle can be dropped without joining). loom's
    /// handles cannot tell: there it says no, and the handle waits for its join.
    pub fn has_ended<T>(handle: &JoinHandle<T>) -> bool {
        #[cfg(mcb_loom)]
        {
            let _ = handle;
            false
        }
        #[cfg(not(mcb_loom))]
        {
            handle.is_finished()
        }
    }
}

/// A mutex that ignores poisoning (the data it guards is kept consistent by its users).
#[derive(Debug, Default)]
pub struct Mutex<T>(imp::Mutex<T>);

/// Guard returned by [`Mutex::lock`].
pub type MutexGuard<'a, T> = imp::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub fn new(value: T) -> Self {
        Self(imp::Mutex::new(value))
    }

    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A condition variable paired with [`Mutex`].
#[derive(Debug, Default)]
pub struct Condvar(imp::Condvar);

impl Condvar {
    pub fn new() -> Self {
        Self(imp::Condvar::new())
    }

    pub fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(guard).unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits at most `dur`; returns the guard and whether the wait timed out.
    /// (loom never times out: a model must not depend on a timeout to make progress.)
    pub fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: std::time::Duration,
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

/// Time.
pub mod time {
    pub use std::time::{Duration, Instant};

    /// The monotonic clock. Under loom it stands still (the first reading, forever): a model
    /// must not depend on time passing, and a clock that moves would make its runs differ.
    pub fn now() -> Instant {
        #[cfg(mcb_loom)]
        {
            static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            #[allow(clippy::disallowed_methods)] // the shim is the one caller
            *START.get_or_init(Instant::now)
        }
        #[cfg(not(mcb_loom))]
        {
            #[allow(clippy::disallowed_methods)] // the shim is the one caller
            Instant::now()
        }
    }

    /// Milliseconds on the monotonic clock, read coarsely: on Linux the time of the last timer
    /// tick (`CLOCK_MONOTONIC_COARSE`, 1 to 4 ms old, a few nanoseconds a read where a precise
    /// read costs tens); elsewhere, and under loom (where it stands still), from [`now`].
    pub fn coarse_ms() -> u64 {
        #[cfg(all(target_os = "linux", not(mcb_loom)))]
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
        #[cfg(not(all(target_os = "linux", not(mcb_loom))))]
        {
            static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
            let origin = *ORIGIN.get_or_init(now);
            u64::try_from(now().saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
        }
    }
}

/// `UnsafeCell` with loom's closure-based access, so loom can check every access.
#[cfg(mcb_loom)]
pub use loom::cell::UnsafeCell;

/// `UnsafeCell` with loom's closure-based access, so loom can check every access.
#[cfg(not(mcb_loom))]
#[derive(Debug, Default)]
pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(mcb_loom))]
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

/// How many CPUs to size per-CPU structures for. Under loom 1 (two stripes, so the models'
/// third thread shares a stripe with another), or `MCB_LOOM_CPUS` (CI's deeper run uses 2: four
/// stripes, one per thread, where other interleavings lie).
pub fn cpu_count() -> usize {
    #[cfg(mcb_loom)]
    {
        std::env::var("MCB_LOOM_CPUS")
            .ok()
            .and_then(|cpus| cpus.parse().ok())
            .unwrap_or(1)
    }
    #[cfg(not(mcb_loom))]
    {
        #[allow(clippy::disallowed_methods)] // the shim is the one caller
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// A small number that is stable for the calling thread and differs between the first threads
/// that ask: threads use it to pick a stripe of a [`Striped`] structure.
#[inline]
pub(crate) fn thread_index() -> usize {
    #[cfg(not(mcb_loom))]
    {
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
    #[cfg(mcb_loom)]
    {
        use std::cell::Cell;
        loom::lazy_static! {
            static ref NEXT: loom::sync::atomic::AtomicUsize = loom::sync::atomic::AtomicUsize::new(0);
        }
        loom::thread_local! {
            static INDEX: Cell<usize> = Cell::new(usize::MAX);
        }
        INDEX.with(|slot| {
            let mut index = slot.get();
            if index == usize::MAX {
                // Relaxed: only uniqueness of the ticket matters; nothing is published with it.
                index = NEXT.fetch_add(1, atomic::Ordering::Relaxed);
                slot.set(index);
            }
            index
        })
    }
}

/// Epoch-based reclamation (crossbeam-epoch) behind one type, so loom models can free what a
/// structure retired when the structure goes.
#[allow(unsafe_code)] // loom builds only: the per-thread participant slots
pub(crate) mod epoch {
    pub use crossbeam_epoch::{unprotected, Atomic, Guard, Owned, Shared};

    /// The reclamation domain of one data structure.
    ///
    /// In std builds this is crossbeam's global collector: pinning it is a thread-local
    /// operation and allocates nothing. Under loom each domain has a collector of its own
    /// (registered per pin), because the global one does not survive loom's teardown at the
    /// end of each execution, and a private one frees everything retired when it drops.
    #[derive(Debug, Default)]
    pub struct Domain {
        #[cfg(mcb_loom)]
        collector: crossbeam_epoch::Collector,
        #[cfg(mcb_loom)]
        participants: Option<Participants>,
    }

    impl Domain {
        /// Frees what this domain retired as far as the collector can now (used at shutdown,
        /// when no other thread is pinned, so a leak checker sees nothing left). Under loom it
        /// does nothing: the domain's own collector frees everything when the domain drops, and
        /// forcing collections inside a model made loom's replay of it diverge.
        pub fn flush(&self) {
            // Each flush moves this thread's garbage to the global queue and advances the
            // epoch at most once; garbage is freed two epochs after it was retired.
            #[cfg(not(mcb_loom))]
            for _ in 0..4 {
                self.pin().flush();
            }
        }

        /// A domain for structures pinned several times per operation. Under loom it keeps one
        /// participant per model thread (made on the thread's first pin), which saves every
        /// pin a participant list insertion and removal for loom to explore; the domain must
        /// then be dropped inside the model. In std builds, `Domain::default()`.
        pub fn per_thread() -> Self {
            #[cfg(mcb_loom)]
            {
                Self {
                    collector: crossbeam_epoch::Collector::new(),
                    participants: Some(Participants::default()),
                }
            }
            #[cfg(not(mcb_loom))]
            {
                Self::default()
            }
        }

        /// Pins the current thread: what it loads stays allocated until the guard drops.
        #[inline]
        pub fn pin(&self) -> Pinned {
            #[cfg(mcb_loom)]
            {
                model::pin();
                let Some(participants) = &self.participants else {
                    return Pinned(self.collector.register().pin());
                };
                Pinned(participants.0[super::thread_index()].with_mut(|slot| {
                    // SAFETY: this thread's own slot (see `Participants`).
                    let slot = unsafe { &mut *slot };
                    slot.get_or_insert_with(|| self.collector.register()).pin()
                }))
            }
            #[cfg(not(mcb_loom))]
            {
                crossbeam_epoch::pin()
            }
        }
    }

    /// A pinned thread (see [`Domain::pin`]); under loom also counted by the models' collector.
    #[cfg(not(mcb_loom))]
    pub type Pinned = Guard;

    /// A pinned thread (see [`Domain::pin`]); under loom also counted by the models' collector.
    #[cfg(mcb_loom)]
    #[derive(Debug)]
    pub struct Pinned(Guard);

    #[cfg(mcb_loom)]
    impl std::ops::Deref for Pinned {
        type Target = Guard;

        fn deref(&self) -> &Guard {
            &self.0
        }
    }

    #[cfg(mcb_loom)]
    impl Pinned {
        /// Unpins while `f` runs (crossbeam's `Guard::repin_after`), for the models' collector
        /// too.
        pub fn repin_after<R>(&mut self, f: impl FnOnce() -> R) -> R {
            model::unpin();
            let result = self.0.repin_after(f);
            model::pin();
            result
        }
    }

    #[cfg(mcb_loom)]
    impl Drop for Pinned {
        fn drop(&mut self) {
            model::unpin();
        }
    }

    #[cfg(mcb_loom)]
    pub use model::mark_freed_when_unpinned;

    /// The models' collector. crossbeam's collector frees nothing while a model's threads run
    /// (a thread's bag holds 64 retired nodes before it is even offered for collection), so a
    /// model could never see a node freed under a reader. This one marks a retired node freed
    /// at the end of its grace period, the earliest moment any epoch collector may free it:
    /// once every thread that was pinned when the node was retired has unpinned (threads that
    /// pin later do not count: they can no longer reach an unlinked node). A reader that then
    /// uses the node panics (`check_live` in the L2).
    #[cfg(mcb_loom)]
    mod model {
        use crate::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
        use crate::sync::{thread_index, Mutex};

        /// The freed flag of a retired node, and the threads (a bit per thread index) whose
        /// pins it still waits for.
        struct Retired(*const AtomicBool, u32);

        // SAFETY: the flag lives in a retired node, which crossbeam frees only when its domain
        // drops, after every guard (and so every mark below) is gone.
        unsafe impl Send for Retired {}

        fn mark(freed: *const AtomicBool) {
            // SAFETY: see `Send`.
            let flag = unsafe { &*freed };
            // SeqCst: test instrumentation, read by `check_live` with SeqCst.
            flag.store(true, Ordering::SeqCst);
        }

        const THREADS: usize = 16;

        loom::lazy_static! {
            /// Per thread index: how many guards the thread holds.
            static ref PINS: Vec<AtomicUsize> = (0..THREADS).map(|_| AtomicUsize::new(0)).collect();
            static ref RETIRED: Mutex<Vec<Retired>> = Mutex::new(Vec::new());
        }

        pub(super) fn pin() {
            // SeqCst, then a SeqCst fence before the thread's loads: the Dekker handshake with
            // `mark_freed_when_unpinned` (as crossbeam's own pin): either the retirer sees this
            // pin, or this thread's loads see the unlink that preceded the retirement.
            PINS[thread_index()].fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
        }

        pub(super) fn unpin() {
            let me = thread_index();
            // SeqCst: as in `pin`.
            if PINS[me].fetch_sub(1, Ordering::SeqCst) == 1 {
                let mut retired = RETIRED.lock();
                for node in retired.iter_mut() {
                    node.1 &= !(1 << me);
                }
                retired.retain(|node| {
                    if node.1 == 0 {
                        mark(node.0);
                    }
                    node.1 != 0
                });
            }
        }

        /// Marks `freed` (the flag of a node just unlinked and retired) once every thread pinned
        /// now has unpinned.
        pub fn mark_freed_when_unpinned(freed: &AtomicBool) {
            let mut retired = RETIRED.lock();
            // SeqCst fence, then SeqCst loads: the retirer's side of the handshake in `pin`.
            fence(Ordering::SeqCst);
            let waits_for = (0..THREADS)
                .filter(|&i| PINS[i].load(Ordering::SeqCst) > 0)
                .fold(0u32, |set, i| set | 1 << i);
            if waits_for == 0 {
                mark(freed);
            } else {
                retired.push(Retired(freed, waits_for));
            }
        }
    }

    /// Slot `i` holds the participant of the model thread whose `thread_index` is `i`.
    #[cfg(mcb_loom)]
    struct Participants(Box<[super::UnsafeCell<Option<crossbeam_epoch::LocalHandle>>]>);

    #[cfg(mcb_loom)]
    impl Default for Participants {
        fn default() -> Self {
            const MODEL_THREADS: usize = 16;
            Self(
                (0..MODEL_THREADS)
                    .map(|_| super::UnsafeCell::new(None))
                    .collect(),
            )
        }
    }

    #[cfg(mcb_loom)]
    impl std::fmt::Debug for Participants {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Participants")
        }
    }

    // SAFETY: a slot is only used by its own thread (see `Domain::pin`), or by whoever drops
    // the domain, once no thread uses it; a participant never leaves its slot.
    #[cfg(mcb_loom)]
    unsafe impl Send for Participants {}
    // SAFETY: as above.
    #[cfg(mcb_loom)]
    unsafe impl Sync for Participants {}
}
