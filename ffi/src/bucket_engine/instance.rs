//! The bottom of the bucket engine: the one instance memcached creates and what `initialize`
//! sets up in it ([`Running`]), how every call reaches them ([`instance`]), the host's logger
//! for code that has no instance at hand ([`log_warning`]), and the functions of the server API
//! our engines get that need the instance: [`engine_get_server_api`], and the refusals of what
//! they may not do (register extensions, fire server events), which `host` takes as hooks.
//! The function table in `mod.rs` builds and frees the instance; every other module only reads
//! it, from here.

use super::host::{Host, OwnedHost};
use super::loader::DlEnv;
use crate::abi::*;
use crate::boundary::guard;
use mcb_core::bucket::Registry;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// The bucket engine: the handle memcached holds (its first field) and our state.
#[repr(C)]
pub(crate) struct BucketEngine {
    pub(super) v1: ENGINE_HANDLE_V1,
    pub(super) info: engine_info,
    pub(super) host: OwnedHost,
    /// Set by `initialize`, freed by `destroy`.
    pub(super) running: AtomicPtr<Running>,
}

/// What `initialize` sets up.
pub(crate) struct Running {
    pub(crate) host: &'static Host,
    pub(crate) registry: Registry<DlEnv>,
}

impl Running {
    /// Whether `cookie` is authenticated as the configured admin user (admin commands, `stats
    /// bucket`).
    pub(crate) fn is_admin(&self, cookie: *const c_void) -> bool {
        match &self.registry.config().admin {
            Some(admin) => self.host.username(cookie).as_deref() == Some(admin.as_str()),
            None => false,
        }
    }
}

// SAFETY: `v1` and `info` are immutable tables of function pointers and static strings; `host`
// is Sync; `running` is an atomic pointer to Sync data.
unsafe impl Sync for BucketEngine {}
// SAFETY: as for `Sync`.
unsafe impl Send for BucketEngine {}

/// The one instance: a leaked box from `create_instance` until `destroy` frees it.
pub(super) static INSTANCE: AtomicPtr<BucketEngine> = AtomicPtr::new(ptr::null_mut());

/// The instance, if created and not destroyed.
#[inline]
pub(super) fn engine() -> Option<&'static BucketEngine> {
    // Acquire: pairs with the Release in `create_instance`; publishes the built instance.
    let engine = INSTANCE.load(Ordering::Acquire);
    // SAFETY: NULL or a live instance: `destroy` frees it only after taking it out of INSTANCE,
    // and the host makes no call on an engine after its `destroy` (memcached's contract).
    unsafe { engine.as_ref() }
}

/// The initialised instance, if any.
#[inline]
pub(crate) fn instance() -> Option<&'static Running> {
    // Acquire: pairs with the Release in `initialize`; publishes the registry.
    let running = engine()?.running.load(Ordering::Acquire);
    // SAFETY: NULL or live; freed only by `destroy` (see `engine`).
    unsafe { running.as_ref() }
}

/// Logs a warning through the host's logger (when there is an instance).
pub(crate) fn log_warning(message: &str) {
    match engine() {
        Some(engine) => engine.host.get().log(EXTENSION_LOG_WARNING, message),
        None => eprintln!("bucket_engine: {message}"),
    }
}

/// The server API the engines we load get (`GET_SERVER_API` for them).
pub(super) unsafe extern "C" fn engine_get_server_api() -> *mut SERVER_HANDLE_V1 {
    guard(ptr::null_mut(), || {
        engine().map_or(ptr::null_mut(), |e| e.host.get().inner_server())
    })
}

/// Engines may not register extensions (the seed's rule): they would outlive their bucket.
pub(super) unsafe extern "C" fn engine_register_extension(
    _type: extension_type_t,
    _ext: *mut c_void,
) -> bool {
    guard(false, || {
        log_warning("Extension support isn't implemented in this version of bucket_engine");
        false
    })
}

/// Nothing can have been registered, so there is nothing to unregister.
pub(super) unsafe extern "C" fn engine_unregister_extension(
    _type: extension_type_t,
    _ext: *mut c_void,
) {
    guard((), || {
        log_warning("An engine tried to unregister an extension it could not have registered");
    })
}

/// Engines may not fire server events (the seed aborted; we log and ignore).
pub(super) unsafe extern "C" fn engine_perform_callbacks(
    _type: ENGINE_EVENT_TYPE,
    _data: *const c_void,
    _cookie: *const c_void,
) {
    guard((), || {
        log_warning("perform_callbacks is not available to engines inside bucket_engine");
    })
}
