//! The callback table (`SERVER_CALLBACK_API`): handlers engines register per event type, and
//! [`fire`], which runs them (ON_CONNECT, ON_DISCONNECT, ON_AUTH, ON_LOG_LEVEL).

use crate::api::extension::log;
use mcb_abi::abi::*;
use mcb_abi::boundary::guard;
use std::ffi::c_void;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

/// One registered handler.
#[derive(Clone, Copy)]
struct Handler {
    callback: unsafe extern "C" fn(*const c_void, ENGINE_EVENT_TYPE, *const c_void, *const c_void),
    data: usize,
}

/// Handlers per event type, newest first (memcached's order). Each list is replaced whole on
/// registration, so a dispatch walks a snapshot and a handler may register another.
static EVENTS: LazyLock<[Mutex<Arc<[Handler]>>; MAX_ENGINE_EVENT_TYPE]> =
    LazyLock::new(Default::default);

unsafe extern "C" fn register_callback(
    _engine: *mut ENGINE_HANDLE,
    kind: ENGINE_EVENT_TYPE,
    callback: EVENT_CALLBACK,
    data: *const c_void,
) {
    guard((), || {
        let (Some(list), Some(callback)) = (EVENTS.get(kind.0 as usize), callback) else {
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
    // SAFETY: the engine vouches for its event's data and cookie (`fire`'s contract), as
    // memcached takes them.
    guard((), || unsafe { fire(kind, data, cookie) })
}

/// Runs the handlers of `kind`, newest first.
///
/// # Safety
/// Handlers dereference what they get: `data` is what an event of `kind` carries (NULL, or for
/// ON_AUTH a live `auth_data_t`), and `cookie` is NULL or a live cookie of this host, both
/// valid for the duration of the call.
pub unsafe fn fire(kind: ENGINE_EVENT_TYPE, data: *const c_void, cookie: *const c_void) {
    let Some(list) = EVENTS.get(kind.0 as usize) else {
        return;
    };
    let snapshot = Arc::clone(&list.lock().unwrap_or_else(PoisonError::into_inner));
    for h in snapshot.iter() {
        // SAFETY: a handler an engine registered with its own data (engines stay loaded for
        // the life of the process); `data` and `cookie` per this function's contract.
        unsafe { (h.callback)(cookie, kind, data, h.data as *const c_void) };
    }
}

/// The callback table of the server handle.
pub const API: SERVER_CALLBACK_API = SERVER_CALLBACK_API {
    register_callback: Some(register_callback),
    perform_callbacks: Some(perform_callbacks),
};
