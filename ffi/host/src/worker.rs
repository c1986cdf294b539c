//! A worker thread: one event loop (mio; epoll on Linux) over the connections the listener
//! hands it, as memcached's worker threads run. A connection is a resumable state machine (the
//! protocols' `Pending`): a step runs while its input is buffered and its output has room, and
//! otherwise the connection waits for its socket. An engine's EWOULDBLOCK parks only that
//! connection; `notify_io_complete`, from any thread, posts its token to the worker's
//! [`Mailbox`] and wakes the loop, which runs the parked step again.
//!
//! A connection fires ON_CONNECT before its first engine call and ON_DISCONNECT when it ends;
//! its first byte chooses the protocol (0x80: binary, anything else: ASCII; `-B` may allow
//! only one), as memcached's negotiation does.

#![deny(unsafe_code)]

use crate::api::extension::log;
use crate::conn::{Conn, Mailbox, State, Wake};
use crate::counters::Stat;
use crate::io::Buffers;
use crate::options::Protocol;
use crate::session::{Ctx, Session, Step};
use crate::{ascii, binary};
use mcb_abi::abi::*;
use mio::net::{TcpStream, UnixStream};
use mio::{Events, Interest, Poll, Token};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The mailbox token that means "new connections or a stop are waiting".
const INCOMING: usize = usize::MAX;
/// The waker's own token in the poll.
const WAKER: Token = Token(usize::MAX - 1);
/// How long a stopping worker lets requests in flight finish.
const DRAIN: Duration = Duration::from_secs(5);

/// An accepted connection, TCP or unix-domain.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Tcp(s) => s,
            Stream::Unix(s) => s,
        }
    }

    fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    /// The peer's address and the listening socket's, as `stats conns` shows them.
    fn addresses(&self) -> (String, String) {
        match self {
            Stream::Tcp(s) => {
                let show = |a: io::Result<std::net::SocketAddr>| {
                    a.map_or_else(|_| "tcp:?".to_owned(), |a| format!("tcp:{a}"))
                };
                (show(s.peer_addr()), show(s.local_addr()))
            }
            Stream::Unix(s) => {
                let path = s
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                    .unwrap_or_default();
                (format!("unix:{path}"), format!("unix:{path}"))
            }
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }

    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read_vectored(bufs),
            Stream::Unix(s) => s.read_vectored(bufs),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write_vectored(bufs),
            Stream::Unix(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The listener's side of a worker: where to hand connections, and how to stop it.
#[derive(Debug)]
pub struct Handle {
    tx: Sender<Stream>,
    mailbox: Arc<Mailbox>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Handle {
    /// Hands an accepted connection to the worker.
    pub fn give(&self, stream: Stream) {
        if self.tx.send(stream).is_ok() {
            self.mailbox.post(INCOMING);
        }
    }

    /// Asks the worker to stop once its requests in flight are answered.
    pub fn stop(&self) {
        // Release: pairs with the worker's Acquire; the listener has stopped handing out
        // connections before this.
        self.stop.store(true, Ordering::Release);
        self.mailbox.post(INCOMING);
    }

    /// Waits for the worker to end.
    pub fn join(self) {
        let _ = self.thread.join();
    }
}

/// Starts worker `index`.
pub fn spawn(index: usize, ctx: &'static Ctx) -> io::Result<Handle> {
    let poll = Poll::new()?;
    let mailbox = Arc::new(Mailbox::new(mio::Waker::new(poll.registry(), WAKER)?));
    let (tx, rx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let (inbox, flag) = (Arc::clone(&mailbox), Arc::clone(&stop));
    // The worker is built on its thread: its connections never leave it.
    let thread = std::thread::Builder::new()
        .name(format!("mcb-worker-{index}"))
        .spawn(move || {
            Worker {
                index,
                ctx,
                poll,
                mailbox: inbox,
                incoming: rx,
                stop: flag,
                clients: Vec::new(),
                free: Vec::new(),
                again: Vec::new(),
                buffers: Buffers::default(),
                now: Instant::now(),
                now_secs: 0,
            }
            .run()
        })?;
    Ok(Handle {
        tx,
        mailbox,
        stop,
        thread,
    })
}

/// Where a connection is in its protocol.
#[derive(Debug)]
enum Proto {
    /// No byte yet: the first one chooses.
    New,
    Ascii(ascii::Pending),
    Binary(binary::Pending),
}

#[derive(Debug)]
struct Client {
    stream: Stream,
    session: Session,
    proto: Proto,
    /// Waiting for the engine's `notify_io_complete`.
    parked: bool,
    /// Registered for writable events (output is waiting for the socket).
    writing: bool,
    /// Ending once the queued output is out.
    closing: bool,
    /// When the connection last made progress: bytes read or written, a request answered
    /// (`-o idle_timeout` closes one that made none for that long, wherever it is in a request).
    active: Instant,
}

impl Client {
    /// Between requests, nothing buffered either way: what an idle timeout or a stop closes.
    fn is_idle(&self) -> bool {
        let idle_proto = match &self.proto {
            Proto::New => true,
            Proto::Ascii(p) => matches!(p, ascii::Pending::Idle),
            Proto::Binary(p) => matches!(p, binary::Pending::Idle),
        };
        idle_proto
            && !self.parked
            && self.session.out.is_empty()
            && self.session.input.buffered().is_empty()
    }
}

struct Worker {
    index: usize,
    ctx: &'static Ctx,
    poll: Poll,
    mailbox: Arc<Mailbox>,
    incoming: Receiver<Stream>,
    stop: Arc<AtomicBool>,
    /// Connections by token; `free` lists the empty slots.
    clients: Vec<Option<Client>>,
    free: Vec<usize>,
    /// Connections that yielded after `-R` requests, to run again after other events.
    again: Vec<usize>,
    /// The input buffers the connections borrow.
    buffers: Buffers,
    /// When the last poll returned, and that in whole seconds of server time: the time of
    /// every turn this round of events runs (read once a round, not once a connection).
    now: Instant,
    now_secs: u64,
}

impl Worker {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let idle_timeout = self.ctx.options.idle_timeout;
        let mut swept = Instant::now();
        let mut stopping: Option<Instant> = None;
        loop {
            let timeout = if !self.again.is_empty() {
                Some(Duration::ZERO)
            } else if stopping.is_some() || idle_timeout.is_some() {
                Some(Duration::from_millis(100))
            } else {
                None
            };
            // What this turn got is let go, or held by a count, before the worker waits.
            self.ctx.engine.end_turn();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    log(
                        EXTENSION_LOG_WARNING,
                        &format!("a worker's poll failed: {e}"),
                    );
                    break;
                }
            }
            self.now = Instant::now();
            self.now_secs = self
                .now
                .saturating_duration_since(self.ctx.started)
                .as_secs();
            for event in events.iter() {
                if event.token() == WAKER {
                    for token in self.mailbox.take() {
                        if token == INCOMING {
                            self.accept_new();
                        } else {
                            self.notified(token);
                        }
                    }
                } else {
                    let token = event.token().0;
                    if event.is_readable() || event.is_read_closed() {
                        if let Some(Some(c)) = self.clients.get_mut(token) {
                            c.session.input.readable(event.is_read_closed());
                        }
                    }
                    self.drive(token);
                }
            }
            for token in std::mem::take(&mut self.again) {
                self.drive(token);
            }
            // Acquire: pairs with the Release in `Handle::stop`.
            if stopping.is_none() && self.stop.load(Ordering::Acquire) {
                // Poll once more before judging who is idle: what clients sent before the
                // stop may not have been among this round's events.
                stopping = Some(Instant::now());
                continue;
            }
            if let Some(since) = stopping {
                let all = since.elapsed() > DRAIN;
                self.close_where(|c| all || c.is_idle());
                if self.clients.iter().all(Option::is_none) {
                    break;
                }
            }
            if let Some(limit) = idle_timeout {
                if swept.elapsed() >= Duration::from_secs(1) {
                    swept = Instant::now();
                    // Any connection without progress, mid-request too (a value half sent,
                    // a reply the client does not read), but not one the engine is serving.
                    self.close_where(|c| !c.parked && c.active.elapsed() >= limit);
                }
            }
        }
    }

    fn close_where(&mut self, mut pick: impl FnMut(&Client) -> bool) {
        for token in 0..self.clients.len() {
            if self.clients[token].as_ref().is_some_and(&mut pick) {
                self.close(token);
            }
        }
    }

    /// Registers the connections the listener handed over and serves what they sent.
    fn accept_new(&mut self) {
        while let Ok(mut stream) = self.incoming.try_recv() {
            let token = self.free.pop().unwrap_or(self.clients.len());
            if let Err(e) =
                self.poll
                    .registry()
                    .register(stream.source(), Token(token), Interest::READABLE)
            {
                log(
                    EXTENSION_LOG_WARNING,
                    &format!("cannot watch a connection: {e}"),
                );
                self.ctx.connections.closed(None);
                continue;
            }
            let wake = Wake {
                mailbox: Arc::clone(&self.mailbox),
                token,
            };
            let (addr, listen_addr) = stream.addresses();
            let conn = Conn::new(stream.fd(), wake, addr, listen_addr);
            self.ctx.connections.opened(&conn);
            let session = Session::new(self.ctx, conn, self.index);
            session.peer.cookie.connected();
            let client = Client {
                stream,
                session,
                proto: Proto::New,
                parked: false,
                writing: false,
                closing: false,
                active: Instant::now(),
            };
            if token == self.clients.len() {
                self.clients.push(Some(client));
            } else {
                self.clients[token] = Some(client);
            }
            self.drive(token);
        }
    }

    /// The engine completed a parked connection's call.
    fn notified(&mut self, token: usize) {
        let Some(Some(c)) = self.clients.get_mut(token) else {
            return; // closed meanwhile (its reservation kept the Conn alive for the engine)
        };
        if !c.parked {
            return; // not parked (any more): the status was consumed when it parked
        }
        if let Some(status) = c.session.peer.conn.take_io() {
            c.parked = false;
            c.session.peer.resume_with(status);
            self.drive(token);
        }
    }

    /// Runs a connection until it waits for its socket or the engine (or has served `-R`
    /// requests in a row, then it runs again after the others' events).
    fn drive(&mut self, token: usize) {
        let limit = self.ctx.options.reqs_per_event;
        let Some(Some(c)) = self.clients.get_mut(token) else {
            return;
        };
        if c.parked {
            return;
        }
        let mut turn = Turn {
            now: self.now,
            limit,
            served: 0,
            steps: 0,
        };
        let buffers = &mut self.buffers;
        c.session.out.lend(buffers);
        // A panic (a bug of ours) ends this connection only.
        let outcome = mcb_abi::boundary::guard(Err(()), || {
            run(c, self.ctx, &mut turn, buffers).map_err(|_| ())
        });
        c.session.out.give_back(buffers);
        if turn.served > 0 {
            c.active = turn.now;
            c.session.peer.conn.answered_at(self.now_secs);
        }
        c.session.peer.conn.set_state(state_of(c, &outcome));
        match outcome {
            Ok(Wait::Socket) => self.watch(token),
            Ok(Wait::Again) => {
                self.again.push(token);
                self.watch(token);
            }
            Ok(Wait::Engine) => {}
            Ok(Wait::Closed) | Err(()) => self.close(token),
        }
    }

    /// Watches for writable events only while output waits for the socket.
    fn watch(&mut self, token: usize) {
        let Some(Some(c)) = self.clients.get_mut(token) else {
            return;
        };
        let writing = !c.session.out.is_empty();
        if writing != c.writing {
            let interest = if writing {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(c.stream.source(), Token(token), interest)
                .is_err()
            {
                self.close(token);
                return;
            }
            c.writing = writing;
        }
    }

    fn close(&mut self, token: usize) {
        let Some(mut c) = self.clients.get_mut(token).and_then(Option::take) else {
            return;
        };
        let _ = self.poll.registry().deregister(c.stream.source());
        c.session.peer.cookie.disconnected();
        self.ctx.connections.closed(Some(&c.session.peer.conn));
        self.free.push(token);
    }
}

/// Why a connection stopped running.
#[derive(Debug)]
enum Wait {
    /// For its socket (readable, or writable when output is queued).
    Socket,
    /// For its next turn: it served `-R` requests.
    Again,
    /// For the engine's `notify_io_complete`.
    Engine,
    /// It ended.
    Closed,
}

/// Where a connection that stopped running with `outcome` is, for `stats conns`.
fn state_of(c: &Client, outcome: &Result<Wait, ()>) -> State {
    match (outcome, &c.proto) {
        (Ok(Wait::Closed) | Err(()), _) => State::Closing,
        (Ok(Wait::Engine), _) => State::ParseCmd,
        _ if !c.session.out.is_empty() => State::Mwrite,
        (_, Proto::Ascii(ascii::Pending::Data(_)) | Proto::Binary(binary::Pending::Data(_))) => {
            State::Nread
        }
        (
            _,
            Proto::Ascii(ascii::Pending::Swallow(_)) | Proto::Binary(binary::Pending::Swallow(_)),
        ) => State::Swallow,
        _ => State::Waiting,
    }
}

/// One connection's turn on its worker: when it began (the time its progress is noted at), and
/// what it may still do before it yields to the others.
struct Turn {
    now: Instant,
    /// `-R`: requests answered before yielding.
    limit: usize,
    served: usize,
    /// Steps of any kind: a stream of parts of requests (quiet gets, each a part of a binary
    /// multi-get) yields too, after [`STEPS_PER_REQUEST`] times the limit.
    steps: usize,
}

/// How many steps a turn may take per request it may answer (see [`Turn::steps`]).
const STEPS_PER_REQUEST: usize = 16;

impl Turn {
    /// Counts a step (`answered`: it ended a request); whether the turn is over.
    fn step(&mut self, answered: bool) -> bool {
        self.steps += 1;
        self.served += usize::from(answered);
        self.served >= self.limit || self.steps >= self.limit * STEPS_PER_REQUEST
    }
}

/// Writes what the socket accepts of the session's output, noting progress (and the bytes
/// written) when bytes went out; whether all of it is out.
fn flush(
    s: &mut Session,
    stream: &mut Stream,
    active: &mut Instant,
    now: Instant,
) -> io::Result<bool> {
    let before = s.out.len();
    let all_out = s.out.write_to(stream)?;
    let written = before - s.out.len();
    if written > 0 {
        *active = now;
        s.peer.add(Stat::BytesWritten, written as u64);
    }
    Ok(all_out)
}

/// The connection's loop: steps while input is buffered and output has room.
fn run(
    c: &mut Client,
    ctx: &'static Ctx,
    turn: &mut Turn,
    buffers: &mut Buffers,
) -> io::Result<Wait> {
    let s = &mut c.session;
    let now = turn.now;
    loop {
        if s.out.is_full() || c.closing {
            let all_out = flush(s, &mut c.stream, &mut c.active, now)?;
            if c.closing && all_out {
                return Ok(Wait::Closed);
            }
            if !all_out {
                return Ok(Wait::Socket);
            }
        }
        let step = match &mut c.proto {
            Proto::New => match s.input.buffered().first() {
                None => Step::NeedInput,
                Some(&first) => {
                    let binary = first == PROTOCOL_BINARY_REQ;
                    c.proto = match (ctx.options.protocol, binary) {
                        (Protocol::Auto | Protocol::Binary, true) => {
                            Proto::Binary(binary::Pending::default())
                        }
                        (Protocol::Auto | Protocol::Ascii, false) => {
                            Proto::Ascii(ascii::Pending::default())
                        }
                        _ => return Ok(Wait::Closed),
                    };
                    Step::More
                }
            },
            Proto::Ascii(p) => ascii::step(s, p),
            Proto::Binary(p) => binary::step(s, p),
        };
        if matches!(step, Step::Done | Step::More) && turn.step(step == Step::Done) {
            s.peer.count(Stat::ConnYields);
            flush(s, &mut c.stream, &mut c.active, now)?;
            return Ok(Wait::Again);
        }
        match step {
            Step::Done | Step::More => {}
            Step::NeedInput => {
                let landing = match &mut c.proto {
                    Proto::Ascii(p) => ascii::landing(p),
                    Proto::Binary(p) => binary::landing(p),
                    Proto::New => None,
                };
                let read = if s.input.take_drained() {
                    // A short read emptied the socket: skip the read that would block.
                    Err(io::ErrorKind::WouldBlock.into())
                } else {
                    s.input.read_from(&mut c.stream, landing, buffers)
                };
                match read {
                    Ok(0) => c.closing = true,
                    Ok(n) => {
                        c.active = now;
                        s.peer.add(Stat::BytesRead, n as u64);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        flush(s, &mut c.stream, &mut c.active, now)?;
                        s.input.release_if_empty(buffers);
                        return Ok(Wait::Socket);
                    }
                    Err(e) => return Err(e),
                }
            }
            Step::Parked => {
                if let Some(status) = s.peer.conn.take_io() {
                    // Notified already (perhaps during the call itself).
                    s.peer.resume_with(status);
                    continue;
                }
                c.parked = true;
                flush(s, &mut c.stream, &mut c.active, now)?;
                // The notification may have come between the check and now.
                if let Some(status) = s.peer.conn.take_io() {
                    c.parked = false;
                    s.peer.resume_with(status);
                    continue;
                }
                return Ok(Wait::Engine);
            }
            Step::Close => c.closing = true,
        }
    }
}
