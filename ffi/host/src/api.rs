//! The server API every engine gets from `get_server_api` (`SERVER_HANDLE_V1`), with memcached's
//! meaning: the core services (clock, expiry conversion, version, hash, `parse_config`,
//! shutdown, the host's own settings), per-engine stats objects, extensions (a stderr logger
//! with levels), connection events and the log API. The cookie API lives in [`crate::conn`].
//!
//! memcached's server handle is process-global (`get_server_api` takes no argument), so this
//! one is too: [`init`] builds it once, in a leaked allocation whose table pointers point into
//! itself, before any engine is loaded.

use crate::conn;
use mcb_abi::abi::*;
use mcb_abi::boundary::guard;
use std::ffi::{c_char, c_int, c_void, CString};
use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

/// memcached's bound between relative and absolute expiry times: 30 days, in seconds.
const REALTIME_MAXDELTA: libc::time_t = 60 * 60 * 24 * 30;

/// What the API needs from the command line.
#[derive(Debug)]
pub struct Settings {
    /// `-v` count: 0 warnings, 1 info, 2 debug, 3 or more detail.
    pub verbosity: u32,
    /// The host's settings as `key=value;...`, what `get_config` parses.
    pub config: CString,
}

/// The process-wide state behind the tables.
struct Server {
    /// The Unix time the server pretends it started at (a little in the past, as memcached does,
    /// so that a `rel_time_t` of 0, "never", is never "now").
    started: libc::time_t,
    settings: Settings,
    /// The lowest severity the stderr logger writes (an `EXTENSION_LOG_LEVEL`).
    log_level: AtomicU32,
    events: Events,
    extensions: Extensions,
    /// Calls to `evicting`, reported as a host stat.
    evictions: AtomicU64,
    /// Set by `shutdown`; the listener watches it.
    shutdown: std::sync::atomic::AtomicBool,
    /// The listening socket (-1 before there is one), shut down to wake `accept`.
    listener: std::sync::atomic::AtomicI32,
    handle: Handle,
}

/// The tables and the handle pointing at them; never moves once leaked. The handle is in an
/// `UnsafeCell`: engines get it as `*mut`, and its `engine` field is written once after the
/// engine exists.
struct Handle {
    server: std::cell::UnsafeCell<SERVER_HANDLE_V1>,
    core: SERVER_CORE_API,
    stat: SERVER_STAT_API,
    extension: SERVER_EXTENSION_API,
    callback: SERVER_CALLBACK_API,
    log: SERVER_LOG_API,
    cookie: SERVER_COOKIE_API,
    #[cfg(not(feature = "engine-pu"))]
    hooks: ALLOCATOR_HOOKS_API,
}

/// The leaked server, as a shareable reference.
struct ServerRef(&'static Server);

// SAFETY: after `init` the handle's tables are only read (by engines, from any thread, which is
// memcached's contract for them); the rest of `Server` is atomics and locks.
unsafe impl Send for ServerRef {}
// SAFETY: as for `Send`.
unsafe impl Sync for ServerRef {}

static SERVER: OnceLock<ServerRef> = OnceLock::new();

fn server() -> &'static Server {
    SERVER
        .get()
        .expect("api::init runs before any engine exists")
        .0
}

/// Builds the server handle. Call once, before loading an engine.
pub fn init(settings: Settings) {
    let level = match settings.verbosity {
        0 => EXTENSION_LOG_WARNING,
        1 => EXTENSION_LOG_INFO,
        2 => EXTENSION_LOG_DEBUG,
        _ => EXTENSION_LOG_DETAIL,
    };
    let server = Box::leak(Box::new(Server {
        started: now() - 2,
        settings,
        log_level: AtomicU32::new(level.0),
        events: Events::default(),
        extensions: Extensions::default(),
        evictions: AtomicU64::new(0),
        shutdown: std::sync::atomic::AtomicBool::new(false),
        listener: std::sync::atomic::AtomicI32::new(-1),
        handle: Handle {
            server: std::cell::UnsafeCell::new(SERVER_HANDLE_V1 {
                interface: 1,
                core: std::ptr::null_mut(),
                stat: std::ptr::null_mut(),
                extension: std::ptr::null_mut(),
                callback: std::ptr::null_mut(),
                engine: std::ptr::null_mut(),
                log: std::ptr::null_mut(),
                cookie: std::ptr::null_mut(),
                #[cfg(not(feature = "engine-pu"))]
                alloc_hooks: std::ptr::null_mut(),
            }),
            core: SERVER_CORE_API {
                get_current_time: Some(get_current_time),
                realtime: Some(realtime),
                abstime: Some(abstime),
                server_version: Some(server_version),
                hash: Some(hash),
                parse_config: Some(crate::config::parse_config),
                shutdown: Some(shutdown),
                get_config: Some(get_config),
            },
            stat: SERVER_STAT_API {
                new_stats: Some(new_stats),
                release_stats: Some(release_stats),
                evicting: Some(evicting),
            },
            extension: SERVER_EXTENSION_API {
                register_extension: Some(register_extension),
                unregister_extension: Some(unregister_extension),
                get_extension: Some(get_extension),
            },
            callback: SERVER_CALLBACK_API {
                register_callback: Some(register_callback),
                perform_callbacks: Some(perform_callbacks),
            },
            log: SERVER_LOG_API {
                get_logger: Some(get_logger),
                get_level: Some(get_level),
                set_level: Some(set_level),
            },
            cookie: conn::COOKIE_API,
            #[cfg(not(feature = "engine-pu"))]
            hooks: hooks::API,
        },
    }));
    let h = &mut server.handle;
    let top = h.server.get_mut();
    top.core = &mut h.core;
    top.stat = &mut h.stat;
    top.extension = &mut h.extension;
    top.callback = &mut h.callback;
    top.log = &mut h.log;
    top.cookie = &mut h.cookie;
    #[cfg(not(feature = "engine-pu"))]
    {
        top.alloc_hooks = &mut h.hooks;
    }
    assert!(SERVER.set(ServerRef(server)).is_ok(), "api::init runs once");
}

/// memcached's `get_server_api`, handed to `create_instance`.
pub unsafe extern "C" fn get_server_api() -> *mut SERVER_HANDLE_V1 {
    guard(std::ptr::null_mut(), || server().handle.server.get())
}

/// Records the engine in the handle's `engine` field, as memcached does once it has one.
/// Called before any connection exists, by the thread that loaded it.
pub fn set_engine(engine: *mut ENGINE_HANDLE) {
    let top = server().handle.server.get();
    // SAFETY: the handle lives in an UnsafeCell in the leaked server; no other thread runs yet
    // (the listener starts after the engine is loaded), and no reference to it is alive.
    unsafe { (*top).engine = engine };
}

/// Tells `shutdown` which socket to wake.
pub fn set_listener(listener: &std::net::TcpListener) {
    use std::os::fd::AsRawFd;
    // Relaxed: the descriptor is a plain number; `shutdown` acts on it through the kernel.
    server()
        .listener
        .store(listener.as_raw_fd(), Ordering::Relaxed);
}

/// Whether an engine asked the server to shut down.
pub fn shutdown_requested() -> bool {
    // Acquire: pairs with the Release in `shutdown`; nothing else is published, but the flag
    // must not be seen before the engine's own writes preceding its call.
    server().shutdown.load(Ordering::Acquire)
}

fn now() -> libc::time_t {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    libc::time_t::try_from(secs).unwrap_or(libc::time_t::MAX)
}

// ---------------------------------------------------------------------------------------------
// Core API

/// Seconds since the server started.
pub fn current_time() -> rel_time_t {
    rel_time_t::try_from(now() - server().started).unwrap_or(0)
}

unsafe extern "C" fn get_current_time() -> rel_time_t {
    guard(0, current_time)
}

/// memcached's rule: 0 is never; up to 30 days is relative to now; beyond is a Unix time, and
/// one at or before the server's start becomes 1 (already expired, but not 0, which would mean
/// never). A negative time has already passed, so it is 1 too.
pub fn to_rel_time(exptime: libc::time_t) -> rel_time_t {
    let started = server().started;
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
    server().started + libc::time_t::from(t)
}

unsafe extern "C" fn abstime(exptime: rel_time_t) -> libc::time_t {
    guard(0, || abstime_of(exptime))
}

/// The version the protocols report (numeric, so clients that parse it are content).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
const VERSION_C: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
) {
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

unsafe extern "C" fn shutdown() {
    guard((), || {
        // Release: pairs with the Acquire in `shutdown_requested`.
        server().shutdown.store(true, Ordering::Release);
        log(
            EXTENSION_LOG_WARNING,
            "an engine asked the server to shut down",
        );
        // Relaxed: see `set_listener`.
        let fd = server().listener.load(Ordering::Relaxed);
        if fd >= 0 {
            // SAFETY: our listening socket, which lives as long as the process serves; shutting
            // it down makes the blocked accept return, and the listener sees the flag.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
    })
}

/// Parses the host's own settings (`maxconns`, `tcpport`, ...) into the engine's table; true
/// unless a value was bad (settings the engine did not ask for are fine, as in memcached).
unsafe extern "C" fn get_config(items: *mut config_item) -> bool {
    guard(false, || {
        let text = server().settings.config.as_ptr();
        // SAFETY: our NUL-terminated settings; the engine's table per parse_config's contract.
        unsafe { crate::config::parse_config(text, items, std::ptr::null_mut()) >= 0 }
    })
}

// ---------------------------------------------------------------------------------------------
// Stat API

/// What `new_stats` hands out: a per-engine block the engine may pass back to the host
/// (`aggregate_stats`); this host keeps its statistics elsewhere, so the block stays zero.
#[repr(C, align(8))]
struct StatsBlock([u64; 32]);

unsafe extern "C" fn new_stats() -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(StatsBlock([0; 32]))).cast()
    })
}

unsafe extern "C" fn release_stats(stats: *mut c_void) {
    guard((), || {
        if !stats.is_null() {
            // SAFETY: a block from `new_stats`, released once (the engine's contract).
            drop(unsafe { Box::from_raw(stats.cast::<StatsBlock>()) });
        }
    })
}

unsafe extern "C" fn evicting(_cookie: *const c_void, _key: *const c_void, _nkey: c_int) {
    // Relaxed: a statistic; nobody synchronises on it.
    guard((), || {
        server().evictions.fetch_add(1, Ordering::Relaxed);
    })
}

/// Evictions engines reported through `evicting`.
pub fn evictions() -> u64 {
    // Relaxed: a statistic.
    server().evictions.load(Ordering::Relaxed)
}

// ---------------------------------------------------------------------------------------------
// Extensions and the logger

extern "C" {
    /// src/logger.c: formats and calls `mcb_host_log_text`.
    fn mcb_host_log(severity: EXTENSION_LOG_LEVEL, cookie: *const c_void, fmt: *const c_char, ...);
}

unsafe extern "C" fn logger_name() -> *const c_char {
    c"mcb-memcached stderr logger".as_ptr()
}

/// The stderr logger (the default `EXTENSION_LOGGER`).
struct Logger(EXTENSION_LOGGER_DESCRIPTOR);

// SAFETY: two function pointers to process-lifetime code, never written.
unsafe impl Sync for Logger {}

static STDERR_LOGGER: Logger = Logger(EXTENSION_LOGGER_DESCRIPTOR {
    get_name: Some(logger_name),
    log: Some(mcb_host_log),
});

/// Called by src/logger.c with a formatted message.
///
/// # Safety
/// `text` points at `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn mcb_host_log_text(
    severity: u32,
    cookie: *const c_void,
    text: *const c_char,
    len: usize,
) {
    guard((), || {
        if text.is_null() {
            return;
        }
        // SAFETY: the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len) };
        write_log(EXTENSION_LOG_LEVEL(severity), cookie, bytes);
    })
}

fn write_log(severity: EXTENSION_LOG_LEVEL, cookie: *const c_void, text: &[u8]) {
    // Relaxed: a filter; a change of level may take effect a message late.
    if severity.0 < server().log_level.load(Ordering::Relaxed) {
        return;
    }
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    let mut line = Vec::with_capacity(text.len() + 32);
    let _ = write!(line, "mcb-memcached[{}] ", level_name(severity));
    if !cookie.is_null() {
        let _ = write!(line, "{cookie:p} ");
    }
    line.extend_from_slice(text);
    line.push(b'\n');
    // One write per line, so concurrent lines do not interleave.
    let _ = std::io::stderr().lock().write_all(&line);
}

fn level_name(level: EXTENSION_LOG_LEVEL) -> &'static str {
    match level {
        EXTENSION_LOG_DETAIL => "detail",
        EXTENSION_LOG_DEBUG => "debug",
        EXTENSION_LOG_INFO => "info",
        _ => "warning",
    }
}

/// Logs through the current logger extension (ours unless an extension replaced it).
pub fn log(severity: EXTENSION_LOG_LEVEL, message: &str) {
    let logger = server().extensions.logger();
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // SAFETY: a registered logger stays valid until unregistered (the extension contract);
    // "%s" with one C string matches the variadic contract.
    match unsafe { logger.as_ref() }.and_then(|l| l.log) {
        // SAFETY: see above; `text` outlives the call.
        Some(f) => unsafe { f(severity, std::ptr::null(), c"%s".as_ptr(), text.as_ptr()) },
        None => write_log(severity, std::ptr::null(), message.as_bytes()),
    }
}

/// Registered extensions, newest first per type; the logger is the newest registered logger,
/// or ours.
#[derive(Default)]
struct Extensions {
    lists: Mutex<[Vec<usize>; 4]>,
}

impl Extensions {
    fn logger(&self) -> *mut EXTENSION_LOGGER_DESCRIPTOR {
        let lists = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        match lists[EXTENSION_LOGGER.0 as usize].first() {
            Some(&p) => p as *mut EXTENSION_LOGGER_DESCRIPTOR,
            None => std::ptr::from_ref(&STDERR_LOGGER.0).cast_mut(),
        }
    }
}

fn extension_index(kind: extension_type_t) -> Option<usize> {
    (kind.0 <= EXTENSION_BINARY_PROTOCOL.0).then_some(kind.0 as usize)
}

/// Records an extension. This host runs no ASCII or binary protocol extensions (their commands
/// are not dispatched to them), so it refuses those; loggers and daemon descriptors are kept.
unsafe extern "C" fn register_extension(kind: extension_type_t, extension: *mut c_void) -> bool {
    guard(false, || {
        if extension.is_null() || !(kind == EXTENSION_LOGGER || kind == EXTENSION_DAEMON) {
            return false;
        }
        let Some(i) = extension_index(kind) else {
            return false;
        };
        let mut lists = server()
            .extensions
            .lists
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        lists[i].insert(0, extension as usize);
        true
    })
}

unsafe extern "C" fn unregister_extension(kind: extension_type_t, extension: *mut c_void) {
    guard((), || {
        let Some(i) = extension_index(kind) else {
            return;
        };
        let mut lists = server()
            .extensions
            .lists
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        lists[i].retain(|&p| p != extension as usize);
    })
}

unsafe extern "C" fn get_extension(kind: extension_type_t) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        let extensions = &server().extensions;
        if kind == EXTENSION_LOGGER {
            return extensions.logger().cast();
        }
        let Some(i) = extension_index(kind) else {
            return std::ptr::null_mut();
        };
        let lists = extensions
            .lists
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        lists[i]
            .first()
            .map_or(std::ptr::null_mut(), |&p| p as *mut c_void)
    })
}

unsafe extern "C" fn get_logger() -> *mut EXTENSION_LOGGER_DESCRIPTOR {
    guard(std::ptr::null_mut(), || server().extensions.logger())
}

unsafe extern "C" fn get_level() -> EXTENSION_LOG_LEVEL {
    // Relaxed: a plain setting.
    guard(EXTENSION_LOG_WARNING, || {
        EXTENSION_LOG_LEVEL(server().log_level.load(Ordering::Relaxed))
    })
}

unsafe extern "C" fn set_level(severity: EXTENSION_LOG_LEVEL) {
    guard((), || set_log_level(severity))
}

/// Sets the logger's level and fires ON_LOG_LEVEL (the binary and ASCII `verbosity` commands).
pub fn set_log_level(severity: EXTENSION_LOG_LEVEL) {
    // Relaxed: a plain setting.
    server().log_level.store(severity.0, Ordering::Relaxed);
    fire(ON_LOG_LEVEL, std::ptr::null(), std::ptr::null());
}

// ---------------------------------------------------------------------------------------------
// Events

/// One registered handler.
#[derive(Clone, Copy)]
struct Handler {
    callback: unsafe extern "C" fn(*const c_void, ENGINE_EVENT_TYPE, *const c_void, *const c_void),
    data: usize,
}

/// Handlers per event type, newest first (memcached's order). Each list is replaced whole on
/// registration, so a dispatch walks a snapshot and a handler may register another.
#[derive(Default)]
struct Events {
    lists: [Mutex<Arc<[Handler]>>; MAX_ENGINE_EVENT_TYPE],
}

unsafe extern "C" fn register_callback(
    _engine: *mut ENGINE_HANDLE,
    kind: ENGINE_EVENT_TYPE,
    callback: EVENT_CALLBACK,
    data: *const c_void,
) {
    guard((), || {
        let (Some(list), Some(callback)) = (server().events.lists.get(kind.0 as usize), callback)
        else {
            log(
                EXTENSION_LOG_WARNING,
                &format!("register_callback: ignoring event type {}", kind.0),
            );
            return;
        };
        let mut list = list.lock().unwrap_or_else(PoisonError::into_inner);
        let handler = Handler {
            callback,
            data: data as usize,
        };
        *list = std::iter::once(handler)
            .chain(list.iter().copied())
            .collect();
    })
}

unsafe extern "C" fn perform_callbacks(
    kind: ENGINE_EVENT_TYPE,
    data: *const c_void,
    cookie: *const c_void,
) {
    guard((), || fire(kind, data, cookie))
}

/// Runs the handlers of `kind`, newest first.
pub fn fire(kind: ENGINE_EVENT_TYPE, data: *const c_void, cookie: *const c_void) {
    let Some(list) = server().events.lists.get(kind.0 as usize) else {
        return;
    };
    let snapshot = Arc::clone(&list.lock().unwrap_or_else(PoisonError::into_inner));
    for h in snapshot.iter() {
        // SAFETY: a handler an engine registered with its own data; engines stay loaded for
        // the life of the process.
        unsafe { (h.callback)(cookie, kind, data, h.data as *const c_void) };
    }
}

// ---------------------------------------------------------------------------------------------
// Allocator hooks (v2.5.1): a host without an instrumented allocator says so.

#[cfg(not(feature = "engine-pu"))]
mod hooks {
    use mcb_abi::abi::*;
    use std::ffi::{c_char, c_int, c_void};

    unsafe extern "C" fn add_new(_hook: allocator_new_hook) -> bool {
        false
    }
    unsafe extern "C" fn add_delete(_hook: allocator_delete_hook) -> bool {
        false
    }
    unsafe extern "C" fn extra_stats_size() -> c_int {
        0
    }
    unsafe extern "C" fn allocator_stats(stats: *mut allocator_stats) {
        // SAFETY: NULL or the engine's live out-parameter.
        if let Some(s) = unsafe { stats.as_mut() } {
            s.allocated_size = 0;
            s.heap_size = 0;
            s.free_size = 0;
            s.fragmentation_size = 0;
            s.ext_stats_size = 0;
        }
    }
    unsafe extern "C" fn allocation_size(_ptr: *mut c_void) -> usize {
        0
    }
    unsafe extern "C" fn detailed_stats(buffer: *mut c_char, size: c_int) {
        if !buffer.is_null() && size > 0 {
            // SAFETY: the engine's buffer of `size` > 0 bytes.
            unsafe { *buffer = 0 };
        }
    }

    pub(super) const API: ALLOCATOR_HOOKS_API = ALLOCATOR_HOOKS_API {
        add_new_hook: Some(add_new),
        remove_new_hook: Some(add_new),
        add_delete_hook: Some(add_delete),
        remove_delete_hook: Some(add_delete),
        get_extra_stats_size: Some(extra_stats_size),
        get_allocator_stats: Some(allocator_stats),
        get_allocation_size: Some(allocation_size),
        get_detailed_stats: Some(detailed_stats),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    /// The server is process-global: the tests of this binary share one.
    fn server_api() -> &'static SERVER_HANDLE_V1 {
        static INIT: std::sync::Once = std::sync::Once::new();
        INIT.call_once(|| {
            init(Settings {
                verbosity: 0,
                config: CString::new("maxconns=10;tcpport=1234").unwrap(),
            })
        });
        // SAFETY: the leaked handle; nothing writes it after `init` in these tests.
        unsafe { &*get_server_api() }
    }

    fn core() -> SERVER_CORE_API {
        // SAFETY: the table `init` pointed the handle at.
        unsafe { *server_api().core }
    }

    #[test]
    fn times_follow_memcacheds_30_day_rule() {
        let core = core();
        let (realtime, abstime) = (core.realtime.unwrap(), core.abstime.unwrap());
        let now = now();
        let current = current_time();
        assert!(current >= 2, "the clock starts a little in the past");
        // SAFETY: our own functions, plain values.
        unsafe {
            assert_eq!(realtime(0), 0, "never");
            assert_eq!(realtime(-5), 1, "already expired");
            let rel = realtime(100);
            assert!(rel == current + 100 || rel == current + 101, "{rel}");
            let month = REALTIME_MAXDELTA;
            assert!(
                realtime(month) >= current + month as u32,
                "30 days is still relative"
            );
            assert_eq!(realtime(month + 1), 1, "an absolute time before the start");
            let abs = realtime(now + 1000);
            assert!(abs >= current + 999 && abs <= current + 1001, "{abs}");
            let back = abstime(realtime(now + 1000));
            assert!((back - (now + 1000)).abs() <= 1, "{back}");
            assert!((abstime(current) - now).abs() <= 1);
        }
    }

    #[test]
    fn version_hash_and_host_settings() {
        let core = core();
        // SAFETY: our own functions with live arguments.
        unsafe {
            let version = CStr::from_ptr(core.server_version.unwrap()());
            assert_eq!(version.to_str().unwrap(), VERSION);
            let hash = core.hash.unwrap();
            let h1 = hash(b"key".as_ptr().cast(), 3, 0);
            assert_eq!(h1, hash(b"key".as_ptr().cast(), 3, 0), "stable");
            assert_ne!(h1, hash(b"key".as_ptr().cast(), 3, 1), "seeded");
            assert_ne!(h1, hash(b"kez".as_ptr().cast(), 3, 0));
            let mut maxconns = 0usize;
            let mut items = [
                config_item {
                    key: c"maxconns".as_ptr(),
                    datatype: DT_SIZE,
                    value: config_value {
                        dt_size: &mut maxconns,
                    },
                    found: false,
                },
                config_item {
                    key: std::ptr::null(),
                    datatype: DT_SIZE,
                    value: config_value {
                        dt_size: std::ptr::null_mut(),
                    },
                    found: false,
                },
            ];
            // Settings nobody asked for (tcpport) are fine.
            assert!(core.get_config.unwrap()(items.as_mut_ptr()));
            assert_eq!((maxconns, items[0].found), (10, true));
        }
    }

    static ORDER: Mutex<Vec<usize>> = Mutex::new(Vec::new());

    unsafe extern "C" fn record(
        _cookie: *const c_void,
        _kind: ENGINE_EVENT_TYPE,
        _data: *const c_void,
        cb_data: *const c_void,
    ) {
        ORDER.lock().unwrap().push(cb_data as usize);
    }

    #[test]
    fn callbacks_run_newest_first() {
        let api = server_api();
        // SAFETY: the table `init` pointed the handle at, and our own functions.
        unsafe {
            let cb = *api.callback;
            for data in [1usize, 2, 3] {
                cb.register_callback.unwrap()(
                    std::ptr::null_mut(),
                    ON_SWITCH_CONN,
                    Some(record),
                    data as *const c_void,
                );
            }
            // An out-of-range event type is refused, not stored.
            cb.register_callback.unwrap()(
                std::ptr::null_mut(),
                ENGINE_EVENT_TYPE(99),
                Some(record),
                std::ptr::null(),
            );
            cb.perform_callbacks.unwrap()(ON_SWITCH_CONN, std::ptr::null(), std::ptr::null());
            cb.perform_callbacks.unwrap()(
                ENGINE_EVENT_TYPE(99),
                std::ptr::null(),
                std::ptr::null(),
            );
        }
        assert_eq!(*ORDER.lock().unwrap(), [3, 2, 1]);
    }

    unsafe extern "C" fn other_name() -> *const c_char {
        c"other".as_ptr()
    }

    #[test]
    fn a_registered_logger_replaces_ours_until_unregistered() {
        let api = server_api();
        // SAFETY: the tables `init` pointed the handle at; a logger descriptor that lives for
        // the whole test (leaked).
        unsafe {
            let ext = *api.extension;
            let ours = ext.get_extension.unwrap()(EXTENSION_LOGGER);
            assert_eq!(ours, (*api.log).get_logger.unwrap()().cast());
            let other = Box::leak(Box::new(EXTENSION_LOGGER_DESCRIPTOR {
                get_name: Some(other_name),
                log: STDERR_LOGGER.0.log,
            }));
            let other_ptr = std::ptr::from_mut(other).cast::<c_void>();
            assert!(ext.register_extension.unwrap()(EXTENSION_LOGGER, other_ptr));
            assert_eq!(ext.get_extension.unwrap()(EXTENSION_LOGGER), other_ptr);
            // Protocol extensions are refused: this host would never call them.
            assert!(!ext.register_extension.unwrap()(
                EXTENSION_ASCII_PROTOCOL,
                other_ptr
            ));
            assert!(ext.get_extension.unwrap()(EXTENSION_ASCII_PROTOCOL).is_null());
            ext.unregister_extension.unwrap()(EXTENSION_LOGGER, other_ptr);
            assert_eq!(ext.get_extension.unwrap()(EXTENSION_LOGGER), ours);
            // Levels: below the current level nothing is written.
            let log = *api.log;
            log.set_level.unwrap()(EXTENSION_LOG_INFO);
            assert_eq!(log.get_level.unwrap()(), EXTENSION_LOG_INFO);
            log.set_level.unwrap()(EXTENSION_LOG_WARNING);
        }
    }

    #[test]
    fn stats_blocks_come_and_go() {
        let api = server_api();
        // SAFETY: the table `init` pointed the handle at; a block released once.
        unsafe {
            let stat = *api.stat;
            let block = stat.new_stats.unwrap()();
            assert!(!block.is_null());
            stat.release_stats.unwrap()(block);
            stat.release_stats.unwrap()(std::ptr::null_mut());
            let before = evictions();
            stat.evicting.unwrap()(std::ptr::null(), b"k".as_ptr().cast(), 1);
            assert_eq!(evictions(), before + 1);
        }
    }
}
