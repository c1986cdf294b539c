//! The core table (`SERVER_CORE_API`): the clock and expiry conversion, the version, a hash,
//! `parse_config`, `shutdown`, and the host's own settings (`get_config`).

use crate::api::extension::log;
use mcb_abi::abi::*;
use mcb_abi::boundary::guard;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

/// memcached's bound between relative and absolute expiry times: 30 days, in seconds.
pub const REALTIME_MAXDELTA: libc::time_t = 60 * 60 * 24 * 30;

/// What [`start`] fixes for the life of the process.
struct Started {
    /// The Unix time the server pretends it started at (a little in the past, as memcached
    /// does, so that a `rel_time_t` of 0, "never", is never "now").
    at: libc::time_t,
    /// The host's settings as `key=value;...`, what `get_config` parses.
    settings: CString,
}

static STARTED: OnceLock<Started> = OnceLock::new();
/// Set by `shutdown`; the listener watches it.
static SHUTDOWN: AtomicBool = AtomicBool::new(false);
/// The listening socket (-1 before there is one), shut down to wake `accept`.
static LISTENER: AtomicI32 = AtomicI32::new(-1);

/// Starts the clock and records the host's settings. Once, before any engine exists.
pub fn start(settings: CString) {
    let started = Started {
        at: now() - 2,
        settings,
    };
    assert!(STARTED.set(started).is_ok(), "the server starts once");
}

fn started() -> &'static Started {
    STARTED
        .get()
        .expect("server_handle::init runs before any engine exists")
}

/// The Unix time now, in seconds, from the coarse clock (the time of the last tick: cheap
/// enough for every engine call, as memcached's once-a-second `current_time` is, and as exact
/// in whole seconds).
pub fn now() -> libc::time_t {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a live out-parameter; CLOCK_REALTIME_COARSE exists on every Linux since 2.6.32.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut t) } == 0 {
        return t.tv_sec;
    }
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    libc::time_t::try_from(secs).unwrap_or(libc::time_t::MAX)
}

/// Seconds since the server started.
pub fn current_time() -> rel_time_t {
    rel_time_t::try_from(now() - started().at).unwrap_or(0)
}

unsafe extern "C" fn get_current_time() -> rel_time_t {
    guard(0, current_time)
}

/// memcached's rule: 0 is never; up to 30 days is relative to now; beyond is a Unix time, and
/// one at or before the server's start becomes 1 (already expired, but not 0, which would mean
/// never). A negative time has already passed, so it is 1 too.
pub fn to_rel_time(exptime: libc::time_t) -> rel_time_t {
    let started = started().at;
    if exptime == 0 {
        0
    } else if exptime < 0 {
        1
    } else if exptime > REALTIME_MAXDELTA {
        if exptime <= started {
            1
        } else {
            rel_time_t::try_from(exptime - started).unwrap_or(rel_time_t::MAX)
        }
    } else {
        let t = exptime + libc::time_t::from(current_time());
        rel_time_t::try_from(t).unwrap_or(rel_time_t::MAX)
    }
}

unsafe extern "C" fn realtime(exptime: libc::time_t) -> rel_time_t {
    guard(0, || to_rel_time(exptime))
}

/// A `rel_time_t` as a Unix time.
pub fn abstime_of(t: rel_time_t) -> libc::time_t {
    started().at + libc::time_t::from(t)
}

unsafe extern "C" fn abstime(exptime: rel_time_t) -> libc::time_t {
    guard(0, || abstime_of(exptime))
}

/// The host's own version, what engines get from `server_version` (and `stats` shows as
/// `mcb_version`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The version the protocols report (`version`, binary VERSION, `stats`): the memcached release
/// whose answers the host gives, byte for byte (the transcript test checks them). Clients and
/// test suites choose what they expect by it: memccapable, told 0.1.0, expects a memcached
/// older than 1.4's answers.
pub const MEMCACHED_VERSION: &str = "1.6.18";
const VERSION_C: &CStr =
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("the package version has no NUL"),
    };

unsafe extern "C" fn server_version() -> *const c_char {
    VERSION_C.as_ptr()
}

/// FNV-1a, 32 bits, with the seed folded into the offset basis. Engines only need a hash that
/// is stable for the life of the process.
unsafe extern "C" fn hash(data: *const c_void, size: usize, seed: u32) -> u32 {
    guard(0, || {
        if data.is_null() {
            return seed;
        }
        // SAFETY: the engine hands `size` readable bytes at `data`.
        let bytes = unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size) };
        bytes.iter().fold(0x811c_9dc5 ^ seed, |h, &b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
    })
}

/// Tells `shutdown` which socket to wake (the listening socket's descriptor).
pub fn set_listener(fd: std::os::fd::RawFd) {
    // Relaxed: the descriptor is a plain number; `shutdown` acts on it through the kernel.
    LISTENER.store(fd, Ordering::Relaxed);
}

/// Whether an engine asked the server to shut down.
pub fn shutdown_requested() -> bool {
    // Acquire: pairs with the Release in `shutdown`; nothing else is published, but the flag
    // must not be seen before the engine's own writes preceding its call.
    SHUTDOWN.load(Ordering::Acquire)
}

/// Stops the server as SIGTERM does: the listener stops accepting, the workers finish what is
/// in flight. `who` asked (for the log).
pub fn request_shutdown(who: &str) {
    // Release: pairs with the Acquire in `shutdown_requested`.
    SHUTDOWN.store(true, Ordering::Release);
    log(
        EXTENSION_LOG_WARNING,
        &format!("{who} asked the server to shut down"),
    );
    // Relaxed: see `set_listener`.
    let fd = LISTENER.load(Ordering::Relaxed);
    if fd >= 0 {
        // SAFETY: our listening socket, which lives as long as the process serves; shutting
        // it down wakes the listener's poll, and the listener sees the flag.
        unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
    }
}

unsafe extern "C" fn shutdown() {
    guard((), || request_shutdown("an engine"))
}

/// Parses the host's own settings (`maxconns`, `tcpport`, ...) into the engine's table; true
/// unless a value was bad (settings the engine did not ask for are fine, as in memcached).
unsafe extern "C" fn get_config(items: *mut config_item) -> bool {
    guard(false, || {
        let text = started().settings.as_ptr();
        // SAFETY: our NUL-terminated settings; the engine's table per parse_config's contract.
        unsafe { crate::config::parse_config(text, items, std::ptr::null_mut()) >= 0 }
    })
}

/// The core table of the server handle.
pub const API: SERVER_CORE_API = SERVER_CORE_API {
    get_current_time: Some(get_current_time),
    realtime: Some(realtime),
    abstime: Some(abstime),
    server_version: Some(server_version),
    hash: Some(hash),
    parse_config: Some(crate::config::parse_config),
    shutdown: Some(shutdown),
    get_config: Some(get_config),
};
