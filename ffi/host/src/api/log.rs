//! The log table (`SERVER_LOG_API`): the current logger and its level, and
//! [`set_log_level`], which engines hear about through ON_LOG_LEVEL.

use crate::api::{callback, extension, logger};
use mcb_abi::abi::*;
use mcb_abi::boundary::guard;

unsafe extern "C" fn get_logger() -> *mut EXTENSION_LOGGER_DESCRIPTOR {
    guard(std::ptr::null_mut(), extension::logger)
}

unsafe extern "C" fn get_level() -> EXTENSION_LOG_LEVEL {
    guard(EXTENSION_LOG_WARNING, logger::level)
}

unsafe extern "C" fn set_level(severity: EXTENSION_LOG_LEVEL) {
    guard((), || set_log_level(severity))
}

/// Sets the logger's level and fires ON_LOG_LEVEL (the binary and ASCII `verbosity` commands).
pub fn set_log_level(severity: EXTENSION_LOG_LEVEL) {
    logger::set_level(severity);
    // SAFETY: ON_LOG_LEVEL carries no data and no cookie (as memcached fires it).
    unsafe { callback::fire(ON_LOG_LEVEL, std::ptr::null(), std::ptr::null()) };
}

/// The log table of the server handle.
pub const API: SERVER_LOG_API = SERVER_LOG_API {
    get_logger: Some(get_logger),
    get_level: Some(get_level),
    set_level: Some(set_level),
};
