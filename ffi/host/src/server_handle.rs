//! The server handle every engine gets from `get_server_api` (`SERVER_HANDLE_V1`): it points at
//! the tables of [`api`](crate::api) and at [`conn`]'s cookie table, above both.
//!
//! memcached's server handle is process-global (`get_server_api` takes no argument), so this
//! one is too: [`init`] builds it once, in a leaked allocation whose table pointers point into
//! itself, before any engine is loaded. This module only points the handle at the tables, and
//! no table module uses it.

#[cfg(not(feature = "engine-pu"))]
use crate::api::hooks;
use crate::api::{callback, extension, log, logger, server_core, stat};
use crate::conn;
use mcb_abi::abi::*;
use mcb_abi::boundary::guard;
use std::cell::UnsafeCell;
use std::ffi::CString;
use std::sync::OnceLock;

/// What the API needs from the command line.
#[derive(Debug)]
pub struct Settings {
    /// `-v` count: 0 warnings, 1 info, 2 debug, 3 or more detail.
    pub verbosity: u32,
    /// The host's settings as `key=value;...`, what `get_config` parses.
    pub config: CString,
}

/// The tables and the handle pointing at them; never moves once leaked. The handle is in an
/// `UnsafeCell`: engines get it as `*mut`, and its `engine` field is written once after the
/// engine exists.
struct Handle {
    server: UnsafeCell<SERVER_HANDLE_V1>,
    core: SERVER_CORE_API,
    stat: SERVER_STAT_API,
    extension: SERVER_EXTENSION_API,
    callback: SERVER_CALLBACK_API,
    log: SERVER_LOG_API,
    cookie: SERVER_COOKIE_API,
    #[cfg(not(feature = "engine-pu"))]
    hooks: ALLOCATOR_HOOKS_API,
}

/// The leaked handle, as a shareable reference.
struct HandleRef(&'static Handle);

// SAFETY: after `init` the tables are only read (by engines, from any thread, which is
// memcached's contract for them); the handle's one later write is `set_engine`'s, whose
// contract keeps it before any other thread reads.
unsafe impl Send for HandleRef {}
// SAFETY: as for `Send`.
unsafe impl Sync for HandleRef {}

static HANDLE: OnceLock<HandleRef> = OnceLock::new();

fn handle() -> &'static Handle {
    HANDLE
        .get()
        .expect("server_handle::init runs before any engine exists")
        .0
}

/// Builds the server handle. Call once, before loading an engine.
pub fn init(settings: Settings) {
    logger::set_level(logger::level_of_verbosity(settings.verbosity));
    server_core::start(settings.config);
    let handle = Box::leak(Box::new(Handle {
        server: UnsafeCell::new(SERVER_HANDLE_V1 {
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
        core: server_core::API,
        stat: stat::API,
        extension: extension::API,
        callback: callback::API,
        log: log::API,
        cookie: conn::COOKIE_API,
        #[cfg(not(feature = "engine-pu"))]
        hooks: hooks::API,
    }));
    let top = handle.server.get_mut();
    top.core = &mut handle.core;
    top.stat = &mut handle.stat;
    top.extension = &mut handle.extension;
    top.callback = &mut handle.callback;
    top.log = &mut handle.log;
    top.cookie = &mut handle.cookie;
    #[cfg(not(feature = "engine-pu"))]
    {
        top.alloc_hooks = &mut handle.hooks;
    }
    assert!(
        HANDLE.set(HandleRef(handle)).is_ok(),
        "server_handle::init runs once"
    );
}

/// memcached's `get_server_api`, handed to `create_instance`.
///
/// # Safety
/// None beyond C's: it takes no argument and returns the static server handle (NULL before
/// `init`); `unsafe` only because it is the C type an engine calls. What it returns is
/// shared with every engine: write only its `engine` field, through [`set_engine`].
pub unsafe extern "C" fn get_server_api() -> *mut SERVER_HANDLE_V1 {
    guard(std::ptr::null_mut(), || handle().server.get())
}

/// Records the engine in the handle's `engine` field, as memcached does once it has one.
///
/// # Safety
/// The write is not synchronised with readers of the handle: call it before any other thread
/// may read the server handle (before the listener starts, and before the engine could have
/// started threads of its own that read it), at most once, with the handle `create_instance`
/// returned (engines may pass it back to us).
pub unsafe fn set_engine(engine: *mut ENGINE_HANDLE) {
    let top = handle().server.get();
    // SAFETY: the handle lives in an UnsafeCell in the leaked allocation; no other thread
    // reads it yet (the caller's contract), and no reference to it is alive.
    unsafe { (*top).engine = engine };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::server_core::{current_time, now, REALTIME_MAXDELTA, VERSION};
    use std::ffi::{c_char, c_void, CStr};
    use std::sync::Mutex;

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
                log: logger::STDERR_LOGGER.0.log,
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
            let before = stat::evictions();
            stat.evicting.unwrap()(std::ptr::null(), b"k".as_ptr().cast(), 1);
            assert_eq!(stat::evictions(), before + 1);
        }
    }
}
