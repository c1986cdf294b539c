//! The loom build of the shim (`--cfg mcb_loom`): loom's primitives, so that the models in
//! `model-tests` run the real code; a clock that stands still and a fixed CPU count, so that
//! a model's runs do not differ; scoped threads run inline; an epoch collector per domain that
//! the models can see free nodes. `std.rs` exports the same names for the std build.

use super::mutant::{self, Mutant};

/// Atomics and fences.
pub mod atomic {
    pub use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU16, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
    };
    pub use std::sync::atomic::Ordering;
}

/// What an access of a handshake needs after the one before it (see
/// [`Ordered::then_load`](super::atomic::Ordered::then_load)): loom does not model the SeqCst total order
/// of accesses to different locations (tokio-rs/loom#180: it treats them as AcqRel), but it
/// does model SeqCst fences, so a SeqCst fence when both accesses are SeqCst.
#[inline(always)]
pub(super) fn fence_between(first: atomic::Ordering, next: atomic::Ordering) {
    use atomic::Ordering::SeqCst;
    if first == SeqCst && next == SeqCst && !mutant::active(Mutant::NoStoreLoadFence) {
        atomic::fence(SeqCst);
    }
}

pub use loom::sync::Arc;

/// The locks the shim's non-poisoning [`Mutex`](super::Mutex) and [`Condvar`](super::Condvar)
/// wrap.
pub(super) mod raw {
    pub use loom::sync::{Condvar, Mutex, MutexGuard};
}

/// Threads.
pub mod thread {
    pub use inline::Scope;
    pub use loom::thread::{spawn, yield_now, JoinHandle};

    /// Scoped threads. loom has none (its threads must be `'static`), so a scope runs each
    /// spawned closure at once on the calling thread: a model then explores the work itself,
    /// not the helper threads that would share it out.
    pub fn scope<'env, F, R>(f: F) -> R
    where
        F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
    {
        f(&Scope::default())
    }

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

    /// Whether the thread has ended: loom's handles cannot tell, so no, and the handle waits
    /// for its join.
    pub fn has_ended<T>(handle: &JoinHandle<T>) -> bool {
        let _ = handle;
        false
    }
}

/// Time.
pub mod time {
    pub use std::time::{Duration, Instant};

    /// The monotonic clock, standing still (the first reading, forever): a model must not
    /// depend on time passing, and a clock that moves would make its runs differ.
    pub fn now() -> Instant {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        #[allow(clippy::disallowed_methods)] // the shim is the one caller
        *START.get_or_init(Instant::now)
    }

    /// Milliseconds on the monotonic clock, from [`now`]: standing still.
    pub fn coarse_ms() -> u64 {
        static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        let origin = *ORIGIN.get_or_init(now);
        u64::try_from(now().saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
    }
}

/// `UnsafeCell` with loom's closure-based access, so loom can check every access.
pub use loom::cell::UnsafeCell;

/// A plain field whose reads loom checks against its owner's destructor (see the std build's
/// docs): each access is recorded, and [`Watched::get_mut`] counts as a write.
#[derive(Debug)]
pub struct Watched<T>(loom::cell::UnsafeCell<T>);

// SAFETY: `&Watched<T>` hands out only `&T` (a mutable access needs `&mut Watched<T>`), so
// sharing it is sharing `&T`.
#[allow(unsafe_code)]
unsafe impl<T: Sync> Sync for Watched<T> {}

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

/// A record of the accesses to memory that the code reads and writes through atomics (the
/// segment store's bytes), so that loom checks their causality as it would plain accesses': a
/// write with no happens-before from an earlier read or write of the same place is reported.
/// It adds no synchronisation (the loom build's only; the std build has nothing to record).
#[derive(Debug)]
pub struct AccessLog(loom::cell::UnsafeCell<()>);

// SAFETY: the cell holds `()`: nothing is read or written through it, only its accesses are
// recorded, in loom's runtime, which every model thread shares.
#[allow(unsafe_code)]
unsafe impl Sync for AccessLog {}

impl AccessLog {
    pub fn new() -> Self {
        Self(loom::cell::UnsafeCell::new(()))
    }

    /// Records a read now.
    pub fn read(&self) {
        self.0.with(|_| ());
    }

    /// Records a write now.
    pub fn write(&self) {
        self.0.with_mut(|_| ());
    }
}

/// How many CPUs to size per-CPU structures for: 1 (two stripes, so the models' third thread
/// shares a stripe with another), or `MCB_LOOM_CPUS` (CI's deeper run uses 2: four stripes,
/// one per thread, where other interleavings lie).
pub fn cpu_count() -> usize {
    std::env::var("MCB_LOOM_CPUS")
        .ok()
        .and_then(|cpus| cpus.parse().ok())
        .unwrap_or(1)
}

/// A small number that is stable for the calling model thread and differs between the first
/// threads that ask: threads use it to pick a stripe of a [`Striped`](super::Striped)
/// structure.
#[inline]
pub(super) fn thread_index() -> usize {
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

/// The claim flags of [`Counts`](super::Counts): two per CPU (as many as a `Counts` has
/// slots, so that a model's third thread may find none). Each claim keeps the flags alive
/// itself: the model's main thread gives its claim back after loom dropped its lazy statics.
pub(super) type Claims = std::sync::Arc<[atomic::AtomicBool]>;

pub(super) fn claims() -> Claims {
    loom::lazy_static! {
        static ref CLAIMS: Claims =
            (0..cpu_count() * 2).map(|_| atomic::AtomicBool::new(false)).collect();
    }
    CLAIMS.clone()
}

/// Epoch-based reclamation (crossbeam-epoch) behind one type, so loom models can free what a
/// structure retired when the structure goes.
#[allow(unsafe_code)] // the per-thread participant slots, the models' retired flags
pub mod epoch {
    pub use crossbeam_epoch::{unprotected, Atomic, Guard, Shared};

    /// The reclamation domain of one data structure. Each has a collector of its own
    /// (registered per pin), because the global one does not survive loom's teardown at the
    /// end of each execution, and a private one frees everything retired when it drops.
    #[derive(Debug, Default)]
    pub struct Domain {
        collector: crossbeam_epoch::Collector,
        participants: Option<Participants>,
    }

    impl Domain {
        /// Does nothing: the domain's own collector frees everything when the domain drops,
        /// and forcing collections inside a model made loom's replay of it diverge. (The std
        /// build frees what the domain retired, for shutdown.)
        pub fn flush(&self) {}

        /// A domain for structures pinned several times per operation. It keeps one
        /// participant per model thread (made on the thread's first pin), which saves every
        /// pin a participant list insertion and removal for loom to explore; the domain must
        /// then be dropped inside the model.
        pub fn per_thread() -> Self {
            Self {
                collector: crossbeam_epoch::Collector::new(),
                participants: Some(Participants::default()),
            }
        }

        /// Pins the current thread: what it loads stays allocated until the guard drops.
        #[inline]
        pub fn pin(&self) -> Pinned {
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
    }

    /// A pinned thread (see [`Domain::pin`]), also counted by the models' collector.
    #[derive(Debug)]
    pub struct Pinned(Guard);

    impl std::ops::Deref for Pinned {
        type Target = Guard;

        fn deref(&self) -> &Guard {
            &self.0
        }
    }

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

    impl Drop for Pinned {
        fn drop(&mut self) {
            model::unpin();
        }
    }

    pub use model::{is_pinned, mark_freed_when_unpinned};

    /// The models' collector. crossbeam's collector frees nothing while a model's threads run
    /// (a thread's bag holds 64 retired nodes before it is even offered for collection), so a
    /// model could never see a node freed under a reader. This one marks a retired node freed
    /// at the end of its grace period, the earliest moment any epoch collector may free it:
    /// once every thread that was pinned when the node was retired has unpinned (threads that
    /// pin later do not count: they can no longer reach an unlinked node). A reader that then
    /// uses the node panics (`check_live` in the L2).
    mod model {
        use super::super::raw::Mutex;
        use super::super::thread_index;
        use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
        use std::sync::PoisonError;

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
                let mut retired = RETIRED.lock().unwrap_or_else(PoisonError::into_inner);
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

        /// Whether the calling thread holds a guard.
        pub fn is_pinned() -> bool {
            // SeqCst: as every access of the pin counts (test instrumentation).
            PINS[thread_index()].load(Ordering::SeqCst) > 0
        }

        /// Marks `freed` (the flag of a node just unlinked and retired) once every thread pinned
        /// now has unpinned.
        pub fn mark_freed_when_unpinned(freed: &AtomicBool) {
            let mut retired = RETIRED.lock().unwrap_or_else(PoisonError::into_inner);
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
    struct Participants(Box<[super::UnsafeCell<Option<crossbeam_epoch::LocalHandle>>]>);

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

    impl std::fmt::Debug for Participants {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Participants")
        }
    }

    // SAFETY: a slot is only used by its own thread (see `Domain::pin`), or by whoever drops
    // the domain, once no thread uses it; a participant never leaves its slot.
    unsafe impl Send for Participants {}
    // SAFETY: as above.
    unsafe impl Sync for Participants {}
}
