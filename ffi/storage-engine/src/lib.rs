//! `libmcb_engine.so`: exports the built-in storage engine's `create_instance`, the one symbol
//! memcached looks up in an engine library (`memcached -E libmcb_engine.so`). Everything else
//! lives in `mcb_ffi::storage`; the bucket engine creates the same engine in-process for
//! `engine=builtin`.

use mcb_ffi::abi::{ENGINE_ERROR_CODE, ENGINE_HANDLE, GET_SERVER_API};

/// memcached's entry point for engine libraries: a new storage engine instance per call.
///
/// # Safety
/// `get_server_api` is NULL or the host's function; `handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn create_instance(
    interface: u64,
    get_server_api: GET_SERVER_API,
    handle: *mut *mut ENGINE_HANDLE,
) -> ENGINE_ERROR_CODE {
    // SAFETY: the caller's contract is the one `mcb_ffi::storage::create_instance` needs.
    unsafe { mcb_ffi::storage::create_instance(interface, get_server_api, handle) }
}

/// Ends the calling thread's turn: our host calls it before each worker waits for events
/// (see `mcb_abi::meta_ext::END_TURN_SYMBOL`).
///
/// # Safety
/// Each item a turn hands out is released on the thread that got it, before its engine is
/// destroyed.
#[no_mangle]
pub unsafe extern "C" fn mcb_end_turn() {
    // SAFETY: the caller's contract is the one `mcb_ffi::storage::end_turn` needs.
    unsafe { mcb_ffi::storage::end_turn() }
}
