//! TAP: `tap_notify` is proxied; `get_tap_iterator` hands out a shim that re-checks the
//! connection's bucket on every step before calling the engine's own iterator (the seed's
//! design; disabled for buckets whose engine path names default_engine, as in the seed).

use super::calls::{handing_out, proxied};
use super::loader::{set_tap_iterator, tap_iterator, DlEngine};
use crate::abi::*;
use crate::boundary::guard;
use std::ffi::c_void;

pub(crate) unsafe extern "C" fn tap_notify(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    engine_specific: *mut c_void,
    nengine: u16,
    ttl: u8,
    tap_flags: u16,
    tap_event: tap_event_t,
    tap_seqno: u32,
    key: *const c_void,
    nkey: usize,
    flags: u32,
    exptime: u32,
    cas: u64,
    data: *const c_void,
    ndata: usize,
    vbucket: u16,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let call = |e: &DlEngine| {
            match e.v1.tap_notify {
                // SAFETY: the host's arguments, passed through unchanged.
                Some(f) => unsafe {
                    f(
                        e.raw_handle(),
                        cookie,
                        engine_specific,
                        nengine,
                        ttl,
                        tap_flags,
                        tap_event,
                        tap_seqno,
                        key,
                        nkey,
                        flags,
                        exptime,
                        cas,
                        data,
                        ndata,
                        vbucket,
                    )
                },
                None => ENGINE_ENOTSUP,
            }
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, false, ENGINE_DISCONNECT, call) }
    })
}

pub(crate) unsafe extern "C" fn get_tap_iterator(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    client: *const c_void,
    nclient: usize,
    flags: u32,
    userdata: *const c_void,
    nuserdata: usize,
) -> TAP_ITERATOR {
    guard(None, || {
        let call = |e: &DlEngine| {
            let f = e.v1.get_tap_iterator.filter(|_| !e.tap_disabled)?;
            // SAFETY: the host's arguments, passed through unchanged.
            let iterator = unsafe {
                f(
                    e.raw_handle(),
                    cookie,
                    client,
                    nclient,
                    flags,
                    userdata,
                    nuserdata,
                )
            };
            set_tap_iterator(e, iterator);
            iterator.map(|_| shim as _)
        };
        // SAFETY: the host's cookie for this call.
        unsafe { proxied(cookie, false, None, call) }
    })
}

/// One TAP step: only while the connection's bucket is RUNNING; TAP_DISCONNECT otherwise.
unsafe extern "C" fn shim(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    item: *mut *mut item,
    engine_specific: *mut *mut c_void,
    nengine_specific: *mut u16,
    ttl: *mut u8,
    flags: *mut u16,
    seqno: *mut u32,
    vbucket: *mut u16,
) -> tap_event_t {
    guard(TAP_DISCONNECT, || {
        let call = |e: &DlEngine| match tap_iterator(e) {
            // SAFETY: the iterator this bucket's engine handed out, with the host's arguments.
            Some(step) => unsafe {
                step(
                    e.raw_handle(),
                    cookie,
                    item,
                    engine_specific,
                    nengine_specific,
                    ttl,
                    flags,
                    seqno,
                    vbucket,
                )
            },
            None => TAP_DISCONNECT,
        };
        // memcached sends these events' items and releases them afterwards.
        let handed = |event| {
            matches!(
                event,
                TAP_MUTATION | TAP_DELETION | TAP_CHECKPOINT_START | TAP_CHECKPOINT_END
            )
        };
        // SAFETY: the host's cookie and item out-parameter for this call.
        unsafe { handing_out(cookie, item, TAP_DISCONNECT, handed, call) }
    })
}
