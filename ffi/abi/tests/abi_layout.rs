//! Pins the size, alignment and every field offset of every `#[repr(C)]` ABI mirror to the
//! values of the real headers (Couchbase memcached v2.5.1 `include/memcached/`, and upstream
//! memcached's `engine-pu` branch under `--features engine-pu`) on x86_64 Linux.
//!
//! The numbers are facts measured once with a throwaway C probe compiled against those headers
//! (`sizeof`, `_Alignof`, `offsetof` of each struct and field, gcc 12, x86_64 Linux); they are
//! written here by hand and nothing of the headers is. `pin!` also destructures each struct
//! exhaustively, so a field added to a mirror without being pinned here fails to compile.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]
#![allow(non_camel_case_types)]

use std::mem::{align_of, offset_of, size_of};

use mcb_abi::abi::*;

/// `pin!(T, size S, align A, { field: offset, ... })`: every field of `T`, in order.
macro_rules! pin {
    ($t:ident, size $size:expr, align $align:expr, { $($f:ident: $off:expr),* $(,)? }) => {{
        assert_eq!(size_of::<$t>(), $size, concat!("sizeof ", stringify!($t)));
        assert_eq!(align_of::<$t>(), $align, concat!("alignof ", stringify!($t)));
        $(
            assert_eq!(
                offset_of!($t, $f),
                $off,
                concat!("offsetof ", stringify!($t), ".", stringify!($f))
            );
        )*
        // Compiles only while the list above names every field of the mirror.
        #[allow(dead_code)]
        fn exhaustive(v: &$t) {
            let $t { $($f: _),* } = v;
        }
    }};
}

/// `scalar!(T, size, align)` for typedefs and enum newtypes.
macro_rules! scalar {
    ($t:ty, $size:expr, $align:expr) => {{
        assert_eq!(size_of::<$t>(), $size, concat!("sizeof ", stringify!($t)));
        assert_eq!(
            align_of::<$t>(),
            $align,
            concat!("alignof ", stringify!($t))
        );
    }};
}

#[test]
fn types_h_layouts() {
    pin!(item_info, size 56, align 8, {
        cas: 0,
        exptime: 8,
        nbytes: 12,
        flags: 16,
        clsid: 20,
        nkey: 22,
        nvalue: 24,
        key: 32,
        value: 40,
    });
    pin!(iovec, size 16, align 8, {
        iov_base: 0,
        iov_len: 8,
    });
    pin!(auth_data_t, size 16, align 8, {
        username: 0,
        config: 8,
    });
    pin!(ENGINE_HANDLE, size 8, align 8, {
        interface: 0,
    });
}

#[test]
fn engine_h_info_layouts() {
    pin!(feature_info, size 16, align 8, {
        feature: 0,
        description: 8,
    });
    pin!(engine_info, size 32, align 8, {
        description: 0,
        num_features: 8,
        features: 16,
    });
    pin!(item_observer_cb_data, size 16, align 8, {
        key: 0,
        nkey: 8,
    });
}

/// v2.5.1: 21 slots after the header, the last one `get_engine_vb_map`.
#[cfg(not(feature = "engine-pu"))]
#[test]
fn engine_handle_v1_layout() {
    pin!(ENGINE_HANDLE_V1, size 176, align 8, {
        interface: 0,
        get_info: 8,
        initialize: 16,
        destroy: 24,
        allocate: 32,
        remove: 40,
        release: 48,
        get: 56,
        store: 64,
        arithmetic: 72,
        flush: 80,
        get_stats: 88,
        reset_stats: 96,
        get_stats_struct: 104,
        aggregate_stats: 112,
        unknown_command: 120,
        tap_notify: 128,
        get_tap_iterator: 136,
        item_set_cas: 144,
        get_item_info: 152,
        errinfo: 160,
        get_engine_vb_map: 168,
    });
}

/// engine-pu: the same slots without `get_engine_vb_map`.
#[cfg(feature = "engine-pu")]
#[test]
fn engine_handle_v1_layout_engine_pu() {
    pin!(ENGINE_HANDLE_V1, size 168, align 8, {
        interface: 0,
        get_info: 8,
        initialize: 16,
        destroy: 24,
        allocate: 32,
        remove: 40,
        release: 48,
        get: 56,
        store: 64,
        arithmetic: 72,
        flush: 80,
        get_stats: 88,
        reset_stats: 96,
        get_stats_struct: 104,
        aggregate_stats: 112,
        unknown_command: 120,
        tap_notify: 128,
        get_tap_iterator: 136,
        item_set_cas: 144,
        get_item_info: 152,
        errinfo: 160,
    });
}

/// v2.5.1: ends with `alloc_hooks`.
#[cfg(not(feature = "engine-pu"))]
#[test]
fn server_handle_v1_layout() {
    pin!(SERVER_HANDLE_V1, size 72, align 8, {
        interface: 0,
        core: 8,
        stat: 16,
        extension: 24,
        callback: 32,
        engine: 40,
        log: 48,
        cookie: 56,
        alloc_hooks: 64,
    });
}

/// engine-pu: no `alloc_hooks`.
#[cfg(feature = "engine-pu")]
#[test]
fn server_handle_v1_layout_engine_pu() {
    pin!(SERVER_HANDLE_V1, size 64, align 8, {
        interface: 0,
        core: 8,
        stat: 16,
        extension: 24,
        callback: 32,
        engine: 40,
        log: 48,
        cookie: 56,
    });
}

#[test]
fn server_api_layouts() {
    pin!(SERVER_CORE_API, size 64, align 8, {
        get_current_time: 0,
        realtime: 8,
        abstime: 16,
        server_version: 24,
        hash: 32,
        parse_config: 40,
        shutdown: 48,
        get_config: 56,
    });
    pin!(SERVER_STAT_API, size 24, align 8, {
        new_stats: 0,
        release_stats: 8,
        evicting: 16,
    });
    pin!(SERVER_COOKIE_API, size 56, align 8, {
        get_socket_fd: 0,
        get_auth_data: 8,
        store_engine_specific: 16,
        get_engine_specific: 24,
        notify_io_complete: 32,
        reserve: 40,
        release: 48,
    });
    pin!(SERVER_CALLBACK_API, size 16, align 8, {
        register_callback: 0,
        perform_callbacks: 8,
    });
    pin!(SERVER_EXTENSION_API, size 24, align 8, {
        register_extension: 0,
        unregister_extension: 8,
        get_extension: 16,
    });
    pin!(SERVER_LOG_API, size 24, align 8, {
        get_logger: 0,
        get_level: 8,
        set_level: 16,
    });
}

#[test]
fn extension_h_layouts() {
    pin!(EXTENSION_LOGGER_DESCRIPTOR, size 16, align 8, {
        get_name: 0,
        log: 8,
    });
    pin!(EXTENSION_DAEMON_DESCRIPTOR, size 16, align 8, {
        get_name: 0,
        next: 8,
    });
    pin!(EXTENSION_ASCII_PROTOCOL_DESCRIPTOR, size 48, align 8, {
        get_name: 0,
        accept: 8,
        execute: 16,
        abort: 24,
        cookie: 32,
        next: 40,
    });
    pin!(EXTENSION_BINARY_PROTOCOL_DESCRIPTOR, size 24, align 8, {
        get_name: 0,
        setup: 8,
        next: 16,
    });
    pin!(mc_extension_token_t, size 16, align 8, {
        value: 0,
        length: 8,
    });
    // engine-pu names it `token_t`; same layout (measured there too).
    scalar!(token_t, 16, 8);
}

#[cfg(not(feature = "engine-pu"))]
#[test]
fn allocator_hooks_h_layouts() {
    pin!(ALLOCATOR_HOOKS_API, size 64, align 8, {
        add_new_hook: 0,
        remove_new_hook: 8,
        add_delete_hook: 16,
        remove_delete_hook: 24,
        get_extra_stats_size: 32,
        get_allocator_stats: 40,
        get_allocation_size: 48,
        get_detailed_stats: 56,
    });
    pin!(allocator_stats, size 48, align 8, {
        allocated_size: 0,
        heap_size: 8,
        free_size: 16,
        fragmentation_size: 24,
        ext_stats: 32,
        ext_stats_size: 40,
    });
    pin!(allocator_ext_stat, size 56, align 8, {
        key: 0,
        value: 48,
    });
}

#[test]
fn config_parser_h_layouts() {
    pin!(config_item, size 32, align 8, {
        key: 0,
        datatype: 8,
        value: 16,
        found: 24,
    });
    scalar!(config_value, 8, 8);
    scalar!(config_datatype, 4, 4);
}

#[test]
fn protocol_binary_h_layouts() {
    scalar!(protocol_binary_request_header, 24, 8);
    assert_eq!(offset_of!(protocol_binary_request_header, request), 0);
    assert_eq!(offset_of!(protocol_binary_request_header, bytes), 0);
    pin!(protocol_binary_request_header_request, size 24, align 8, {
        magic: 0,
        opcode: 1,
        keylen: 2,
        extlen: 4,
        datatype: 5,
        vbucket: 6,
        bodylen: 8,
        opaque: 12,
        cas: 16,
    });
    scalar!(protocol_binary_response_header, 24, 8);
    assert_eq!(offset_of!(protocol_binary_response_header, response), 0);
    assert_eq!(offset_of!(protocol_binary_response_header, bytes), 0);
    pin!(protocol_binary_response_header_response, size 24, align 8, {
        magic: 0,
        opcode: 1,
        keylen: 2,
        extlen: 4,
        datatype: 5,
        status: 6,
        bodylen: 8,
        opaque: 12,
        cas: 16,
    });
    assert_eq!(
        size_of::<protocol_binary_request_header>(),
        PROTOCOL_BINARY_HEADER_SIZE
    );
}

/// C enums are 4-byte `unsigned int`s here (no negative enumerators); typedefs as measured.
#[test]
fn scalar_layouts() {
    scalar!(ENGINE_ERROR_CODE, 4, 4);
    scalar!(ENGINE_STORE_OPERATION, 4, 4);
    scalar!(ENGINE_EVENT_TYPE, 4, 4);
    scalar!(tap_event_t, 4, 4);
    scalar!(engine_feature_t, 4, 4);
    scalar!(EXTENSION_LOG_LEVEL, 4, 4);
    scalar!(extension_type_t, 4, 4);
    scalar!(EXTENSION_ERROR_CODE, 4, 4);
    scalar!(vbucket_state_t, 4, 4);
    scalar!(rel_time_t, 4, 4);
    scalar!(libc::time_t, 8, 8);
    scalar!(bool, 1, 1);
}

/// Function-pointer slots are nullable pointers: `Option<fn>` has a pointer's layout and
/// `None` is all zero bits, so a zeroed C table reads as all `None`.
#[test]
fn nullable_slots_are_pointer_sized() {
    scalar!(ADD_STAT, 8, 8);
    scalar!(ADD_RESPONSE, 8, 8);
    scalar!(EVENT_CALLBACK, 8, 8);
    scalar!(TAP_ITERATOR, 8, 8);
    scalar!(GET_SERVER_API, 8, 8);
    scalar!(CREATE_INSTANCE, 8, 8);
    // SAFETY: every field of SERVER_COOKIE_API is an `Option` of a function pointer, for which
    // all-zero bits are `None`.
    let zeroed: SERVER_COOKIE_API = unsafe { std::mem::zeroed() };
    assert!(zeroed.release.is_none() && zeroed.get_socket_fd.is_none());
}

/// The over-allocation helpers lay the extra elements out exactly where C's `value[1]` /
/// `features[1]` arrays would continue.
#[test]
fn over_allocation_helpers() {
    assert_eq!(
        offset_of!(item_info_iov<3>, more),
        offset_of!(item_info, value) + size_of::<iovec>()
    );
    assert_eq!(size_of::<item_info_iov<3>>(), 56 + 3 * 16);
    assert_eq!(
        offset_of!(engine_info_n<2>, more),
        offset_of!(engine_info, features) + size_of::<feature_info>()
    );
    assert_eq!(size_of::<engine_info_n<2>>(), 32 + 2 * 16);
}
