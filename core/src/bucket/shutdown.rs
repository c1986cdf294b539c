//! Shutdown of deleted buckets, and the global shutdown that waits for them.
//!
//! As in the seed, a deleted bucket is destroyed by a worker thread of its own (a connection's
//! thread must not block while other connections leave the engine), and global destroy first
//! stops those workers from waiting any longer, then waits until they are gone.
//!
//! # No missed wake-up (the seed's argument, kept)
//! `release` decrements the count without the mutex and then, if it reached zero, takes the
//! mutex to broadcast. The worker checks the count and sleeps under the mutex. If the worker
//! read a non-zero count, the decrement to zero is later in the count's modification order; its
//! thread takes the mutex after that (so after the worker's check, and the worker only lets
//! the mutex go by sleeping): the broadcast reaches a sleeping worker. The same holds for the
//! `in_progress` flag, which is written under the mutex.

use crate::sync::mutant::{self, Mutant};
use crate::sync::{Condvar, Mutex};

/// What the shutdown mutex guards.
#[derive(Debug, Default)]
struct Progress {
    /// Global destroy has begun: workers stop waiting for references.
    in_progress: bool,
    /// Workers between their start and their end.
    workers: usize,
}

/// The shutdown coordinator shared by all buckets of one registry.
#[derive(Debug, Default)]
pub(crate) struct Shutdown {
    progress: Mutex<Progress>,
    /// Broadcast when a bucket loses its last reference, or global destroy begins.
    references: Condvar,
    /// Signalled when the last worker ends during global destroy.
    workers_done: Condvar,
}

impl Shutdown {
    /// Wakes the workers waiting for references (called by the release that reached zero).
    pub(crate) fn references_gone(&self) {
        if mutant::active(Mutant::ReleaseWakesWithoutLock) {
            self.references.notify_all();
            return;
        }
        let _progress = self.progress.lock();
        self.references.notify_all();
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

    /// Waits until the bucket has no reference left (`is_referenced`, read under the mutex, says
    /// whether it still has one), or global destroy began.
    pub(crate) fn wait_unreferenced(&self, is_referenced: impl Fn() -> bool) {
        let mut progress = self.progress.lock();
        if mutant::active(Mutant::WorkerWaitsWithoutRecheck) {
            if !progress.in_progress {
                drop(self.references.wait(progress));
            }
            return;
        }
        while is_referenced() && !progress.in_progress {
            progress = self.references.wait(progress);
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
        self.references.notify_all();
        while progress.workers > 0 {
            progress = self.workers_done.wait(progress);
        }
    }
}
