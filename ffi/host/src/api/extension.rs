//! The extension table (`SERVER_EXTENSION_API`): extensions engines register, newest first per
//! type, and [`log`], which logs through the current logger (the newest registered one, or ours).

use crate::api::logger;
use mcb_abi::abi::*;
use mcb_abi::boundary::guard;
use std::ffi::{c_void, CString};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Registered extensions per `extension_type_t`, newest first, as addresses.
static LISTS: Mutex<[Vec<usize>; 4]> = Mutex::new([Vec::new(), Vec::new(), Vec::new(), Vec::new()]);

fn lists() -> MutexGuard<'static, [Vec<usize>; 4]> {
    LISTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The current logger: the newest registered one, or ours.
pub fn logger() -> *mut EXTENSION_LOGGER_DESCRIPTOR {
    match lists()[EXTENSION_LOGGER.0 as usize].first() {
        Some(&p) => p as *mut EXTENSION_LOGGER_DESCRIPTOR,
        None => std::ptr::from_ref(&logger::STDERR_LOGGER.0).cast_mut(),
    }
}

/// Logs through the current logger extension (ours unless an extension replaced it).
pub fn log(severity: EXTENSION_LOG_LEVEL, message: &str) {
    let current = logger();
    let text = CString::new(message.replace('\0', "\\0")).unwrap_or_default();
    // SAFETY: a registered logger stays valid until unregistered (the extension contract);
    // ours is static.
    match unsafe { current.as_ref() }.and_then(|l| l.log) {
        // SAFETY: "%s" with one C string matches the variadic contract; `text` outlives the
        // call.
        Some(f) => unsafe { f(severity, std::ptr::null(), c"%s".as_ptr(), text.as_ptr()) },
        None => logger::write(severity, std::ptr::null(), message.as_bytes()),
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
        lists()[i].insert(0, extension as usize);
        true
    })
}

unsafe extern "C" fn unregister_extension(kind: extension_type_t, extension: *mut c_void) {
    guard((), || {
        let Some(i) = extension_index(kind) else {
            return;
        };
        lists()[i].retain(|&p| p != extension as usize);
    })
}

unsafe extern "C" fn get_extension(kind: extension_type_t) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        if kind == EXTENSION_LOGGER {
            return logger().cast();
        }
        let Some(i) = extension_index(kind) else {
            return std::ptr::null_mut();
        };
        lists()[i]
            .first()
            .map_or(std::ptr::null_mut(), |&p| p as *mut c_void)
    })
}

/// The extension table of the server handle.
pub const API: SERVER_EXTENSION_API = SERVER_EXTENSION_API {
    register_extension: Some(register_extension),
    unregister_extension: Some(unregister_extension),
    get_extension: Some(get_extension),
};
