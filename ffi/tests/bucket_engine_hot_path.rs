//! The bucket engine's call path through the C ABI allocates nothing (topkeys off): a counting
//! global allocator in this test binary counts every Rust allocation of the bucket engine
//! (linked in as a Rust library), while the C host and the C test engine allocate with malloc,
//! which is not counted. The host is the harness's mock memcached (`libmock_host.so`).
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

mod abi_common;

use abi_common::build;
use mcb_ffi::abi::*;
use mcb_model_tests::alloc::{allocations_during, Counting};
use std::ffi::{c_int, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::ptr;

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

#[test]
fn proxied_calls_do_not_allocate() {
    let dir = build();
    let host_path = CString::new(dir.join("libmock_host.so").as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path; the library is the harness's mock host.
    let host = unsafe { libc::dlopen(host_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!host.is_null(), "dlopen libmock_host.so");
    let init: unsafe extern "C" fn() -> c_int = sym(host, c"mh_init");
    let get_server_api: unsafe extern "C" fn() -> *mut SERVER_HANDLE_V1 =
        sym(host, c"mh_get_server_api");
    let conn_open: unsafe extern "C" fn() -> *mut c_void = sym(host, c"mh_conn_open");
    let conn_close: unsafe extern "C" fn(*mut c_void) = sym(host, c"mh_conn_close");
    // SAFETY: the host's documented set-up call, once.
    assert_eq!(unsafe { init() }, 0);

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
