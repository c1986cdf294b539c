//! One connection's state as the protocols use it, below them and the workers: the shared
//! context ([`Ctx`]), the [`Peer`] (the connection engines know by its cookie, with the
//! EWOULDBLOCK handling and the host's statistics), the [`Session`] buffers, and the [`Step`]
//! a protocol's state machine reports back to its worker.

use crate::api::{server_core, stat};
use crate::codec::push_stat;
use crate::conn::{Conn, Cookie};
use crate::counters::{self, Registry, Stat, Tenant};
use crate::engine::Engine;
use crate::io::{Input, Output};
use crate::options::Options;
use crate::sasl::Pwdb;
use mcb_abi::abi::*;
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Connection counts, written once per connection (not per request). Relaxed: statistics.
#[derive(Debug, Default)]
pub struct Connections {
    pub curr: AtomicU64,
    pub total: AtomicU64,
    pub rejected: AtomicU64,
}

impl Connections {
    pub fn bump(counter: &AtomicU64) {
        // Relaxed: a statistic.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection ended.
    pub fn closed(&self) {
        // Relaxed: a statistic (and the listener's bound, which a race cannot hurt).
        self.curr.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What every connection shares.
#[derive(Debug)]
pub struct Ctx {
    pub engine: &'static Engine,
    pub pwdb: Option<Pwdb>,
    pub options: Options,
    pub connections: Connections,
    pub counters: Registry,
    /// The bucket engine's admin user (its `admin=` setting), who sees the server's counters.
    pub admin: Option<String>,
    pub started: std::time::Instant,
}

/// A connection as the protocols use it: the shared context, the connection object engines
/// know by its cookie, its worker, its tenant's counters, and the EWOULDBLOCK state.
#[derive(Debug)]
pub struct Peer {
    pub ctx: &'static Ctx,
    pub conn: Arc<Conn>,
    pub cookie: Cookie,
    /// The worker serving the connection (its line in the counters).
    pub worker: usize,
    tenant: RefCell<Arc<Tenant>>,
    /// Set when an engine call answered EWOULDBLOCK: the step stops and runs again once the
    /// engine notifies.
    parked: Cell<bool>,
    /// The status the engine notified, for the call that parked.
    resume: Cell<Option<ENGINE_ERROR_CODE>>,
    /// It authenticated, then failed a SASL step: it must authenticate again.
    lost_identity: Cell<bool>,
}

/// One connection's state: the peer, its buffers, and a reusable buffer for packets handed to
/// the engine whole.
#[derive(Debug)]
pub struct Session {
    pub peer: Peer,
    pub input: Input,
    pub out: Output,
    pub scratch: Aligned,
}

impl Session {
    pub fn new(ctx: &'static Ctx, conn: Arc<Conn>, worker: usize) -> Session {
        let cookie = conn.cookie();
        Session {
            peer: Peer {
                ctx,
                conn,
                cookie,
                worker,
                tenant: RefCell::new(ctx.counters.tenant("")),
                parked: Cell::new(false),
                resume: Cell::new(None),
                lost_identity: Cell::new(false),
            },
            input: Input::default(),
            out: Output::default(),
            scratch: Aligned::default(),
        }
    }
}

/// What one step of a protocol's state machine did.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Step {
    /// A request was answered; more may be buffered.
    Done,
    /// Part of a request was served (a stretch of a multi-get, a piece of a value).
    More,
    /// The request is incomplete: read more input.
    NeedInput,
    /// An engine call answered EWOULDBLOCK: run the step again once the engine notifies.
    Parked,
    /// End the connection (after writing what is queued).
    Close,
}

/// A reusable 8-byte-aligned buffer: `protocol_binary_request_header` holds a `u64`, so a packet
/// handed to an engine must be aligned for it, which a spot in the read buffer is not.
#[derive(Debug, Default)]
pub struct Aligned(Vec<u64>);

impl Aligned {
    /// Copies the concatenation of `parts` into the buffer; a pointer to it, valid until the
    /// next call.
    pub fn fill(&mut self, parts: &[&[u8]]) -> *mut u64 {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        self.0.clear();
        self.0.resize(len.div_ceil(8), 0);
        let base = self.0.as_mut_ptr().cast::<u8>();
        let mut at = 0;
        for part in parts {
            // SAFETY: the buffer holds at least `len` bytes, `at + part.len() <= len`, and it
            // does not overlap `part` (which the caller borrows from elsewhere).
            unsafe { std::ptr::copy_nonoverlapping(part.as_ptr(), base.add(at), part.len()) };
            at += part.len();
        }
        self.0.as_mut_ptr()
    }
}

/// Whether to go on reading requests.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Flow {
    Continue,
    Close,
}

/// An engine status as a `Result`.
pub fn ok(rc: ENGINE_ERROR_CODE) -> Result<(), ENGINE_ERROR_CODE> {
    if rc == ENGINE_SUCCESS {
        Ok(())
    } else {
        Err(rc)
    }
}

impl Peer {
    pub fn engine(&self) -> &'static Engine {
        self.ctx.engine
    }

    /// Runs an engine call as memcached does: after a notification, the call that parked runs
    /// again if the engine notified SUCCESS, and fails with the notified status otherwise; an
    /// EWOULDBLOCK parks the connection (the caller's step returns [`Step::Parked`]).
    pub fn retry<T>(
        &self,
        call: impl FnOnce() -> Result<T, ENGINE_ERROR_CODE>,
    ) -> Result<T, ENGINE_ERROR_CODE> {
        if let Some(status) = self.resume.take() {
            if status != ENGINE_SUCCESS {
                return Err(status);
            }
        }
        let r = call();
        if matches!(r, Err(ENGINE_EWOULDBLOCK)) {
            self.parked.set(true);
        }
        r
    }

    /// After an `allocate` refused with `rc`: a value too large or no memory for it unlinks
    /// the key's old value, as memcached does for a set. Best effort: the answer is the
    /// refusal's whatever the removal says.
    pub fn unlink_refused(&self, rc: ENGINE_ERROR_CODE, key: &[u8]) {
        if matches!(rc, ENGINE_E2BIG | ENGINE_ENOMEM) {
            let mut cas = 0;
            self.engine().remove(&self.cookie, key, &mut cas, 0);
        }
    }

    /// Whether the last step parked (clearing the mark).
    pub fn take_parked(&self) -> bool {
        self.parked.replace(false)
    }

    /// Hands the engine's notified status to the step about to run again.
    pub fn resume_with(&self, status: ENGINE_ERROR_CODE) {
        self.resume.set(Some(status));
    }

    /// Counts one event for this connection's tenant, on its worker's line.
    pub fn count(&self, stat: Stat) {
        self.tenant.borrow().bump(self.worker, stat);
    }

    /// Records a successful SASL authentication: the connection's tenant is now `user`.
    pub fn authenticated(&self, user: &str, config: Option<&str>) {
        self.conn.authenticate(user, config);
        *self.tenant.borrow_mut() = self.ctx.counters.tenant(user);
    }

    /// A failed SASL step: the connection is no longer authenticated.
    pub fn auth_failed(&self) {
        if self.conn.is_authenticated() {
            self.lost_identity.set(true);
        }
        self.conn.deauthenticate();
        *self.tenant.borrow_mut() = self.ctx.counters.tenant("");
    }

    /// Whether this connection sees the server's counters: no SASL identity, or the admin's.
    fn sees_server(&self) -> bool {
        match self.conn.user() {
            None => true,
            Some(user) => self.ctx.admin.as_deref() == Some(user.as_str()),
        }
    }

    /// Prepares the sink for the engine's answers to one request.
    pub fn open_sink(&self, ascii: bool, opcode: u8, opaque: u32) {
        let mut sink = self.conn.sink();
        sink.buf.clear();
        sink.ascii = ascii;
        sink.opcode = opcode;
        sink.opaque = opaque;
        sink.status = None;
    }

    /// Moves what the engine's callbacks produced into `out`; the status of its last response.
    pub fn take_sink(&self, out: &mut Vec<u8>) -> Option<u16> {
        let mut sink = self.conn.sink();
        out.extend_from_slice(&sink.buf);
        sink.buf.clear();
        sink.status
    }

    /// Whether this connection must authenticate before other commands: SASL is required, or
    /// it lost an identity by a failed step (the engine may still serve it as that user: the
    /// bucket engine keeps a connection in its bucket until the next successful ON_AUTH).
    pub fn needs_auth(&self) -> bool {
        (self.ctx.options.require_sasl || self.lost_identity.get()) && !self.conn.is_authenticated()
    }

    /// Statistics of `group` into the sink: the host's own, then the engine's (but none the
    /// host gave), for the empty group; the host's settings for `settings`; `reset` resets
    /// ours (the tenant's, or the server's for the admin or without SASL) and the engine's;
    /// anything else is the engine's.
    pub fn stats(&self, group: &[u8]) -> ENGINE_ERROR_CODE {
        match group {
            b"" => {
                self.host_stats();
                let rc = self.retry(|| ok(self.engine().get_stats(&self.cookie, b"")));
                self.conn.sink().skip.clear();
                rc.err().unwrap_or(ENGINE_SUCCESS)
            }
            b"settings" => {
                self.push_stats(&self.ctx.options.settings());
                ENGINE_SUCCESS
            }
            b"reset" => {
                if self.sees_server() {
                    self.ctx.counters.reset();
                } else {
                    self.tenant.borrow().reset();
                }
                self.engine().reset_stats(&self.cookie);
                ENGINE_SUCCESS
            }
            _ => {
                let rc = self.retry(|| ok(self.engine().get_stats(&self.cookie, group)));
                rc.err().unwrap_or(ENGINE_SUCCESS)
            }
        }
    }

    fn host_stats(&self) {
        let ctx = self.ctx;
        let mut stats: Vec<(&'static str, String)> = vec![
            ("pid", std::process::id().to_string()),
            ("uptime", ctx.started.elapsed().as_secs().to_string()),
            (
                "time",
                server_core::abstime_of(server_core::current_time()).to_string(),
            ),
            ("version", server_core::VERSION.to_owned()),
            (
                "pointer_size",
                (8 * std::mem::size_of::<usize>()).to_string(),
            ),
            ("threads", ctx.options.threads.to_string()),
        ];
        let counts = if self.sees_server() {
            let c = &ctx.connections;
            // Relaxed (every load here): statistics.
            let n = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
            stats.push(("curr_connections", n(&c.curr)));
            stats.push(("total_connections", n(&c.total)));
            stats.push(("rejected_conns", n(&c.rejected)));
            stats.push(("evictions_notified", stat::evictions().to_string()));
            ctx.counters.snapshot()
        } else {
            self.tenant.borrow().snapshot()
        };
        for (name, value) in counters::NAMES.iter().zip(counts) {
            stats.push((name, value.to_string()));
        }
        self.push_stats(&stats);
        self.conn.sink().skip = stats.iter().map(|(k, _)| *k).collect();
    }

    fn push_stats(&self, stats: &[(&'static str, String)]) {
        let mut sink = self.conn.sink();
        for (k, v) in stats {
            push_stat(&mut sink, k.as_bytes(), v.as_bytes());
        }
    }
}
