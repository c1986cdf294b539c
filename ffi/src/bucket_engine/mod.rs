//! `libbucket_engine.so`: a drop-in replacement for Couchbase's `bucket_engine.c`, over
//! `mcb_core::bucket`.
//!
//! memcached loads it with `-E libbucket_engine.so -e "<config>"`, calls `create_instance`, then
//! `initialize`. Like the seed there is one instance per process (the engines we load reach it
//! through `get_server_api`, which takes no argument). Unlike the seed, `destroy` frees it all, so
//! a host that unloads the library afterwards leaks nothing: memcached makes no call on an
//! engine after its `destroy`, and a later `create_instance` starts afresh.
//!
//! This module is the top of the folder: memcached's entry point and the function table, with
//! the calls that build and free the instance (`initialize`, `destroy`). Each module below holds
//! one part: `host` (the host's API tables and the ones our engines get), `loader` (engines
//! from shared libraries), `instance` (the instance, its state and the logger, which every call
//! reads), `config`, `conn` (per-connection state and events), `calls` (the proxied engine
//! calls), `items`, `admin` (CREATE, DELETE, LIST, SELECT), `stats`, `tap`, `turns` (the host's
//! end of turn, passed on to the libraries buckets were loaded from). None of them names
//! this module.

mod admin;
mod calls;
mod config;
mod conn;
mod host;
mod instance;
mod items;
mod loader;
mod stats;
mod tap;
mod turns;

use crate::abi::*;
use crate::boundary::guard;
use host::{Host, OwnedHost};
use instance::{engine, instance, BucketEngine, Running, INSTANCE};
use loader::DlEnv;
use mcb_core::bucket::Registry;
use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
pub use turns::end_turn;

/// memcached's entry point: hands out the one bucket engine instance (exported as
/// `create_instance` by `libbucket_engine.so`).
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
        let engine = match engine() {
            Some(engine) => engine,
            None => {
                // SAFETY: the host's own get_server_api, and what it returns, per memcached.
                let host = match unsafe { Host::adopt(get_server_api(), conn::hooks()) } {
                    Ok(host) => host,
                    Err(why) => {
                        eprintln!("bucket_engine: {why}");
                        return ENGINE_FAILED;
                    }
                };
                let fresh = Box::into_raw(Box::new(new_engine(host)));
                // Release: publishes the built instance to `engine()`'s Acquire loads.
                let installed = INSTANCE.compare_exchange(
                    ptr::null_mut(),
                    fresh,
                    Ordering::Release,
                    Ordering::Relaxed,
                );
                if installed.is_err() {
                    // SAFETY: ours and never published (the host calls this once, anyway).
                    let lost = unsafe { Box::from_raw(fresh) };
                    // SAFETY: the Host just adopted for it; nothing else has seen it.
                    unsafe { lost.host.free() };
                    return ENGINE_FAILED;
                }
                // SAFETY: just published; lives until `destroy`.
                unsafe { &*fresh }
            }
        };
        // SAFETY: checked non-NULL; the host gave us somewhere to write the handle.
        unsafe { *handle = ptr::from_ref(&engine.v1.interface).cast_mut() };
        ENGINE_SUCCESS
    })
}

fn new_engine(host: OwnedHost) -> BucketEngine {
    BucketEngine {
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
            get_stats: Some(stats::get_stats),
            reset_stats: Some(calls::reset_stats),
            get_stats_struct: Some(stats::get_stats_struct),
            aggregate_stats: Some(stats::aggregate_stats),
            unknown_command: Some(admin::unknown_command),
            tap_notify: Some(tap::tap_notify),
            get_tap_iterator: Some(tap::get_tap_iterator),
            item_set_cas: Some(calls::item_set_cas),
            get_item_info: Some(calls::get_item_info),
            errinfo: Some(calls::errinfo),
            #[cfg(not(feature = "engine-pu"))]
            get_engine_vb_map: Some(calls::get_engine_vb_map),
        },
        info: engine_info {
            description: c"Bucket engine v0.2".as_ptr(),
            num_features: 1,
            features: [feature_info {
                feature: ENGINE_FEATURE_MULTI_TENANCY.0,
                description: c"Multi tenancy".as_ptr(),
            }],
        },
        host,
        running: AtomicPtr::new(ptr::null_mut()),
    }
}

unsafe extern "C" fn get_info(_handle: *mut ENGINE_HANDLE) -> *const engine_info {
    guard(ptr::null(), || {
        engine().map_or(ptr::null(), |e| ptr::from_ref(&e.info))
    })
}

unsafe extern "C" fn initialize(
    handle: *mut ENGINE_HANDLE,
    config: *const c_char,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let Some(engine) = engine() else {
            return ENGINE_FAILED;
        };
        let host = engine.host.get();
        if instance().is_some() {
            host.log(
                EXTENSION_LOG_WARNING,
                "bucket_engine is already initialized",
            );
            return ENGINE_FAILED;
        }
        // SAFETY: the host passes NULL or a NUL-terminated config string.
        let text = unsafe { host::c_str(config) };
        let settings = match config::parse(host, text.as_deref()) {
            Ok(settings) => settings,
            Err(why) => {
                host.log(EXTENSION_LOG_WARNING, &format!("bucket_engine: {why}"));
                return ENGINE_FAILED;
            }
        };
        let env = DlEnv {
            host,
            topkeys: config::topkeys_from_env(),
            server_api: Some(instance::engine_get_server_api),
        };
        let registry = match Registry::new(env, settings) {
            Ok(registry) => registry,
            Err(why) => {
                let message = format!("bucket_engine: default bucket: {why}");
                host.log(EXTENSION_LOG_WARNING, &message);
                return ENGINE_FAILED;
            }
        };
        let running = Box::into_raw(Box::new(Running { host, registry }));
        // Release: publishes the registry to `instance()`'s Acquire loads.
        let installed = engine.running.compare_exchange(
            ptr::null_mut(),
            running,
            Ordering::Release,
            Ordering::Relaxed,
        );
        if installed.is_err() {
            // SAFETY: ours and never published.
            let running = unsafe { Box::from_raw(running) };
            running.registry.destroy();
            return ENGINE_FAILED;
        }
        let me = ptr::from_ref(engine).cast::<c_void>();
        host.register_callback(handle, ON_CONNECT, Some(conn::on_connect), me);
        host.register_callback(handle, ON_AUTH, Some(conn::on_auth), me);
        host.register_callback(handle, ON_DISCONNECT, Some(conn::on_disconnect), me);
        ENGINE_SUCCESS
    })
}

/// Global shutdown: destroys every bucket (waiting for the shutdowns in flight), then frees the
/// instance and our copy of the host's API.
unsafe extern "C" fn destroy(_handle: *mut ENGINE_HANDLE, _force: bool) {
    guard((), || {
        // AcqRel: takes the instance exactly once and sees everything `create_instance` built.
        let engine = INSTANCE.swap(ptr::null_mut(), Ordering::AcqRel);
        if engine.is_null() {
            return;
        }
        // SAFETY: made by Box::into_raw in `create_instance`; now out of reach of new callers.
        let engine = unsafe { Box::from_raw(engine) };
        // AcqRel: as above, for the registry.
        let running = engine.running.swap(ptr::null_mut(), Ordering::AcqRel);
        if !running.is_null() {
            // SAFETY: made by Box::into_raw in `initialize`.
            let running = unsafe { Box::from_raw(running) };
            // Items a host never gave back: no engine will be called again.
            items::forget_orphans();
            running.registry.destroy();
        }
        // SAFETY: the engines handed the host's tables are destroyed and our state is gone;
        // the host makes no call on an engine after its `destroy`.
        unsafe { engine.host.free() };
    })
}
