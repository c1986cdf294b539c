//! The proxied engine calls: each enters the caller's bucket through the core (no lock, no
//! allocation), calls the bucket's engine, counts topkeys where the seed does, and leaves. A
//! connection with no bucket, or whose bucket is not RUNNING, gets ENGINE_DISCONNECT.
//!
//! `reset_stats`, `errinfo` and `get_engine_vb_map` use the try form (only the connection's own
//! bucket, never the default), as in the seed. A NULL cookie means the default bucket.
//!
//! Items go back to the engine that made them ([`super::items`]): `allocate`, `get` and the TAP
//! shim record each item they hand out with a hold on its engine; `release`, `get_item_info`
//! and `item_set_cas` find it there. An item recorded nowhere (a NULL cookie's) goes to the
//! connection's bucket, else the default one (the seed tried only the connection's own bucket,
//! so a connection using the default bucket leaked every item).

use super::conn;
use super::instance::{instance, log_warning};
use super::items::{self, ItemHolds};
use super::loader::DlEngine;
use crate::abi::*;
use crate::boundary::guard;
use mcb_core::bucket::topkeys::TopKeyOp;
use std::ffi::{c_char, c_int, c_void};

/// Runs `call` inside the caller's bucket; `outside` if there is none to enter.
///
/// # Safety
/// `cookie` is NULL or the cookie the host passed to the current call ([`conn::state`]).
#[inline]
pub(crate) unsafe fn proxied<T>(
    cookie: *const c_void,
    try_form: bool,
    outside: T,
    call: impl FnOnce(&DlEngine) -> T,
) -> T {
    let Some(running) = instance() else {
        return outside;
    };
    // SAFETY: the caller's contract.
    match unsafe { conn::enter(running, cookie, try_form) } {
        Some(engine) => call(&engine),
        None => outside,
    }
}

/// As [`proxied`] for the calls that hand out an item (`allocate`, `get`, a TAP step): when
/// `handed` says the answer gave one, the item `call` wrote to `*out` is recorded on the
/// connection with a hold on the engine (see [`super::items`]).
///
/// # Safety
/// As for [`proxied`]; `out` is the host's out-parameter, which the engine writes when `handed`
/// says so.
#[inline]
pub(crate) unsafe fn handing_out<T: Copy>(
    cookie: *const c_void,
    out: *mut *mut item,
    outside: T,
    handed: impl FnOnce(T) -> bool,
    call: impl FnOnce(&DlEngine) -> T,
) -> T {
    let Some(running) = instance() else {
        return outside;
    };
    // SAFETY: the caller's contract.
    let Some(engine) = (unsafe { conn::enter(running, cookie, false) }) else {
        return outside;
    };
    let answer = call(&engine);
    if !handed(answer) || out.is_null() {
        return answer;
    }
    // SAFETY: the caller's contract (as above).
    if let Some(state) = unsafe { conn::state(running, cookie) } {
        // SAFETY: `handed` says the engine wrote its item to the host's out-parameter.
        let item = unsafe { *out };
        if !item.is_null() {
            state.items.add(item, engine);
        }
    }
    answer
}

/// [`handing_out`] for `allocate` and `get`: an item is handed out on ENGINE_SUCCESS.
///
/// # Safety
/// As for [`handing_out`].
unsafe fn item_call(
    cookie: *const c_void,
    out: *mut *mut item,
    call: impl FnOnce(&DlEngine) -> ENGINE_ERROR_CODE,
) -> ENGINE_ERROR_CODE {
    let handed = |rc| rc == ENGINE_SUCCESS;
    // SAFETY: the caller's contract.
    unsafe { handing_out(cookie, out, ENGINE_DISCONNECT, handed, call) }
}

/// The records `item` may be in: the connection's, then those of connections whose state is
/// gone.
///
/// # Safety
/// As for [`proxied`]; the references are used only during the current call.
unsafe fn records<'a>(cookie: *const c_void) -> impl Iterator<Item = &'a ItemHolds> {
    // SAFETY: the caller's contract.
    let mine = instance().and_then(|running| unsafe { conn::state(running, cookie) });
    mine.map(|state| &state.items)
        .into_iter()
        .chain(items::orphans())
}

/// Runs `call` with the engine that made `item` (see the module docs); `outside` if there is
/// none.
///
/// # Safety
/// As for [`proxied`].
unsafe fn with_item_engine<T>(
    cookie: *const c_void,
    item: *const item,
    outside: T,
    call: impl FnOnce(&DlEngine) -> T,
) -> T {
    let mut call = Some(call);
    // SAFETY: the caller's contract.
    for holds in unsafe { records(cookie) } {
        // `with` runs the closure only when it finds the item, so `call` is there to take.
        if let Some(Some(answer)) = holds.with(item, |e| call.take().map(|call| call(e))) {
            return answer;
        }
    }
    match call {
        // SAFETY: the caller's contract.
        Some(call) => unsafe { proxied(cookie, false, outside, call) },
        None => outside,
    }
}

/// Gives `item` back through its record, if there is one: `call` (the release) runs with the
/// engine that made it, which its record kept.
///
/// # Safety
/// As for [`proxied`].
unsafe fn release_held(
    cookie: *const c_void,
    item: *const item,
    call: impl Fn(&DlEngine) -> bool,
) -> Option<bool> {
    // SAFETY: the caller's contract.
    unsafe { records(cookie) }.find_map(|holds| holds.release(item, &call))
}

/// Counts `op` on `key` in the bucket's topkeys, if enabled (an empty key is not counted).
pub(crate) fn topkey(engine: &DlEngine, key: &[u8], op: TopKeyOp) {
    let (Some(topkeys), false) = (&engine.topkeys, key.is_empty()) else {
        return;
    };
    let now = instance().map_or(0, |r| r.host.current_time());
    topkeys.record(key, op, now);
}

/// The key the host passed as a pointer and a length (empty for NULL).
///
/// # Safety
/// `key` is NULL or points at `nkey` readable bytes that outlive `'a`.
unsafe fn host_key<'a>(key: *const c_void, nkey: usize) -> &'a [u8] {
    if key.is_null() || nkey == 0 {
        return &[];
    }
    // SAFETY: the caller's contract; non-NULL and nkey > 0.
    unsafe { std::slice::from_raw_parts(key.cast::<u8>(), nkey) }
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
        let call = |e: &DlEngine| {
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
        };
        // SAFETY: the host's cookie and out-parameter for this call.
        unsafe { item_call(cookie, item, call) }
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
        let call = |e: &DlEngine| {
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
                // SAFETY: the host passed `nkey` bytes at `key` for this call.
                topkey(e, unsafe { host_key(key, nkey) }, op);
            }
            rc
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, false, ENGINE_DISCONNECT, call) }
    })
}

pub(crate) unsafe extern "C" fn release(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *mut item,
) {
    guard((), || {
        let give_back = |e: &DlEngine| {
            let f = e.v1.release.expect("checked at load");
            // SAFETY: the host's item, handed back to the engine that made it.
            unsafe { f(e.raw_handle(), cookie, item) };
            true
        };
        // SAFETY: the host's cookie for this call.
        let released = match unsafe { release_held(cookie, item, give_back) } {
            // The record kept the engine alive; its hold, given back after the call, may
            // let the shutdown worker of a deleted bucket destroy it.
            Some(released) => released,
            // SAFETY: as above.
            None => unsafe { proxied(cookie, false, false, give_back) },
        };
        if !released {
            log_warning("Potential memory leak: no bucket to release an item to");
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
        let call = |e: &DlEngine| {
            let f = e.v1.get.expect("checked at load");
            // SAFETY: the host's arguments, passed through unchanged.
            let rc = unsafe { f(e.raw_handle(), cookie, item, key, nkey, vbucket) };
            let op = match rc {
                ENGINE_SUCCESS => TopKeyOp::GetHits,
                ENGINE_KEY_ENOENT => TopKeyOp::GetMisses,
                _ => return rc,
            };
            // SAFETY: the host passed `nkey` bytes at `key` for this call.
            let key = unsafe { host_key(key, usize::try_from(nkey).unwrap_or(0)) };
            topkey(e, key, op);
            rc
        };
        // SAFETY: the host's cookie and out-parameter for this call.
        unsafe { item_call(cookie, item, call) }
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
        let call = |e: &DlEngine| {
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
                    // SAFETY: the host's item of this engine, still held.
                    unsafe { count_item(e, cookie, item, op) };
                }
            }
            rc
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, false, ENGINE_DISCONNECT, call) }
    })
}

/// Counts a topkeys op on an item's key (the key comes from the engine's item info).
///
/// # Safety
/// `item` is an item of `e`'s engine that the host holds.
unsafe fn count_item(e: &DlEngine, cookie: *const c_void, item: *mut item, op: TopKeyOp) {
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
        // SAFETY: the engine's key bytes, valid while the host holds the item.
        topkey(e, unsafe { host_key(info.key, usize::from(info.nkey)) }, op);
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
        let call = |e: &DlEngine| {
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
                // SAFETY: the host passed `nkey` bytes at `key` for this call.
                let key = unsafe { host_key(key, usize::try_from(nkey).unwrap_or(0)) };
                topkey(e, key, op);
            }
            rc
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, false, ENGINE_DISCONNECT, call) }
    })
}

pub(crate) unsafe extern "C" fn flush(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    when: libc::time_t,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let call = |e: &DlEngine| {
            let f = e.v1.flush.expect("checked at load");
            // SAFETY: the host's arguments, passed through unchanged.
            unsafe { f(e.raw_handle(), cookie, when) }
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, false, ENGINE_DISCONNECT, call) }
    })
}

pub(crate) unsafe extern "C" fn reset_stats(_handle: *mut ENGINE_HANDLE, cookie: *const c_void) {
    guard((), || {
        let call = |e: &DlEngine| {
            let f = e.v1.reset_stats.expect("checked at load");
            // SAFETY: the host's cookie, passed through.
            unsafe { f(e.raw_handle(), cookie) }
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, true, (), call) }
    })
}

pub(crate) unsafe extern "C" fn item_set_cas(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *mut item,
    cas: u64,
) {
    guard((), || {
        let call = |e: &DlEngine| {
            let f = e.v1.item_set_cas.expect("checked at load");
            // SAFETY: the host's item, and the engine that made it.
            unsafe { f(e.raw_handle(), cookie, item, cas) };
            true
        };
        // SAFETY: the host's cookie for this call.
        let done = unsafe { with_item_engine(cookie, item, false, call) };
        if !done {
            log_warning("item_set_cas: the engine is no longer there");
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
        let call = |e: &DlEngine| {
            let f = e.v1.get_item_info.expect("checked at load");
            // SAFETY: the host's item and item_info (with its declared nvalue), passed to the
            // engine that made the item.
            unsafe { f(e.raw_handle(), cookie, item, info) }
        };
        // SAFETY: the host's cookie for this call.
        unsafe { with_item_engine(cookie, item, false, call) }
    })
}

pub(crate) unsafe extern "C" fn errinfo(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    buffer: *mut c_char,
    size: usize,
) -> usize {
    guard(0, || {
        let call = |e: &DlEngine| match e.v1.errinfo {
            // SAFETY: the host's buffer of `size` bytes, passed through.
            Some(f) => unsafe { f(e.raw_handle(), cookie, buffer, size) },
            None => 0,
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, true, 0, call) }
    })
}

#[cfg(not(feature = "engine-pu"))]
pub(crate) unsafe extern "C" fn get_engine_vb_map(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    callback: engine_get_vb_map_cb,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let call = |e: &DlEngine| {
            match e.v1.get_engine_vb_map {
                // SAFETY: the host's callback, passed through.
                Some(f) => unsafe { f(e.raw_handle(), cookie, callback) },
                None => ENGINE_ENOTSUP,
            }
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, true, ENGINE_SUCCESS, call) }
    })
}
