//! The listener: memcached's thread model. The main thread accepts (TCP on each `-l` address,
//! or a unix-domain socket with `-s`) and hands each connection to one of `-t` workers in turn
//! ([`worker`]); threads do not grow with connections. `-c` bounds the connections (one over
//! it is closed at once and counted in `rejected_connections`).
//!
//! SIGTERM, SIGINT and SIGUSR1 (or `shutdown`: an engine's, or the ASCII command with `-A`)
//! stop accepting; each worker then finishes the requests in flight (closing connections as
//! they become idle, all of them after a few seconds) and ends, and [`run`] returns for the
//! caller to destroy the engine.

use crate::api::extension::log;
use crate::api::server_core;
use crate::options::Options;
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

const SIGNALS: Token = Token(0);
/// The first listener's token (the others follow).
const LISTENERS: usize = 1;

/// The listening socket.
#[derive(Debug)]
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener),
}

/// An `-l` entry as memcached 1.6 reads one: `host`, `host:port`, `[v6]`, `[v6]:port`, or a
/// bare IPv6 address (more than one colon); without a port, `port`.
fn address(entry: &str, port: u16) -> Result<(String, u16), String> {
    let bad = || format!("invalid listen address {entry:?}");
    let (host, given) = if let Some(v6) = entry.strip_prefix('[') {
        let (host, rest) = v6.split_once(']').ok_or_else(bad)?;
        match rest {
            "" => (host, None),
            _ => (host, Some(rest.strip_prefix(':').ok_or_else(bad)?)),
        }
    } else {
        match entry.split_once(':') {
            Some((host, p)) if !p.contains(':') => (host, Some(p)),
            _ => (entry, None),
        }
    };
    let port = match given {
        Some(p) => p.parse().map_err(|_| bad())?,
        None => port,
    };
    Ok((host.to_owned(), port))
}

/// The listening sockets the options ask for: the unix-domain socket of `-s` (with `-a`'s
/// mode), or one TCP socket per `-l` address.
pub fn bind_all(o: &Options) -> Result<Vec<Listener>, String> {
    if let Some(path) = &o.unix_socket {
        let l = Listener::bind_unix(path, o.backlog)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(o.unix_mask))
            .map_err(|e| format!("cannot set the mode of {}: {e}", path.display()))?;
        return Ok(vec![l]);
    }
    o.listen
        .iter()
        .map(|entry| {
            let (host, port) = address(entry, o.port)?;
            Listener::bind_tcp(&host, port, o.backlog)
        })
        .collect()
}

impl Listener {
    /// Listens on a unix-domain socket at `path` (replacing a stale socket file).
    fn bind_unix(path: &std::path::Path, backlog: i32) -> Result<Listener, String> {
        use std::os::unix::fs::FileTypeExt;
        if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
            let _ = std::fs::remove_file(path);
        }
        let l = std::os::unix::net::UnixListener::bind(path)
            .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        Listener::Unix(UnixListener::from_std(l)).with_backlog(backlog)
    }

    /// Listens on TCP `host:port`.
    fn bind_tcp(host: &str, port: u16, backlog: i32) -> Result<Listener, String> {
        let l = std::net::TcpListener::bind((host, port))
            .map_err(|e| format!("cannot listen on {host}:{port}: {e}"))?;
        l.set_nonblocking(true).map_err(|e| e.to_string())?;
        Listener::Tcp(TcpListener::from_std(l)).with_backlog(backlog)
    }

    fn with_backlog(self, backlog: i32) -> Result<Listener, String> {
        let listener = self;
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

    /// Where it listens, as `stats conns` shows it (`tcp:ADDR`, `unix:PATH`).
    pub fn address(&self) -> String {
        match self {
            Listener::Tcp(_) => format!("tcp:{}", self.describe()),
            Listener::Unix(_) => self.describe(),
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

/// Where SIGTERM, SIGINT and SIGUSR1 arrive once [`catch_signals`] ran: the listener watches it.
#[derive(Debug)]
pub struct Signals(mio::net::UnixStream);

/// Routes SIGTERM, SIGINT and SIGUSR1 (memcached 1.6's graceful stop; every stop here is
/// graceful) to the returned [`Signals`]; before the server says it listens, so that a signal
/// from then on stops it gracefully.
pub fn catch_signals() -> io::Result<Signals> {
    let (read, write) = UnixStream::pair()?;
    read.set_nonblocking(true)?;
    write.set_nonblocking(true)?;
    // Relaxed: see `on_signal`; the handlers are installed after this store.
    SIGNAL_FD.store(write.as_raw_fd(), Ordering::Relaxed);
    std::mem::forget(write); // open for the life of the process: the handler may run late
    for signal in [libc::SIGTERM, libc::SIGINT, libc::SIGUSR1] {
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
    mut listeners: Vec<Listener>,
    Signals(mut signals): Signals,
    ctx: &'static Ctx,
) -> io::Result<()> {
    if let Some(first) = listeners.first() {
        server_core::set_listener(first.fd());
    }
    let mut poll = Poll::new()?;
    for (i, listener) in listeners.iter_mut().enumerate() {
        poll.registry()
            .register(listener.source(), Token(LISTENERS + i), Interest::READABLE)?;
    }
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
        for listener in &listeners {
            if !accept_all(listener, ctx, &workers, &mut next, &mut retry) {
                break 'serve;
            }
        }
    }
    drop(listeners);
    workers.iter().for_each(worker::Handle::stop);
    workers.into_iter().for_each(worker::Handle::join);
    let mut drained = [0u8; 16];
    let _ = signals.read(&mut drained);
    Ok(())
}

/// Accepts what `listener` has waiting and hands each connection to the next worker in turn;
/// false once a shutdown was asked for.
fn accept_all(
    listener: &Listener,
    ctx: &'static Ctx,
    workers: &[worker::Handle],
    next: &mut usize,
    retry: &mut Option<Duration>,
) -> bool {
    loop {
        if server_core::shutdown_requested() {
            return false;
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
                workers[*next].give(stream);
                *next = (*next + 1) % workers.len();
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => {
                // Out of descriptors and the like: say so, and keep serving who we have.
                log(EXTENSION_LOG_WARNING, &format!("accept failed: {e}"));
                *retry = Some(Duration::from_millis(10));
                return true;
            }
        }
    }
}
