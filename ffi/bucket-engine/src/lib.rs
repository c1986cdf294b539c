//! `libbucket_engine.so`: exports the bucket engine's `create_instance`, the one symbol
//! memcached looks up in an engine library. Everything else lives in `mcb_ffi::bucket_engine`.

use mcb_ffi::abi::{ENGINE_ERROR_CODE, ENGINE_HANDLE, GET_SERVER_API};

/// memcached's entry point for engine libraries.
///
/// # Safety
/// `get_server_api` is NULL or the host's function; `handle` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn create_instance(
    interface: u64,
    get_server_api: GET_SERVER_API,
    handle: *mut *mut ENGINE_HANDLE,
) -> ENGINE_ERROR_CODE {
    // SAFETY: the caller's contract is the one `mcb_ffi::bucket_engine::create_instance` needs.
    unsafe { mcb_ffi::bucket_engine::create_instance(interface, get_server_api, handle) }
}

/// Ends the calling thread's turn, for a host that serves requests in turns (`mcb-memcached`
/// calls it on each worker before the worker waits for events; see
/// `mcb_abi::meta_ext::END_TURN_SYMBOL`). From the first call on, items that the `builtin`
/// buckets hand this thread are kept by the turn rather than by a count, and so are those of
/// buckets loaded from a library that exports its own end of turn (ours do), which this one
/// calls in turn.
///
/// # Safety
/// Each item a turn hands out is released on the thread that got it, before its engine is
/// destroyed.
#[no_mangle]
pub unsafe extern "C" fn mcb_end_turn() {
    // SAFETY: the caller's contract is the one `mcb_ffi::bucket_engine::end_turn` needs.
    unsafe { mcb_ffi::bucket_engine::end_turn() }
}
