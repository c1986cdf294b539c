//! The engine calls: check what the host passes, call the store, map its answer to a code.
//!
//! An item crosses to the host as the store's token for it, cast to a pointer: each `allocate`
//! and each successful `get` hands out one, with a hold on the item, which the host gives back
//! with `release`.

use super::instance::{engine, store as store_of, store_op, value_of, Store};
use crate::abi::*;
use crate::boundary::guard;
use crate::wire;
use mcb_core::store::{Error, KEY_MAX};
use std::ffi::{c_char, c_int, c_void};
use std::ptr;

/// memcached's code for a store error.
fn code(e: &Error) -> ENGINE_ERROR_CODE {
    match e {
        Error::NotFound => ENGINE_KEY_ENOENT,
        Error::Exists => ENGINE_KEY_EEXISTS,
        Error::NotStored => ENGINE_NOT_STORED,
        Error::TooBig => ENGINE_E2BIG,
        Error::NoMemory => ENGINE_ENOMEM,
        Error::NotNumeric | Error::BadKey | Error::InvalidConfig(_) => ENGINE_EINVAL,
    }
}

fn result_code<T>(r: &Result<T, Error>) -> ENGINE_ERROR_CODE {
    r.as_ref().err().map_or(ENGINE_SUCCESS, code)
}

/// A key the host passed: `None` when NULL, empty or longer than memcached allows.
///
/// # Safety
/// `key` is NULL or points at `nkey` readable bytes for the duration of the call.
unsafe fn key<'a>(key: *const c_void, nkey: usize) -> Option<&'a [u8]> {
    if key.is_null() || nkey == 0 || nkey > KEY_MAX {
        return None;
    }
    // SAFETY: the caller's contract; non-NULL and nkey > 0.
    Some(unsafe { std::slice::from_raw_parts(key.cast::<u8>(), nkey) })
}

/// Hands an item's token (and its hold) to the host.
fn to_host(token: u64) -> *mut item {
    // A token is never 0, so never NULL; the host only passes it back.
    token as usize as *mut item
}

/// The token behind a pointer the host holds.
fn token(item: *const item) -> u64 {
    item as usize as u64
}

/// Runs `call` with a handle's store (see [`store_of`]); ENGINE_FAILED for a handle not yet
/// initialised (or NULL), and for a panic.
fn with_store(
    store: Option<&Store>,
    call: impl FnOnce(&Store) -> ENGINE_ERROR_CODE,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || match store {
        Some(store) => call(store),
        None => ENGINE_FAILED,
    })
}

pub(crate) unsafe extern "C" fn allocate(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    out: *mut *mut item,
    key_ptr: *const c_void,
    nkey: usize,
    nbytes: usize,
    flags: c_int,
    exptime: rel_time_t,
) -> ENGINE_ERROR_CODE {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        // SAFETY: the host passes `nkey` bytes at `key_ptr`.
        let (Some(key), false) = (unsafe { key(key_ptr, nkey) }, out.is_null()) else {
            return ENGINE_EINVAL;
        };
        // The flags are the host's 32 bits, kept as they come. The host fills the whole value
        // before it stores the item (engine interface v1), so it is not zeroed first.
        match store.allocate_unfilled(key, nbytes, flags as u32, exptime) {
            Ok(item) => {
                // SAFETY: checked non-NULL; the host's out-parameter.
                unsafe { *out = to_host(store.into_token(item)) };
                ENGINE_SUCCESS
            }
            Err(e) => code(&e),
        }
    })
}

#[cfg(not(feature = "engine-pu"))]
type Cas = *mut u64;
#[cfg(feature = "engine-pu")]
type Cas = u64;

/// The expected CAS of a remove (0: any).
///
/// # Safety
/// `cas` is NULL or points at a readable `uint64_t` (the host's argument).
#[cfg(not(feature = "engine-pu"))]
unsafe fn expected(cas: Cas) -> u64 {
    // SAFETY: the caller's contract.
    unsafe { cas.as_ref() }.copied().unwrap_or(0)
}

/// The expected CAS of a remove (0: any): engine-pu passes it by value.
///
/// # Safety
/// None needed; `unsafe` only so that both forms are called alike.
#[cfg(feature = "engine-pu")]
unsafe fn expected(cas: Cas) -> u64 {
    cas
}

pub(crate) unsafe extern "C" fn remove(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    key_ptr: *const c_void,
    nkey: usize,
    cas: Cas,
    _vbucket: u16,
) -> ENGINE_ERROR_CODE {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        // SAFETY: the host passes `nkey` bytes at `key_ptr`.
        let Some(key) = (unsafe { key(key_ptr, nkey) }) else {
            return ENGINE_EINVAL;
        };
        // SAFETY: the host's CAS argument for this call.
        result_code(&store.remove(key, unsafe { expected(cas) }))
    })
}

pub(crate) unsafe extern "C" fn release(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    item: *mut item,
) {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        if !item.is_null() {
            // The host gives back the item `allocate` or `get` handed it, once.
            store.release_token(token(item));
        }
        ENGINE_SUCCESS
    });
}

pub(crate) unsafe extern "C" fn get(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    out: *mut *mut item,
    key_ptr: *const c_void,
    nkey: c_int,
    _vbucket: u16,
) -> ENGINE_ERROR_CODE {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        let Ok(nkey) = usize::try_from(nkey) else {
            return ENGINE_EINVAL;
        };
        // SAFETY: the host passes `nkey` bytes at `key_ptr`.
        let (Some(key), false) = (unsafe { key(key_ptr, nkey) }, out.is_null()) else {
            return ENGINE_EINVAL;
        };
        // A miss writes NULL, as memcached's default engine does (engine tests check it).
        // A hit is noted as fetched: what the meta commands' `h` and `l` report. Our host's
        // workers end their turns, and get items pinned by the turn (`mcb_core::store::end_turn`).
        let (found, rc) = match store.fetch_token(key) {
            Some(token) => (to_host(token), ENGINE_SUCCESS),
            None => (ptr::null_mut(), ENGINE_KEY_ENOENT),
        };
        // SAFETY: checked non-NULL; the host's out-parameter.
        unsafe { *out = found };
        rc
    })
}

pub(crate) unsafe extern "C" fn store(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    item: *mut item,
    cas: *mut u64,
    operation: ENGINE_STORE_OPERATION,
    _vbucket: u16,
) -> ENGINE_ERROR_CODE {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        let Some(op) = store_op(operation) else {
            return ENGINE_ENOTSUP;
        };
        if item.is_null() {
            return ENGINE_EINVAL;
        }
        // A non-NULL item the host allocated from us and still holds.
        match store.with_token(token(item), |item| store.store(item, op)) {
            Ok(new_cas) => {
                if !cas.is_null() {
                    // SAFETY: the host's out-parameter, non-NULL.
                    unsafe { *cas = new_cas };
                }
                ENGINE_SUCCESS
            }
            Err(e) => code(&e),
        }
    })
}

pub(crate) unsafe extern "C" fn arithmetic(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    key_ptr: *const c_void,
    nkey: c_int,
    increment: bool,
    create: bool,
    delta: u64,
    initial: u64,
    exptime: rel_time_t,
    cas: *mut u64,
    result: *mut u64,
    _vbucket: u16,
) -> ENGINE_ERROR_CODE {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        let Ok(nkey) = usize::try_from(nkey) else {
            return ENGINE_EINVAL;
        };
        // SAFETY: the host passes `nkey` bytes at `key_ptr`.
        let Some(key) = (unsafe { key(key_ptr, nkey) }) else {
            return ENGINE_EINVAL;
        };
        // SAFETY: memcached passes the handle create_instance returned.
        let host = &unsafe { engine(handle) }.expect("has a store").host;
        // The client's expiry, as memcached's default engine reads it.
        let create = create.then(|| (initial, host.realtime(libc::time_t::from(exptime))));
        match store.arithmetic(key, increment, delta, create) {
            Ok((value, new_cas)) => {
                // SAFETY: the host's out-parameters, each checked non-NULL.
                unsafe {
                    if !cas.is_null() {
                        *cas = new_cas;
                    }
                    if !result.is_null() {
                        *result = value;
                    }
                }
                ENGINE_SUCCESS
            }
            Err(e) => code(&e),
        }
    })
}

pub(crate) unsafe extern "C" fn flush(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    when: libc::time_t,
) -> ENGINE_ERROR_CODE {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        if when < 0 {
            return ENGINE_EINVAL;
        }
        // SAFETY: memcached passes the handle create_instance returned.
        let host = &unsafe { engine(handle) }.expect("has a store").host;
        store.flush(if when == 0 { 0 } else { host.realtime(when) });
        ENGINE_SUCCESS
    })
}

/// Hands one statistic to the host's callback.
fn add(add_stat: ADD_STAT, cookie: *const c_void, key: &str, value: &str) {
    wire::add_stat(add_stat, cookie, key.as_bytes(), value.as_bytes());
}

pub(crate) unsafe extern "C" fn get_stats(
    handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    stat_key: *const c_char,
    nkey: c_int,
    add_stat: ADD_STAT,
) -> ENGINE_ERROR_CODE {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        if add_stat.is_none() {
            return ENGINE_EINVAL;
        }
        let which: &[u8] = match usize::try_from(nkey) {
            Ok(n) if n > 0 && !stat_key.is_null() => {
                // SAFETY: the host passes `nkey` bytes at `stat_key`.
                unsafe { std::slice::from_raw_parts(stat_key.cast::<u8>(), n) }
            }
            _ => b"",
        };
        match which {
            b"" => {
                for (name, value) in store.stats().pairs() {
                    add(add_stat, cookie, name, &value.to_string());
                }
            }
            b"settings" => {
                let c = store.config();
                add(add_stat, cookie, "use_cas", &c.use_cas.to_string());
                add(add_stat, cookie, "eviction", &c.eviction.to_string());
                add(add_stat, cookie, "cache_size", &c.cache_size.to_string());
                add(
                    add_stat,
                    cookie,
                    "item_size_max",
                    &c.item_size_max.to_string(),
                );
            }
            _ => return ENGINE_KEY_ENOENT,
        }
        // The server ends the response itself, after the engine's stats.
        ENGINE_SUCCESS
    })
}

pub(crate) unsafe extern "C" fn reset_stats(handle: *mut ENGINE_HANDLE, _cookie: *const c_void) {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        store.reset_stats();
        ENGINE_SUCCESS
    });
}

/// The store keeps no host stats object.
pub(crate) unsafe extern "C" fn get_stats_struct(
    _handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
) -> *mut c_void {
    ptr::null_mut()
}

pub(crate) unsafe extern "C" fn aggregate_stats(
    _handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    _callback: Option<unsafe extern "C" fn(*mut c_void, *mut c_void)>,
    _dest: *mut c_void,
) -> ENGINE_ERROR_CODE {
    ENGINE_ENOTSUP
}

/// Answered through `response` as memcached's default engine answers them: SCRUB (0xf0) takes
/// back every expired item now and answers SUCCESS; touch (0x1c), get-and-touch (0x1d) and its
/// quiet form (0x1e); any other opcode gets UNKNOWN_COMMAND (and the call returns
/// ENGINE_SUCCESS: the answer was sent).
pub(crate) unsafe extern "C" fn unknown_command(
    handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    req: *mut protocol_binary_request_header,
    response: ADD_RESPONSE,
) -> ENGINE_ERROR_CODE {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        if response.is_none() || req.is_null() {
            return ENGINE_EINVAL;
        }
        // SAFETY: not NULL, and memcached hands engines the whole request.
        let Ok(request) = (unsafe { wire::parse(req, usize::MAX) }) else {
            return ENGINE_EINVAL;
        };
        let opcode = request.opcode;
        let send = |ext: &[u8], body: &[u8], status: u16, cas: u64| {
            wire::respond(response, cookie, status, ext, body, cas)
        };
        if super::meta::is_meta(opcode) {
            // SAFETY: memcached passes the handle create_instance returned.
            let host = &unsafe { engine(handle) }.expect("has a store").host;
            return super::meta::command(store, host, &request, &send);
        }
        match opcode {
            PROTOCOL_BINARY_CMD_TOUCH | PROTOCOL_BINARY_CMD_GAT | PROTOCOL_BINARY_CMD_GATQ => {}
            PROTOCOL_BINARY_CMD_SCRUB => {
                // memcached's scrubber runs in the background and answers EBUSY while one
                // runs; ours is done when the call returns, so it is never busy.
                store.scrub();
                return send(&[], &[], PROTOCOL_BINARY_RESPONSE_SUCCESS, 0);
            }
            _ => return send(&[], &[], PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND, 0),
        }
        let (Ok(expiration), false) = (
            <[u8; 4]>::try_from(request.extras),
            request.key.is_empty() || request.key.len() > KEY_MAX,
        ) else {
            return send(&[], &[], PROTOCOL_BINARY_RESPONSE_EINVAL, 0);
        };
        // SAFETY: memcached passes the handle create_instance returned.
        let host = &unsafe { engine(handle) }.expect("has a store").host;
        let exptime = host.realtime(libc::time_t::from(u32::from_be_bytes(expiration)));
        let touched = store.touch(request.key, exptime);
        // A touch is a fetch too, as in memcached (`mg … h` then says so).
        if let Some(item) = &touched {
            item.note_access(store.now());
        }
        match (touched, opcode) {
            // A touch answers the flags without the value, as memcached's does.
            (Some(item), _) => send(
                &item.flags().to_ne_bytes(),
                if opcode == PROTOCOL_BINARY_CMD_TOUCH {
                    &[]
                } else {
                    value_of(&item)
                },
                PROTOCOL_BINARY_RESPONSE_SUCCESS,
                item.cas(),
            ),
            // Quiet: a miss says nothing.
            (None, PROTOCOL_BINARY_CMD_GATQ) => ENGINE_SUCCESS,
            (None, _) => send(&[], &[], PROTOCOL_BINARY_RESPONSE_KEY_ENOENT, 0),
        }
    })
}

pub(crate) unsafe extern "C" fn tap_notify(
    _handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    _engine_specific: *mut c_void,
    _nengine: u16,
    _ttl: u8,
    _tap_flags: u16,
    _tap_event: tap_event_t,
    _tap_seqno: u32,
    _key: *const c_void,
    _nkey: usize,
    _flags: u32,
    _exptime: u32,
    _cas: u64,
    _data: *const c_void,
    _ndata: usize,
    _vbucket: u16,
) -> ENGINE_ERROR_CODE {
    ENGINE_ENOTSUP
}

/// No TAP: a NULL iterator.
pub(crate) unsafe extern "C" fn get_tap_iterator(
    _handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    _client: *const c_void,
    _nclient: usize,
    _flags: u32,
    _userdata: *const c_void,
    _nuserdata: usize,
) -> TAP_ITERATOR {
    None
}

pub(crate) unsafe extern "C" fn item_set_cas(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    item: *mut item,
    cas: u64,
) {
    // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
    with_store(unsafe { store_of(handle) }, |store| {
        // NULL or an item the host holds.
        if !item.is_null() {
            store.with_token(token(item), |item| item.set_cas(cas));
        }
        ENGINE_SUCCESS
    });
}

pub(crate) unsafe extern "C" fn get_item_info(
    handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    item: *const item,
    info: *mut item_info,
) -> bool {
    guard(false, || {
        // SAFETY: memcached passes the handle create_instance returned, not yet destroyed.
        let (Some(store), false) = (unsafe { store_of(handle) }, item.is_null()) else {
            return false;
        };
        // SAFETY: NULL or the host's item_info, whose `nvalue` says how many iovecs it has.
        let Some(info) = (unsafe { info.as_mut() }) else {
            return false;
        };
        // An item the host holds.
        store.with_token(token(item), |item| {
            let (Ok(nbytes), Ok(nkey)) = (
                u32::try_from(item.value_len()),
                u16::try_from(item.key_len()),
            ) else {
                return false;
            };
            if info.nvalue < 1 {
                return false;
            }
            let (key, value) = item.raw_parts();
            info.cas = item.cas();
            info.exptime = item.exptime();
            info.nbytes = nbytes;
            info.flags = item.flags();
            info.clsid = 0;
            info.nkey = nkey;
            info.nvalue = 1;
            info.key = key.cast();
            info.value[0] = iovec {
                // The host fills an allocated value here before storing it, and reads a held
                // one (memcached's engine interface); nothing else writes there meanwhile.
                iov_base: value.cast(),
                iov_len: item.value_len(),
            };
            true
        })
    })
}

/// No extended error information.
pub(crate) unsafe extern "C" fn errinfo(
    _handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    _buffer: *mut c_char,
    _buffsz: usize,
) -> usize {
    0
}

/// One vbucket, no map.
#[cfg(not(feature = "engine-pu"))]
pub(crate) unsafe extern "C" fn get_engine_vb_map(
    _handle: *mut ENGINE_HANDLE,
    _cookie: *const c_void,
    _callback: engine_get_vb_map_cb,
) -> ENGINE_ERROR_CODE {
    ENGINE_ENOTSUP
}
