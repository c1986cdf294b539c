//! The listener and the connections. The design is a thread per connection with blocking I/O:
//! simple, and an engine that parks a connection (EWOULDBLOCK) parks only that thread. `-c`
//! bounds the connections (and so the threads); `-t` is accepted for memcached's command line
//! and reported in stats, but there is no fixed worker pool to size.
//!
//! A connection fires ON_CONNECT before its first engine call and ON_DISCONNECT when it ends
//! (ON_SWITCH_CONN never fires: a thread serves only its own connection);
//! its first byte chooses the protocol (0x80: binary, anything else: ASCII), as memcached's
//! negotiation does.

use crate::api;
use crate::conn::Conn;
use crate::engine::Engine;
use crate::io::Io;
use crate::options::Options;
use crate::sasl::Pwdb;
use mcb_abi::abi::*;
use std::ffi::c_void;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
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
    fn reset(&self) {
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
    pub cookie: *const c_void,
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
                let rc = self.retry(|| ok(self.engine().get_stats(self.cookie, b"")));
                rc.err().unwrap_or(ENGINE_SUCCESS)
            }
            b"settings" => {
                self.settings_stats();
                ENGINE_SUCCESS
            }
            b"reset" => {
                self.ctx.counters.reset();
                self.engine().reset_stats(self.cookie);
                ENGINE_SUCCESS
            }
            _ => {
                let rc = self.retry(|| ok(self.engine().get_stats(self.cookie, group)));
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
            ("time", api::abstime_of(api::current_time()).to_string()),
            ("version", api::VERSION.to_owned()),
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
            ("evictions_notified", api::evictions().to_string()),
        ];
        self.push_stats(&stats);
    }

    fn settings_stats(&self) {
        self.push_stats(&self.ctx.options.settings());
    }

    fn push_stats(&self, stats: &[(&'static str, String)]) {
        let mut sink = self.conn.sink();
        for (k, v) in stats {
            crate::conn::push_stat(&mut sink, k.as_bytes(), v.as_bytes());
        }
    }
}

/// Serves until an engine asks for shutdown (or the listener fails).
pub fn run(listener: TcpListener, ctx: &'static Ctx) -> io::Result<()> {
    for stream in listener.incoming() {
        if api::shutdown_requested() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) if api::shutdown_requested() => break,
            Err(e) => {
                // Out of descriptors and the like: say so, and keep serving who we have.
                api::log(EXTENSION_LOG_WARNING, &format!("accept failed: {e}"));
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
        };
        let c = &ctx.counters;
        // Relaxed: the count is only a bound; a connection over it by a race is harmless.
        if c.curr_connections.load(Ordering::Relaxed) >= ctx.options.max_connections as u64 {
            Counters::bump(&c.rejected_connections);
            drop(stream);
            continue;
        }
        Counters::bump(&c.curr_connections);
        Counters::bump(&c.total_connections);
        let spawned = std::thread::Builder::new()
            .name("mcb-conn".into())
            .spawn(move || {
                serve(stream, ctx);
                // Relaxed: a statistic (and the bound above).
                ctx.counters
                    .curr_connections
                    .fetch_sub(1, Ordering::Relaxed);
            });
        if let Err(e) = spawned {
            api::log(
                EXTENSION_LOG_WARNING,
                &format!("cannot start a connection thread: {e}"),
            );
            // Relaxed: as above.
            c.curr_connections.fetch_sub(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

fn serve(stream: TcpStream, ctx: &'static Ctx) {
    let _ = stream.set_nodelay(true);
    let conn = Conn::new(stream.as_raw_fd());
    let cookie = conn.cookie();
    api::fire(ON_CONNECT, std::ptr::null(), cookie);
    let mut session = Session {
        peer: Peer { ctx, conn, cookie },
        io: Io::new(stream),
        scratch: Aligned::default(),
    };
    // A panic (a bug of ours) ends this connection only, and it still gets its ON_DISCONNECT.
    let panicked = || Err(io::Error::other("the connection's handler panicked"));
    let served = mcb_abi::boundary::guard(panicked(), || match session.io.fill(1) {
        Ok(true) if session.io.buffered()[0] == PROTOCOL_BINARY_REQ => {
            crate::binary::serve(&mut session)
        }
        Ok(true) => crate::ascii::serve(&mut session),
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    });
    if let Err(e) = served.and_then(|()| session.io.flush()) {
        if ctx.options.verbosity > 0 {
            api::log(EXTENSION_LOG_INFO, &format!("connection closed: {e}"));
        }
    }
    api::fire(ON_DISCONNECT, std::ptr::null(), cookie);
    // The session's Arc goes; reservations an engine holds keep the Conn alive.
}
