//! The host's request counters, kept per tenant (the SASL user, whose bucket the bucket engine
//! serves) and, within a tenant, per worker thread: each worker writes only its own cache line,
//! so no line is shared by every request. A reader sums the lines; `stats reset` records a
//! baseline instead of writing the workers' lines.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The counted events, in `stats` order.
#[derive(Debug, Clone, Copy)]
pub enum Stat {
    CmdGet,
    GetHits,
    GetMisses,
    CmdSet,
    CmdFlush,
    AuthCmds,
    AuthErrors,
}

/// Their `stats` names, indexed by [`Stat`].
pub const NAMES: [&str; 7] = [
    "cmd_get",
    "get_hits",
    "get_misses",
    "cmd_set",
    "cmd_flush",
    "auth_cmds",
    "auth_errors",
];

pub type Snapshot = [u64; NAMES.len()];

/// One worker's counters of one tenant, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Line([AtomicU64; NAMES.len()]);

/// One tenant's counters.
#[derive(Debug)]
pub struct Tenant {
    lines: Box<[Line]>,
    /// The totals at the tenant's last `stats reset`.
    baseline: Mutex<Snapshot>,
}

impl Tenant {
    fn new(workers: usize) -> Tenant {
        Tenant {
            lines: (0..workers).map(|_| Line::default()).collect(),
            baseline: Mutex::default(),
        }
    }

    /// Counts one event on `worker`'s line. Only that worker calls this for its line.
    pub fn bump(&self, worker: usize, stat: Stat) {
        let counter = &self.lines[worker].0[stat as usize];
        // Relaxed: a statistic with a single writer (this worker), so a load and a store lose
        // nothing and cost no locked instruction; readers only sum.
        counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    fn totals(&self) -> Snapshot {
        let mut sum = Snapshot::default();
        for line in self.lines.iter() {
            for (s, c) in sum.iter_mut().zip(&line.0) {
                // Relaxed: a statistic.
                *s += c.load(Ordering::Relaxed);
            }
        }
        sum
    }

    /// The counts since the tenant's last reset.
    pub fn snapshot(&self) -> Snapshot {
        since(self.totals(), &lock(&self.baseline))
    }

    pub fn reset(&self) {
        *lock(&self.baseline) = self.totals();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn since(now: Snapshot, base: &Snapshot) -> Snapshot {
    std::array::from_fn(|i| now[i].saturating_sub(base[i]))
}

/// Every tenant's counters; the server's are their sum.
#[derive(Debug)]
pub struct Registry {
    workers: usize,
    tenants: Mutex<HashMap<String, Arc<Tenant>>>,
    /// The server-wide totals at the last server-wide `stats reset`.
    baseline: Mutex<Snapshot>,
}

impl Registry {
    pub fn new(workers: usize) -> Registry {
        Registry {
            workers,
            tenants: Mutex::default(),
            baseline: Mutex::default(),
        }
    }

    /// The counters of tenant `name` ("" before authentication), created on first use.
    pub fn tenant(&self, name: &str) -> Arc<Tenant> {
        let mut tenants = lock(&self.tenants);
        if let Some(t) = tenants.get(name) {
            return Arc::clone(t);
        }
        let t = Arc::new(Tenant::new(self.workers));
        tenants.insert(name.to_owned(), Arc::clone(&t));
        t
    }

    fn totals(&self) -> Snapshot {
        let tenants = lock(&self.tenants);
        let mut sum = Snapshot::default();
        for t in tenants.values() {
            for (s, v) in sum.iter_mut().zip(t.totals()) {
                *s += v;
            }
        }
        sum
    }

    /// The server's counts since its last server-wide reset.
    pub fn snapshot(&self) -> Snapshot {
        since(self.totals(), &lock(&self.baseline))
    }

    /// A server-wide reset (the tenants' own baselines stay).
    pub fn reset(&self) {
        *lock(&self.baseline) = self.totals();
    }
}

#[cfg(test)]
mod tests {
    use super::{Registry, Stat};

    #[test]
    fn tenants_count_and_reset_apart_and_the_server_sums_them() {
        let r = Registry::new(2);
        let (a, b) = (r.tenant("a"), r.tenant("b"));
        a.bump(0, Stat::CmdGet);
        a.bump(1, Stat::CmdGet);
        b.bump(1, Stat::CmdSet);
        assert_eq!(a.snapshot()[Stat::CmdGet as usize], 2);
        assert_eq!(r.snapshot()[Stat::CmdGet as usize], 2);
        assert_eq!(r.snapshot()[Stat::CmdSet as usize], 1);
        a.reset();
        assert_eq!(a.snapshot()[Stat::CmdGet as usize], 0);
        assert_eq!(b.snapshot()[Stat::CmdSet as usize], 1);
        assert_eq!(
            r.snapshot()[Stat::CmdGet as usize],
            2,
            "a tenant's reset is its own"
        );
        r.reset();
        assert_eq!(r.snapshot(), [0; 7]);
        assert_eq!(b.snapshot()[Stat::CmdSet as usize], 1, "so is the server's");
        assert!(std::sync::Arc::ptr_eq(&a, &r.tenant("a")));
    }
}
