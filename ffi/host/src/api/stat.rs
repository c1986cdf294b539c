//! The stat table (`SERVER_STAT_API`): per-engine stats blocks and the eviction count.

use mcb_abi::abi::*;
use mcb_abi::boundary::guard;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// Calls to `evicting`, reported as a host stat.
static EVICTIONS: AtomicU64 = AtomicU64::new(0);

/// What `new_stats` hands out: a per-engine block the engine may pass back to the host
/// (`aggregate_stats`); this host keeps its statistics elsewhere, so the block stays zero.
#[repr(C, align(8))]
struct StatsBlock([u64; 32]);

unsafe extern "C" fn new_stats() -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(StatsBlock([0; 32]))).cast()
    })
}

unsafe extern "C" fn release_stats(stats: *mut c_void) {
    guard((), || {
        if !stats.is_null() {
            // SAFETY: a block from `new_stats`, released once (the engine's contract).
            drop(unsafe { Box::from_raw(stats.cast::<StatsBlock>()) });
        }
    })
}

unsafe extern "C" fn evicting(_cookie: *const c_void, _key: *const c_void, _nkey: c_int) {
    // Relaxed: a statistic; nobody synchronises on it.
    guard((), || {
        EVICTIONS.fetch_add(1, Ordering::Relaxed);
    })
}

/// Evictions engines reported through `evicting`.
pub fn evictions() -> u64 {
    // Relaxed: a statistic.
    EVICTIONS.load(Ordering::Relaxed)
}

/// The stat table of the server handle.
pub const API: SERVER_STAT_API = SERVER_STAT_API {
    new_stats: Some(new_stats),
    release_stats: Some(release_stats),
    evicting: Some(evicting),
};
