//! What the storage engine uses of its host: the core API (clock, `realtime`, `parse_config`)
//! and the logger, copied by value at `create_instance` after checking each pointer, so that we
//! never keep a pointer into host memory we did not check.

use crate::abi::*;
use mcb_core::store::{Clock, RelTime};
use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

/// Why the host's server API could not be used.
#[derive(Debug)]
pub(crate) struct BadHost(&'static str);

impl std::fmt::Display for BadHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

/// Copies of the host's tables the engine calls.
pub(crate) struct HostApi {
    core: SERVER_CORE_API,
    logger: *mut EXTENSION_LOGGER_DESCRIPTOR,
}

impl HostApi {
    /// Copies what we need of the host's server API.
    ///
    /// # Safety
    /// `server` is NULL or points at a `SERVER_HANDLE_V1` whose table pointers are NULL or
    /// point at live tables, for the life of the engine (memcached's contract).
    pub(crate) unsafe fn copy(server: *mut SERVER_HANDLE_V1) -> Result<Self, BadHost> {
        // SAFETY: the caller's contract.
        let Some(top) = (unsafe { server.as_ref() }) else {
            return Err(BadHost("get_server_api returned NULL"));
        };
        if top.interface != 1 {
            return Err(BadHost("the server API is not version 1"));
        }
        // SAFETY: as above, for the table `top` points at.
        let Some(core) = (unsafe { top.core.as_ref() }).copied() else {
            return Err(BadHost("the server has no core API"));
        };
        if core.parse_config.is_none() || core.get_current_time.is_none() {
            return Err(BadHost(
                "the server's core API lacks parse_config or get_current_time",
            ));
        }
        // SAFETY: as above.
        let extension = unsafe { top.extension.as_ref() };
        let logger = match extension.and_then(|e| e.get_extension) {
            // SAFETY: a host function from a checked table; EXTENSION_LOGGER is a valid type.
            Some(get) => unsafe { get(EXTENSION_LOGGER) }.cast::<EXTENSION_LOGGER_DESCRIPTOR>(),
            None => ptr::null_mut(),
        };
        Ok(Self { core, logger })
    }

    /// Logs a warning through the host's logger extension (stderr if it has none).
    pub(crate) fn log(&self, message: &str) {
        let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
        // SAFETY: `logger` came from the host's get_extension(EXTENSION_LOGGER); when not NULL
        // it points at a descriptor that lives as long as the host.
        let logger = unsafe { self.logger.as_ref() };
        match logger.and_then(|l| l.log) {
            // SAFETY: "%s" with one NUL-terminated string matches the variadic contract; `text`
            // outlives the call.
            Some(log) => unsafe {
                log(
                    EXTENSION_LOG_WARNING,
                    ptr::null(),
                    c"%s".as_ptr(),
                    text.as_ptr(),
                )
            },
            None => eprintln!("{message}"),
        }
    }

    /// The host's clock, for the store.
    pub(crate) fn clock(&self) -> HostClock {
        HostClock(self.core.get_current_time.expect("checked at copy"))
    }

    /// An expiry as a client sent it (0, relative seconds, or an absolute Unix time) on the
    /// host's clock, by the host's `realtime`.
    pub(crate) fn realtime(&self, exptime: libc::time_t) -> RelTime {
        match self.core.realtime {
            // SAFETY: a host function from a checked table.
            Some(realtime) => unsafe { realtime(exptime) },
            None if exptime == 0 => 0,
            None => self.clock().now().saturating_add(exptime as RelTime),
        }
    }

    /// Parses `config` into `items` (NULL-key terminated) with the host's `parse_config`.
    ///
    /// # Safety
    /// `items` follows `parse_config`'s contract: a table ending in a NULL key whose value
    /// pointers point at live storage of the item's datatype.
    pub(crate) unsafe fn parse_config(&self, config: &CStr, items: &mut [config_item]) -> c_int {
        debug_assert!(items.last().is_some_and(|i| i.key.is_null()));
        let parse = self.core.parse_config.expect("checked at copy");
        // SAFETY: `config` is NUL-terminated; `items` per the caller; a NULL error stream
        // makes the host keep quiet (we log ourselves).
        unsafe { parse(config.as_ptr(), items.as_mut_ptr(), ptr::null_mut()) }
    }
}

/// The host's `get_current_time` as the store's clock.
pub(crate) struct HostClock(unsafe extern "C" fn() -> rel_time_t);

impl Clock for HostClock {
    fn now(&self) -> RelTime {
        // SAFETY: the host's own function, checked at copy; it takes no argument.
        unsafe { (self.0)() }
    }
}

/// A C string from the host as an owned Rust string (lossy), or `None` for NULL.
///
/// # Safety
/// `s` is NULL or points at a NUL-terminated string valid for the duration of the call.
pub(crate) unsafe fn c_str(s: *const c_char) -> Option<String> {
    if s.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}
