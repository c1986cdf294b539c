//! The allocator-hooks table (`ALLOCATOR_HOOKS_API`, v2.5.1 only): a host without an
//! instrumented allocator says so.

use mcb_abi::abi::*;
use std::ffi::{c_char, c_int, c_void};

unsafe extern "C" fn add_new(_hook: allocator_new_hook) -> bool {
    false
}
unsafe extern "C" fn add_delete(_hook: allocator_delete_hook) -> bool {
    false
}
unsafe extern "C" fn extra_stats_size() -> c_int {
    0
}
unsafe extern "C" fn allocator_stats(stats: *mut allocator_stats) {
    // SAFETY: NULL or the engine's live out-parameter.
    if let Some(s) = unsafe { stats.as_mut() } {
        s.allocated_size = 0;
        s.heap_size = 0;
        s.free_size = 0;
        s.fragmentation_size = 0;
        s.ext_stats_size = 0;
    }
}
unsafe extern "C" fn allocation_size(_ptr: *mut c_void) -> usize {
    0
}
unsafe extern "C" fn detailed_stats(buffer: *mut c_char, size: c_int) {
    if !buffer.is_null() && size > 0 {
        // SAFETY: the engine's buffer of `size` > 0 bytes.
        unsafe { *buffer = 0 };
    }
}

/// The allocator-hooks table of the server handle (v2.5.1 only).
pub const API: ALLOCATOR_HOOKS_API = ALLOCATOR_HOOKS_API {
    add_new_hook: Some(add_new),
    remove_new_hook: Some(add_new),
    add_delete_hook: Some(add_delete),
    remove_delete_hook: Some(add_delete),
    get_extra_stats_size: Some(extra_stats_size),
    get_allocator_stats: Some(allocator_stats),
    get_allocation_size: Some(allocation_size),
    get_detailed_stats: Some(detailed_stats),
};
