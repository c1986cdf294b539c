//! `libbucket_engine.so`: a drop-in replacement for Couchbase's `bucket_engine.c`, over
//! `mcb_core::bucket`.
//!
//! memcached loads it with `-E libbucket_engine.so -e "<config>"`, calls `create_instance`, then
//! `initialize`. Like the seed there is one instance per process (the engines we load reach it
//! through `get_server_api`, which takes no argument). Each module holds one part:
//! [`host`] (the host's API tables and the ones our engines get), [`loader`] (engines from
//! shared libraries), [`config`], [`conn`] (per-connection state and events), [`calls`] (the
//! proxied engine calls), [`admin`] (CREATE, DELETE, LIST, SELECT), [`stats`], [`tap`].

mod admin;
mod calls;
mod config;
mod conn;
mod host;
mod loader;
mod stats;
mod tap;

use crate::abi::*;
use crate::boundary::guard;
use host::Host;
use loader::DlEnv;
use mcb_core::bucket::Registry;
use std::ffi::{c_char, c_void};
use std::ptr;
use std::sync::OnceLock;

/// The bucket engine: the handle memcached holds (its first field) and our state.
#[repr(C)]
pub(crate) struct BucketEngine {
    v1: ENGINE_HANDLE_V1,
    info: engine_info,
    host: &'static Host,
    running: OnceLock<Running>,
}

/// What `initialize` sets up.
pub(crate) struct Running {
    pub(crate) host: &'static Host,
    pub(crate) registry: Registry<DlEnv>,
}

// SAFETY: `v1` and `info` are immutable tables of function pointers and static strings; `host`
// is Sync; `running` is a OnceLock of Sync data.
unsafe impl Sync for BucketEngine {}
// SAFETY: as for `Sync`.
unsafe impl Send for BucketEngine {}

static INSTANCE: OnceLock<&'static BucketEngine> = OnceLock::new();

/// The initialised instance, if any.
#[inline]
pub(crate) fn instance() -> Option<&'static Running> {
    INSTANCE.get()?.running.get()
}

/// Logs a warning through the host's logger (when there is an instance).
pub(crate) fn log_warning(message: &str) {
    match INSTANCE.get() {
        Some(engine) => engine.host.log(EXTENSION_LOG_WARNING, message),
        None => eprintln!("bucket_engine: {message}"),
    }
}

/// The server API the engines we load get (`GET_SERVER_API` for them).
unsafe extern "C" fn engine_get_server_api() -> *mut SERVER_HANDLE_V1 {
    guard(ptr::null_mut(), || {
        INSTANCE
            .get()
            .map_or(ptr::null_mut(), |e| e.host.inner_server())
    })
}

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
        let engine = match INSTANCE.get() {
            Some(engine) => *engine,
            None => {
                // SAFETY: the host's own get_server_api, and what it returns, per memcached.
                let host = match unsafe { Host::adopt(get_server_api()) } {
                    Ok(host) => host,
                    Err(why) => {
                        eprintln!("bucket_engine: {why}");
                        return ENGINE_FAILED;
                    }
                };
                *INSTANCE.get_or_init(|| Box::leak(Box::new(new_engine(host))))
            }
        };
        // SAFETY: checked non-NULL; the host gave us somewhere to write the handle.
        unsafe { *handle = ptr::from_ref(&engine.v1.interface).cast_mut() };
        ENGINE_SUCCESS
    })
}

fn new_engine(host: &'static Host) -> BucketEngine {
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
        running: OnceLock::new(),
    }
}

unsafe extern "C" fn get_info(_handle: *mut ENGINE_HANDLE) -> *const engine_info {
    guard(ptr::null(), || {
        INSTANCE
            .get()
            .map_or(ptr::null(), |e| ptr::from_ref(&e.info))
    })
}

unsafe extern "C" fn initialize(
    handle: *mut ENGINE_HANDLE,
    config: *const c_char,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let Some(engine) = INSTANCE.get() else {
            return ENGINE_FAILED;
        };
        let host = engine.host;
        if engine.running.get().is_some() {
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
        };
        let registry = match Registry::new(env, settings) {
            Ok(registry) => registry,
            Err(why) => {
                host.log(
                    EXTENSION_LOG_WARNING,
                    &format!("bucket_engine: default bucket: {why}"),
                );
                return ENGINE_FAILED;
            }
        };
        if engine.running.set(Running { host, registry }).is_err() {
            return ENGINE_FAILED;
        }
        let me = ptr::from_ref(*engine).cast::<c_void>();
        host.register_callback(handle, ON_CONNECT, Some(conn::on_connect), me);
        host.register_callback(handle, ON_AUTH, Some(conn::on_auth), me);
        host.register_callback(handle, ON_DISCONNECT, Some(conn::on_disconnect), me);
        ENGINE_SUCCESS
    })
}

unsafe extern "C" fn destroy(_handle: *mut ENGINE_HANDLE, _force: bool) {
    guard((), || {
        if let Some(running) = instance() {
            running.registry.destroy();
        }
    })
}
