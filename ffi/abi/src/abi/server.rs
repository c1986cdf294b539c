//! `server_api.h`, `callback.h`, `extension.h` and (v2.5.1) `allocator_hooks.h`: the tables of
//! functions the server hands an engine through [`SERVER_HANDLE_V1`] (here too, with
//! [`GET_SERVER_API`]), the connection events, and the extensions (loggers above all).
//!
//! The bucket engine copies these tables by value before overriding slots for the engines it
//! loads; a copy must have exactly the host's layout, which the tests pin.

use core::ffi::{c_char, c_int, c_void};

use super::config::config_item;
use super::protocol::protocol_binary_request_header;
use super::types::{auth_data_t, rel_time_t, ADD_RESPONSE, ENGINE_ERROR_CODE, ENGINE_HANDLE};

// ---------------------------------------------------------------------------------------------
// server_api.h

/// The server's core services (`SERVER_CORE_API`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SERVER_CORE_API {
    /// The current time, relative to the server's start.
    pub get_current_time: Option<unsafe extern "C" fn() -> rel_time_t>,
    /// An expiry as the client sent it (relative, or absolute beyond 30 days) to `rel_time_t`.
    pub realtime: Option<unsafe extern "C" fn(exptime: libc::time_t) -> rel_time_t>,
    /// A `rel_time_t` to an absolute Unix time.
    pub abstime: Option<unsafe extern "C" fn(exptime: rel_time_t) -> libc::time_t>,
    pub server_version: Option<unsafe extern "C" fn() -> *const c_char>,
    pub hash: Option<unsafe extern "C" fn(data: *const c_void, size: usize, seed: u32) -> u32>,
    /// Parses `key=value;...` into `items` (terminated by a NULL key); 0 on success, -1 on an
    /// error (reported to `error` when not NULL), 1 when an unknown key was found.
    pub parse_config: Option<
        unsafe extern "C" fn(
            str_: *const c_char,
            items: *mut config_item,
            error: *mut libc::FILE,
        ) -> c_int,
    >,
    pub shutdown: Option<unsafe extern "C" fn()>,
    pub get_config: Option<unsafe extern "C" fn(items: *mut config_item) -> bool>,
}

/// The server's statistics services (`SERVER_STAT_API`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SERVER_STAT_API {
    pub new_stats: Option<unsafe extern "C" fn() -> *mut c_void>,
    pub release_stats: Option<unsafe extern "C" fn(stats: *mut c_void)>,
    pub evicting:
        Option<unsafe extern "C" fn(cookie: *const c_void, key: *const c_void, nkey: c_int)>,
}

/// Per-connection services, keyed by the connection's cookie (`SERVER_COOKIE_API`, seven
/// slots).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SERVER_COOKIE_API {
    pub get_socket_fd: Option<unsafe extern "C" fn(cookie: *const c_void) -> c_int>,
    pub get_auth_data: Option<unsafe extern "C" fn(cookie: *const c_void, data: *mut auth_data_t)>,
    pub store_engine_specific:
        Option<unsafe extern "C" fn(cookie: *const c_void, engine_data: *mut c_void)>,
    pub get_engine_specific: Option<unsafe extern "C" fn(cookie: *const c_void) -> *mut c_void>,
    pub notify_io_complete:
        Option<unsafe extern "C" fn(cookie: *const c_void, status: ENGINE_ERROR_CODE)>,
    /// Keeps the connection's resources alive (even past its close) until `release`.
    pub reserve: Option<unsafe extern "C" fn(cookie: *const c_void) -> ENGINE_ERROR_CODE>,
    pub release: Option<unsafe extern "C" fn(cookie: *const c_void) -> ENGINE_ERROR_CODE>,
}

/// The server's handle for an engine: the version and the server's API tables
/// (`struct server_handle_v1_t`). In v2.5.1 it ends with `alloc_hooks`; on `engine-pu` it does
/// not, so a host may hand out a struct 8 bytes shorter than this one.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SERVER_HANDLE_V1 {
    /// The version number of the server structure (1).
    pub interface: u64,
    pub core: *mut SERVER_CORE_API,
    pub stat: *mut SERVER_STAT_API,
    pub extension: *mut SERVER_EXTENSION_API,
    pub callback: *mut SERVER_CALLBACK_API,
    pub engine: *mut ENGINE_HANDLE,
    pub log: *mut SERVER_LOG_API,
    pub cookie: *mut SERVER_COOKIE_API,
    #[cfg(not(feature = "engine-pu"))]
    pub alloc_hooks: *mut ALLOCATOR_HOOKS_API,
}

/// The C struct tag of [`SERVER_HANDLE_V1`].
pub type server_handle_v1_t = SERVER_HANDLE_V1;

/// Returns the server's handle (`GET_SERVER_API`).
pub type GET_SERVER_API = Option<unsafe extern "C" fn() -> *mut SERVER_HANDLE_V1>;

// ---------------------------------------------------------------------------------------------
// callback.h

/// A connection event (`ENGINE_EVENT_TYPE`).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ENGINE_EVENT_TYPE(pub u32);

/// A new connection was established (fired before any engine call on it).
pub const ON_CONNECT: ENGINE_EVENT_TYPE = ENGINE_EVENT_TYPE(0);
/// A connection was terminated.
pub const ON_DISCONNECT: ENGINE_EVENT_TYPE = ENGINE_EVENT_TYPE(1);
/// A connection was authenticated; the event data is an [`auth_data_t`].
pub const ON_AUTH: ENGINE_EVENT_TYPE = ENGINE_EVENT_TYPE(2);
/// The thread switched to processing a different connection.
pub const ON_SWITCH_CONN: ENGINE_EVENT_TYPE = ENGINE_EVENT_TYPE(3);
/// The log level changed.
pub const ON_LOG_LEVEL: ENGINE_EVENT_TYPE = ENGINE_EVENT_TYPE(4);
/// How many event types there are (`#define MAX_ENGINE_EVENT_TYPE 5`), as an array length.
pub const MAX_ENGINE_EVENT_TYPE: usize = 5;

/// An event handler (`EVENT_CALLBACK`).
pub type EVENT_CALLBACK = Option<
    unsafe extern "C" fn(
        cookie: *const c_void,
        type_: ENGINE_EVENT_TYPE,
        event_data: *const c_void,
        cb_data: *const c_void,
    ),
>;

/// Event registration and dispatch (`SERVER_CALLBACK_API`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SERVER_CALLBACK_API {
    pub register_callback: Option<
        unsafe extern "C" fn(
            engine: *mut ENGINE_HANDLE,
            type_: ENGINE_EVENT_TYPE,
            cb: EVENT_CALLBACK,
            cb_data: *const c_void,
        ),
    >,
    pub perform_callbacks: Option<
        unsafe extern "C" fn(type_: ENGINE_EVENT_TYPE, data: *const c_void, cookie: *const c_void),
    >,
}

// ---------------------------------------------------------------------------------------------
// extension.h

/// An extension's result (`EXTENSION_ERROR_CODE`).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct EXTENSION_ERROR_CODE(pub u32);

pub const EXTENSION_SUCCESS: EXTENSION_ERROR_CODE = EXTENSION_ERROR_CODE(0x00);
pub const EXTENSION_FATAL: EXTENSION_ERROR_CODE = EXTENSION_ERROR_CODE(0xfe);
pub const EXTENSION_FAILED: EXTENSION_ERROR_CODE = EXTENSION_ERROR_CODE(0xff);

/// The kind of an extension (`extension_type_t`).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct extension_type_t(pub u32);

/// An [`EXTENSION_DAEMON_DESCRIPTOR`].
pub const EXTENSION_DAEMON: extension_type_t = extension_type_t(0);
/// An [`EXTENSION_LOGGER_DESCRIPTOR`].
pub const EXTENSION_LOGGER: extension_type_t = extension_type_t(1);
/// An [`EXTENSION_ASCII_PROTOCOL_DESCRIPTOR`].
pub const EXTENSION_ASCII_PROTOCOL: extension_type_t = extension_type_t(2);
/// An [`EXTENSION_BINARY_PROTOCOL_DESCRIPTOR`].
pub const EXTENSION_BINARY_PROTOCOL: extension_type_t = extension_type_t(3);

/// A daemon extension, in a linked list (`struct extension_daemon_descriptor`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EXTENSION_DAEMON_DESCRIPTOR {
    pub get_name: Option<unsafe extern "C" fn() -> *const c_char>,
    pub next: *mut EXTENSION_DAEMON_DESCRIPTOR,
}

/// The C struct tag of [`EXTENSION_DAEMON_DESCRIPTOR`].
pub type extension_daemon_descriptor = EXTENSION_DAEMON_DESCRIPTOR;

/// A log severity (`EXTENSION_LOG_LEVEL`); higher is more severe.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct EXTENSION_LOG_LEVEL(pub u32);

pub const EXTENSION_LOG_DETAIL: EXTENSION_LOG_LEVEL = EXTENSION_LOG_LEVEL(0);
pub const EXTENSION_LOG_DEBUG: EXTENSION_LOG_LEVEL = EXTENSION_LOG_LEVEL(1);
pub const EXTENSION_LOG_INFO: EXTENSION_LOG_LEVEL = EXTENSION_LOG_LEVEL(2);
pub const EXTENSION_LOG_WARNING: EXTENSION_LOG_LEVEL = EXTENSION_LOG_LEVEL(3);

/// A logger (`EXTENSION_LOGGER_DESCRIPTOR`). `log` is variadic (printf-style): Rust can call
/// it but cannot define one; pass `"%s"` and a NUL-terminated message rather than a format
/// built from untrusted text.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EXTENSION_LOGGER_DESCRIPTOR {
    pub get_name: Option<unsafe extern "C" fn() -> *const c_char>,
    pub log: Option<
        unsafe extern "C" fn(
            severity: EXTENSION_LOG_LEVEL,
            client_cookie: *const c_void,
            fmt: *const c_char,
            ...
        ),
    >,
}

/// The server's logging services (`SERVER_LOG_API`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SERVER_LOG_API {
    pub get_logger: Option<unsafe extern "C" fn() -> *mut EXTENSION_LOGGER_DESCRIPTOR>,
    pub get_level: Option<unsafe extern "C" fn() -> EXTENSION_LOG_LEVEL>,
    pub set_level: Option<unsafe extern "C" fn(severity: EXTENSION_LOG_LEVEL)>,
}

/// One token of an ASCII command line (`mc_extension_token_t`; `token_t` on engine-pu).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct mc_extension_token_t {
    pub value: *mut c_char,
    pub length: usize,
}

/// The engine-pu branch's name for [`mc_extension_token_t`] (same layout).
pub type token_t = mc_extension_token_t;

/// The callback through which an ASCII extension answers (the `response_handler` parameter of
/// `execute`).
pub type ascii_response_handler = Option<
    unsafe extern "C" fn(
        cookie: *const c_void,
        nbytes: c_int,
        dta: *const c_char,
    ) -> ENGINE_ERROR_CODE,
>;

/// An ASCII protocol extension, in a linked list (`struct extension_ascii_protocol_descriptor`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EXTENSION_ASCII_PROTOCOL_DESCRIPTOR {
    pub get_name: Option<unsafe extern "C" fn(cmd_cookie: *const c_void) -> *const c_char>,
    pub accept: Option<
        unsafe extern "C" fn(
            cmd_cookie: *const c_void,
            cookie: *mut c_void,
            argc: c_int,
            argv: *mut mc_extension_token_t,
            ndata: *mut usize,
            ptr: *mut *mut c_char,
        ) -> bool,
    >,
    pub execute: Option<
        unsafe extern "C" fn(
            cmd_cookie: *const c_void,
            cookie: *const c_void,
            argc: c_int,
            argv: *mut mc_extension_token_t,
            response_handler: ascii_response_handler,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub abort: Option<unsafe extern "C" fn(cmd_cookie: *const c_void, cookie: *const c_void)>,
    pub cookie: *const c_void,
    pub next: *mut EXTENSION_ASCII_PROTOCOL_DESCRIPTOR,
}

/// The C struct tag of [`EXTENSION_ASCII_PROTOCOL_DESCRIPTOR`].
pub type extension_ascii_protocol_descriptor = EXTENSION_ASCII_PROTOCOL_DESCRIPTOR;

/// Handles one binary command for an extension (`BINARY_COMMAND_CALLBACK`).
pub type BINARY_COMMAND_CALLBACK = Option<
    unsafe extern "C" fn(
        descriptor: *mut EXTENSION_BINARY_PROTOCOL_DESCRIPTOR,
        handle: *mut ENGINE_HANDLE,
        cookie: *const c_void,
        request: *mut protocol_binary_request_header,
        response: ADD_RESPONSE,
    ) -> ENGINE_ERROR_CODE,
>;

/// The `add` callback handed to a binary extension's `setup`.
pub type binary_extension_add = Option<
    unsafe extern "C" fn(
        descriptor: *mut EXTENSION_BINARY_PROTOCOL_DESCRIPTOR,
        cmd: u8,
        new_handler: BINARY_COMMAND_CALLBACK,
    ),
>;

/// A binary protocol extension, in a linked list
/// (`struct extension_binary_protocol_descriptor`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EXTENSION_BINARY_PROTOCOL_DESCRIPTOR {
    pub get_name: Option<unsafe extern "C" fn() -> *const c_char>,
    pub setup: Option<unsafe extern "C" fn(add: binary_extension_add)>,
    pub next: *mut EXTENSION_BINARY_PROTOCOL_DESCRIPTOR,
}

/// The C struct tag of [`EXTENSION_BINARY_PROTOCOL_DESCRIPTOR`].
pub type extension_binary_protocol_descriptor = EXTENSION_BINARY_PROTOCOL_DESCRIPTOR;

/// An extension module's entry point (`MEMCACHED_EXTENSIONS_INITIALIZE`).
pub type MEMCACHED_EXTENSIONS_INITIALIZE = Option<
    unsafe extern "C" fn(
        config: *const c_char,
        get_server_api: GET_SERVER_API,
    ) -> EXTENSION_ERROR_CODE,
>;

/// Registration and lookup of extensions (`SERVER_EXTENSION_API`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SERVER_EXTENSION_API {
    pub register_extension:
        Option<unsafe extern "C" fn(type_: extension_type_t, extension: *mut c_void) -> bool>,
    pub unregister_extension:
        Option<unsafe extern "C" fn(type_: extension_type_t, extension: *mut c_void)>,
    pub get_extension: Option<unsafe extern "C" fn(type_: extension_type_t) -> *mut c_void>,
}

// ---------------------------------------------------------------------------------------------
// allocator_hooks.h (v2.5.1 only; engine-pu's SERVER_HANDLE_V1 has no `alloc_hooks`)

/// One allocator-specific statistic (`allocator_ext_stat`).
#[cfg(not(feature = "engine-pu"))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct allocator_ext_stat {
    pub key: [c_char; 48],
    pub value: usize,
}

/// Allocator statistics (`allocator_stats`).
#[cfg(not(feature = "engine-pu"))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct allocator_stats {
    pub allocated_size: usize,
    pub heap_size: usize,
    pub free_size: usize,
    pub fragmentation_size: usize,
    pub ext_stats: *mut allocator_ext_stat,
    pub ext_stats_size: usize,
}

/// A hook called with each new allocation.
#[cfg(not(feature = "engine-pu"))]
pub type allocator_new_hook = Option<unsafe extern "C" fn(ptr: *const c_void, size: usize)>;
/// A hook called with each freed allocation.
#[cfg(not(feature = "engine-pu"))]
pub type allocator_delete_hook = Option<unsafe extern "C" fn(ptr: *const c_void)>;

/// The server's allocator hooks (`struct engine_allocator_hooks_v1`).
#[cfg(not(feature = "engine-pu"))]
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ALLOCATOR_HOOKS_API {
    pub add_new_hook: Option<unsafe extern "C" fn(hook: allocator_new_hook) -> bool>,
    pub remove_new_hook: Option<unsafe extern "C" fn(hook: allocator_new_hook) -> bool>,
    pub add_delete_hook: Option<unsafe extern "C" fn(hook: allocator_delete_hook) -> bool>,
    pub remove_delete_hook: Option<unsafe extern "C" fn(hook: allocator_delete_hook) -> bool>,
    pub get_extra_stats_size: Option<unsafe extern "C" fn() -> c_int>,
    pub get_allocator_stats: Option<unsafe extern "C" fn(stats: *mut allocator_stats)>,
    pub get_allocation_size: Option<unsafe extern "C" fn(ptr: *mut c_void) -> usize>,
    pub get_detailed_stats: Option<unsafe extern "C" fn(buffer: *mut c_char, size: c_int)>,
}

/// The C struct tag of [`ALLOCATOR_HOOKS_API`].
#[cfg(not(feature = "engine-pu"))]
pub type engine_allocator_hooks_v1 = ALLOCATOR_HOOKS_API;
