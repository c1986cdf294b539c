//! Shutdown of deleted buckets, and the global shutdown that waits for them.
//!
//! As in the seed, a deleted bucket is destroyed by a worker thread of its own (a connection's
//! thread must not block while other connections leave the engine), and global destroy first
//! stops those workers from waiting any longer, then waits until they are gone. A worker waits
//! twice: for the last item of its engine that a connection still holds (then it destroys the
//! engine), and for the last reference (then it frees the bucket).
//!
//! # No missed wake-up (the seed's argument, kept)
//! `release` decrements the count without the mutex and then, if it reached zero, takes the
//! mutex to broadcast. The worker checks the count and sleeps under the mutex. If the worker
//! read a non-zero count, the decrement to zero is later in the count's modification order; its
//! thread takes the mutex after that (so after the worker's check, and the worker only lets
//! the mutex go by sleeping): the broadcast reaches a sleeping worker. The same holds for the
//! held items, counted in per-thread rows: a give-back the worker's sum missed read a state
//! other than RUNNING (`handle.rs`), so it broadcasts under the mutex after its store, and the
//! worker sums again when woken. And for the `in_progress` flag, written under the mutex.

use crate::sync::mutant::{self, Mutant};
use crate::sync::{Condvar, Mutex};

/// What the shutdown mutex guards.
#[derive(Debug, Default)]
struct Progress {
    /// Global destroy has begun: workers stop waiting for references and held items.
    in_progress: bool,
    /// Workers between their start and their end.
    workers: usize,
}

/// The shutdown coordinator shared by all buckets of one registry.
#[derive(Debug, Default)]
pub(crate) struct Shutdown {
    progress: Mutex<Progress>,
    /// Broadcast when a bucket loses its last reference, a bucket no longer RUNNING gets a held
    /// item back, or global destroy begins.
    released: Condvar,
    /// Signalled when the last worker ends during global destroy.
    workers_done: Condvar,
}

impl Shutdown {
    /// Wakes the waiting workers (called by the release of a bucket's last reference, or by a
    /// held item given back to a bucket no longer RUNNING).
    pub(crate) fn wake_workers(&self) {
        if mutant::active(Mutant::ReleaseWakesWithoutLock) {
            self.released.notify_all();
            return;
        }
        let _progress = self.progress.lock();
        self.released.notify_all();
    }

    /// Registers a worker; `false` if global destroy already began (it then owns the bucket).
    pub(crate) fn worker_begin(&self) -> bool {
        let mut progress = self.progress.lock();
        if progress.in_progress {
            return false;
        }
        progress.workers += 1;
        true
    }

    /// Waits while `busy` holds (read under the mutex: the bucket still has a reference, or a
    /// held item, whose release calls [`Shutdown::wake_workers`]), or until global
    /// destroy began.
    pub(crate) fn wait_while(&self, busy: impl Fn() -> bool) {
        let mut progress = self.progress.lock();
        if mutant::active(Mutant::WorkerWaitsWithoutRecheck) {
            if !progress.in_progress {
                drop(self.released.wait(progress));
            }
            return;
        }
        while busy() && !progress.in_progress {
            progress = self.released.wait(progress);
        }
    }

    /// Unregisters a worker, waking global destroy if it was the last.
    pub(crate) fn worker_end(&self) {
        let mut progress = self.progress.lock();
        progress.workers -= 1;
        if progress.in_progress && progress.workers == 0 {
            self.workers_done.notify_all();
        }
    }

    /// Begins global destroy: wakes waiting workers and waits until every worker ended.
    pub(crate) fn begin_global(&self) {
        let mut progress = self.progress.lock();
        progress.in_progress = true;
        self.released.notify_all();
        while progress.workers > 0 {
            progress = self.workers_done.wait(progress);
        }
    }
}
