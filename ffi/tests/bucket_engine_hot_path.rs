//! The bucket engine's call path through the C ABI allocates nothing (topkeys off), and neither
//! does a get on the built-in storage engine (hit or miss): a counting global allocator in this
//! test binary counts every Rust allocation of the engines (linked in as a Rust library), while
//! the C host and the C test engine allocate with malloc, which is not counted. The host is the
//! harness's mock memcached (`libmock_host.so`), set up once for both tests.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use mcb_ffi::abi::*;
use mcb_testkit::alloc::{allocations_during, Counting};
use mcb_testkit::c_harness::{build, Variant};
use std::ffi::{c_int, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr;
use std::sync::OnceLock;

/// The harness in the ABI variant of this crate's features.
const VARIANT: Variant = Variant::of(cfg!(feature = "engine-pu"));

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A symbol of the mock host, as a function of type `T`.
fn sym<T: Copy>(lib: *mut c_void, name: &std::ffi::CStr) -> T {
    // SAFETY: a live handle and a NUL-terminated name.
    let p = unsafe { libc::dlsym(lib, name.as_ptr()) };
    assert!(!p.is_null(), "mock host lacks {name:?}");
    assert_eq!(std::mem::size_of::<T>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: the symbol is a function of exactly this signature (mock_host.h).
    unsafe { std::mem::transmute_copy::<*mut c_void, T>(&p) }
}

/// The mock host's entry points, after its one `mh_init`.
#[derive(Clone, Copy)]
struct MockHost {
    get_server_api: unsafe extern "C" fn() -> *mut SERVER_HANDLE_V1,
    conn_open: unsafe extern "C" fn() -> *mut c_void,
    conn_close: unsafe extern "C" fn(*mut c_void),
}

fn mock_host() -> &'static MockHost {
    static HOST: OnceLock<MockHost> = OnceLock::new();
    HOST.get_or_init(|| {
        let path = CString::new(
            build(VARIANT)
                .join("libmock_host.so")
                .as_os_str()
                .as_bytes(),
        )
        .unwrap();
        // SAFETY: a NUL-terminated path; the library is the harness's mock host.
        let host = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!host.is_null(), "dlopen libmock_host.so");
        let init: unsafe extern "C" fn() -> c_int = sym(host, c"mh_init");
        // SAFETY: the host's documented set-up call, once.
        assert_eq!(unsafe { init() }, 0);
        MockHost {
            get_server_api: sym(host, c"mh_get_server_api"),
            conn_open: sym(host, c"mh_conn_open"),
            conn_close: sym(host, c"mh_conn_close"),
        }
    })
}

#[test]
fn proxied_calls_do_not_allocate() {
    let dir = build(VARIANT);
    let MockHost {
        get_server_api,
        conn_open,
        conn_close,
    } = *mock_host();

    let mut handle: *mut ENGINE_HANDLE = ptr::null_mut();
    // SAFETY: interface 1, the host's get_server_api, a live out-parameter.
    let rc =
        unsafe { mcb_ffi::bucket_engine::create_instance(1, Some(get_server_api), &mut handle) };
    assert_eq!(rc, ENGINE_SUCCESS);
    // SAFETY: create_instance returned our ENGINE_HANDLE_V1.
    let v1 = unsafe { *handle.cast::<ENGINE_HANDLE_V1>() };
    let engine = dir.join("libtest_engine.so");
    let config = CString::new(format!("engine={};default=true", engine.display())).unwrap();
    // SAFETY: our own slot with a NUL-terminated config.
    let rc = unsafe { v1.initialize.unwrap()(handle, config.as_ptr()) };
    assert_eq!(rc, ENGINE_SUCCESS);
    // SAFETY: fires ON_CONNECT; the connection lives until conn_close.
    let cookie = unsafe { conn_open() }.cast_const();

    // One stored key to read back.
    let mut item: *mut item = ptr::null_mut();
    // SAFETY: our own slots, the host's cookie, live out-parameters; the key is 3 bytes.
    unsafe {
        assert_eq!(
            v1.allocate.unwrap()(
                handle,
                cookie,
                &mut item,
                c"key".as_ptr().cast(),
                3,
                2,
                0,
                0
            ),
            ENGINE_SUCCESS
        );
        let mut cas = 0u64;
        assert_eq!(
            v1.store.unwrap()(handle, cookie, item, &mut cas, OPERATION_SET, 0),
            ENGINE_SUCCESS
        );
        v1.release.unwrap()(handle, cookie, item);
    }

    let get = v1.get.unwrap();
    let release = v1.release.unwrap();
    let n = allocations_during(|| {
        for _ in 0..1_000 {
            let mut found: *mut item = ptr::null_mut();
            // SAFETY: as above.
            let rc = unsafe { get(handle, cookie, &mut found, c"key".as_ptr().cast(), 3, 0) };
            assert_eq!(rc, ENGINE_SUCCESS);
            // SAFETY: the item the engine just handed out.
            unsafe { release(handle, cookie, found) };
            let mut missing: *mut item = ptr::null_mut();
            // SAFETY: as above.
            let rc = unsafe { get(handle, cookie, &mut missing, c"nope".as_ptr().cast(), 4, 0) };
            assert_eq!(rc, ENGINE_KEY_ENOENT);
        }
    });
    assert_eq!(n, 0, "the proxied call path allocated {n} times");

    // SAFETY: fires ON_DISCONNECT, then our destroy; the host goes last.
    unsafe {
        conn_close(cookie.cast_mut());
        v1.destroy.unwrap()(handle, false);
    }
}

#[test]
fn storage_engine_gets_do_not_allocate() {
    let mut handle: *mut ENGINE_HANDLE = ptr::null_mut();
    let get_server_api = mock_host().get_server_api;
    // SAFETY: interface 1, the host's get_server_api, a live out-parameter.
    let rc = unsafe { mcb_ffi::storage::create_instance(1, Some(get_server_api), &mut handle) };
    assert_eq!(rc, ENGINE_SUCCESS);
    // SAFETY: create_instance returned our ENGINE_HANDLE_V1.
    let v1 = unsafe { *handle.cast::<ENGINE_HANDLE_V1>() };
    // SAFETY: our own slot; NULL is the default configuration.
    let rc = unsafe { v1.initialize.unwrap()(handle, ptr::null()) };
    assert_eq!(rc, ENGINE_SUCCESS);
    let cookie = ptr::null(); // memcached's engine test harness passes NULL cookies
    let mut item: *mut item = ptr::null_mut();
    // SAFETY: our own slots, live out-parameters; the key is 3 bytes.
    unsafe {
        assert_eq!(
            v1.allocate.unwrap()(
                handle,
                cookie,
                &mut item,
                c"key".as_ptr().cast(),
                3,
                2,
                0,
                0
            ),
            ENGINE_SUCCESS
        );
        let mut cas = 0u64;
        assert_eq!(
            v1.store.unwrap()(handle, cookie, item, &mut cas, OPERATION_SET, 0),
            ENGINE_SUCCESS
        );
        v1.release.unwrap()(handle, cookie, item);
    }
    let (get, release, info) = (
        v1.get.unwrap(),
        v1.release.unwrap(),
        v1.get_item_info.unwrap(),
    );
    // Warm up this thread's epoch participant and stats stripe (first use allocates).
    let mut found: *mut item = ptr::null_mut();
    // SAFETY: as above.
    unsafe {
        assert_eq!(
            get(handle, cookie, &mut found, c"key".as_ptr().cast(), 3, 0),
            ENGINE_SUCCESS
        );
        release(handle, cookie, found);
    }
    let n = allocations_during(|| {
        for _ in 0..1_000 {
            let mut found: *mut item = ptr::null_mut();
            // SAFETY: as above.
            let rc = unsafe { get(handle, cookie, &mut found, c"key".as_ptr().cast(), 3, 0) };
            assert_eq!(rc, ENGINE_SUCCESS);
            // SAFETY: item_info is plain data (integers and pointers); all zeroes is valid.
            let mut item_info: item_info = unsafe { std::mem::zeroed() };
            item_info.nvalue = 1;
            // SAFETY: the item just handed out and a live item_info with one iovec.
            let filled = unsafe { info(handle, cookie, found, &mut item_info) };
            assert!(filled);
            // SAFETY: the item the engine just handed out, given back once.
            unsafe { release(handle, cookie, found) };
            let mut missing: *mut item = ptr::null_mut();
            // SAFETY: as above.
            let rc = unsafe { get(handle, cookie, &mut missing, c"nope".as_ptr().cast(), 4, 0) };
            assert_eq!(rc, ENGINE_KEY_ENOENT);
        }
    });
    assert_eq!(n, 0, "the storage engine's get path allocated {n} times");
    // SAFETY: no call in flight; the handle is not used again.
    unsafe { v1.destroy.unwrap()(handle, false) };
}
