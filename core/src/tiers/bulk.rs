//! The threads a bulk get runs its loaders on: the caller and helpers it starts for the call,
//! at most [`BULK_HELPERS_MAX`] helpers at once in the whole process however many bulk gets
//! run and whatever concurrency they ask for (lua-resty-mlcache's light threads cost nothing;
//! an OS thread costs a stack and a clone, and a caller asking for a concurrency of 10,000
//! must not start 10,000 of them). Past the bound a call gets fewer helpers, down to none, and
//! its caller runs the rest: loaders must not wait for one another.

use crate::sync::atomic::{AtomicUsize, Ordering};
use crate::sync::{thread, Mutex};

/// Helper threads that every bulk get of the process together may run at once.
pub const BULK_HELPERS_MAX: usize = 64;

/// Helper threads the process's bulk gets run now.
#[cfg(not(mcb_loom))]
static HELPERS: AtomicUsize = AtomicUsize::new(0);
#[cfg(mcb_loom)]
loom::lazy_static! {
    static ref HELPERS: AtomicUsize = AtomicUsize::new(0);
}

/// Helpers taken from the process's bound, given back on drop.
struct Helpers(usize);

impl Helpers {
    /// Up to `want` helpers: fewer while other calls hold the rest.
    fn take(want: usize) -> Helpers {
        // Relaxed (all): a count bounding a resource, publishing nothing; each read-modify-write
        // sees the latest count, so that the bound holds.
        let mut now = HELPERS.load(Ordering::Relaxed);
        loop {
            let got = want.min(BULK_HELPERS_MAX.saturating_sub(now));
            if got == 0 {
                return Helpers(0);
            }
            match HELPERS.compare_exchange_weak(
                now,
                now + got,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Helpers(got),
                Err(seen) => now = seen,
            }
        }
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        if self.0 > 0 {
            // Relaxed: see `take`.
            HELPERS.fetch_sub(self.0, Ordering::Relaxed);
        }
    }
}

/// `work` of each of `jobs`, in their order: run on this thread and on up to `concurrency - 1`
/// helpers beside it (within the process's bound), each runner taking the next job when it has
/// done one, so that a slow loader holds up no others.
pub(super) fn run<J: Send, R: Send>(
    jobs: Vec<J>,
    concurrency: usize,
    work: impl Fn(J) -> R + Sync,
) -> Vec<R> {
    let count = jobs.len();
    let helpers = Helpers::take(concurrency.min(count).saturating_sub(1));
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let done = Mutex::new(Vec::with_capacity(count));
    let runner = || loop {
        let Some((index, job)) = queue.lock().next() else {
            return;
        };
        let result = work(job);
        done.lock().push((index, result));
    };
    if helpers.0 == 0 {
        // Alone (all hits, a concurrency of 1, or the bound taken): no scope to set up.
        runner();
    } else {
        thread::scope(|scope| {
            for _ in 0..helpers.0 {
                scope.spawn(runner);
            }
            runner();
        });
    }
    drop(helpers);
    let mut done = std::mem::take(&mut *done.lock());
    done.sort_unstable_by_key(|&(index, _)| index);
    done.into_iter().map(|(_, result)| result).collect()
}
