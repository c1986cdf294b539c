//! Connections: our state behind each host cookie, the host events that create and free it
//! (ON_CONNECT, ON_AUTH, ON_DISCONNECT), and the cookie API our engines call (their own
//! per-connection word, reserve and release).
//!
//! The state is a boxed [`ConnState`] stored in the host's engine-specific slot. It is freed
//! exactly once, by whoever the core's `Connection` says is last (the disconnect, or the last
//! release of a reservation), and the slot is cleared before it is freed.
//!
//! The host drives each connection from one thread at a time; other threads reach a connection
//! only through reservations (engine threads). Switching buckets (auth, SELECT, a connection
//! deleting its own bucket) needs exclusive access, which we take only when the connection
//! holds no reservation: then no other thread may legitimately be looking at it.

use super::loader::{register_disconnect, Cookie, DlEngine, DlEnv};
use super::{instance, log_warning, Running};
use crate::abi::*;
use crate::boundary::guard;
use mcb_core::bucket::{Connection, Fate, Registry};
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

/// What the bucket engine keeps per connection.
pub(crate) struct ConnState {
    conn: UnsafeCell<Connection<DlEngine>>,
    /// A DELETE of this connection's is waiting for its bucket's shutdown (the retried call
    /// answers SUCCESS).
    pub(crate) delete_pending: AtomicBool,
}

// SAFETY: `Connection` is Sync; the `UnsafeCell` is only written through `exclusive`, whose
// contract rules out concurrent readers (see the module docs).
unsafe impl Sync for ConnState {}

impl ConnState {
    fn new(conn: Connection<DlEngine>) -> Self {
        Self {
            conn: UnsafeCell::new(conn),
            delete_pending: AtomicBool::new(false),
        }
    }

    /// The connection, shared.
    pub(crate) fn conn(&self) -> &Connection<DlEngine> {
        // SAFETY: writes happen only in `exclusive`, never concurrently with this borrow.
        unsafe { &*self.conn.get() }
    }

    /// The connection, exclusively, if it holds no reservation.
    ///
    /// # Safety
    /// Called on the thread the host drives this connection from (an event or a call for it).
    #[allow(clippy::mut_from_ref)] // the UnsafeCell pattern; the contract above makes it sound
    pub(crate) unsafe fn exclusive(&self) -> Option<&mut Connection<DlEngine>> {
        if self.conn().reservations() > 0 {
            return None;
        }
        // SAFETY: no reservation, so no engine thread may touch the connection, and the host
        // thread is the caller (see the module docs).
        Some(unsafe { &mut *self.conn.get() })
    }
}

/// The state of `cookie`'s connection, if it has one.
pub(crate) fn state(running: &Running, cookie: *const c_void) -> Option<&'static ConnState> {
    let raw = running.host.get_engine_specific(cookie).cast::<ConnState>();
    // SAFETY: the slot holds NULL or a pointer from `Box::into_raw(ConnState)` that stays valid
    // until the one freer clears the slot and drops it; the host only calls us for a cookie
    // while its connection is alive.
    unsafe { raw.as_ref() }
}

/// The state of `cookie`'s connection, created (attached as a new connection would be) when the
/// host never told us about it.
pub(crate) fn state_or_connect(
    running: &Running,
    cookie: *const c_void,
) -> Option<&'static ConnState> {
    if cookie.is_null() {
        return None;
    }
    if let Some(state) = state(running, cookie) {
        return Some(state);
    }
    let fresh = Box::into_raw(Box::new(ConnState::new(Connection::connect(
        &running.registry,
    ))));
    running.host.store_engine_specific(cookie, fresh.cast());
    // SAFETY: just created and stored; freed only by the disconnect or last release.
    Some(unsafe { &*fresh })
}

/// Frees a connection's state: clears the host's slot, then drops the box.
fn free(running: &Running, cookie: *const c_void, state: &'static ConnState) {
    running.host.store_engine_specific(cookie, ptr::null_mut());
    // SAFETY: the core said this caller is the last user (Fate::Free); the pointer came from
    // Box::into_raw and nobody else can reach it any more.
    drop(unsafe { Box::from_raw(ptr::from_ref(state).cast_mut()) });
}

/// ON_CONNECT: a new connection gets the default bucket (the seed's `handle_connect`).
pub(crate) unsafe extern "C" fn on_connect(
    cookie: *const c_void,
    _event: ENGINE_EVENT_TYPE,
    _data: *const c_void,
    _cb_data: *const c_void,
) {
    guard((), || {
        let Some(running) = instance() else { return };
        if state(running, cookie).is_some() {
            log_warning("ON_CONNECT for a connection bucket_engine already knows; ignored");
            return;
        }
        state_or_connect(running, cookie);
    })
}

/// ON_AUTH: the connection moves to the bucket named by the user (the seed's `handle_auth`).
pub(crate) unsafe extern "C" fn on_auth(
    cookie: *const c_void,
    _event: ENGINE_EVENT_TYPE,
    data: *const c_void,
    _cb_data: *const c_void,
) {
    guard((), || {
        let Some(running) = instance() else { return };
        let auth = data.cast::<auth_data_t>();
        // SAFETY: the host passes NULL or its auth_data_t with NULL or NUL-terminated strings.
        let (user, config) = match unsafe { auth.as_ref() } {
            // SAFETY: as above.
            Some(a) => unsafe { (super::host::c_str(a.username), super::host::c_str(a.config)) },
            None => (None, None),
        };
        let Some(user) = user else {
            log_warning("ON_AUTH without a user name; connection left where it was");
            return;
        };
        let Some(state) = state_or_connect(running, cookie) else {
            return;
        };
        // SAFETY: ON_AUTH runs on the connection's own thread.
        match unsafe { state.exclusive() } {
            Some(conn) => {
                let _ = conn.authenticate(&running.registry, &user, config.as_deref());
            }
            None => log_warning("ON_AUTH on a reserved connection; it keeps its bucket"),
        }
    })
}

/// ON_DISCONNECT: forwards to the engine if it asked, then frees the connection's state unless
/// reservations keep it (the seed's `handle_disconnect`).
pub(crate) unsafe extern "C" fn on_disconnect(
    cookie: *const c_void,
    _event: ENGINE_EVENT_TYPE,
    _data: *const c_void,
    _cb_data: *const c_void,
) {
    guard((), || {
        let Some(running) = instance() else { return };
        let Some(state) = state(running, cookie) else {
            return;
        };
        if state.conn().disconnect(&running.registry, Cookie(cookie)) == Fate::Free {
            free(running, cookie, state);
        }
    })
}

/// Our engines' `register_callback`: ON_DISCONNECT is forwarded per bucket; other events are
/// not available to engines inside the bucket engine.
pub(crate) unsafe extern "C" fn engine_register_callback(
    engine: *mut ENGINE_HANDLE,
    event: ENGINE_EVENT_TYPE,
    callback: EVENT_CALLBACK,
    data: *const c_void,
) {
    guard((), || {
        if event != ON_DISCONNECT {
            log_warning(&format!(
                "An engine registered for event {}; only ON_DISCONNECT is forwarded",
                event.0
            ));
        } else if !register_disconnect(engine, callback, data) {
            log_warning("ON_DISCONNECT registration from an engine bucket_engine did not load");
        }
    })
}

/// Our engines' `store_engine_specific`: their own word in our state, not the host's slot.
pub(crate) unsafe extern "C" fn engine_store_engine_specific(
    cookie: *const c_void,
    data: *mut c_void,
) {
    guard((), || {
        let Some(running) = instance() else { return };
        match state(running, cookie) {
            Some(state) => state.conn().set_engine_specific(data.cast()),
            None => {
                log_warning("store_engine_specific for a connection bucket_engine does not know")
            }
        }
    })
}

/// Our engines' `get_engine_specific`.
pub(crate) unsafe extern "C" fn engine_get_engine_specific(cookie: *const c_void) -> *mut c_void {
    guard(ptr::null_mut(), || {
        instance()
            .and_then(|running| state(running, cookie))
            .map_or(ptr::null_mut(), |state| {
                state.conn().engine_specific().cast()
            })
    })
}

/// Our engines' `reserve`: counts the reservation against the connection's bucket, then
/// reserves upstream (the seed's `bucket_engine_reserve_cookie`).
pub(crate) unsafe extern "C" fn engine_reserve_cookie(cookie: *const c_void) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let Some(running) = instance() else {
            return ENGINE_FAILED;
        };
        let Some(state) = state(running, cookie) else {
            return ENGINE_FAILED;
        };
        if state.conn().reserve(&running.registry).is_err() {
            return ENGINE_FAILED;
        }
        let rc = running.host.reserve(cookie);
        if rc != ENGINE_SUCCESS {
            // Still connected (reserve comes from a call on it), so this cannot free it.
            let _ = state.conn().release(&running.registry);
        }
        rc
    })
}

/// Our engines' `release`: returns the reservation, frees the state if it was the last user,
/// then releases upstream (the seed's `bucket_engine_release_cookie`, which never freed it).
pub(crate) unsafe extern "C" fn engine_release_cookie(cookie: *const c_void) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let Some(running) = instance() else {
            return ENGINE_FAILED;
        };
        let Some(state) = state(running, cookie) else {
            log_warning("release_cookie for a connection bucket_engine does not know");
            return ENGINE_FAILED;
        };
        match state.conn().release(&running.registry) {
            Ok(Fate::Free) => free(running, cookie, state),
            Ok(Fate::Keep) => {}
            Err(why) => {
                log_warning(&format!("release_cookie refused: {why}"));
                return ENGINE_FAILED;
            }
        }
        if running.host.release(cookie) != ENGINE_SUCCESS {
            log_warning("Failed to release a reserved cookie upstream");
        }
        ENGINE_SUCCESS
    })
}

/// Enters the bucket `cookie`'s calls go to: its own, else the default (plain form), or only
/// its own (`try_form`, the seed's `try_get_engine_handle`).
#[inline]
pub(crate) fn enter<'a>(
    running: &'a Running,
    cookie: *const c_void,
    try_form: bool,
) -> Option<mcb_core::bucket::Lease<'a, DlEnv>> {
    let registry: &Registry<DlEnv> = &running.registry;
    match state(running, cookie) {
        Some(state) if try_form => state.conn().try_enter(registry),
        Some(state) => state.conn().enter(registry),
        None if try_form => None,
        // No state (a NULL cookie, or a host that fired no ON_CONNECT): the default bucket.
        None => registry.enter(registry.default_bucket()?),
    }
}

/// Whether `delete_pending` was set, clearing it.
pub(crate) fn take_delete_pending(state: &ConnState) -> bool {
    // AcqRel: the flag is set and cleared on the connection's own thread; a plain swap suffices.
    state.delete_pending.swap(false, Ordering::AcqRel)
}
