//! What both engines need of their host's server API beyond their own tables: the error for an
//! unusable API, host strings, the logger extension and `parse_config`.

use crate::abi::*;
use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;

/// Why the host's server API could not be used.
#[derive(Debug)]
pub(crate) struct BadHost(pub(crate) &'static str);

impl std::fmt::Display for BadHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
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

/// The host's logger extension; stderr when the host has none.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Logger(*mut EXTENSION_LOGGER_DESCRIPTOR);

impl Logger {
    /// The logger the host's extension API hands out, if any.
    ///
    /// # Safety
    /// `extension` is NULL or points at the host's live extension table.
    pub(crate) unsafe fn of(extension: *const SERVER_EXTENSION_API) -> Self {
        // SAFETY: the caller's contract.
        let get = unsafe { extension.as_ref() }.and_then(|e| e.get_extension);
        Self(match get {
            // SAFETY: a host function from a checked table; EXTENSION_LOGGER is a valid type.
            Some(get) => unsafe { get(EXTENSION_LOGGER) }.cast(),
            None => ptr::null_mut(),
        })
    }

    /// Logs `message` at `level`.
    pub(crate) fn log(&self, level: EXTENSION_LOG_LEVEL, message: &str) {
        let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
        // SAFETY: NULL or the descriptor the host's get_extension returned, which lives as
        // long as the host.
        let logger = unsafe { self.0.as_ref() };
        match logger.and_then(|l| l.log) {
            // SAFETY: "%s" with one NUL-terminated string matches the variadic contract; `text`
            // outlives the call.
            Some(log) => unsafe { log(level, ptr::null(), c"%s".as_ptr(), text.as_ptr()) },
            None => eprintln!("{message}"),
        }
    }
}

/// Parses `config` into `items` with the host's `parse_config` (0: parsed, 1: an unknown key,
/// -1: a bad value).
///
/// # Safety
/// `items` follows `parse_config`'s contract: a table ending in [`config_item::END`] whose
/// value pointers point at live storage of each item's datatype.
pub(crate) unsafe fn parse_config(
    core: &SERVER_CORE_API,
    config: &CStr,
    items: &mut [config_item],
) -> c_int {
    debug_assert!(items.last().is_some_and(|i| i.key.is_null()));
    let Some(parse) = core.parse_config else {
        return -1;
    };
    // SAFETY: `config` is NUL-terminated; `items` per the caller; a NULL error stream makes the
    // host keep quiet (the caller logs).
    unsafe { parse(config.as_ptr(), items.as_mut_ptr(), ptr::null_mut()) }
}
