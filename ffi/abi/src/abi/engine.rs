//! `engine.h`: the engine handle (`ENGINE_HANDLE_V1`), its description (`engine_info`,
//! `feature_info`, `engine_feature_t`) and the entry point's types (`CREATE_INSTANCE`). The
//! server handle the entry point is given (`SERVER_HANDLE_V1`, `GET_SERVER_API`) is in
//! `server`, with the tables it points at.

use core::ffi::{c_char, c_int, c_void};

use super::protocol::protocol_binary_request_header;
use super::server::GET_SERVER_API;
use super::tap::{tap_event_t, TAP_ITERATOR};
use super::types::{
    item, item_info, rel_time_t, ADD_RESPONSE, ADD_STAT, ENGINE_ERROR_CODE, ENGINE_HANDLE,
    ENGINE_STORE_OPERATION,
};

/// The only interface version there is (`ENGINE_INTERFACE_VERSION`); `create_instance` is asked
/// for it, and both handles carry it in their first field.
pub const ENGINE_INTERFACE_VERSION: u64 = 1;

/// The key of an item observer callback (`struct item_observer_cb_data`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct item_observer_cb_data {
    pub key: *const c_void,
    pub nkey: usize,
}

/// Called by `get_engine_vb_map` with the vbucket map (`engine_get_vb_map_cb`; v2.5.1 only).
#[cfg(not(feature = "engine-pu"))]
pub type engine_get_vb_map_cb = Option<
    unsafe extern "C" fn(
        cookie: *const c_void,
        map: *const c_void,
        mapsize: usize,
    ) -> ENGINE_ERROR_CODE,
>;

/// The symbol every engine exports as `create_instance` (`CREATE_INSTANCE`).
pub type CREATE_INSTANCE = Option<
    unsafe extern "C" fn(
        interface: u64,
        get_server_api: GET_SERVER_API,
        handle: *mut *mut ENGINE_HANDLE,
    ) -> ENGINE_ERROR_CODE,
>;

/// A feature an engine may advertise in `engine_info` (`engine_feature_t`).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct engine_feature_t(pub u32);

/// Has compare-and-set.
pub const ENGINE_FEATURE_CAS: engine_feature_t = engine_feature_t(0);
/// Has persistent storage.
pub const ENGINE_FEATURE_PERSISTENT_STORAGE: engine_feature_t = engine_feature_t(1);
/// Performs as a pseudo engine.
pub const ENGINE_FEATURE_SECONDARY_ENGINE: engine_feature_t = engine_feature_t(2);
/// Has access control.
pub const ENGINE_FEATURE_ACCESS_CONTROL: engine_feature_t = engine_feature_t(3);
/// Hosts several tenants (what the bucket engine reports).
pub const ENGINE_FEATURE_MULTI_TENANCY: engine_feature_t = engine_feature_t(4);
/// Implements an LRU.
pub const ENGINE_FEATURE_LRU: engine_feature_t = engine_feature_t(5);
/// Implements virtual buckets.
pub const ENGINE_FEATURE_VBUCKET: engine_feature_t = engine_feature_t(6);
/// The last feature id registered.
pub const LAST_REGISTERED_ENGINE_FEATURE: engine_feature_t = ENGINE_FEATURE_VBUCKET;

/// One advertised feature. `feature` is a plain `uint32_t` holding an [`engine_feature_t`]
/// value.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct feature_info {
    pub feature: u32,
    pub description: *const c_char,
}

/// What `get_info` returns. Ends in a one-element array that engines over-allocate: see
/// [`engine_info_n`].
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engine_info {
    pub description: *const c_char,
    pub num_features: u32,
    pub features: [feature_info; 1],
}

/// An [`engine_info`] followed by `N` more features, the layout of an over-allocated C
/// `engine_info` (no tail padding after `features`), so `info.num_features` may be `N + 1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct engine_info_n<const N: usize> {
    pub info: engine_info,
    pub more: [feature_info; N],
}

/// The engine interface, version 1: the header, then one function pointer per operation, in
/// this order (`struct engine_interface_v1`). Every slot may be NULL as far as the type is
/// concerned; memcached itself assumes the ones it calls are set.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ENGINE_HANDLE_V1 {
    pub interface: ENGINE_HANDLE,
    pub get_info: Option<unsafe extern "C" fn(handle: *mut ENGINE_HANDLE) -> *const engine_info>,
    pub initialize: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            config_str: *const c_char,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub destroy: Option<unsafe extern "C" fn(handle: *mut ENGINE_HANDLE, force: bool)>,
    pub allocate: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            item: *mut *mut item,
            key: *const c_void,
            nkey: usize,
            nbytes: usize,
            flags: c_int,
            exptime: rel_time_t,
        ) -> ENGINE_ERROR_CODE,
    >,
    /// v2.5.1: the CAS by pointer (in: expected, out: the deletion's CAS).
    #[cfg(not(feature = "engine-pu"))]
    pub remove: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            key: *const c_void,
            nkey: usize,
            cas: *mut u64,
            vbucket: u16,
        ) -> ENGINE_ERROR_CODE,
    >,
    /// engine-pu: the CAS by value.
    #[cfg(feature = "engine-pu")]
    pub remove: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            key: *const c_void,
            nkey: usize,
            cas: u64,
            vbucket: u16,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub release: Option<
        unsafe extern "C" fn(handle: *mut ENGINE_HANDLE, cookie: *const c_void, item: *mut item),
    >,
    pub get: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            item: *mut *mut item,
            key: *const c_void,
            nkey: c_int,
            vbucket: u16,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub store: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            item: *mut item,
            cas: *mut u64,
            operation: ENGINE_STORE_OPERATION,
            vbucket: u16,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub arithmetic: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
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
        ) -> ENGINE_ERROR_CODE,
    >,
    pub flush: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            when: libc::time_t,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub get_stats: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            stat_key: *const c_char,
            nkey: c_int,
            add_stat: ADD_STAT,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub reset_stats:
        Option<unsafe extern "C" fn(handle: *mut ENGINE_HANDLE, cookie: *const c_void)>,
    pub get_stats_struct: Option<
        unsafe extern "C" fn(handle: *mut ENGINE_HANDLE, cookie: *const c_void) -> *mut c_void,
    >,
    pub aggregate_stats: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            callback: Option<unsafe extern "C" fn(src: *mut c_void, dest: *mut c_void)>,
            dest: *mut c_void,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub unknown_command: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            request: *mut protocol_binary_request_header,
            response: ADD_RESPONSE,
        ) -> ENGINE_ERROR_CODE,
    >,
    pub tap_notify: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
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
        ) -> ENGINE_ERROR_CODE,
    >,
    pub get_tap_iterator: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            client: *const c_void,
            nclient: usize,
            flags: u32,
            userdata: *const c_void,
            nuserdata: usize,
        ) -> TAP_ITERATOR,
    >,
    pub item_set_cas: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            item: *mut item,
            cas: u64,
        ),
    >,
    pub get_item_info: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            item: *const item,
            item_info: *mut item_info,
        ) -> bool,
    >,
    pub errinfo: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            buffer: *mut c_char,
            buffsz: usize,
        ) -> usize,
    >,
    /// v2.5.1 only: hands the engine's vbucket map to `callback`.
    #[cfg(not(feature = "engine-pu"))]
    pub get_engine_vb_map: Option<
        unsafe extern "C" fn(
            handle: *mut ENGINE_HANDLE,
            cookie: *const c_void,
            callback: engine_get_vb_map_cb,
        ) -> ENGINE_ERROR_CODE,
    >,
}

/// The C struct tag of [`ENGINE_HANDLE_V1`].
pub type engine_interface_v1 = ENGINE_HANDLE_V1;
