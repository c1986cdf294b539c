//! Builds the C engine harness in `examples-c/engine` with make and runs it:
//!
//! - `abi_layout` prints the layout of every struct in our C header `engine_abi.h`; each line
//!   must equal the Rust mirror's (whose numbers `abi_layout.rs` pins to memcached's headers),
//!   and the two must describe the same set of types and fields;
//! - `host_selftest` checks the mock memcached host on its own;
//! - `conformance` drives the C test engine through the mock host;
//! - both programs again under valgrind memcheck when valgrind is on PATH (CI installs it; a
//!   local run without it says so, and a run with `CI` set fails instead).
//!
//! The C variant follows the crate's: `--features engine-pu` builds with `ENGINE_PU=1`. A
//! missing C compiler or make is a failure, not a skip.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

mod abi_common;

use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};
use std::path::Path;
use std::process::{Command, Output};

use abi_common::build;
use bucket_engine::abi::*;

fn run(program: &str, args: &[&Path]) -> Output {
    let path = build().join(program);
    Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()))
}

fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
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

/// Parses `abi_layout`'s `S name size align` / `F name field offset` lines.
fn parse_c_layouts(text: &str) -> BTreeMap<String, Layout> {
    let mut m: BTreeMap<String, Layout> = BTreeMap::new();
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
            _ => panic!("unexpected line from abi_layout: {line:?}"),
        }
    }
    m
}

#[test]
fn c_header_layout_matches_the_rust_mirror() {
    let out = run("abi_layout", &[]);
    assert_success("abi_layout", &out);
    let c = parse_c_layouts(&String::from_utf8_lossy(&out.stdout));
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
fn mock_host_self_test_passes() {
    assert_success("host_selftest", &run("host_selftest", &[]));
}

#[test]
fn test_engine_conformance_passes() {
    let engine = build().join("libtest_engine.so");
    assert_success("conformance", &run("conformance", &[&engine]));
}

#[test]
fn harness_is_clean_under_valgrind() {
    let found = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "valgrind is not on PATH but CI is set: .ci/run installs it"
        );
        eprintln!("SKIPPED harness_is_clean_under_valgrind: valgrind not on PATH (CI runs it)");
        return;
    }
    let engine = build().join("libtest_engine.so");
    for (program, args) in [
        ("host_selftest", vec![]),
        ("conformance", vec![engine.as_path()]),
    ] {
        let out = Command::new("valgrind")
            .args(["--quiet", "--error-exitcode=1", "--leak-check=full"])
            .arg("--errors-for-leak-kinds=definite,possible")
            .arg(build().join(program))
            .args(&args)
            .output()
            .expect("run valgrind");
        assert_success(&format!("{program} under valgrind memcheck"), &out);
    }
}
