//! The proxied engine calls: each enters the caller's bucket through the core (no lock, no
//! allocation), calls the bucket's engine, counts topkeys where the seed does, and leaves. A
//! connection with no bucket, or whose bucket is not RUNNING, gets ENGINE_DISCONNECT.
//!
//! `release`, `get_item_info`, `item_set_cas`, `reset_stats`, `errinfo` and `get_engine_vb_map`
//! use the try form (only the connection's own bucket, never the default), as in the seed.

use super::conn;
use super::instance;
use super::loader::DlEngine;
use crate::abi::*;
use crate::boundary::guard;
use mcb_core::bucket::topkeys::TopKeyOp;
use std::ffi::{c_char, c_int, c_void};

/// Runs `call` inside the caller's bucket; `outside` if there is none to enter.
#[inline]
pub(crate) fn proxied<T>(
    cookie: *const c_void,
    try_form: bool,
    outside: T,
    call: impl FnOnce(&DlEngine) -> T,
) -> T {
    let Some(running) = instance() else {
        return outside;
    };
    match conn::enter(running, cookie, try_form) {
        Some(engine) => call(&engine),
        None => outside,
    }
}

/// Counts `op` on `key` in the bucket's topkeys, if enabled.
pub(crate) fn topkey(engine: &DlEngine, key: *const c_void, nkey: usize, op: TopKeyOp) {
    let (Some(topkeys), false) = (&engine.topkeys, key.is_null() || nkey == 0) else {
        return;
    };
    // SAFETY: the host passed `nkey` readable bytes at `key` for this call.
    let key = unsafe { std::slice::from_raw_parts(key.cast::<u8>(), nkey) };
    let now = instance().map_or(0, |r| r.host.current_time());
    topkeys.record(key, op, now);
}

pub(crate) unsafe extern "C" fn allocate(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *mut *mut item,
    key: *const c_void,
    nkey: usize,
    nbytes: usize,
    flags: c_int,
    exptime: rel_time_t,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        proxied(cookie, false, ENGINE_DISCONNECT, |e| {
            let f = e.v1.allocate.expect("checked at load");
            // SAFETY: the host's arguments, passed through unchanged to the bucket's engine.
            unsafe {
                f(
                    e.raw_handle(),
                    cookie,
                    item,
                    key,
                    nkey,
                    nbytes,
                    flags,
                    exptime,
                )
            }
        })
    })
}

#[cfg(not(feature = "engine-pu"))]
type Cas = *mut u64;
#[cfg(feature = "engine-pu")]
type Cas = u64;

pub(crate) unsafe extern "C" fn remove(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    key: *const c_void,
    nkey: usize,
    cas: Cas,
    vbucket: u16,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        proxied(cookie, false, ENGINE_DISCONNECT, |e| {
            let f = e.v1.remove.expect("checked at load");
            // SAFETY: the host's arguments, passed through unchanged.
            let rc = unsafe { f(e.raw_handle(), cookie, key, nkey, cas, vbucket) };
            let op = match rc {
                ENGINE_SUCCESS => Some(TopKeyOp::DeleteHits),
                ENGINE_KEY_ENOENT => Some(TopKeyOp::DeleteMisses),
                ENGINE_KEY_EEXISTS => Some(TopKeyOp::CasBadval),
                _ => None,
            };
            if let Some(op) = op {
                topkey(e, key, nkey, op);
            }
            rc
        })
    })
}

pub(crate) unsafe extern "C" fn release(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *mut item,
) {
    guard((), || {
        let released = proxied(cookie, true, false, |e| {
            let f = e.v1.release.expect("checked at load");
            // SAFETY: the host's item, handed back to the engine that allocated it.
            unsafe { f(e.raw_handle(), cookie, item) };
            true
        });
        if !released {
            super::log_warning("Potential memory leak: no bucket to release an item to");
        }
    })
}

pub(crate) unsafe extern "C" fn get(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *mut *mut item,
    key: *const c_void,
    nkey: c_int,
    vbucket: u16,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        proxied(cookie, false, ENGINE_DISCONNECT, |e| {
            let f = e.v1.get.expect("checked at load");
            // SAFETY: the host's arguments, passed through unchanged.
            let rc = unsafe { f(e.raw_handle(), cookie, item, key, nkey, vbucket) };
            let n = usize::try_from(nkey).unwrap_or(0);
            match rc {
                ENGINE_SUCCESS => topkey(e, key, n, TopKeyOp::GetHits),
                ENGINE_KEY_ENOENT => topkey(e, key, n, TopKeyOp::GetMisses),
                _ => {}
            }
            rc
        })
    })
}

pub(crate) unsafe extern "C" fn store(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *mut item,
    cas: *mut u64,
    operation: ENGINE_STORE_OPERATION,
    vbucket: u16,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        proxied(cookie, false, ENGINE_DISCONNECT, |e| {
            let f = e.v1.store.expect("checked at load");
            // SAFETY: the host's arguments, passed through unchanged.
            let rc = unsafe { f(e.raw_handle(), cookie, item, cas, operation, vbucket) };
            if rc != ENGINE_EWOULDBLOCK && e.topkeys.is_some() {
                let op = if operation != OPERATION_CAS {
                    Some(TopKeyOp::CmdSet)
                } else {
                    match rc {
                        ENGINE_SUCCESS => Some(TopKeyOp::CasHits),
                        ENGINE_KEY_EEXISTS => Some(TopKeyOp::CasBadval),
                        ENGINE_KEY_ENOENT => Some(TopKeyOp::CasMisses),
                        _ => None,
                    }
                };
                if let Some(op) = op {
                    count_item(e, cookie, item, op);
                }
            }
            rc
        })
    })
}

/// Counts a topkeys op on an item's key (the key comes from the engine's item info).
fn count_item(e: &DlEngine, cookie: *const c_void, item: *mut item, op: TopKeyOp) {
    let f = e.v1.get_item_info.expect("checked at load");
    let mut info = item_info {
        cas: 0,
        exptime: 0,
        nbytes: 0,
        flags: 0,
        clsid: 0,
        nkey: 0,
        nvalue: 1,
        key: std::ptr::null(),
        value: [iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }],
    };
    // SAFETY: an item of this engine and an item_info with room for one iovec.
    if unsafe { f(e.raw_handle(), cookie, item, &mut info) } {
        topkey(e, info.key, usize::from(info.nkey), op);
    }
}

pub(crate) unsafe extern "C" fn arithmetic(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    key: *const c_void,
    nkey: c_int,
    increment: bool,
    create: bool,
    delta: u64,
    initial: u64,
    exptime: rel_time_t,
    cas: *mut u64,
    result: *mut u64,
    vbucket: u16,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        proxied(cookie, false, ENGINE_DISCONNECT, |e| {
            let f = e.v1.arithmetic.expect("checked at load");
            // SAFETY: the host's arguments, passed through unchanged.
            let rc = unsafe {
                f(
                    e.raw_handle(),
                    cookie,
                    key,
                    nkey,
                    increment,
                    create,
                    delta,
                    initial,
                    exptime,
                    cas,
                    result,
                    vbucket,
                )
            };
            let op = match (rc, increment) {
                (ENGINE_SUCCESS, true) => Some(TopKeyOp::IncrHits),
                (ENGINE_SUCCESS, false) => Some(TopKeyOp::DecrHits),
                (ENGINE_KEY_ENOENT, true) => Some(TopKeyOp::IncrMisses),
                (ENGINE_KEY_ENOENT, false) => Some(TopKeyOp::DecrMisses),
                _ => None,
            };
            if let Some(op) = op {
                topkey(e, key, usize::try_from(nkey).unwrap_or(0), op);
            }
            rc
        })
    })
}

pub(crate) unsafe extern "C" fn flush(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    when: libc::time_t,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        proxied(cookie, false, ENGINE_DISCONNECT, |e| {
            let f = e.v1.flush.expect("checked at load");
            // SAFETY: the host's arguments, passed through unchanged.
            unsafe { f(e.raw_handle(), cookie, when) }
        })
    })
}

pub(crate) unsafe extern "C" fn reset_stats(_handle: *mut ENGINE_HANDLE, cookie: *const c_void) {
    guard((), || {
        proxied(cookie, true, (), |e| {
            let f = e.v1.reset_stats.expect("checked at load");
            // SAFETY: the host's cookie, passed through.
            unsafe { f(e.raw_handle(), cookie) }
        })
    })
}

pub(crate) unsafe extern "C" fn item_set_cas(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *mut item,
    cas: u64,
) {
    guard((), || {
        let done = proxied(cookie, true, false, |e| {
            let f = e.v1.item_set_cas.expect("checked at load");
            // SAFETY: the host's item of this engine.
            unsafe { f(e.raw_handle(), cookie, item, cas) };
            true
        });
        if !done {
            super::log_warning("item_set_cas: the engine is no longer there");
        }
    })
}

pub(crate) unsafe extern "C" fn get_item_info(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *const item,
    info: *mut item_info,
) -> bool {
    guard(false, || {
        proxied(cookie, true, false, |e| {
            let f = e.v1.get_item_info.expect("checked at load");
            // SAFETY: the host's item and item_info (with its declared nvalue), passed through.
            unsafe { f(e.raw_handle(), cookie, item, info) }
        })
    })
}

pub(crate) unsafe extern "C" fn errinfo(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    buffer: *mut c_char,
    size: usize,
) -> usize {
    guard(0, || {
        proxied(cookie, true, 0, |e| match e.v1.errinfo {
            // SAFETY: the host's buffer of `size` bytes, passed through.
            Some(f) => unsafe { f(e.raw_handle(), cookie, buffer, size) },
            None => 0,
        })
    })
}

#[cfg(not(feature = "engine-pu"))]
pub(crate) unsafe extern "C" fn get_engine_vb_map(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    callback: engine_get_vb_map_cb,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        proxied(cookie, true, ENGINE_SUCCESS, |e| {
            match e.v1.get_engine_vb_map {
                // SAFETY: the host's callback, passed through.
                Some(f) => unsafe { f(e.raw_handle(), cookie, callback) },
                None => ENGINE_ENOTSUP,
            }
        })
    })
}
