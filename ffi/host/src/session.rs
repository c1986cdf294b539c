//! One connection's state as the protocols use it, below them and the listener: the shared
//! context ([`Ctx`], its [`Counters`]), the [`Peer`] (the connection engines know by its cookie,
//! with the EWOULDBLOCK retry loop and the host's statistics), and the [`Session`] buffers.

use crate::api::{server_core, stat};
use crate::codec::push_stat;
use crate::conn::{Conn, Cookie};
use crate::engine::Engine;
use crate::io::Io;
use crate::options::Options;
use crate::sasl::Pwdb;
use mcb_abi::abi::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Server-wide counters, reported by `stats`. All Relaxed: statistics nobody synchronises on.
#[derive(Debug, Default)]
pub struct Counters {
    pub curr_connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub cmd_get: AtomicU64,
    pub get_hits: AtomicU64,
    pub get_misses: AtomicU64,
    pub cmd_set: AtomicU64,
    pub cmd_flush: AtomicU64,
    pub auth_cmds: AtomicU64,
    pub auth_errors: AtomicU64,
}

impl Counters {
    pub fn bump(counter: &AtomicU64) {
        // Relaxed: a statistic.
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// `stats reset`: the counters of events go back to zero (not the current connections).
    pub fn reset(&self) {
        for counter in [
            &self.total_connections,
            &self.rejected_connections,
            &self.cmd_get,
            &self.get_hits,
            &self.get_misses,
            &self.cmd_set,
            &self.cmd_flush,
            &self.auth_cmds,
            &self.auth_errors,
        ] {
            // Relaxed: a statistic.
            counter.store(0, Ordering::Relaxed);
        }
    }
}

/// What every connection shares.
#[derive(Debug)]
pub struct Ctx {
    pub engine: &'static Engine,
    pub pwdb: Option<Pwdb>,
    pub options: Options,
    pub counters: Counters,
    pub started: std::time::Instant,
}

/// A connection as the protocols use it: the shared context and the connection object
/// engines know by its cookie.
#[derive(Debug)]
pub struct Peer {
    pub ctx: &'static Ctx,
    pub conn: Arc<Conn>,
}

/// One connection's state: the peer, its buffers, and a reusable buffer for packets handed to
/// the engine whole.
#[derive(Debug)]
pub struct Session {
    pub peer: Peer,
    pub io: Io,
    pub scratch: Aligned,
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

    /// The connection's cookie, for engine calls.
    pub fn cookie(&self) -> Cookie<'_> {
        self.conn.cookie()
    }

    /// Runs an engine call; while it answers EWOULDBLOCK, parks the connection until the
    /// engine's `notify_io_complete` and then retries it (or fails with the notified status),
    /// as memcached does.
    pub fn retry<T>(
        &self,
        mut call: impl FnMut() -> Result<T, ENGINE_ERROR_CODE>,
    ) -> Result<T, ENGINE_ERROR_CODE> {
        loop {
            match call() {
                Err(ENGINE_EWOULDBLOCK) => match self.conn.wait_io() {
                    ENGINE_SUCCESS => continue,
                    status => return Err(status),
                },
                other => return other,
            }
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

    /// Whether SASL is required and this connection has not authenticated.
    pub fn needs_auth(&self) -> bool {
        self.ctx.options.require_sasl && !self.conn.is_authenticated()
    }

    /// Statistics of `group` into the sink: the host's own, then the engine's, for the empty
    /// group; the host's settings for `settings`; `reset` resets ours and the engine's;
    /// anything else is the engine's.
    pub fn stats(&self, group: &[u8]) -> ENGINE_ERROR_CODE {
        match group {
            b"" => {
                self.host_stats();
                let rc = self.retry(|| ok(self.engine().get_stats(self.cookie(), b"")));
                rc.err().unwrap_or(ENGINE_SUCCESS)
            }
            b"settings" => {
                self.settings_stats();
                ENGINE_SUCCESS
            }
            b"reset" => {
                self.ctx.counters.reset();
                self.engine().reset_stats(self.cookie());
                ENGINE_SUCCESS
            }
            _ => {
                let rc = self.retry(|| ok(self.engine().get_stats(self.cookie(), group)));
                rc.err().unwrap_or(ENGINE_SUCCESS)
            }
        }
    }

    fn host_stats(&self) {
        let ctx = self.ctx;
        let c = &ctx.counters;
        // Relaxed (every load here): statistics.
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        let stats: [(&str, String); 17] = [
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
            ("curr_connections", n(&c.curr_connections)),
            ("total_connections", n(&c.total_connections)),
            ("rejected_conns", n(&c.rejected_connections)),
            ("cmd_get", n(&c.cmd_get)),
            ("get_hits", n(&c.get_hits)),
            ("get_misses", n(&c.get_misses)),
            ("cmd_set", n(&c.cmd_set)),
            ("cmd_flush", n(&c.cmd_flush)),
            ("auth_cmds", n(&c.auth_cmds)),
            ("auth_errors", n(&c.auth_errors)),
            ("threads", ctx.options.threads.to_string()),
            ("evictions_notified", stat::evictions().to_string()),
        ];
        self.push_stats(&stats);
    }

    fn settings_stats(&self) {
        self.push_stats(&self.ctx.options.settings());
    }

    fn push_stats(&self, stats: &[(&'static str, String)]) {
        let mut sink = self.conn.sink();
        for (k, v) in stats {
            push_stat(&mut sink, k.as_bytes(), v.as_bytes());
        }
    }
}
