//! What the storage engine uses of its host: the core API (clock, `realtime`, `parse_config`)
//! and the logger, copied by value at `create_instance` after checking each pointer, so that we
//! never keep a pointer into host memory we did not check.

use crate::abi::*;
use crate::host_api::{self, Logger};
pub(crate) use crate::host_api::{c_str, BadHost};
use mcb_core::store::{Clock, RelTime};
use std::ffi::{c_int, CStr};

/// Copies of the host's tables the engine calls.
pub(crate) struct HostApi {
    core: SERVER_CORE_API,
    logger: Logger,
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
        // SAFETY: as above, for the extension table.
        let logger = unsafe { Logger::of(top.extension) };
        Ok(Self { core, logger })
    }

    /// Logs a warning through the host's logger extension (stderr if it has none).
    pub(crate) fn log(&self, message: &str) {
        self.logger.log(EXTENSION_LOG_WARNING, message);
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

    /// Parses `config` into `items` with the host's `parse_config`.
    ///
    /// # Safety
    /// As [`crate::host_api::parse_config`].
    pub(crate) unsafe fn parse_config(&self, config: &CStr, items: &mut [config_item]) -> c_int {
        // SAFETY: the caller's contract.
        unsafe { host_api::parse_config(&self.core, config, items) }
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
