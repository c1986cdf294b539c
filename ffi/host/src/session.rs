//! One connection's state as the protocols use it, below them and the workers: the shared
//! context ([`Ctx`]), the [`Peer`] (the connection engines know by its cookie, with the
//! EWOULDBLOCK handling and the host's counters), the [`Session`] buffers, and the [`Step`]
//! a protocol's state machine reports back to its worker.

#![deny(unsafe_code)]

use crate::codec::Answer;
use crate::conn::{Conn, Cookie};
use crate::counters::{self, Registry, Stat, Tenant};
use crate::engine::{Arith, Engine};
use crate::io::{Input, Output};
use crate::options::Options;
use crate::packet::Packet;
use crate::sasl::Pwdb;
use mcb_abi::abi::*;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Connection counts, written once per connection (not per request). Relaxed: statistics.
/// And the live connections, for `stats conns` (a lock taken once when a connection opens and
/// once when it closes).
#[derive(Debug, Default)]
pub struct Connections {
    pub curr: AtomicU64,
    pub total: AtomicU64,
    pub rejected: AtomicU64,
    live: Mutex<HashMap<usize, Weak<Conn>>>,
}

impl Connections {
    pub fn bump(counter: &AtomicU64) {
        // Relaxed: a statistic.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection a worker serves from now on.
    pub fn opened(&self, conn: &Arc<Conn>) {
        let key = Arc::as_ptr(conn) as usize;
        lock(&self.live).insert(key, Arc::downgrade(conn));
    }

    /// A connection ended (`conn`: the one [`Connections::opened`] recorded, if any).
    pub fn closed(&self, conn: Option<&Arc<Conn>>) {
        // Relaxed: a statistic (and the listener's bound, which a race cannot hurt).
        self.curr.fetch_sub(1, Ordering::Relaxed);
        if let Some(conn) = conn {
            lock(&self.live).remove(&(Arc::as_ptr(conn) as usize));
        }
    }

    /// The live connections, by descriptor.
    pub fn live(&self) -> Vec<Arc<Conn>> {
        let mut conns: Vec<Arc<Conn>> = lock(&self.live)
            .values()
            .filter_map(Weak::upgrade)
            .collect();
        conns.sort_by_key(|c| c.fd());
        conns
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What every connection shares.
#[derive(Debug)]
pub struct Ctx {
    pub engine: &'static Engine,
    pub pwdb: Option<Pwdb>,
    /// `-Y`'s users: ASCII connections authenticate as one before any other command.
    pub ascii_users: Option<Pwdb>,
    pub options: Options,
    pub connections: Connections,
    pub counters: Registry,
    /// The bucket engine's admin user (its `admin=` setting), who sees the server's counters.
    pub admin: Option<String>,
    pub started: std::time::Instant,
    /// The listening sockets (descriptor, address), as `stats conns` lists them.
    pub listening: Vec<(i32, String)>,
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

/// One connection's state: the peer, its buffers, and a reusable packet for requests handed to
/// the engine whole.
#[derive(Debug)]
pub struct Session {
    pub peer: Peer,
    pub input: Input,
    pub out: Output,
    pub packet: Packet,
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
            packet: Packet::default(),
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

    /// v1's incr or decr of `key` ([`Peer::retry`]'s handling of EWOULDBLOCK): the new CAS and
    /// the new value.
    pub fn arithmetic(
        &self,
        key: &[u8],
        a: &Arith,
        vbucket: u16,
    ) -> Result<(u64, u64), ENGINE_ERROR_CODE> {
        let (mut cas, mut result) = (0, 0);
        let engine = self.engine();
        self.retry(|| ok(engine.arithmetic(&self.cookie, key, a, &mut cas, &mut result, vbucket)))
            .map(|()| (cas, result))
    }

    /// A storage command for `key`, allocated (`allocated`: the allocation's result): counted
    /// (`cmd_set`, and a value too large or without memory for it). A
    /// refused set (`set`: SET, `ms` in any mode) unlinks the key's old value, as memcached
    /// does, so that no client reads a value older than its last write attempt; best effort:
    /// the answer is the refusal's whatever the removal says.
    pub fn storing<T>(&self, key: &[u8], allocated: &Result<T, ENGINE_ERROR_CODE>, set: bool) {
        self.count(Stat::CmdSet);
        let Err(rc) = allocated else {
            return;
        };
        match *rc {
            ENGINE_E2BIG => self.count(Stat::StoreTooLarge),
            ENGINE_ENOMEM => self.count(Stat::StoreNoMemory),
            _ => return,
        }
        if set {
            let mut cas = 0;
            self.engine().remove(&self.cookie, key, &mut cas, 0);
        }
    }

    /// A get of `key` found it (`hit`) or not: `cmd_get` and `get_hits`/`get_misses`.
    pub fn fetched(&self, hit: bool) {
        self.count(Stat::CmdGet);
        self.count(if hit { Stat::GetHits } else { Stat::GetMisses });
    }

    /// A classic get (ASCII or binary) of `key` found it or not: [`Peer::fetched`] (but for a
    /// gat, `touched`, which memcached counts as a touch only), and the detail's `get` and
    /// `hit` (memcached's detail counts classic commands only, a gat among them).
    pub fn fetched_classic(&self, key: &[u8], hit: bool, touched: bool) {
        if !touched {
            self.fetched(hit);
        }
        self.detail(key, counters::Op::Get);
        if hit {
            self.detail(key, counters::Op::Hit);
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

    /// Whether this run of a request follows its engine call's EWOULDBLOCK and notification,
    /// and has not made that call again yet ([`Peer::retry`] takes the notified status): what
    /// it counts until then, its first run counted.
    fn resuming(&self) -> bool {
        self.resume.get().is_some()
    }

    /// Counts one event for this connection's tenant, on its worker's line (not again on the
    /// run of a parked request before its engine call, which its first run counted).
    pub fn count(&self, stat: Stat) {
        if !self.resuming() {
            self.tenant.borrow().bump(self.worker, stat);
        }
    }

    /// Counts `n` (bytes) for this connection's tenant, on its worker's line.
    pub fn add(&self, stat: Stat, n: u64) {
        self.tenant.borrow().add(self.worker, stat, n);
    }

    /// Counts `op` on `key`'s prefix in this tenant's `stats detail`, when it is on (memcached
    /// counts classic gets, storage commands and deletes; not touch, arithmetic or meta), as
    /// [`Peer::count`] counts.
    pub fn detail(&self, key: &[u8], op: counters::Op) {
        if self.resuming() {
            return;
        }
        let delimiter = self.ctx.options.prefix_delimiter.unwrap_or(b':');
        self.tenant.borrow().detail(key, delimiter, op);
    }

    /// This connection's tenant's counters.
    pub fn tenant(&self) -> Arc<Tenant> {
        Arc::clone(&self.tenant.borrow())
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
    pub fn sees_server(&self) -> bool {
        match self.conn.user() {
            None => true,
            Some(user) => self.ctx.admin.as_deref() == Some(user.as_str()),
        }
    }

    /// The counters this connection sees: its tenant's, or the server's sum (admin or no SASL
    /// identity).
    pub fn counts(&self) -> counters::Snapshot {
        if self.sees_server() {
            self.ctx.counters.snapshot()
        } else {
            self.tenant.borrow().snapshot()
        }
    }

    /// `stats reset` of the host's counters this connection sees (see [`Peer::counts`]).
    pub fn reset_counts(&self) {
        if self.sees_server() {
            self.ctx.counters.reset();
        } else {
            self.tenant.borrow().reset();
        }
    }

    /// Prepares the sink for the engine's answers to one request.
    pub fn open_sink(&self, ascii: bool, opcode: u8, opaque: u32) {
        self.conn.sink().open(ascii, opcode, opaque);
    }

    /// Prepares the sink to record the engine's response to a packet of `opcode` the host built
    /// (see [`crate::codec::Answer`]), in the buffers of the last answer given back.
    pub fn open_answer(&self, opcode: u8) {
        let mut sink = self.conn.sink();
        sink.open(false, opcode, 0);
        sink.answer = Some(std::mem::take(&mut sink.spare));
    }

    /// The engine's response since [`Peer::open_answer`], if it gave one.
    pub fn take_answer(&self) -> Option<Answer> {
        let mut sink = self.conn.sink();
        let answer = sink.answer.take()?;
        if sink.status.is_none() {
            sink.keep(answer.ext, answer.value);
            return None;
        }
        Some(answer)
    }

    /// Gives an answer's buffers back (see [`Peer::open_answer`]).
    pub fn keep_answer(&self, ext: Vec<u8>, value: Vec<u8>) {
        self.conn.sink().keep(ext, value);
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
}
