//! The host (memcached) as the bucket engine sees it: copies of the host's API tables, checked
//! wrappers around the calls we make into them, and the server API we hand to the engines we
//! load, whose callback, extension and cookie tables are our own.
//!
//! This module sits below the connection layer and the instance: the cookie and callback
//! functions our engines get in place of the host's (kept per connection, in `conn`), and the
//! extension and event functions they may not use (refused with a warning in the instance's log,
//! in `instance`), come in as [`Hooks`].
//!
//! Every table is copied by value once, at `create_instance`, after checking its pointer: we
//! never read more of a host structure than its type (the one the `engine-pu` feature selects)
//! says the host provided, and never keep a pointer into host memory we did not check.

use crate::abi::*;
use crate::host_api::{self, Logger};
pub(crate) use crate::host_api::{c_str, BadHost};
use std::ffi::{c_int, c_void, CStr};
use std::ptr::{self, NonNull};

/// The host's tables (copies) and the tables our own engines get.
pub(crate) struct Host {
    core: SERVER_CORE_API,
    stat: SERVER_STAT_API,
    callback: SERVER_CALLBACK_API,
    cookie: SERVER_COOKIE_API,
    logger: Logger,
    /// What engines loaded by the bucket engine get from `get_server_api`; its table pointers
    /// point at the `inner_*` fields below (the struct lives in a leaked box, so they stay put).
    inner: SERVER_HANDLE_V1,
    inner_core: SERVER_CORE_API,
    inner_stat: SERVER_STAT_API,
    inner_callback: SERVER_CALLBACK_API,
    inner_extension: SERVER_EXTENSION_API,
    inner_cookie: SERVER_COOKIE_API,
}

// SAFETY: after construction every field is read-only; the raw pointers point at the host's
// process-lifetime tables and functions (memcached never frees them), which are themselves
// safe to call from any thread (memcached's contract with engines).
unsafe impl Send for Host {}
// SAFETY: as for `Send`: immutable after construction.
unsafe impl Sync for Host {}

/// Copies `*table` if the host provided it.
///
/// # Safety
/// `table` is NULL or points at a live `T` (the host's contract for its API tables).
unsafe fn copy<T: Copy>(table: *const T, what: &'static str) -> Result<T, BadHost> {
    if table.is_null() {
        return Err(BadHost(what));
    }
    // SAFETY: non-null, and the caller vouches that it points at a live `T`.
    Ok(unsafe { *table })
}

/// What our engines get in place of the host's own functions: `register_callback` and
/// `perform_callbacks` from `callback`, `register_extension` and `unregister_extension` from
/// `extension`, and `store_engine_specific`, `get_engine_specific`, `reserve` and `release`
/// from `cookie` (their other fields are not used).
pub(crate) struct Hooks {
    pub(crate) callback: SERVER_CALLBACK_API,
    pub(crate) extension: SERVER_EXTENSION_API,
    pub(crate) cookie: SERVER_COOKIE_API,
}

/// The one owner of a [`Host`] made by [`Host::adopt`]: it lives until [`OwnedHost::free`],
/// which deallocates through the pointer `Box::into_raw` gave (never through a reference).
pub(crate) struct OwnedHost(NonNull<Host>);

impl OwnedHost {
    /// The host, for as long as the owner has not freed it (callers keep no reference past
    /// `free`: see its contract).
    pub(crate) fn get(&self) -> &'static Host {
        // SAFETY: live from `adopt` until `free`, which consumes the owner and whose caller
        // promises that no reference handed out here is used any more.
        unsafe { self.0.as_ref() }
    }

    /// Frees the host.
    ///
    /// # Safety
    /// Nothing uses a reference from [`OwnedHost::get`] afterwards (no engine we loaded runs any
    /// more, and the bucket engine's own state is gone).
    pub(crate) unsafe fn free(self) {
        // SAFETY: from Box::into_raw in `adopt`, freed once (the owner is consumed); the
        // caller's contract rules out later uses.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

impl Host {
    /// Copies the host's server API (from `get_server_api`) into a new `Host`, whose tables for
    /// our engines use `hooks`.
    ///
    /// # Safety
    /// `server` is NULL or points at the host's `SERVER_HANDLE_V1`, whose table pointers are
    /// NULL or point at live tables, for the life of the process.
    pub(crate) unsafe fn adopt(
        server: *mut SERVER_HANDLE_V1,
        hooks: Hooks,
    ) -> Result<OwnedHost, BadHost> {
        // SAFETY: the caller's contract.
        let top = unsafe { copy(server, "get_server_api returned NULL")? };
        if top.interface != 1 {
            return Err(BadHost("the server API is not version 1"));
        }
        // SAFETY: the caller's contract covers the tables `top` points at (this and below).
        let core = unsafe { copy(top.core, "the server has no core API")? };
        // SAFETY: as above.
        let stat = unsafe { copy(top.stat, "the server has no stat API")? };
        // SAFETY: as above.
        let extension = unsafe { copy(top.extension, "the server has no extension API")? };
        // SAFETY: as above.
        let callback = unsafe { copy(top.callback, "the server has no callback API")? };
        // SAFETY: as above.
        let cookie = unsafe { copy(top.cookie, "the server has no cookie API")? };
        if cookie.get_engine_specific.is_none()
            || cookie.store_engine_specific.is_none()
            || callback.register_callback.is_none()
            || core.parse_config.is_none()
        {
            return Err(BadHost(
                "the server API lacks a function the bucket engine needs",
            ));
        }
        // SAFETY: the caller's contract covers the extension table too.
        let logger = unsafe { Logger::of(top.extension) };
        let host = Box::into_raw(Box::new(Host {
            core,
            stat,
            callback,
            cookie,
            logger,
            inner: top,
            inner_core: core,
            inner_stat: stat,
            inner_callback: SERVER_CALLBACK_API {
                register_callback: hooks.callback.register_callback,
                perform_callbacks: hooks.callback.perform_callbacks,
            },
            inner_extension: SERVER_EXTENSION_API {
                register_extension: hooks.extension.register_extension,
                unregister_extension: hooks.extension.unregister_extension,
                get_extension: extension.get_extension,
            },
            inner_cookie: SERVER_COOKIE_API {
                store_engine_specific: hooks.cookie.store_engine_specific,
                get_engine_specific: hooks.cookie.get_engine_specific,
                reserve: hooks.cookie.reserve,
                release: hooks.cookie.release,
                ..cookie
            },
        }));
        // SAFETY: just allocated and not shared yet; the table pointers point into the same
        // allocation, which stays put until `OwnedHost::free`.
        unsafe {
            (*host).inner.core = &raw mut (*host).inner_core;
            (*host).inner.stat = &raw mut (*host).inner_stat;
            (*host).inner.callback = &raw mut (*host).inner_callback;
            (*host).inner.extension = &raw mut (*host).inner_extension;
            (*host).inner.cookie = &raw mut (*host).inner_cookie;
        }
        // SAFETY: Box::into_raw never returns NULL.
        Ok(OwnedHost(unsafe { NonNull::new_unchecked(host) }))
    }

    /// The server API our engines see.
    pub(crate) fn inner_server(&'static self) -> *mut SERVER_HANDLE_V1 {
        ptr::from_ref(&self.inner).cast_mut()
    }

    /// Logs `message` through the host's logger extension (stderr if it has none).
    pub(crate) fn log(&self, level: EXTENSION_LOG_LEVEL, message: &str) {
        self.logger.log(level, message);
    }

    /// The host's clock (seconds since it started).
    pub(crate) fn current_time(&self) -> rel_time_t {
        // SAFETY: a host function from a checked table, no arguments.
        self.core.get_current_time.map_or(0, |f| unsafe { f() })
    }

    /// Parses `config` into `items` with the host's `parse_config`.
    ///
    /// # Safety
    /// As [`crate::host_api::parse_config`].
    pub(crate) unsafe fn parse_config(&self, config: &CStr, items: &mut [config_item]) -> c_int {
        // SAFETY: the caller's contract.
        unsafe { host_api::parse_config(&self.core, config, items) }
    }

    /// The host's per-connection slot (where our connection state lives).
    pub(crate) fn get_engine_specific(&self, cookie: *const c_void) -> *mut c_void {
        if cookie.is_null() {
            return ptr::null_mut();
        }
        let get = self.cookie.get_engine_specific.expect("checked at adopt");
        // SAFETY: a non-NULL cookie the host handed us for this connection.
        unsafe { get(cookie) }
    }

    /// Sets the host's per-connection slot.
    pub(crate) fn store_engine_specific(&self, cookie: *const c_void, value: *mut c_void) {
        if cookie.is_null() {
            return;
        }
        let store = self.cookie.store_engine_specific.expect("checked at adopt");
        // SAFETY: as in `get_engine_specific`.
        unsafe { store(cookie, value) }
    }

    /// The SASL user name of a connection, if authenticated.
    pub(crate) fn username(&self, cookie: *const c_void) -> Option<String> {
        let get = self.cookie.get_auth_data?;
        if cookie.is_null() {
            return None;
        }
        let mut data = auth_data_t {
            username: ptr::null(),
            config: ptr::null(),
        };
        // SAFETY: a host cookie and a live out-parameter.
        unsafe { get(cookie, &mut data) };
        // SAFETY: the host returns NULL or a NUL-terminated string valid during this call.
        unsafe { c_str(data.username) }
    }

    /// memcached's `notify_io_complete`: wakes a connection parked on EWOULDBLOCK.
    pub(crate) fn notify_io_complete(&self, cookie: *const c_void, status: ENGINE_ERROR_CODE) {
        if let (Some(notify), false) = (self.cookie.notify_io_complete, cookie.is_null()) {
            // SAFETY: a host cookie of a connection that is waiting for this notification.
            unsafe { notify(cookie, status) }
        }
    }

    /// The host's own `reserve` (after we counted the reservation).
    pub(crate) fn reserve(&self, cookie: *const c_void) -> ENGINE_ERROR_CODE {
        match self.cookie.reserve {
            // SAFETY: a host cookie, passed through from the engine that reserves it.
            Some(reserve) => unsafe { reserve(cookie) },
            None => ENGINE_SUCCESS,
        }
    }

    /// The host's own `release`.
    pub(crate) fn release(&self, cookie: *const c_void) -> ENGINE_ERROR_CODE {
        match self.cookie.release {
            // SAFETY: a reserved host cookie, passed through from the engine releasing it.
            Some(release) => unsafe { release(cookie) },
            None => ENGINE_SUCCESS,
        }
    }

    /// Registers one of our event handlers with the host.
    pub(crate) fn register_callback(
        &self,
        engine: *mut ENGINE_HANDLE,
        event: ENGINE_EVENT_TYPE,
        callback: EVENT_CALLBACK,
        data: *const c_void,
    ) {
        let register = self.callback.register_callback.expect("checked at adopt");
        // SAFETY: our own handle and handler; `data` is the leaked instance, valid forever.
        unsafe { register(engine, event, callback, data) }
    }

    /// A per-bucket stats object from the host (`new_stats`), NULL if it has none.
    pub(crate) fn new_stats(&self) -> *mut c_void {
        // SAFETY: a host function from a checked table, no arguments.
        self.stat
            .new_stats
            .map_or(ptr::null_mut(), |f| unsafe { f() })
    }

    /// Gives a `new_stats` object back.
    pub(crate) fn release_stats(&self, stats: *mut c_void) {
        if let (Some(release), false) = (self.stat.release_stats, stats.is_null()) {
            // SAFETY: `stats` came from this host's `new_stats` and is released once.
            unsafe { release(stats) }
        }
    }
}
