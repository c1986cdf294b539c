//! Statistics: `bucket` (admin only: every bucket's state), `topkeys`, the bucket's own stats
//! plus `bucket_conns` and `bucket_active_conns` for the empty key, and the host's per-bucket
//! stats objects for `get_stats_struct` and `aggregate_stats`.

use super::calls::proxied;
use super::conn;
use super::instance::instance;
use crate::abi::*;
use crate::boundary::guard;
use crate::wire::add_stat as add;
use std::ffi::{c_char, c_int, c_void};

pub(crate) unsafe extern "C" fn get_stats(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    stat_key: *const c_char,
    nkey: c_int,
    add_stat: ADD_STAT,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let Some(running) = instance() else {
            return ENGINE_FAILED;
        };
        let key: &[u8] = match usize::try_from(nkey) {
            Ok(0) | Err(_) => &[],
            Ok(_) if stat_key.is_null() => return ENGINE_EINVAL,
            // SAFETY: the host passes `nkey` readable bytes at `stat_key`.
            Ok(n) => unsafe { std::slice::from_raw_parts(stat_key.cast::<u8>(), n) },
        };
        if key == b"bucket" {
            if !running.is_admin(cookie) {
                return ENGINE_FAILED;
            }
            for (name, state) in running.registry.states() {
                add(add_stat, cookie, name.as_bytes(), state.name().as_bytes());
            }
            return ENGINE_SUCCESS;
        }
        // SAFETY: the host's cookie for this call.
        let Some(engine) = (unsafe { conn::enter(running, cookie, false) }) else {
            return ENGINE_DISCONNECT;
        };
        if key == b"topkeys" {
            if let Some(topkeys) = &engine.topkeys {
                topkeys.stats(running.host.current_time(), &mut |k, v| {
                    add(add_stat, cookie, k, v.as_bytes())
                });
            }
            return ENGINE_SUCCESS;
        }
        let f = engine.v1.get_stats.expect("checked at load");
        // SAFETY: the host's arguments, passed through unchanged.
        let rc = unsafe { f(engine.raw_handle(), cookie, stat_key, nkey, add_stat) };
        if key.is_empty() {
            let bucket = engine.handle();
            // The seed's figures: references but the registry's, and calls inside (this one too).
            let conns = bucket.refcount().saturating_sub(1).to_string();
            let active = bucket.clients().to_string();
            add(add_stat, cookie, b"bucket_conns", conns.as_bytes());
            add(add_stat, cookie, b"bucket_active_conns", active.as_bytes());
        }
        rc
    })
}

pub(crate) unsafe extern "C" fn get_stats_struct(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
) -> *mut c_void {
    guard(std::ptr::null_mut(), || {
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, true, std::ptr::null_mut(), |e| e.stats()) }
    })
}

pub(crate) unsafe extern "C" fn aggregate_stats(
    _handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    callback: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
    dest: *mut c_void,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let (Some(running), Some(callback)) = (instance(), callback) else {
            return ENGINE_FAILED;
        };
        for bucket in running.registry.list() {
            if let Some(engine) = running.registry.enter(bucket.arc()) {
                // SAFETY: the host's callback, its destination, and the host's own stats
                // object of a RUNNING bucket.
                unsafe { callback(engine.stats(), dest) };
            }
        }
        ENGINE_SUCCESS
    })
}
