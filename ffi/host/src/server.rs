//! The listener and the connections. The design is a thread per connection with blocking I/O:
//! simple, and an engine that parks a connection (EWOULDBLOCK) parks only that thread. `-c`
//! bounds the connections (and so the threads); `-t` is accepted for memcached's command line
//! and reported in stats, but there is no fixed worker pool to size.
//!
//! A connection fires ON_CONNECT before its first engine call and ON_DISCONNECT when it ends
//! (ON_SWITCH_CONN never fires: a thread serves only its own connection);
//! its first byte chooses the protocol (0x80: binary, anything else: ASCII), as memcached's
//! negotiation does.

use crate::api::extension::log;
use crate::api::{callback, server_core};
use crate::conn::Conn;
use crate::io::Io;
use crate::session::{Aligned, Counters, Ctx, Peer, Session};
use crate::{ascii, binary};
use mcb_abi::abi::*;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

/// Serves until an engine asks for shutdown (or the listener fails).
pub fn run(listener: TcpListener, ctx: &'static Ctx) -> io::Result<()> {
    for stream in listener.incoming() {
        if server_core::shutdown_requested() {
            break;
        }
        let stream = match stream {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) if server_core::shutdown_requested() => break,
            Err(e) => {
                // Out of descriptors and the like: say so, and keep serving who we have.
                log(EXTENSION_LOG_WARNING, &format!("accept failed: {e}"));
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
            log(
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
    let cookie = conn.cookie().as_ptr();
    // SAFETY: ON_CONNECT carries no data; the cookie is live (`conn` holds it).
    unsafe { callback::fire(ON_CONNECT, std::ptr::null(), cookie) };
    let mut session = Session {
        peer: Peer { ctx, conn },
        io: Io::new(stream),
        scratch: Aligned::default(),
    };
    // A panic (a bug of ours) ends this connection only, and it still gets its ON_DISCONNECT.
    let panicked = || Err(io::Error::other("the connection's handler panicked"));
    let served = mcb_abi::boundary::guard(panicked(), || match session.io.fill(1) {
        Ok(true) if session.io.buffered()[0] == PROTOCOL_BINARY_REQ => binary::serve(&mut session),
        Ok(true) => ascii::serve(&mut session),
        Ok(false) => Ok(()),
        Err(e) => Err(e),
    });
    if let Err(e) = served.and_then(|()| session.io.flush()) {
        if ctx.options.verbosity > 0 {
            log(EXTENSION_LOG_INFO, &format!("connection closed: {e}"));
        }
    }
    // SAFETY: ON_DISCONNECT carries no data; the cookie is live (the session's `conn` is
    // dropped below, after the handlers ran).
    unsafe { callback::fire(ON_DISCONNECT, std::ptr::null(), cookie) };
    // The session's Arc goes; reservations an engine holds keep the Conn alive.
}
