//! Builds the C engine harness in `examples-c/engine` with make and runs it:
//!
//! - `abi_layout` prints the layout of every struct and the value of every constant in our C
//!   header `engine_abi.h`; each must equal the Rust mirror's (whose numbers `abi_layout.rs`
//!   and `abi_constants.rs` pin to memcached's headers), and the two must describe the same set
//!   of types, fields and constants;
//! - `host_selftest` checks the mock memcached host on its own;
//! - `conformance` drives the C test engine through the mock host;
//! - both programs again under valgrind memcheck when valgrind is on PATH (CI installs it; a
//!   local run without it says so, and a run with `CI` set fails instead).
//! - both programs again built with gcc's AddressSanitizer and UBSan (`make SAN=1`), any
//!   report failing the run.
//!
//! The C variant follows the crate's: `--features engine-pu` builds with `ENGINE_PU=1`. A
//! missing C compiler or make is a failure, not a skip.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

mod raw;

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::{Command, Output};

use mcb_abi::abi::*;
use mcb_testkit::c_harness::{
    assert_success, build, build_sanitized, valgrind_available, Variant, MEMCHECK, SANITIZER_ENV,
};
use raw::Raw;

/// The harness in the ABI variant of this crate's features.
const VARIANT: Variant = Variant::of(cfg!(feature = "engine-pu"));

fn run(program: &str, args: &[&Path]) -> Output {
    let path = build(VARIANT).join(program);
    Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()))
}

/// One struct's layout: size, alignment, and field offsets by name.
#[derive(Debug, Default, PartialEq, Eq)]
struct Layout {
    size: usize,
    align: usize,
    fields: BTreeMap<String, usize>,
}

macro_rules! layout {
    ($map:ident, $t:ty $(, $f:ident)*) => {
        let fields: BTreeMap<String, usize> =
            [$((stringify!($f).to_string(), offset_of!($t, $f))),*].into_iter().collect();
        let name = stringify!($t).rsplit("::").next().unwrap().trim().to_string();
        $map.insert(name, Layout { size: size_of::<$t>(), align: align_of::<$t>(), fields });
    };
}

/// The Rust mirror's view, under the names `abi_layout.c` prints.
fn rust_layouts() -> BTreeMap<String, Layout> {
    let mut m = BTreeMap::new();
    layout!(m, item_info, cas, exptime, nbytes, flags, clsid, nkey, nvalue, key, value);
    layout!(m, iovec, iov_base, iov_len);
    layout!(m, auth_data_t, username, config);
    layout!(m, ENGINE_HANDLE, interface);
    layout!(m, feature_info, feature, description);
    layout!(m, engine_info, description, num_features, features);
    #[cfg(not(feature = "engine-pu"))]
    layout!(
        m,
        ENGINE_HANDLE_V1,
        interface,
        get_info,
        initialize,
        destroy,
        allocate,
        remove,
        release,
        get,
        store,
        arithmetic,
        flush,
        get_stats,
        reset_stats,
        get_stats_struct,
        aggregate_stats,
        unknown_command,
        tap_notify,
        get_tap_iterator,
        item_set_cas,
        get_item_info,
        errinfo,
        get_engine_vb_map
    );
    #[cfg(feature = "engine-pu")]
    layout!(
        m,
        ENGINE_HANDLE_V1,
        interface,
        get_info,
        initialize,
        destroy,
        allocate,
        remove,
        release,
        get,
        store,
        arithmetic,
        flush,
        get_stats,
        reset_stats,
        get_stats_struct,
        aggregate_stats,
        unknown_command,
        tap_notify,
        get_tap_iterator,
        item_set_cas,
        get_item_info,
        errinfo
    );
    #[cfg(not(feature = "engine-pu"))]
    {
        layout!(
            m,
            SERVER_HANDLE_V1,
            interface,
            core,
            stat,
            extension,
            callback,
            engine,
            log,
            cookie,
            alloc_hooks
        );
        layout!(
            m,
            ALLOCATOR_HOOKS_API,
            add_new_hook,
            remove_new_hook,
            add_delete_hook,
            remove_delete_hook,
            get_extra_stats_size,
            get_allocator_stats,
            get_allocation_size,
            get_detailed_stats
        );
        layout!(
            m,
            allocator_stats,
            allocated_size,
            heap_size,
            free_size,
            fragmentation_size,
            ext_stats,
            ext_stats_size
        );
        layout!(m, allocator_ext_stat, key, value);
    }
    #[cfg(feature = "engine-pu")]
    layout!(
        m,
        SERVER_HANDLE_V1,
        interface,
        core,
        stat,
        extension,
        callback,
        engine,
        log,
        cookie
    );
    layout!(
        m,
        SERVER_CORE_API,
        get_current_time,
        realtime,
        abstime,
        server_version,
        hash,
        parse_config,
        shutdown,
        get_config
    );
    layout!(m, SERVER_STAT_API, new_stats, release_stats, evicting);
    layout!(
        m,
        SERVER_COOKIE_API,
        get_socket_fd,
        get_auth_data,
        store_engine_specific,
        get_engine_specific,
        notify_io_complete,
        reserve,
        release
    );
    layout!(m, SERVER_CALLBACK_API, register_callback, perform_callbacks);
    layout!(
        m,
        SERVER_EXTENSION_API,
        register_extension,
        unregister_extension,
        get_extension
    );
    layout!(m, SERVER_LOG_API, get_logger, get_level, set_level);
    layout!(m, EXTENSION_LOGGER_DESCRIPTOR, get_name, log);
    layout!(m, EXTENSION_DAEMON_DESCRIPTOR, get_name, next);
    layout!(m, config_item, key, datatype, value, found);
    layout!(m, config_value);
    layout!(m, config_datatype);
    layout!(m, protocol_binary_request_header, request, bytes);
    layout!(
        m,
        protocol_binary_request_header_request,
        magic,
        opcode,
        keylen,
        extlen,
        datatype,
        vbucket,
        bodylen,
        opaque,
        cas
    );
    layout!(m, protocol_binary_response_header, response, bytes);
    layout!(
        m,
        protocol_binary_response_header_response,
        magic,
        opcode,
        keylen,
        extlen,
        datatype,
        status,
        bodylen,
        opaque,
        cas
    );
    layout!(m, ENGINE_ERROR_CODE);
    layout!(m, ENGINE_STORE_OPERATION);
    layout!(m, ENGINE_EVENT_TYPE);
    layout!(m, tap_event_t);
    layout!(m, engine_feature_t);
    layout!(m, EXTENSION_LOG_LEVEL);
    layout!(m, extension_type_t);
    layout!(m, EXTENSION_ERROR_CODE);
    layout!(m, rel_time_t);
    m
}

/// Parses `abi_layout`'s `S name size align`, `F name field offset` and `C name value` lines.
fn parse_c_output(text: &str) -> (BTreeMap<String, Layout>, BTreeMap<String, i64>) {
    let mut m: BTreeMap<String, Layout> = BTreeMap::new();
    let mut constants = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let num = |s: &str| {
            s.parse::<usize>()
                .unwrap_or_else(|_| panic!("bad line: {line}"))
        };
        match words.as_slice() {
            ["S", name, size, align] => {
                let l = m.entry(name.to_string()).or_default();
                l.size = num(size);
                l.align = num(align);
            }
            ["F", name, field, offset] => {
                let l = m.entry(name.to_string()).or_default();
                l.fields.insert(field.to_string(), num(offset));
            }
            ["C", name, value] => {
                let v = value
                    .parse::<i64>()
                    .unwrap_or_else(|_| panic!("bad line: {line}"));
                constants.insert(name.to_string(), v);
            }
            _ => panic!("unexpected line from abi_layout: {line:?}"),
        }
    }
    (m, constants)
}

macro_rules! constants {
    ($($name:ident),* $(,)?) => {{
        let mut m = BTreeMap::new();
        $(m.insert(stringify!($name).to_string(), $name.raw());)*
        m
    }};
}

/// Every constant engine_abi.h declares, as the Rust mirror defines it.
fn rust_constants() -> BTreeMap<String, i64> {
    // engine-pu adds nothing below.
    #[cfg_attr(feature = "engine-pu", allow(unused_mut))]
    let mut m = constants!(
        ENGINE_SUCCESS,
        ENGINE_KEY_ENOENT,
        ENGINE_KEY_EEXISTS,
        ENGINE_ENOMEM,
        ENGINE_NOT_STORED,
        ENGINE_EINVAL,
        ENGINE_ENOTSUP,
        ENGINE_EWOULDBLOCK,
        ENGINE_E2BIG,
        ENGINE_WANT_MORE,
        ENGINE_DISCONNECT,
        ENGINE_EACCESS,
        ENGINE_NOT_MY_VBUCKET,
        ENGINE_TMPFAIL,
        ENGINE_ERANGE,
        ENGINE_FAILED,
        OPERATION_ADD,
        OPERATION_SET,
        OPERATION_REPLACE,
        OPERATION_APPEND,
        OPERATION_PREPEND,
        OPERATION_CAS,
        PROTOCOL_BINARY_REQ,
        PROTOCOL_BINARY_RES,
        PROTOCOL_BINARY_RAW_BYTES,
        PROTOCOL_BINARY_RESPONSE_SUCCESS,
        PROTOCOL_BINARY_RESPONSE_KEY_ENOENT,
        PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS,
        PROTOCOL_BINARY_RESPONSE_E2BIG,
        PROTOCOL_BINARY_RESPONSE_EINVAL,
        PROTOCOL_BINARY_RESPONSE_NOT_STORED,
        PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL,
        PROTOCOL_BINARY_RESPONSE_NOT_MY_VBUCKET,
        PROTOCOL_BINARY_RESPONSE_AUTH_ERROR,
        PROTOCOL_BINARY_RESPONSE_AUTH_CONTINUE,
        PROTOCOL_BINARY_RESPONSE_ERANGE,
        PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND,
        PROTOCOL_BINARY_RESPONSE_ENOMEM,
        PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED,
        PROTOCOL_BINARY_RESPONSE_EINTERNAL,
        PROTOCOL_BINARY_RESPONSE_EBUSY,
        PROTOCOL_BINARY_RESPONSE_ETMPFAIL,
        CREATE_BUCKET,
        DELETE_BUCKET,
        LIST_BUCKETS,
        SELECT_BUCKET,
        CREATE_BUCKET_DEPRECATED,
        DELETE_BUCKET_DEPRECATED,
        LIST_BUCKETS_DEPRECATED,
        SELECT_BUCKET_DEPRECATED,
        DT_SIZE,
        DT_FLOAT,
        DT_BOOL,
        DT_STRING,
        DT_CONFIGFILE,
        ON_CONNECT,
        ON_DISCONNECT,
        ON_AUTH,
        ON_SWITCH_CONN,
        ON_LOG_LEVEL,
        MAX_ENGINE_EVENT_TYPE,
        EXTENSION_SUCCESS,
        EXTENSION_FATAL,
        EXTENSION_FAILED,
        EXTENSION_DAEMON,
        EXTENSION_LOGGER,
        EXTENSION_ASCII_PROTOCOL,
        EXTENSION_BINARY_PROTOCOL,
        EXTENSION_LOG_DETAIL,
        EXTENSION_LOG_DEBUG,
        EXTENSION_LOG_INFO,
        EXTENSION_LOG_WARNING,
        ENGINE_INTERFACE_VERSION,
        TAP_MUTATION,
        TAP_DELETION,
        TAP_FLUSH,
        TAP_OPAQUE,
        TAP_VBUCKET_SET,
        TAP_ACK,
        TAP_DISCONNECT,
        TAP_NOOP,
        TAP_PAUSE,
        TAP_CHECKPOINT_START,
        TAP_CHECKPOINT_END,
        ENGINE_FEATURE_CAS,
        ENGINE_FEATURE_PERSISTENT_STORAGE,
        ENGINE_FEATURE_SECONDARY_ENGINE,
        ENGINE_FEATURE_ACCESS_CONTROL,
        ENGINE_FEATURE_MULTI_TENANCY,
        ENGINE_FEATURE_LRU,
        ENGINE_FEATURE_VBUCKET,
    );
    #[cfg(not(feature = "engine-pu"))]
    m.extend(constants!(DT_SSIZE));
    m
}

#[test]
fn c_header_layout_matches_the_rust_mirror() {
    let out = run("abi_layout", &[]);
    assert_success("abi_layout", &out);
    let (c, _) = parse_c_output(&String::from_utf8_lossy(&out.stdout));
    let rust = rust_layouts();
    let c_names: Vec<&String> = c.keys().collect();
    let rust_names: Vec<&String> = rust.keys().collect();
    assert_eq!(
        c_names, rust_names,
        "engine_abi.h and the Rust mirror cover different types"
    );
    for (name, rust_layout) in &rust {
        assert_eq!(
            &c[name], rust_layout,
            "{name}: C (left) and Rust (right) disagree"
        );
    }
    // The two structs a wrong slot would hurt most, spelled out.
    let engine = &c["ENGINE_HANDLE_V1"];
    let server = &c["SERVER_HANDLE_V1"];
    if cfg!(feature = "engine-pu") {
        assert_eq!((engine.size, server.size), (168, 64));
    } else {
        assert_eq!((engine.size, server.size), (176, 72));
    }
}

#[test]
fn c_header_constants_match_the_rust_mirror() {
    let out = run("abi_layout", &[]);
    assert_success("abi_layout", &out);
    let (_, c) = parse_c_output(&String::from_utf8_lossy(&out.stdout));
    let rust = rust_constants();
    let c_names: Vec<&String> = c.keys().collect();
    let rust_names: Vec<&String> = rust.keys().collect();
    assert_eq!(
        c_names, rust_names,
        "engine_abi.h and the Rust mirror list different constants"
    );
    for (name, value) in &rust {
        assert_eq!(
            c[name], *value,
            "{name}: C (left) and Rust (right) disagree"
        );
    }
}

#[test]
fn mock_host_self_test_passes() {
    assert_success("host_selftest", &run("host_selftest", &[]));
}

#[test]
fn test_engine_conformance_passes() {
    let engine = build(VARIANT).join("libtest_engine.so");
    assert_success("conformance", &run("conformance", &[&engine]));
}

#[test]
fn harness_is_clean_under_valgrind() {
    if !valgrind_available("harness_is_clean_under_valgrind") {
        return;
    }
    let engine = build(VARIANT).join("libtest_engine.so");
    for (program, args) in [
        ("host_selftest", vec![]),
        ("conformance", vec![engine.as_path()]),
    ] {
        let out = Command::new(MEMCHECK[0])
            .args(&MEMCHECK[1..])
            .arg(build(VARIANT).join(program))
            .args(&args)
            .output()
            .expect("run valgrind");
        assert_success(&format!("{program} under valgrind memcheck"), &out);
    }
}

#[test]
fn harness_is_clean_under_asan_and_ubsan() {
    let dir = build_sanitized(VARIANT);
    let engine = dir.join("libtest_engine.so");
    for (program, args) in [
        ("host_selftest", vec![]),
        ("conformance", vec![engine.as_path()]),
    ] {
        let out = Command::new(dir.join(program))
            .args(&args)
            .envs(SANITIZER_ENV)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        assert_success(&format!("{program} under ASan and UBSan"), &out);
    }
}
