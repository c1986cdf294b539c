//! The host's request counters, kept per tenant (the SASL user, whose bucket the bucket engine
//! serves) and, within a tenant, per worker thread: each worker writes only its own cache line,
//! so no line is shared by every request. A reader sums the lines; `stats reset` records a
//! baseline instead of writing the workers' lines. Each tenant also keeps its own `stats
//! detail` (per key prefix counts), switched on and off by its own connections, so no tenant
//! sees another's keys.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    CmdTouch,
    CmdMeta,
    StoreTooLarge,
    StoreNoMemory,
    BytesRead,
    BytesWritten,
    ConnYields,
}

/// Their `stats` names (memcached's), indexed by [`Stat`].
pub const NAMES: [&str; 14] = [
    "cmd_get",
    "get_hits",
    "get_misses",
    "cmd_set",
    "cmd_flush",
    "auth_cmds",
    "auth_errors",
    "cmd_touch",
    "cmd_meta",
    "store_too_large",
    "store_no_memory",
    "bytes_read",
    "bytes_written",
    "conn_yields",
];

pub type Snapshot = [u64; NAMES.len()];

/// One worker's counters of one tenant, alone on its cache lines.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Line([AtomicU64; NAMES.len()]);

/// The `stats detail` operations, as memcached counts them per key prefix.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Get,
    Hit,
    Set,
    Delete,
}

/// Most key prefixes one tenant's detail keeps (memcached keeps any number): later prefixes
/// are not counted, so a client cannot grow the server's memory by naming new prefixes.
const PREFIXES_MAX: usize = 10_000;

/// One tenant's `stats detail`.
#[derive(Debug, Default)]
struct Detail {
    on: bool,
    prefixes: BTreeMap<Vec<u8>, [u64; 4]>,
}

/// One tenant's counters.
#[derive(Debug)]
pub struct Tenant {
    lines: Box<[Line]>,
    /// The totals at the tenant's last `stats reset`.
    baseline: Mutex<Snapshot>,
    /// Whether `detail` is on: read on every keyed request, so apart from its lock. Relaxed
    /// everywhere: a switch whose exact moment no one synchronises on (the counts are under
    /// the lock).
    detail_on: AtomicBool,
    detail: Mutex<Detail>,
}

impl Tenant {
    fn new(workers: usize, detail_on: bool) -> Tenant {
        Tenant {
            lines: (0..workers).map(|_| Line::default()).collect(),
            baseline: Mutex::default(),
            detail_on: AtomicBool::new(detail_on),
            detail: Mutex::new(Detail {
                on: detail_on,
                prefixes: BTreeMap::new(),
            }),
        }
    }

    /// Counts one event on `worker`'s line. Only that worker calls this for its line.
    pub fn bump(&self, worker: usize, stat: Stat) {
        self.add(worker, stat, 1);
    }

    /// Counts `n` on `worker`'s line (bytes read, ...). Only that worker calls this for its
    /// line.
    pub fn add(&self, worker: usize, stat: Stat, n: u64) {
        let counter = &self.lines[worker].0[stat as usize];
        // Relaxed: a statistic with a single writer (this worker), so a load and a store lose
        // nothing and cost no locked instruction; readers only sum.
        counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Counts `op` on `key`'s prefix (up to the first `delimiter`; keys without one are not
    /// counted, as memcached) when detail is on.
    pub fn detail(&self, key: &[u8], delimiter: u8, op: Op) {
        // Relaxed: see `detail_on`.
        if !self.detail_on.load(Ordering::Relaxed) {
            return;
        }
        let Some(end) = key.iter().position(|&b| b == delimiter) else {
            return;
        };
        let mut detail = lock(&self.detail);
        let full = detail.prefixes.len() >= PREFIXES_MAX;
        if let Some(counts) = detail.prefixes.get_mut(&key[..end]) {
            counts[op as usize] += 1;
        } else if detail.on && !full {
            let mut counts = [0; 4];
            counts[op as usize] = 1;
            detail.prefixes.insert(key[..end].to_vec(), counts);
        }
    }

    /// `stats detail on|off`: collection starts or stops (what was counted stays).
    pub fn set_detail(&self, on: bool) {
        let mut detail = lock(&self.detail);
        detail.on = on;
        // Relaxed: see `detail_on`.
        self.detail_on.store(on, Ordering::Relaxed);
    }

    /// Whether detail is on.
    pub fn detail_enabled(&self) -> bool {
        lock(&self.detail).on
    }

    /// `stats detail dump`: memcached's `PREFIX <p> get <n> hit <n> set <n> del <n>` lines.
    pub fn detail_dump(&self) -> Vec<u8> {
        let detail = lock(&self.detail);
        let mut out = Vec::new();
        for (prefix, [get, hit, set, del]) in &detail.prefixes {
            out.extend_from_slice(b"PREFIX ");
            out.extend_from_slice(prefix);
            out.extend_from_slice(
                format!(" get {get} hit {hit} set {set} del {del}\r\n").as_bytes(),
            );
        }
        out
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
    /// Whether a new tenant's detail starts on (`-D`).
    detail_on: bool,
    tenants: Mutex<HashMap<String, Arc<Tenant>>>,
    /// The server-wide totals at the last server-wide `stats reset`.
    baseline: Mutex<Snapshot>,
}

impl Registry {
    pub fn new(workers: usize, detail_on: bool) -> Registry {
        Registry {
            workers,
            detail_on,
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
        let t = Arc::new(Tenant::new(self.workers, self.detail_on));
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
    use super::{Op, Registry, Stat, NAMES};

    #[test]
    fn tenants_count_and_reset_apart_and_the_server_sums_them() {
        let r = Registry::new(2, false);
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
        assert_eq!(r.snapshot(), [0; NAMES.len()]);
        assert_eq!(b.snapshot()[Stat::CmdSet as usize], 1, "so is the server's");
        assert!(std::sync::Arc::ptr_eq(&a, &r.tenant("a")));
    }

    #[test]
    fn detail_counts_prefixes_per_tenant_while_on() {
        let r = Registry::new(1, false);
        let (a, b) = (r.tenant("a"), r.tenant("b"));
        a.detail(b"user:1", b':', Op::Get);
        assert!(a.detail_dump().is_empty(), "off: nothing counted");
        a.set_detail(true);
        for op in [Op::Get, Op::Hit, Op::Set, Op::Delete, Op::Get] {
            a.detail(b"user:1", b':', op);
        }
        a.detail(b"nodelimiter", b':', Op::Get);
        a.set_detail(false);
        a.detail(b"user:2", b':', Op::Get);
        assert_eq!(a.detail_dump(), b"PREFIX user get 2 hit 1 set 1 del 1\r\n");
        assert!(
            b.detail_dump().is_empty(),
            "another tenant's detail is its own"
        );
    }
}
