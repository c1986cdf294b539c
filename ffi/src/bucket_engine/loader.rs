//! Engines loaded from shared libraries: the `core` `Engine` and `Env` for the C world.
//!
//! A bucket's engine is created as memcached creates one (`crate::engine_lib`: dlopen, then
//! `create_instance`, the library closed on every error path before an engine exists and kept
//! loaded after), or, for the spec `builtin` ([`BUILTIN`]), in-process by
//! `crate::storage::create_instance`; everything after `create_instance` is the same for both.
//! Every failure is logged with the path and the reason.

use super::host::Host;
use crate::abi::*;
use crate::engine_lib::{self, Created};
use mcb_core::bucket::topkeys::TopKeys;
use mcb_core::bucket::{Engine, Env};
use std::ffi::{c_void, CString};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// A host cookie, as the core's connection identity.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Cookie(pub(crate) *const c_void);

// SAFETY: a cookie is an opaque token the host gives us; we only hand it back to the host and
// to engines, which may use it from any thread (memcached's contract).
unsafe impl Send for Cookie {}
// SAFETY: as for `Send`.
unsafe impl Sync for Cookie {}

/// The ON_DISCONNECT handler an engine registered through our callback API.
#[derive(Clone, Copy)]
struct Disconnect {
    callback: unsafe extern "C" fn(*const c_void, ENGINE_EVENT_TYPE, *const c_void, *const c_void),
    data: usize,
}

/// Where an engine's ON_DISCONNECT registration lands, found by its `ENGINE_HANDLE` pointer
/// (engines register during `initialize`, and only know their own handle).
#[derive(Default)]
struct DisconnectSlot(OnceLock<Disconnect>);

/// Engine handle address to its slot. A short list (one entry per loaded engine) scanned only at
/// registration: a plain vector, whose buffer a leak checker sees as reachable at exit.
type Slots = Mutex<Vec<(usize, Arc<DisconnectSlot>)>>;

fn slots() -> &'static Slots {
    static SLOTS: OnceLock<Slots> = OnceLock::new();
    SLOTS.get_or_init(Slots::default)
}

/// Records an engine's ON_DISCONNECT handler; false if the handle is not one of ours.
pub(crate) fn register_disconnect(
    engine: *mut ENGINE_HANDLE,
    callback: EVENT_CALLBACK,
    data: *const c_void,
) -> bool {
    let Some(callback) = callback else {
        return false;
    };
    let slots = slots().lock().unwrap_or_else(PoisonError::into_inner);
    let Some((_, slot)) = slots.iter().find(|(e, _)| *e == engine as usize) else {
        return false;
    };
    // A second registration keeps the first, as one handler per engine is all the seed keeps.
    let _ = slot.0.set(Disconnect {
        callback,
        data: data as usize,
    });
    true
}

/// One bucket's engine, loaded from a shared library.
pub(crate) struct DlEngine {
    handle: *mut ENGINE_HANDLE,
    /// The engine's function table, copied (and its required slots checked) at load.
    pub(crate) v1: ENGINE_HANDLE_V1,
    path: String,
    /// The seed disables TAP for memcached's default engine.
    pub(crate) tap_disabled: bool,
    /// The TAP iterator the engine last handed out (the seed keeps one per bucket), as a
    /// pointer (NULL: none), so it keeps its provenance.
    tap_iterator: AtomicPtr<()>,
    disconnect: Arc<DisconnectSlot>,
    /// The host's per-bucket stats object (`new_stats`), for `aggregate_stats`; given back when
    /// the engine is destroyed (nothing reads it after that: no call can enter any more).
    stats: AtomicPtr<c_void>,
    pub(crate) topkeys: Option<TopKeys>,
    host: &'static Host,
}

// SAFETY: the engine handle and its table are used from any thread, as memcached does (engines
// are thread-safe by contract); `stats` is only handed back to the host.
unsafe impl Send for DlEngine {}
// SAFETY: as for `Send`; our own fields are immutable or atomic.
unsafe impl Sync for DlEngine {}

impl DlEngine {
    /// The host's per-bucket stats object, NULL once the engine is destroyed.
    pub(crate) fn stats(&self) -> *mut c_void {
        // Acquire: pairs with the store of the object at load (published with the handle).
        self.stats.load(Ordering::Acquire)
    }

    /// The engine's handle, for calls through `v1`.
    #[inline]
    pub(crate) fn raw_handle(&self) -> *mut ENGINE_HANDLE {
        self.handle
    }
}

impl Drop for DlEngine {
    fn drop(&mut self) {
        let mut slots = slots().lock().unwrap_or_else(PoisonError::into_inner);
        slots.retain(|(e, _)| *e != self.handle as usize);
        if slots.is_empty() {
            // Give the buffer back: a host may unload this library, static and all.
            *slots = Vec::new();
        }
    }
}

impl Engine for DlEngine {
    type Cookie = Cookie;

    fn initialize(&self, config: &str) -> Result<(), String> {
        let config = CString::new(config).map_err(|_| "config holds a NUL byte".to_owned())?;
        let init = self.v1.initialize.expect("checked at load");
        // SAFETY: the engine's own handle and slot; a NUL-terminated config.
        let rc = unsafe { init(self.handle, config.as_ptr()) };
        if rc == ENGINE_SUCCESS {
            Ok(())
        } else {
            // The seed printed the wrong variable here; this is the engine's own code.
            Err(format!("{} returned error code {}", self.path, rc.0))
        }
    }

    fn destroy(&self, force: bool) {
        let destroy = self.v1.destroy.expect("checked at load");
        // SAFETY: called once, when no call is inside (the core's lifecycle).
        unsafe { destroy(self.handle, force) };
        // AcqRel: takes the object exactly once (destroy runs once; this is belt and braces).
        let stats = self.stats.swap(ptr::null_mut(), Ordering::AcqRel);
        self.host.release_stats(stats);
    }

    fn disconnect(&self, cookie: Cookie) {
        if let Some(d) = self.disconnect.0.get() {
            // SAFETY: the handler and data the engine registered for ON_DISCONNECT.
            unsafe {
                (d.callback)(
                    cookie.0,
                    ON_DISCONNECT,
                    ptr::null(),
                    d.data as *const c_void,
                )
            }
        }
    }
}

/// Loads engines for the registry and tells connections when their delete completed.
pub(crate) struct DlEnv {
    pub(crate) host: &'static Host,
    pub(crate) topkeys: usize,
    /// The `get_server_api` the engines we load get (`instance::engine_get_server_api`).
    pub(crate) server_api: GET_SERVER_API,
}

impl Env for DlEnv {
    type Engine = DlEngine;

    fn load(&self, spec: &str) -> Result<DlEngine, String> {
        load(self.host, spec, self.topkeys, self.server_api).inspect_err(|why| {
            self.host.log(EXTENSION_LOG_WARNING, why);
        })
    }

    fn notify_deleted(&self, cookie: Cookie) {
        self.host.notify_io_complete(cookie.0, ENGINE_SUCCESS);
    }
}

/// The engine spec of the built-in storage engine (`crate::storage`): a bucket created with
/// `engine=builtin` (or CREATE with body `builtin`) gets its own instance, made in-process, with
/// no library to load.
pub(crate) const BUILTIN: &str = "builtin";

fn load(
    host: &'static Host,
    path: &str,
    topkeys: usize,
    gsapi: GET_SERVER_API,
) -> Result<DlEngine, String> {
    if path.is_empty() {
        return Err("Failed to load engine: no engine path".into());
    }
    // A library's end of turn is recorded, so that ours ends its turn too; the built-in
    // buckets live in this library, whose own end of turn covers them.
    let Created {
        handle,
        v1,
        end_turn,
    } = if path == BUILTIN {
        // SAFETY: our own storage engine's create_instance meets the interface's contract;
        // the bucket engine's server API lives as long as the bucket engine.
        unsafe { engine_lib::create_with(crate::storage::create_instance, path, gsapi)? }
    } else {
        // SAFETY: `path` names an engine library by the admin's or the configuration's word,
        // as memcached trusts its `-E` (the engine interface's premise); server API as above.
        unsafe { engine_lib::load(path, gsapi)? }
    };
    if let Some(end_turn) = end_turn {
        if !super::turns::record(end_turn) {
            let why = format!("{path}: too many engine libraries to end their turns; its buckets' gets keep counted holds");
            host.log(EXTENSION_LOG_WARNING, &why);
        }
    }
    let disconnect = Arc::new(DisconnectSlot::default());
    slots()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((handle as usize, Arc::clone(&disconnect)));
    Ok(DlEngine {
        handle,
        v1,
        path: path.to_owned(),
        tap_disabled: path.contains("default_engine"),
        tap_iterator: AtomicPtr::new(ptr::null_mut()),
        disconnect,
        stats: AtomicPtr::new(host.new_stats()),
        topkeys: (topkeys > 0).then(|| TopKeys::new(topkeys)),
        host,
    })
}

/// The TAP iterator stored for a bucket, if any.
pub(crate) fn tap_iterator(engine: &DlEngine) -> TAP_ITERATOR {
    // Acquire: pairs with the Release in `set_tap_iterator`.
    let stored = engine.tap_iterator.load(Ordering::Acquire);
    // SAFETY: NULL is None (the niche of the Option); any other value is the pointer of a
    // TAP_ITERATOR function that `set_tap_iterator` stored, with its provenance.
    unsafe { std::mem::transmute::<*mut (), TAP_ITERATOR>(stored) }
}

/// Stores the TAP iterator the engine handed out.
pub(crate) fn set_tap_iterator(engine: &DlEngine, iterator: TAP_ITERATOR) {
    let stored = iterator.map_or(ptr::null_mut(), |f| f as *mut ());
    // Release: publishes the function pointer to the shim on another connection's thread.
    engine.tap_iterator.store(stored, Ordering::Release);
}
