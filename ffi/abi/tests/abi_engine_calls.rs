//! Drives a real C engine (the harness's `libtest_engine.so`) through the Rust mirror alone, the
//! way the bucket engine will: dlopen with RTLD_NOW | RTLD_LOCAL, `create_instance(1, ...)`
//! with a server API whose cookie table is a Rust copy of the host's with slots overridden, then
//! every `ENGINE_HANDLE_V1` slot, with `ADD_RESPONSE`, `ADD_STAT`, the aggregate callback, the
//! TAP iterator and (v2.5.1) the vbucket-map callback crossing the boundary in Rust.
//!
//! The layout tests prove where each slot is; this proves the slots' signatures: a wrong
//! parameter type in a mirror shows up here as a wrong answer or a crash. The host is the
//! harness's mock memcached (`libmock_host.so`).
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use mcb_abi::abi::*;
use mcb_testkit::c_harness::{build, Variant};

/// The harness in the ABI variant of this crate's features.
const VARIANT: Variant = Variant::of(cfg!(feature = "engine-pu"));

/// A dlopen'ed library, closed on drop.
struct Lib(*mut c_void);

impl Lib {
    fn open(path: &Path) -> Lib {
        let c = CString::new(path.as_os_str().as_bytes()).expect("no NUL in path");
        // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(
            !handle.is_null(),
            "dlopen {}: {}",
            path.display(),
            dlerror()
        );
        Lib(handle)
    }

    fn sym(&self, name: &CStr) -> *mut c_void {
        // SAFETY: `self.0` is an open handle and `name` is NUL-terminated.
        let p = unsafe { libc::dlsym(self.0, name.as_ptr()) };
        assert!(!p.is_null(), "dlsym {name:?}: {}", dlerror());
        p
    }
}

impl Drop for Lib {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from dlopen and is closed exactly once, here.
        unsafe { libc::dlclose(self.0) };
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call on
    // this thread; it is copied at once.
    unsafe {
        let e = libc::dlerror();
        if e.is_null() {
            String::from("(no dlerror)")
        } else {
            CStr::from_ptr(e).to_string_lossy().into_owned()
        }
    }
}

/// Casts a symbol's address to the function type the C header declares for it.
macro_rules! func {
    ($lib:expr, $name:literal, $t:ty) => {{
        let p = $lib.sym($name);
        // SAFETY: the symbol is a function with exactly this C signature (mock_host.h /
        // engine_abi.h), and function and data pointers share a representation on this target.
        unsafe { std::mem::transmute::<*mut c_void, $t>(p) }
    }};
}

/// The mock host's entry points (mock_host.h).
struct Host {
    _lib: Lib,
    init: unsafe extern "C" fn() -> c_int,
    shutdown: unsafe extern "C" fn(),
    get_server_api: unsafe extern "C" fn() -> *mut SERVER_HANDLE_V1,
    conn_open: unsafe extern "C" fn() -> *mut c_void,
    conn_close: unsafe extern "C" fn(*mut c_void),
    conn_wait_io: unsafe extern "C" fn(*mut c_void, c_int) -> ENGINE_ERROR_CODE,
    events_forget: unsafe extern "C" fn(*mut ENGINE_HANDLE),
    live_connections: unsafe extern "C" fn() -> c_int,
}

fn load_host() -> Host {
    let lib = Lib::open(&build(VARIANT).join("libmock_host.so"));
    Host {
        init: func!(lib, c"mh_init", unsafe extern "C" fn() -> c_int),
        shutdown: func!(lib, c"mh_shutdown", unsafe extern "C" fn()),
        get_server_api: func!(
            lib,
            c"mh_get_server_api",
            unsafe extern "C" fn() -> *mut SERVER_HANDLE_V1
        ),
        conn_open: func!(lib, c"mh_conn_open", unsafe extern "C" fn() -> *mut c_void),
        conn_close: func!(lib, c"mh_conn_close", unsafe extern "C" fn(*mut c_void)),
        conn_wait_io: func!(
            lib,
            c"mh_conn_wait_io",
            unsafe extern "C" fn(*mut c_void, c_int) -> ENGINE_ERROR_CODE
        ),
        events_forget: func!(
            lib,
            c"mh_events_forget",
            unsafe extern "C" fn(*mut ENGINE_HANDLE)
        ),
        live_connections: func!(lib, c"mh_live_connections", unsafe extern "C" fn() -> c_int),
        _lib: lib,
    }
}

// ---------------------------------------------------------------------------------------------
// The server API handed to the engine: the host's, with the cookie table copied and its
// reserve/release overridden (the bucket engine's pattern).

/// The wrapped handle; raw pointers into leaked tables, written once before any engine runs.
struct Wrapped {
    handle: *mut SERVER_HANDLE_V1,
    upstream_cookie: SERVER_COOKIE_API,
}

// SAFETY: the pointed-to tables are leaked (live forever) and never written after `WRAPPED` is
// set, so sharing the pointers between threads only ever reads immutable data.
unsafe impl Send for Wrapped {}
// SAFETY: as above.
unsafe impl Sync for Wrapped {}

static WRAPPED: OnceLock<Wrapped> = OnceLock::new();
static RESERVES: AtomicUsize = AtomicUsize::new(0);
static RELEASES: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn wrapped_get_server_api() -> *mut SERVER_HANDLE_V1 {
    WRAPPED.get().map_or(ptr::null_mut(), |w| w.handle)
}

unsafe extern "C" fn counting_reserve(cookie: *const c_void) -> ENGINE_ERROR_CODE {
    // Relaxed: a counter read by the test after the engine's own synchronisation (the host's
    // notify/wait) or by polling; nothing is published through it.
    RESERVES.fetch_add(1, Ordering::Relaxed);
    let upstream = WRAPPED
        .get()
        .and_then(|w| w.upstream_cookie.reserve)
        .expect("host reserve");
    // SAFETY: forwarding the engine's own call, with its cookie, to the host's slot.
    unsafe { upstream(cookie) }
}

unsafe extern "C" fn counting_release(cookie: *const c_void) -> ENGINE_ERROR_CODE {
    let upstream = WRAPPED
        .get()
        .and_then(|w| w.upstream_cookie.release)
        .expect("host release");
    // SAFETY: forwarding the engine's own call, with its cookie, to the host's slot.
    let rv = unsafe { upstream(cookie) };
    // Relaxed: see counting_reserve.
    RELEASES.fetch_add(1, Ordering::Relaxed);
    rv
}

fn wrap_server_api(host: &Host) -> GET_SERVER_API {
    WRAPPED.get_or_init(|| {
        // SAFETY: the host's get_server_api returns its static, fully initialised handle whose
        // table pointers are valid for the life of the library; we copy them by value.
        let (mut handle, cookie) = unsafe {
            let h = (host.get_server_api)();
            assert!(!h.is_null());
            assert_eq!((*h).interface, 1);
            (*h, *(*h).cookie)
        };
        let mut ours = cookie;
        ours.reserve = Some(counting_reserve);
        ours.release = Some(counting_release);
        handle.cookie = Box::leak(Box::new(ours));
        Wrapped {
            handle: Box::leak(Box::new(handle)),
            upstream_cookie: cookie,
        }
    });
    Some(wrapped_get_server_api)
}

// ---------------------------------------------------------------------------------------------
// Callbacks defined in Rust.

#[derive(Debug, Default, Clone)]
struct Response {
    key: Vec<u8>,
    ext: Vec<u8>,
    body: Vec<u8>,
    status: u16,
    cas: u64,
}

static RESPONSES: Mutex<Vec<Response>> = Mutex::new(Vec::new());
static STATS: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());

/// # Safety
/// `p` must point to `n` readable bytes (or `n` must be 0).
unsafe fn bytes(p: *const c_void, n: usize) -> Vec<u8> {
    if n == 0 || p.is_null() {
        return Vec::new();
    }
    // SAFETY: the caller guarantees `n` readable bytes at `p`.
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), n) }.to_vec()
}

unsafe extern "C" fn add_response(
    key: *const c_void,
    keylen: u16,
    ext: *const c_void,
    extlen: u8,
    body: *const c_void,
    bodylen: u32,
    _datatype: u8,
    status: u16,
    cas: u64,
    _cookie: *const c_void,
) -> bool {
    // SAFETY: ADD_RESPONSE's contract: each pointer covers its length.
    let r = unsafe {
        Response {
            key: bytes(key, keylen.into()),
            ext: bytes(ext, extlen.into()),
            body: bytes(body, body_len(bodylen)),
            status,
            cas,
        }
    };
    RESPONSES.lock().unwrap().push(r);
    true
}

fn body_len(n: u32) -> usize {
    usize::try_from(n).expect("u32 fits usize")
}

unsafe extern "C" fn add_stat(
    key: *const c_char,
    klen: u16,
    val: *const c_char,
    vlen: u32,
    _cookie: *const c_void,
) {
    // SAFETY: ADD_STAT's contract: key covers klen bytes and val covers vlen bytes.
    let (k, v) = unsafe {
        (
            bytes(key.cast(), klen.into()),
            bytes(val.cast(), body_len(vlen)),
        )
    };
    STATS.lock().unwrap().push((
        String::from_utf8_lossy(&k).into_owned(),
        String::from_utf8_lossy(&v).into_owned(),
    ));
}

static AGGREGATED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn aggregate(_src: *mut c_void, dest: *mut c_void) {
    assert!(!dest.is_null());
    // Relaxed: a plain counter read after the engine call returns.
    AGGREGATED.fetch_add(1, Ordering::Relaxed);
}

#[cfg(not(feature = "engine-pu"))]
static VB_MAP: Mutex<Vec<u8>> = Mutex::new(Vec::new());

#[cfg(not(feature = "engine-pu"))]
unsafe extern "C" fn vb_map(
    _cookie: *const c_void,
    map: *const c_void,
    mapsize: usize,
) -> ENGINE_ERROR_CODE {
    // SAFETY: the callback's contract: map covers mapsize bytes.
    *VB_MAP.lock().unwrap() = unsafe { bytes(map, mapsize) };
    ENGINE_SUCCESS
}

// ---------------------------------------------------------------------------------------------
// Engine call helpers. Each takes the handle and its v1 table, which stay valid until destroy.

struct Engine {
    h: *mut ENGINE_HANDLE,
    v1: ENGINE_HANDLE_V1,
}

impl Engine {
    fn store(
        &self,
        cookie: *const c_void,
        key: &[u8],
        value: &[u8],
        op: ENGINE_STORE_OPERATION,
    ) -> (ENGINE_ERROR_CODE, u64) {
        let mut it: *mut item = ptr::null_mut();
        // SAFETY: h is a live engine handle; key covers key.len() bytes; `it` is writable.
        let rc = unsafe {
            (self.v1.allocate.unwrap())(
                self.h,
                cookie,
                &mut it,
                key.as_ptr().cast(),
                key.len(),
                value.len(),
                0x1234,
                0,
            )
        };
        if rc != ENGINE_SUCCESS {
            return (rc, 0);
        }
        // Room for three iovecs: nvalue is IN (3) and OUT (1 used).
        // SAFETY: all-zero bits are a valid item_info_iov (integers and null pointers).
        let mut info: item_info_iov<2> = unsafe { std::mem::zeroed() };
        info.info.nvalue = 3;
        // SAFETY: `it` is the item just allocated; `info` is writable with 3 iovecs of room.
        let ok = unsafe { (self.v1.get_item_info.unwrap())(self.h, cookie, it, &mut info.info) };
        assert!(ok);
        assert_eq!(info.info.nvalue, 1);
        assert_eq!(info.info.value[0].iov_len, value.len());
        let mut cas = 0u64;
        // SAFETY: iov_base covers the item's nbytes (== value.len()) writable bytes; the item is
        // ours until release.
        let rc = unsafe {
            ptr::copy_nonoverlapping(
                value.as_ptr(),
                info.info.value[0].iov_base.cast(),
                value.len(),
            );
            (self.v1.item_set_cas.unwrap())(self.h, cookie, it, 0);
            let rc = (self.v1.store.unwrap())(self.h, cookie, it, &mut cas, op, 0);
            (self.v1.release.unwrap())(self.h, cookie, it);
            rc
        };
        (rc, cas)
    }

    fn get(
        &self,
        cookie: *const c_void,
        key: &[u8],
    ) -> Result<(Vec<u8>, u32, u64), ENGINE_ERROR_CODE> {
        let mut it: *mut item = ptr::null_mut();
        let nkey = c_int::try_from(key.len()).unwrap();
        // SAFETY: live handle; key covers nkey bytes; `it` writable.
        let rc = unsafe {
            (self.v1.get.unwrap())(self.h, cookie, &mut it, key.as_ptr().cast(), nkey, 0)
        };
        if rc != ENGINE_SUCCESS {
            return Err(rc);
        }
        // SAFETY: all-zero bits are a valid item_info.
        let mut info: item_info = unsafe { std::mem::zeroed() };
        info.nvalue = 1;
        // SAFETY: `it` is a referenced item; `info` has room for one iovec; the value and key
        // are read before the item is released.
        unsafe {
            assert!((self.v1.get_item_info.unwrap())(
                self.h, cookie, it, &mut info
            ));
            assert_eq!(bytes(info.key, info.nkey.into()), key);
            let value = bytes(info.value[0].iov_base, info.value[0].iov_len);
            (self.v1.release.unwrap())(self.h, cookie, it);
            Ok((value, info.flags, info.cas))
        }
    }

    fn remove(&self, cookie: *const c_void, key: &[u8], cas: u64) -> ENGINE_ERROR_CODE {
        let remove = self.v1.remove.unwrap();
        // SAFETY: live handle; key covers key.len() bytes; (v2.5.1) `inout` is writable.
        #[cfg(not(feature = "engine-pu"))]
        let rc = unsafe {
            let mut inout = cas;
            remove(
                self.h,
                cookie,
                key.as_ptr().cast(),
                key.len(),
                &mut inout,
                0,
            )
        };
        // SAFETY: live handle; key covers key.len() bytes.
        #[cfg(feature = "engine-pu")]
        let rc = unsafe { remove(self.h, cookie, key.as_ptr().cast(), key.len(), cas, 0) };
        rc
    }

    fn command(
        &self,
        cookie: *const c_void,
        opcode: u8,
        ext: &[u8],
        key: &[u8],
        value: &[u8],
    ) -> ENGINE_ERROR_CODE {
        #[repr(C)]
        struct Packet {
            header: protocol_binary_request_header,
            body: [u8; 256],
        }
        let bodylen = ext.len() + key.len() + value.len();
        let mut p = Packet {
            header: protocol_binary_request_header {
                request: protocol_binary_request_header_request {
                    magic: PROTOCOL_BINARY_REQ,
                    opcode,
                    keylen: u16::try_from(key.len()).unwrap().to_be(),
                    extlen: u8::try_from(ext.len()).unwrap(),
                    datatype: PROTOCOL_BINARY_RAW_BYTES,
                    vbucket: 0,
                    bodylen: u32::try_from(bodylen).unwrap().to_be(),
                    opaque: 0x1234_5678,
                    cas: 0,
                },
            },
            body: [0; 256],
        };
        p.body[..ext.len()].copy_from_slice(ext);
        p.body[ext.len()..ext.len() + key.len()].copy_from_slice(key);
        p.body[ext.len() + key.len()..bodylen].copy_from_slice(value);
        RESPONSES.lock().unwrap().clear();
        // SAFETY: the header is followed in memory by its `bodylen` body bytes, as the protocol
        // requires; add_response has ADD_RESPONSE's signature.
        unsafe {
            (self.v1.unknown_command.unwrap())(self.h, cookie, &mut p.header, Some(add_response))
        }
    }

    fn stats(
        &self,
        cookie: *const c_void,
        group: &[u8],
    ) -> (ENGINE_ERROR_CODE, Vec<(String, String)>) {
        STATS.lock().unwrap().clear();
        let key = if group.is_empty() {
            ptr::null()
        } else {
            group.as_ptr().cast()
        };
        // SAFETY: live handle; key is NULL or covers group.len() bytes.
        let rc = unsafe {
            (self.v1.get_stats.unwrap())(
                self.h,
                cookie,
                key,
                c_int::try_from(group.len()).unwrap(),
                Some(add_stat),
            )
        };
        (rc, std::mem::take(&mut *STATS.lock().unwrap()))
    }

    fn stat(&self, cookie: *const c_void, name: &str) -> String {
        let (rc, stats) = self.stats(cookie, b"");
        assert_eq!(rc, ENGINE_SUCCESS);
        stats
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no stat {name}"))
    }
}

#[test]
fn every_engine_slot_through_the_rust_mirror() {
    let host = load_host();
    // SAFETY: the host's init takes no arguments and is called once, before anything else.
    assert_eq!(unsafe { (host.init)() }, 0);
    let get_server_api = wrap_server_api(&host);

    let lib = Lib::open(&build(VARIANT).join("libtest_engine.so"));
    let create = func!(
        lib,
        c"create_instance",
        unsafe extern "C" fn(u64, GET_SERVER_API, *mut *mut ENGINE_HANDLE) -> ENGINE_ERROR_CODE
    );
    // The symbol's type is the mirror's CREATE_INSTANCE slot type.
    let _: CREATE_INSTANCE = Some(create);
    let mut h: *mut ENGINE_HANDLE = ptr::null_mut();
    // SAFETY: create_instance's contract: interface version, server-API getter, out pointer.
    let rc = unsafe { create(ENGINE_INTERFACE_VERSION, get_server_api, &mut h) };
    assert_eq!(rc, ENGINE_SUCCESS);
    assert!(!h.is_null());
    // SAFETY: a v1 engine's handle starts with its version and is an ENGINE_HANDLE_V1.
    let v1 = unsafe {
        assert_eq!((*h).interface, 1);
        *h.cast::<ENGINE_HANDLE_V1>()
    };
    assert!(v1.get_info.is_some() && v1.initialize.is_some() && v1.destroy.is_some());
    assert!(v1.allocate.is_some() && v1.remove.is_some() && v1.release.is_some());
    assert!(v1.get.is_some() && v1.store.is_some() && v1.arithmetic.is_some());
    assert!(v1.flush.is_some() && v1.get_stats.is_some() && v1.reset_stats.is_some());
    assert!(v1.get_stats_struct.is_some() && v1.aggregate_stats.is_some());
    assert!(v1.unknown_command.is_some() && v1.tap_notify.is_some());
    assert!(v1.get_tap_iterator.is_some() && v1.item_set_cas.is_some());
    assert!(v1.get_item_info.is_some() && v1.errinfo.is_some());
    #[cfg(not(feature = "engine-pu"))]
    assert!(v1.get_engine_vb_map.is_some());
    let e = Engine { h, v1 };

    // SAFETY: live handle; the config is NUL-terminated.
    let rc = unsafe { (v1.initialize.unwrap())(h, c"name=rust-mirror;cache_size=1m".as_ptr()) };
    assert_eq!(rc, ENGINE_SUCCESS);

    // get_info, with its over-allocated features array.
    // SAFETY: get_info returns the engine's info, valid until destroy; num_features entries
    // follow `features`.
    unsafe {
        let info = (v1.get_info.unwrap())(h);
        assert_eq!(CStr::from_ptr((*info).description), c"Test engine v0.1");
        assert_eq!((*info).num_features, 2);
        let features = (*info).features.as_ptr();
        assert_eq!((*features).feature, ENGINE_FEATURE_CAS.0);
        assert_eq!((*features.add(1)).feature, ENGINE_FEATURE_LRU.0);
    }

    // SAFETY: the host's conn_open takes no arguments; the cookie lives until conn_close.
    let cookie = unsafe { (host.conn_open)() };
    assert!(!cookie.is_null());
    let c = cookie.cast_const();

    // Store operations, get, flags and CAS.
    let (rc, cas) = e.store(c, b"k", b"value", OPERATION_SET);
    assert_eq!(rc, ENGINE_SUCCESS);
    assert_ne!(cas, 0);
    assert_eq!(e.get(c, b"k"), Ok((b"value".to_vec(), 0x1234, cas)));
    assert_eq!(e.store(c, b"k", b"x", OPERATION_ADD).0, ENGINE_NOT_STORED);
    assert_eq!(e.store(c, b"k", b"++", OPERATION_APPEND).0, ENGINE_SUCCESS);
    assert_eq!(e.get(c, b"k").unwrap().0, b"value++");
    assert_eq!(e.get(c, b"missing"), Err(ENGINE_KEY_ENOENT));

    // arithmetic: bools, u64s, rel_time_t and two out-pointers in one call.
    let (mut acas, mut result) = (0u64, 0u64);
    // SAFETY: live handle; key covers 1 byte; cas and result are writable.
    let rc = unsafe {
        (v1.arithmetic.unwrap())(
            h,
            c,
            b"n".as_ptr().cast(),
            1,
            true,
            true,
            5,
            40,
            0,
            &mut acas,
            &mut result,
            0,
        )
    };
    assert_eq!((rc, result), (ENGINE_SUCCESS, 40));
    // SAFETY: as above.
    let rc = unsafe {
        (v1.arithmetic.unwrap())(
            h,
            c,
            b"n".as_ptr().cast(),
            1,
            true,
            false,
            2,
            0,
            0,
            &mut acas,
            &mut result,
            0,
        )
    };
    assert_eq!((rc, result), (ENGINE_SUCCESS, 42));
    assert_ne!(acas, 0);

    // remove: the CAS by pointer (v2.5.1) or by value (engine-pu).
    let current = e.get(c, b"k").unwrap().2;
    assert_eq!(e.remove(c, b"k", current + 1), ENGINE_KEY_EEXISTS);
    assert_eq!(e.remove(c, b"k", current), ENGINE_SUCCESS);
    assert_eq!(e.remove(c, b"k", 0), ENGINE_KEY_ENOENT);

    // Stats through a Rust ADD_STAT.
    assert_eq!(e.stat(c, "engine_name"), "rust-mirror");
    assert_eq!(e.stat(c, "curr_items"), "1");
    assert_eq!(e.stat(c, "cache_size"), "1048576");
    assert_eq!(e.stats(c, b"bogus").0, ENGINE_KEY_ENOENT);
    // SAFETY: live handle and cookie.
    unsafe { (v1.reset_stats.unwrap())(h, c) };
    assert_eq!(e.stat(c, "cmd_get"), "0");
    // SAFETY: live handle; the callback has the C signature; dest is a valid pointer.
    let rc = unsafe {
        (v1.aggregate_stats.unwrap())(
            h,
            c,
            Some(aggregate),
            ptr::NonNull::<u8>::dangling().as_ptr().cast(),
        )
    };
    assert_eq!(rc, ENGINE_SUCCESS);
    assert_eq!(AGGREGATED.load(Ordering::Relaxed), 1);
    // SAFETY: live handle and cookie.
    assert!(!unsafe { (v1.get_stats_struct.unwrap())(h, c) }.is_null());

    // unknown_command answered through a Rust ADD_RESPONSE (header fields big-endian).
    assert_eq!(e.command(c, 0xe0, &[9, 8], b"ek", b"body"), ENGINE_SUCCESS);
    {
        let r = RESPONSES.lock().unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].key.as_slice(), r[0].ext.as_slice()),
            (&b"ek"[..], &[9u8, 8][..])
        );
        assert_eq!(
            (r[0].body.as_slice(), r[0].status, r[0].cas),
            (&b"body"[..], 0, 0xabc)
        );
    }
    assert_eq!(e.command(c, 0x99, &[], b"k", b""), ENGINE_ENOTSUP);

    // EWOULDBLOCK: the engine reserves the cookie through our wrapped table, completes from
    // its own thread, and releases it.
    assert_eq!(e.command(c, 0xe1, &[], b"a", b""), ENGINE_EWOULDBLOCK);
    // SAFETY: the cookie is open; the wait consumes the engine's notification.
    let status = unsafe { (host.conn_wait_io)(cookie, 10_000) };
    assert_eq!(status, ENGINE_SUCCESS);
    let deadline = Instant::now() + Duration::from_secs(10);
    while RELEASES.load(Ordering::Relaxed) < 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        (
            RESERVES.load(Ordering::Relaxed),
            RELEASES.load(Ordering::Relaxed)
        ),
        (1, 1)
    );
    assert_eq!(e.command(c, 0xe1, &[], b"a", b""), ENGINE_SUCCESS);
    assert_eq!(RESPONSES.lock().unwrap()[0].body, b"async done");

    // TAP out (an iterator the engine returns) and in (tap_notify).
    // SAFETY: live handle; client covers 4 bytes; no userdata.
    let iter = unsafe {
        (v1.get_tap_iterator.unwrap())(h, c, b"rust".as_ptr().cast(), 4, 0, ptr::null(), 0)
    };
    let iter = iter.expect("a TAP iterator");
    let mut mutations = 0;
    loop {
        let (mut it, mut es): (*mut item, *mut c_void) = (ptr::null_mut(), ptr::null_mut());
        let (mut nes, mut ttl, mut flags, mut seqno, mut vb) = (0u16, 0u8, 0u16, 0u32, 0u16);
        // SAFETY: every out-pointer is writable; the handle and cookie are live.
        let ev = unsafe {
            iter(
                h, c, &mut it, &mut es, &mut nes, &mut ttl, &mut flags, &mut seqno, &mut vb,
            )
        };
        if ev == TAP_DISCONNECT {
            break;
        }
        assert_eq!(ev, TAP_MUTATION);
        mutations += 1;
        // SAFETY: a TAP_MUTATION hands the caller a reference to the item.
        unsafe { (v1.release.unwrap())(h, c, it) };
        assert!(mutations < 100);
    }
    assert_eq!(mutations, 1);
    // SAFETY: live handle; key and data cover their lengths.
    let rc = unsafe {
        (v1.tap_notify.unwrap())(
            h,
            c,
            ptr::null_mut(),
            0,
            0,
            0,
            TAP_MUTATION,
            1,
            b"t".as_ptr().cast(),
            1,
            7,
            0,
            0,
            b"tv".as_ptr().cast(),
            2,
            0,
        )
    };
    assert_eq!(rc, ENGINE_SUCCESS);
    assert_eq!(
        e.get(c, b"t"),
        Ok((b"tv".to_vec(), 7, e.get(c, b"t").unwrap().2))
    );

    // flush, errinfo, and (v2.5.1) the vbucket map through a Rust callback.
    // SAFETY: live handle and cookie.
    assert_eq!(unsafe { (v1.flush.unwrap())(h, c, 0) }, ENGINE_SUCCESS);
    assert_eq!(e.get(c, b"n"), Err(ENGINE_KEY_ENOENT));
    let mut buf = [0 as c_char; 64];
    // SAFETY: buf is writable for its length.
    let n = unsafe { (v1.errinfo.unwrap())(h, c, buf.as_mut_ptr(), buf.len()) };
    assert_eq!(n, 0);
    #[cfg(not(feature = "engine-pu"))]
    {
        // SAFETY: live handle; vb_map has engine_get_vb_map_cb's signature.
        let rc = unsafe { (v1.get_engine_vb_map.unwrap())(h, c, Some(vb_map)) };
        assert_eq!(rc, ENGINE_SUCCESS);
        assert_eq!(VB_MAP.lock().unwrap().as_slice(), b"test-vbmap");
    }

    // ON_DISCONNECT reaches the engine (it registered through the host's callback table).
    // SAFETY: the cookie is closed once and not used after; a fresh one is opened for stats.
    let other = unsafe {
        (host.conn_close)(cookie);
        (host.conn_open)()
    };
    assert_eq!(e.stat(other, "disconnects"), "1");

    // SAFETY: `other` is closed once; then the engine's handlers are dropped before its code
    // goes away, destroy is called once, and nothing uses `h` afterwards.
    unsafe {
        (host.conn_close)(other);
        (host.events_forget)(h);
        (v1.destroy.unwrap())(h, false);
        assert_eq!((host.live_connections)(), 0);
        (host.shutdown)();
    }
    drop(lib);
}

#[test]
fn create_instance_refuses_other_interface_versions() {
    let lib = Lib::open(&build(VARIANT).join("libtest_engine.so"));
    let create = func!(
        lib,
        c"create_instance",
        unsafe extern "C" fn(u64, GET_SERVER_API, *mut *mut ENGINE_HANDLE) -> ENGINE_ERROR_CODE
    );
    let mut h: *mut ENGINE_HANDLE = ptr::null_mut();
    // SAFETY: an unsupported version is refused before the server API is touched.
    let rc = unsafe { create(2, None, &mut h) };
    assert_eq!(rc, ENGINE_ENOTSUP);
    assert!(h.is_null());
}
