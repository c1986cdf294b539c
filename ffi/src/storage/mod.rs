//! The built-in storage engine: memcached's engine interface v1 over [`mcb_core::store`].
//!
//! Two ways in: `ffi/storage-engine` exports [`create_instance`] as `libmcb_engine.so`, which
//! memcached loads with `-E`; and the bucket engine creates it in-process for buckets whose
//! engine is `builtin` (no library to load). Every call makes a new, independent instance
//! (each bucket its own), which `destroy` frees.
//!
//! Items handed to the host are the store's tokens cast to pointers (`allocate` and `get` hand
//! out one with a hold on the item, `release` gives it back), so the host reads an item safely
//! after the store replaced, deleted, evicted or flushed it. The host fills an allocated
//! value, and reads a held one, in place in the store's segments through the pointers
//! `get_item_info` gives. `get` takes no lock and allocates nothing; `store` takes only its
//! key's bucket locks.
//!
//! Every entry point accepts a NULL cookie (memcached's engine test harness passes one) and
//! runs inside [`guard`]: no panic reaches the host.
//!
//! This module is the top of the folder: the entry point and the function table, with the
//! calls that build and free an instance (`initialize`, `destroy`). Below it: `instance` (the
//! instance and how a call finds it), `calls` (the item, stats and command calls), `meta` (the
//! meta commands), `config` and `host` (the host's API as the engine uses it). None of them
//! names this module.

mod calls;
mod config;
mod host;
mod instance;
mod meta;

use crate::abi::*;
use crate::boundary::guard;
use host::HostApi;
use instance::{engine, StorageEngine, Store};
use std::ffi::c_char;
use std::ptr;
use std::sync::OnceLock;

/// Ends the calling thread's turn (our engine libraries export it as
/// [`END_TURN_SYMBOL`](crate::meta_ext::END_TURN_SYMBOL)): `mcb_core::store::end_turn`, with
/// each store it asks for found at the address it names.
///
/// # Safety
/// The host's promise of [`EndTurn`](crate::meta_ext::EndTurn).
pub unsafe extern "C" fn end_turn() {
    guard((), || {
        mcb_core::store::end_turn(|store, count| {
            // SAFETY: the address of a store (exposed by the store's turn) that handed this
            // thread an item not yet given back; the host's promise keeps its engine
            // instance, which owns the store, alive until then.
            count(unsafe { &*std::ptr::with_exposed_provenance::<Store>(store) })
        })
    });
}

/// memcached's entry point: a new storage engine instance per call (exported as
/// `create_instance` by `libmcb_engine.so`; called in-process for the bucket engine's
/// `builtin` buckets).
///
/// # Safety
/// `get_server_api` is NULL or the host's function; `handle` is NULL or writable.
pub unsafe extern "C" fn create_instance(
    interface: u64,
    get_server_api: GET_SERVER_API,
    handle: *mut *mut ENGINE_HANDLE,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        if interface != 1 {
            return ENGINE_ENOTSUP;
        }
        let (Some(get_server_api), false) = (get_server_api, handle.is_null()) else {
            return ENGINE_EINVAL;
        };
        // SAFETY: the host's own get_server_api, and what it returns, per memcached.
        let host = match unsafe { HostApi::copy(get_server_api()) } {
            Ok(host) => host,
            Err(why) => {
                eprintln!("mcb storage engine: {why}");
                return ENGINE_FAILED;
            }
        };
        let engine = Box::into_raw(Box::new(new_engine(host)));
        // SAFETY: checked non-NULL; the host gave us somewhere to write the handle. The engine
        // is freed by `destroy`.
        unsafe { *handle = engine.cast::<ENGINE_HANDLE>() };
        ENGINE_SUCCESS
    })
}

fn new_engine(host: HostApi) -> StorageEngine {
    StorageEngine {
        v1: ENGINE_HANDLE_V1 {
            interface: ENGINE_HANDLE { interface: 1 },
            get_info: Some(get_info),
            initialize: Some(initialize),
            destroy: Some(destroy),
            allocate: Some(calls::allocate),
            remove: Some(calls::remove),
            release: Some(calls::release),
            get: Some(calls::get),
            store: Some(calls::store),
            arithmetic: Some(calls::arithmetic),
            flush: Some(calls::flush),
            get_stats: Some(calls::get_stats),
            reset_stats: Some(calls::reset_stats),
            get_stats_struct: Some(calls::get_stats_struct),
            aggregate_stats: Some(calls::aggregate_stats),
            unknown_command: Some(calls::unknown_command),
            tap_notify: Some(calls::tap_notify),
            get_tap_iterator: Some(calls::get_tap_iterator),
            item_set_cas: Some(calls::item_set_cas),
            get_item_info: Some(calls::get_item_info),
            errinfo: Some(calls::errinfo),
            #[cfg(not(feature = "engine-pu"))]
            get_engine_vb_map: Some(calls::get_engine_vb_map),
        },
        info: engine_info_n {
            info: engine_info {
                description: c"mcb built-in storage engine v0.1".as_ptr(),
                num_features: 2,
                features: [feature_info {
                    feature: ENGINE_FEATURE_CAS.0,
                    description: c"compare and set".as_ptr(),
                }],
            },
            more: [feature_info {
                feature: ENGINE_FEATURE_LRU.0,
                description: c"segment eviction".as_ptr(),
            }],
        },
        host,
        store: OnceLock::new(),
    }
}

unsafe extern "C" fn get_info(handle: *mut ENGINE_HANDLE) -> *const engine_info {
    guard(ptr::null(), || {
        // SAFETY: memcached passes the handle create_instance returned.
        unsafe { engine(handle) }.map_or(ptr::null(), |e| ptr::from_ref(&e.info.info))
    })
}

unsafe extern "C" fn initialize(
    handle: *mut ENGINE_HANDLE,
    config: *const c_char,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        // SAFETY: memcached passes the handle create_instance returned.
        let Some(engine) = (unsafe { engine(handle) }) else {
            return ENGINE_EINVAL;
        };
        if engine.store.get().is_some() {
            engine
                .host
                .log("mcb storage engine: initialize called twice");
            return ENGINE_FAILED;
        }
        // SAFETY: the host passes NULL or a NUL-terminated config string.
        let text = unsafe { host::c_str(config) };
        let settings = match config::parse(&engine.host, text.as_deref()) {
            Ok(settings) => settings,
            Err(why) => {
                engine.host.log(&format!("mcb storage engine: {why}"));
                return ENGINE_FAILED;
            }
        };
        match Store::new(settings, Box::new(engine.host.clock())) {
            Ok(store) => match engine.store.set(store) {
                Ok(()) => ENGINE_SUCCESS,
                Err(_) => ENGINE_FAILED,
            },
            Err(why) => {
                engine.host.log(&format!("mcb storage engine: {why}"));
                ENGINE_FAILED
            }
        }
    })
}

unsafe extern "C" fn destroy(handle: *mut ENGINE_HANDLE, _force: bool) {
    guard((), || {
        if handle.is_null() {
            return;
        }
        // SAFETY: memcached calls destroy once, with the handle create_instance made with
        // Box::into_raw, and no call on it in flight or after.
        let engine = unsafe { Box::from_raw(handle.cast::<StorageEngine>()) };
        if let Some(store) = engine.store.get() {
            // Grace periods of retired segments end now rather than in a collector that may
            // never run again (a leak checker would report what they keep).
            store.reclaim();
        }
        drop(engine);
    })
}
