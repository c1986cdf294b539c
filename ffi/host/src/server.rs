//! The listener: memcached's thread model. The main thread accepts (TCP, or a unix-domain
//! socket with `-s`) and hands each connection to one of `-t` workers in turn ([`worker`]);
//! threads do not grow with connections. `-c` bounds the connections (one over it is closed at
//! once and counted in `rejected_conns`).
//!
//! SIGTERM and SIGINT (or an engine's `shutdown`) stop accepting; each worker then finishes
//! the requests in flight (closing connections as they become idle, all of them after a few
//! seconds) and ends, and [`run`] returns for the caller to destroy the engine.

use crate::api::extension::log;
use crate::api::server_core;
use crate::session::{Connections, Ctx};
use crate::worker::{self, Stream};
use mcb_abi::abi::*;
use mio::net::{TcpListener, UnixListener};
use mio::{Events, Interest, Poll, Token};
use std::io::{self, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

const LISTENER: Token = Token(0);
const SIGNALS: Token = Token(1);

/// The listening socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

impl Listener {
    /// Listens on TCP `addr:port` or, given `path`, on a unix-domain socket there (replacing
    /// a stale socket file), with `backlog` pending connections.
    pub fn bind(
        addr: &str,
        port: u16,
        path: Option<&std::path::Path>,
        backlog: i32,
    ) -> Result<Listener, String> {
        let listener = match path {
            Some(path) => {
                use std::os::unix::fs::FileTypeExt;
                if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
                    let _ = std::fs::remove_file(path);
                }
                let l = std::os::unix::net::UnixListener::bind(path)
                    .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
                l.set_nonblocking(true).map_err(|e| e.to_string())?;
                Listener::Unix(UnixListener::from_std(l))
            }
            None => {
                let l = std::net::TcpListener::bind((addr, port))
                    .map_err(|e| format!("cannot listen on {addr}:{port}: {e}"))?;
                l.set_nonblocking(true).map_err(|e| e.to_string())?;
                Listener::Tcp(TcpListener::from_std(l))
            }
        };
        // SAFETY: our listening socket; `listen` again on Linux only sets its backlog.
        if unsafe { libc::listen(listener.fd(), backlog) } != 0 {
            return Err(format!(
                "cannot set the listen backlog: {}",
                io::Error::last_os_error()
            ));
        }
        Ok(listener)
    }

    pub fn fd(&self) -> RawFd {
        match self {
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l) => l.as_raw_fd(),
        }
    }

    /// Where it listens, as tests and scripts read it.
    pub fn describe(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map_or_else(|e| format!("? ({e})"), |a| a.to_string()),
            Listener::Unix(l) => l
                .local_addr()
                .ok()
                .and_then(|a| a.as_pathname().map(|p| format!("unix:{}", p.display())))
                .unwrap_or_else(|| "unix:?".to_owned()),
        }
    }

    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Listener::Tcp(l) => l,
            Listener::Unix(l) => l,
        }
    }

    fn accept(&self) -> io::Result<Stream> {
        match self {
            Listener::Tcp(l) => {
                let (s, _) = l.accept()?;
                let _ = s.set_nodelay(true);
                Ok(Stream::Tcp(s))
            }
            Listener::Unix(l) => Ok(Stream::Unix(l.accept()?.0)),
        }
    }
}

/// The write end of the signal socket pair (-1 before `run` installs the handlers).
static SIGNAL_FD: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(_: libc::c_int) {
    // Relaxed: a plain descriptor number, set before the handler was installed.
    let fd = SIGNAL_FD.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; `fd` is the socket pair's write end, open for
        // the life of the process; one byte from a local. A full buffer (a stop is already
        // pending) is fine to ignore.
        unsafe { libc::write(fd, std::ptr::from_ref(&byte).cast(), 1) };
    }
}

/// Where SIGTERM and SIGINT arrive once [`catch_signals`] ran: the listener watches it.
#[derive(Debug)]
pub struct Signals(mio::net::UnixStream);

/// Routes SIGTERM and SIGINT to the returned [`Signals`]; before the server says it listens,
/// so that a signal from then on stops it gracefully.
pub fn catch_signals() -> io::Result<Signals> {
    let (read, write) = UnixStream::pair()?;
    read.set_nonblocking(true)?;
    write.set_nonblocking(true)?;
    // Relaxed: see `on_signal`; the handlers are installed after this store.
    SIGNAL_FD.store(write.as_raw_fd(), Ordering::Relaxed);
    std::mem::forget(write); // open for the life of the process: the handler may run late
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SAFETY: installs an async-signal-safe handler (it only writes one byte).
        if unsafe { libc::signal(signal, handler) } == libc::SIG_ERR {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(Signals(mio::net::UnixStream::from_std(read)))
}

/// Serves until a signal or an engine asks for shutdown; the workers have stopped when it
/// returns.
pub fn run(
    mut listener: Listener,
    Signals(mut signals): Signals,
    ctx: &'static Ctx,
) -> io::Result<()> {
    server_core::set_listener(listener.fd());
    let mut poll = Poll::new()?;
    poll.registry()
        .register(listener.source(), LISTENER, Interest::READABLE)?;
    poll.registry()
        .register(&mut signals, SIGNALS, Interest::READABLE)?;
    let workers = (0..ctx.options.threads as usize)
        .map(|i| worker::spawn(i, ctx))
        .collect::<io::Result<Vec<_>>>()?;
    let mut next = 0;
    let mut events = Events::with_capacity(16);
    // After a failed accept (out of descriptors), try again soon: no new edge may come.
    let mut retry: Option<Duration> = None;
    'serve: loop {
        if let Err(e) = poll.poll(&mut events, retry) {
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        retry = None;
        for event in events.iter() {
            if event.token() == SIGNALS {
                log(EXTENSION_LOG_INFO, "stopping on a signal");
                break 'serve;
            }
        }
        loop {
            if server_core::shutdown_requested() {
                break 'serve;
            }
            match listener.accept() {
                Ok(stream) => {
                    let c = &ctx.connections;
                    // Relaxed: the count is a bound; a connection over it by a race is harmless.
                    if c.curr.load(Ordering::Relaxed) >= ctx.options.max_connections as u64 {
                        Connections::bump(&c.rejected);
                        continue;
                    }
                    Connections::bump(&c.curr);
                    Connections::bump(&c.total);
                    workers[next].give(stream);
                    next = (next + 1) % workers.len();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Out of descriptors and the like: say so, and keep serving who we have.
                    log(EXTENSION_LOG_WARNING, &format!("accept failed: {e}"));
                    retry = Some(Duration::from_millis(10));
                    break;
                }
            }
        }
    }
    drop(listener);
    workers.iter().for_each(worker::Handle::stop);
    workers.into_iter().for_each(worker::Handle::join);
    let mut drained = [0u8; 16];
    let _ = signals.read(&mut drained);
    Ok(())
}
