//! Connections as engines see them: a cookie is a pointer to a [`Conn`] inside an `Arc`. The
//! connection's worker holds one reference; each `reserve` takes another, so a closed
//! connection's cookie stays valid until the engine releases it. Here too: the cookie API
//! (socket fd, auth data, the engine-specific slot, `notify_io_complete`, reserve/release) and
//! the two callbacks through which engines answer (`ADD_RESPONSE`, `ADD_STAT`).

use crate::api::callback;
use crate::api::extension::log;
use crate::codec::{encode_response, push_stat, Response, Sink};
use mcb_abi::abi::*;
use mcb_abi::boundary::guard;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The SASL identity of a connection; the pointers `get_auth_data` hands out point into it.
#[derive(Debug, Default)]
struct Auth {
    user: Option<CString>,
    config: Option<CString>,
}

/// A connection's cookie as the engine calls take it. It holds a reference to the connection,
/// so the pointer engines know it by stays valid for as long as the cookie (or an item obtained
/// with it, which keeps a clone) lives: safe code cannot hand an engine a cookie of a connection
/// that is gone, or one that never was. The host never dereferences the pointer through it.
#[derive(Debug, Clone)]
pub struct Cookie(Arc<Conn>);

impl Cookie {
    /// The pointer engines know the connection by; live while `self` is.
    pub fn as_ptr(&self) -> *const c_void {
        self.0.cookie_ptr()
    }

    /// Fires ON_CONNECT for this connection (before its first engine call).
    pub fn connected(&self) {
        self.fire_bare(ON_CONNECT);
    }

    /// Fires ON_DISCONNECT for this connection (when it ends).
    pub fn disconnected(&self) {
        self.fire_bare(ON_DISCONNECT);
    }

    /// Fires `kind`, one of the events that carry no data.
    fn fire_bare(&self, kind: ENGINE_EVENT_TYPE) {
        // SAFETY: ON_CONNECT and ON_DISCONNECT (our two callers) carry no data; the cookie is
        // live (`self`; reservations the engine holds keep it alive after).
        unsafe { callback::fire(kind, std::ptr::null(), self.as_ptr()) };
    }
}

/// Where a connection is, as `stats conns` names it (memcached's state names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum State {
    /// Between requests, waiting for the next.
    Waiting,
    /// Running a command (or waiting for the engine to complete one).
    ParseCmd,
    /// A value arriving.
    Nread,
    /// Data to drop arriving.
    Swallow,
    /// Output waiting for the socket.
    Mwrite,
    Closing,
}

impl State {
    pub fn name(self) -> &'static str {
        match self {
            State::Waiting => "conn_waiting",
            State::ParseCmd => "conn_parse_cmd",
            State::Nread => "conn_nread",
            State::Swallow => "conn_swallow",
            State::Mwrite => "conn_mwrite",
            State::Closing => "conn_closing",
        }
    }

    fn from_u8(v: u8) -> State {
        [
            State::Waiting,
            State::ParseCmd,
            State::Nread,
            State::Swallow,
            State::Mwrite,
            State::Closing,
        ]
        .get(usize::from(v))
        .copied()
        .unwrap_or(State::Closing)
    }
}

/// One client connection.
#[derive(Debug)]
pub struct Conn {
    fd: c_int,
    /// The peer's and the listening socket's addresses, as `stats conns` shows them
    /// (`tcp:127.0.0.1:5000`, `unix:/path`).
    pub addr: String,
    pub listen_addr: String,
    /// A [`State`], and the server time (seconds) of the last request answered: written by the
    /// connection's worker, read by `stats conns` on any worker. Relaxed: a report, which no
    /// one synchronises on.
    state: std::sync::atomic::AtomicU8,
    last_cmd: std::sync::atomic::AtomicU64,
    engine_specific: AtomicPtr<c_void>,
    auth: Mutex<Auth>,
    /// The status of a `notify_io_complete` not yet consumed by [`Conn::take_io`].
    io: Mutex<Option<ENGINE_ERROR_CODE>>,
    /// Who to wake when the engine notifies: the connection's worker.
    wake: Wake,
    /// Reservations the engine holds (each also holds a strong count of the `Arc`).
    reserved: AtomicUsize,
    sink: Mutex<Sink>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A worker's mailbox for `notify_io_complete`: the tokens of its connections the engine
/// completed, and the waker of its event loop. Any thread may post.
#[derive(Debug)]
pub struct Mailbox {
    waker: mio::Waker,
    woken: Mutex<Vec<usize>>,
}

impl Mailbox {
    pub fn new(waker: mio::Waker) -> Mailbox {
        Mailbox {
            waker,
            woken: Mutex::default(),
        }
    }

    /// Queues `token` and wakes the loop (once per batch: a non-empty queue is already woken).
    pub fn post(&self, token: usize) {
        let first = {
            let mut woken = lock(&self.woken);
            woken.push(token);
            woken.len() == 1
        };
        if first {
            if let Err(e) = self.waker.wake() {
                log(EXTENSION_LOG_WARNING, &format!("cannot wake a worker: {e}"));
            }
        }
    }

    /// The tokens posted since the last call.
    pub fn take(&self) -> Vec<usize> {
        std::mem::take(&mut *lock(&self.woken))
    }
}

/// Where a connection's completions go: its worker's mailbox, under its token.
#[derive(Debug, Clone)]
pub struct Wake {
    pub mailbox: Arc<Mailbox>,
    pub token: usize,
}

impl Conn {
    pub fn new(fd: c_int, wake: Wake, addr: String, listen_addr: String) -> Arc<Conn> {
        Arc::new(Conn {
            fd,
            addr,
            listen_addr,
            state: std::sync::atomic::AtomicU8::new(State::Waiting as u8),
            last_cmd: std::sync::atomic::AtomicU64::new(0),
            engine_specific: AtomicPtr::new(std::ptr::null_mut()),
            auth: Mutex::default(),
            io: Mutex::new(None),
            wake,
            reserved: AtomicUsize::new(0),
            sink: Mutex::default(),
        })
    }

    /// The socket's descriptor (what `stats conns` numbers connections by).
    pub fn fd(&self) -> c_int {
        self.fd
    }

    /// Records where the connection is (see [`State`]).
    pub fn set_state(&self, state: State) {
        // Relaxed: see the field.
        self.state.store(state as u8, Ordering::Relaxed);
    }

    pub fn state(&self) -> State {
        // Relaxed: see the field.
        State::from_u8(self.state.load(Ordering::Relaxed))
    }

    /// Records that a request was answered at server time `secs`.
    pub fn answered_at(&self, secs: u64) {
        // Relaxed: see the field.
        self.last_cmd.store(secs, Ordering::Relaxed);
    }

    /// The server time of the last request answered.
    pub fn last_answered(&self) -> u64 {
        // Relaxed: see the field.
        self.last_cmd.load(Ordering::Relaxed)
    }

    /// The cookie engines get for this connection, holding a reference to it.
    pub fn cookie(self: &Arc<Self>) -> Cookie {
        Cookie(Arc::clone(self))
    }

    /// The pointer engines know this connection by (its cookie's).
    fn cookie_ptr(&self) -> *const c_void {
        std::ptr::from_ref(self).cast()
    }

    /// The answer sink; never held across an engine call (the engine's callbacks lock it).
    pub fn sink(&self) -> MutexGuard<'_, Sink> {
        lock(&self.sink)
    }

    /// Records a successful SASL authentication and fires ON_AUTH with its `auth_data_t`.
    pub fn authenticate(self: &Arc<Self>, user: &str, config: Option<&str>) {
        let data = {
            let mut auth = lock(&self.auth);
            auth.user = CString::new(user).ok();
            auth.config = config.and_then(|c| CString::new(c).ok());
            auth_data(&auth)
        };
        // SAFETY: ON_AUTH carries the connection's auth data, live for the call (its strings
        // until the next authentication); the cookie is live (`self`).
        unsafe { callback::fire(ON_AUTH, std::ptr::from_ref(&data).cast(), self.cookie_ptr()) };
    }

    pub fn is_authenticated(&self) -> bool {
        lock(&self.auth).user.is_some()
    }

    /// Forgets the SASL identity (a failed authentication step), as memcached does.
    pub fn deauthenticate(&self) {
        *lock(&self.auth) = Auth::default();
    }

    /// The user this connection authenticated as.
    pub fn user(&self) -> Option<String> {
        let auth = lock(&self.auth);
        auth.user.as_ref().map(|u| u.to_string_lossy().into_owned())
    }

    /// The status of a `notify_io_complete` not yet consumed, if any.
    pub fn take_io(&self) -> Option<ENGINE_ERROR_CODE> {
        lock(&self.io).take()
    }
}

fn auth_data(auth: &Auth) -> auth_data_t {
    auth_data_t {
        username: auth.user.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
        config: auth
            .config
            .as_ref()
            .map_or(std::ptr::null(), |s| s.as_ptr()),
    }
}

/// The connection behind a cookie.
///
/// # Safety
/// `cookie` is NULL or a cookie this host handed out whose connection is still referenced (by
/// its thread or a reservation): the engine's contract.
unsafe fn conn<'a>(cookie: *const c_void) -> Option<&'a Conn> {
    // SAFETY: the caller's contract.
    unsafe { cookie.cast::<Conn>().as_ref() }
}

unsafe extern "C" fn get_socket_fd(cookie: *const c_void) -> c_int {
    // SAFETY: an engine's cookie (see `conn`).
    guard(-1, || unsafe { conn(cookie) }.map_or(-1, |c| c.fd))
}

unsafe extern "C" fn get_auth_data(cookie: *const c_void, data: *mut auth_data_t) {
    guard((), || {
        // SAFETY: NULL or the engine's live out-parameter.
        let Some(out) = (unsafe { data.as_mut() }) else {
            return;
        };
        // SAFETY: an engine's cookie. The strings stay valid until the connection
        // authenticates again (or fails to: that forgets the identity) or goes away.
        *out = match unsafe { conn(cookie) } {
            Some(c) => auth_data(&lock(&c.auth)),
            None => auth_data(&Auth::default()),
        };
    })
}

unsafe extern "C" fn store_engine_specific(cookie: *const c_void, engine_data: *mut c_void) {
    guard((), || {
        // SAFETY: an engine's cookie.
        if let Some(c) = unsafe { conn(cookie) } {
            // Release: pairs with the Acquire in `get_engine_specific`, which may run on
            // another thread (an engine's worker); publishes what the pointer points at.
            c.engine_specific.store(engine_data, Ordering::Release);
        }
    })
}

unsafe extern "C" fn get_engine_specific(cookie: *const c_void) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        // SAFETY: an engine's cookie.
        unsafe { conn(cookie) }.map_or(std::ptr::null_mut(), |c| {
            // Acquire: pairs with the Release in `store_engine_specific`.
            c.engine_specific.load(Ordering::Acquire)
        })
    })
}

unsafe extern "C" fn notify_io_complete(cookie: *const c_void, status: ENGINE_ERROR_CODE) {
    guard((), || {
        // SAFETY: an engine's cookie (a reserved one, when the connection may have closed).
        let Some(c) = (unsafe { conn(cookie) }) else {
            log(
                EXTENSION_LOG_WARNING,
                "notify_io_complete with a NULL cookie",
            );
            return;
        };
        *lock(&c.io) = Some(status);
        c.wake.mailbox.post(c.wake.token);
    })
}

unsafe extern "C" fn reserve(cookie: *const c_void) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        if cookie.is_null() {
            return ENGINE_EINVAL;
        }
        // SAFETY: a live cookie is the pointer of an `Arc<Conn>` (`Conn::cookie`) with at
        // least one strong reference, which the caller's contract guarantees.
        unsafe { Arc::increment_strong_count(cookie.cast::<Conn>()) };
        // SAFETY: as above.
        let c = unsafe { &*cookie.cast::<Conn>() };
        // Relaxed: a count of reservations only guards `release` against releasing more than
        // was reserved; the Arc's own count orders the connection's lifetime.
        c.reserved.fetch_add(1, Ordering::Relaxed);
        ENGINE_SUCCESS
    })
}

unsafe extern "C" fn release(cookie: *const c_void) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        // SAFETY: an engine's cookie.
        let Some(c) = (unsafe { conn(cookie) }) else {
            return ENGINE_EINVAL;
        };
        // Relaxed: see `reserve`.
        let took = c
            .reserved
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if !took {
            log(
                EXTENSION_LOG_WARNING,
                "release of a cookie that is not reserved",
            );
            return ENGINE_EINVAL;
        }
        // SAFETY: drops the strong count `reserve` took; the pointer came from an Arc.
        unsafe { Arc::decrement_strong_count(cookie.cast::<Conn>()) };
        ENGINE_SUCCESS
    })
}

/// The cookie table of the server handle.
pub const COOKIE_API: SERVER_COOKIE_API = SERVER_COOKIE_API {
    get_socket_fd: Some(get_socket_fd),
    get_auth_data: Some(get_auth_data),
    store_engine_specific: Some(store_engine_specific),
    get_engine_specific: Some(get_engine_specific),
    notify_io_complete: Some(notify_io_complete),
    reserve: Some(reserve),
    release: Some(release),
};

/// `len` bytes at `p` from an engine, checked: NULL is only allowed for zero bytes.
///
/// # Safety
/// When not NULL, `p` points at `len` readable bytes that stay valid for `'a`.
unsafe fn bytes<'a>(p: *const c_void, len: usize) -> Option<&'a [u8]> {
    match (p.is_null(), len) {
        (_, 0) => Some(&[]),
        (true, _) => None,
        // SAFETY: the caller's contract.
        (false, _) => Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }),
    }
}

/// `ADD_RESPONSE`: a binary response to the current request (ASCII: its status only; a packet
/// the host built: recorded as it came).
///
/// # Safety
/// Each of `key`, `ext` and `body` is NULL with a zero length or points at that many readable
/// bytes for the call; `cookie` is NULL or a cookie of a live connection (the engine's
/// contract).
pub unsafe extern "C" fn add_response(
    key: *const c_void,
    keylen: u16,
    ext: *const c_void,
    extlen: u8,
    body: *const c_void,
    bodylen: u32,
    datatype: u8,
    status: u16,
    cas: u64,
    cookie: *const c_void,
) -> bool {
    guard(false, || {
        // SAFETY: the engine's buffers with their lengths, valid during the call.
        let parts = unsafe {
            (
                bytes(key, usize::from(keylen)),
                bytes(ext, usize::from(extlen)),
                bytes(body, bodylen as usize),
            )
        };
        // SAFETY: an engine's cookie.
        let (Some(c), (Some(key), Some(ext), Some(body))) = (unsafe { conn(cookie) }, parts) else {
            return false;
        };
        let mut sink = c.sink();
        sink.status = Some(status);
        if let Some(answer) = &mut sink.answer {
            answer.status = status;
            answer.cas = cas;
            answer.ext.clear();
            answer.ext.extend_from_slice(ext);
            answer.value.clear();
            answer.value.extend_from_slice(body);
        } else if !sink.ascii {
            let (opcode, opaque) = (sink.opcode, sink.opaque);
            encode_response(
                &mut sink.buf,
                &Response {
                    opcode,
                    opaque,
                    status,
                    cas,
                    datatype,
                },
                ext,
                key,
                std::iter::once(body),
            );
        }
        true
    })
}

/// `ADD_STAT`: one statistic (an empty key ends a binary stats stream).
///
/// # Safety
/// `key` and `val` are NULL with a zero length or point at that many readable bytes for the
/// call; `cookie` is NULL or a cookie of a live connection (the engine's contract).
pub unsafe extern "C" fn add_stat(
    key: *const c_char,
    klen: u16,
    val: *const c_char,
    vlen: u32,
    cookie: *const c_void,
) {
    guard((), || {
        // SAFETY: the engine's buffers with their lengths, valid during the call.
        let parts = unsafe {
            (
                bytes(key.cast(), usize::from(klen)),
                bytes(val.cast(), vlen as usize),
            )
        };
        // SAFETY: an engine's cookie.
        let (Some(c), (Some(key), Some(val))) = (unsafe { conn(cookie) }, parts) else {
            return;
        };
        let mut sink = c.sink();
        push_stat(&mut sink, key, val);
    })
}
