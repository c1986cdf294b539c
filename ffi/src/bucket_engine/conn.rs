//! Connections: our state behind each host cookie, the host events that create and free it
//! (ON_CONNECT, ON_AUTH, ON_DISCONNECT), and the cookie API our engines call (their own
//! per-connection word, reserve and release).
//!
//! The state is a boxed [`ConnState`] stored in the host's engine-specific slot. It is freed
//! exactly once, by whoever the core's `Connection` says is last (the disconnect, or the last
//! release of a reservation), and the slot is cleared before it is freed.
//!
//! Every function here that takes a cookie is `unsafe`: the state behind it is valid only while
//! the host's connection is (see [`state`]), which only the host's caller can vouch for.
//!
//! The host drives each connection from one thread at a time; other threads reach a connection
//! only through reservations (engine threads). Switching buckets (auth, SELECT, a connection
//! deleting its own bucket) needs exclusive access, which we take only when the connection
//! holds no reservation: then no other thread may legitimately be looking at it.

use super::host::Hooks;
use super::instance::{self, instance, log_warning, Running};
use super::items::ItemHolds;
use super::loader::{register_disconnect, Cookie, DlEngine, DlEnv};
use crate::abi::*;
use crate::boundary::guard;
use mcb_core::bucket::{Connection, Fate, Registry};
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

/// What the bucket engine keeps per connection.
pub(crate) struct ConnState {
    conn: UnsafeCell<Connection<DlEngine>>,
    /// A DELETE of this connection's is waiting for its bucket's shutdown (the retried call
    /// answers SUCCESS).
    pub(crate) delete_pending: AtomicBool,
    /// The items handed out on this connection and the engines they came from.
    pub(crate) items: ItemHolds,
    /// The engine's own per-connection word (its `store_engine_specific`), never interpreted.
    engine_specific: AtomicPtr<c_void>,
}

// SAFETY: `Connection` is Sync; the `UnsafeCell` is only written through `exclusive`, whose
// contract rules out concurrent readers (see the module docs).
unsafe impl Sync for ConnState {}

impl ConnState {
    fn new(conn: Connection<DlEngine>) -> Self {
        Self {
            conn: UnsafeCell::new(conn),
            delete_pending: AtomicBool::new(false),
            items: ItemHolds::default(),
            engine_specific: AtomicPtr::new(ptr::null_mut()),
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

/// Where `cookie`'s connection state lives, if it has one: the host's slot holds NULL or a
/// pointer from `Box::into_raw(ConnState)`, valid until [`free`] clears the slot.
fn slot(running: &Running, cookie: *const c_void) -> Option<NonNull<ConnState>> {
    NonNull::new(running.host.get_engine_specific(cookie).cast::<ConnState>())
}

/// The state of `cookie`'s connection, if it has one.
///
/// # Safety
/// `cookie` is NULL or a cookie the host passed to the current call (or event) while its
/// connection is alive, and the reference is not used after that call returns: the state is
/// freed, at the disconnect or the last release, only after the host stopped passing it.
pub(crate) unsafe fn state<'a>(running: &Running, cookie: *const c_void) -> Option<&'a ConnState> {
    // SAFETY: a pointer from `slot` is live until `free`, which the caller's contract rules out
    // for as long as the reference is used.
    slot(running, cookie).map(|state| unsafe { state.as_ref() })
}

/// The state of `cookie`'s connection, created (attached as a new connection would be) when the
/// host never told us about it.
///
/// # Safety
/// As for [`state`].
pub(crate) unsafe fn state_or_connect<'a>(
    running: &Running,
    cookie: *const c_void,
) -> Option<&'a ConnState> {
    if cookie.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    if let Some(state) = unsafe { state(running, cookie) } {
        return Some(state);
    }
    let fresh = Box::into_raw(Box::new(ConnState::new(Connection::connect(
        &running.registry,
    ))));
    running.host.store_engine_specific(cookie, fresh.cast());
    // SAFETY: just created and stored; freed only by the disconnect or last release, which
    // the caller's contract puts after the reference's last use.
    Some(unsafe { &*fresh })
}

/// Frees a connection's state: clears the host's slot, moves the items still held to the
/// process-wide list, then drops the box through the pointer `Box::into_raw` gave.
///
/// # Safety
/// `state` is `cookie`'s state from [`slot`], and the caller was told by the core that it is
/// the last user (`Fate::Free`): no reference to the state is used afterwards.
unsafe fn free(running: &Running, cookie: *const c_void, state: NonNull<ConnState>) {
    running.host.store_engine_specific(cookie, ptr::null_mut());
    // SAFETY: live until the drop below (the caller's contract).
    unsafe { state.as_ref() }.items.orphan();
    // SAFETY: the pointer came from Box::into_raw; the caller is the last user, and the slot
    // no longer leads anyone to it.
    drop(unsafe { Box::from_raw(state.as_ptr()) });
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
        if slot(running, cookie).is_some() {
            log_warning("ON_CONNECT for a connection bucket_engine already knows; ignored");
            return;
        }
        // SAFETY: the host fires ON_CONNECT with the new connection's live cookie.
        unsafe { state_or_connect(running, cookie) };
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
        // SAFETY: the host fires ON_AUTH with a live connection's cookie.
        let Some(state) = (unsafe { state_or_connect(running, cookie) }) else {
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
        let Some(raw) = slot(running, cookie) else {
            return;
        };
        // SAFETY: live: the host fires ON_DISCONNECT once, and only the disconnect or the last
        // release frees the state (the core tells exactly one of them).
        let fate = unsafe { raw.as_ref() }
            .conn()
            .disconnect(&running.registry, Cookie(cookie));
        if fate == Fate::Free {
            // SAFETY: the core said this caller is the last user; the reference above is dead.
            unsafe { free(running, cookie, raw) };
        }
    })
}

/// The cookie and callback functions our engines get in place of the host's.
pub(crate) fn hooks() -> Hooks {
    Hooks {
        callback: SERVER_CALLBACK_API {
            register_callback: Some(engine_register_callback),
            perform_callbacks: Some(instance::engine_perform_callbacks),
        },
        extension: SERVER_EXTENSION_API {
            register_extension: Some(instance::engine_register_extension),
            unregister_extension: Some(instance::engine_unregister_extension),
            get_extension: None,
        },
        cookie: SERVER_COOKIE_API {
            get_socket_fd: None,
            get_auth_data: None,
            store_engine_specific: Some(engine_store_engine_specific),
            get_engine_specific: Some(engine_get_engine_specific),
            notify_io_complete: None,
            reserve: Some(engine_reserve_cookie),
            release: Some(engine_release_cookie),
        },
    }
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
        // SAFETY: an engine passes the cookie of the call it is serving (or one it reserved).
        match unsafe { state(running, cookie) } {
            // Release: publishes what the word points at to the engine thread that loads it.
            Some(state) => state.engine_specific.store(data, Ordering::Release),
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
            // SAFETY: as in `engine_store_engine_specific`.
            .and_then(|running| unsafe { state(running, cookie) })
            .map_or(ptr::null_mut(), |state| {
                // Acquire: pairs with the Release in `engine_store_engine_specific`.
                state.engine_specific.load(Ordering::Acquire)
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
        // SAFETY: an engine reserves the cookie of the call it is serving.
        let Some(state) = (unsafe { state(running, cookie) }) else {
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
        let Some(raw) = slot(running, cookie) else {
            log_warning("release_cookie for a connection bucket_engine does not know");
            return ENGINE_FAILED;
        };
        // SAFETY: live: the engine still holds its reservation, which keeps the state.
        let released = unsafe { raw.as_ref() }.conn().release(&running.registry);
        match released {
            // SAFETY: the core said this caller is the last user; the reference above is dead.
            Ok(Fate::Free) => unsafe { free(running, cookie, raw) },
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
/// its own (`try_form`, the seed's `try_get_engine_handle`). A NULL cookie (an extension or a
/// test harness calling without a connection) means the default bucket in both forms.
///
/// # Safety
/// As for [`state`]: the lease borrows the state, so it ends before the call returns.
#[inline]
pub(crate) unsafe fn enter<'a>(
    running: &'a Running,
    cookie: *const c_void,
    try_form: bool,
) -> Option<mcb_core::bucket::Lease<'a, DlEnv>> {
    let registry: &Registry<DlEnv> = &running.registry;
    // SAFETY: the caller's contract.
    match unsafe { state(running, cookie) } {
        Some(state) if try_form => state.conn().try_enter(registry),
        Some(state) => state.conn().enter(registry),
        None if try_form && !cookie.is_null() => None,
        // A NULL cookie, or a host that fired no ON_CONNECT: the default bucket.
        None => registry.enter(registry.default_bucket()?),
    }
}

/// Whether `delete_pending` was set, clearing it.
pub(crate) fn take_delete_pending(state: &ConnState) -> bool {
    // AcqRel: the flag is set and cleared on the connection's own thread; a plain swap suffices.
    state.delete_pending.swap(false, Ordering::AcqRel)
}
