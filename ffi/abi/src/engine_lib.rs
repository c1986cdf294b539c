//! Engines from shared libraries, created as memcached creates them: `dlopen(RTLD_NOW |
//! RTLD_LOCAL)`, `create_instance(1, get_server_api, &handle)`, an interface-1 handle whose
//! required slots are all set. Shared by the bucket engine (its buckets' engines) and the host
//! (its one engine).
//!
//! The library is closed on every error path before an engine exists (the seed leaked it when
//! `dlsym` failed). Once `create_instance` was called it stays loaded for good: an engine may
//! have registered callbacks or kept cookies reserved, and unloading it would leave pointers
//! into unmapped code.

use crate::abi::*;
use crate::meta_ext::{EndTurn, END_TURN_SYMBOL};
use std::ffi::{c_void, CStr, CString};
use std::ptr;

/// An engine library's entry point.
pub type CreateInstance =
    unsafe extern "C" fn(u64, GET_SERVER_API, *mut *mut ENGINE_HANDLE) -> ENGINE_ERROR_CODE;

/// A created engine: its handle and a copy of its function table, required slots checked;
/// from a library, also the end of turn it exports, if it does (see
/// [`END_TURN_SYMBOL`]).
#[derive(Clone, Copy, Debug)]
pub struct Created {
    pub handle: *mut ENGINE_HANDLE,
    pub v1: ENGINE_HANDLE_V1,
    pub end_turn: Option<EndTurn>,
}

/// Closes a library on an error path.
struct Library(*mut c_void);

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: a handle from dlopen, closed once, before any engine of it was created.
        unsafe { libc::dlclose(self.0) };
    }
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl call on
    // this thread; it is copied at once.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-NULL and NUL-terminated (above).
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// Opens the library at `path` and creates its engine with `get_server_api`.
///
/// Safe code cannot load an engine: whatever the library does is on the caller's word.
/// ```compile_fail,E0133
/// let _ = mcb_abi::engine_lib::load("/path/to/engine.so", None);
/// ```
///
/// # Safety
/// Loading a library runs its code, which Rust cannot check: `path`, if it opens, must be an
/// engine library of interface v1, whose initialisers are sound to run in this process and
/// whose `create_instance` meets [`create_with`]'s contract; and `get_server_api` must meet it
/// too.
pub unsafe fn load(path: &str, get_server_api: GET_SERVER_API) -> Result<Created, String> {
    let cpath = CString::new(path)
        .map_err(|_| format!("Failed to open library \"{path}\": NUL in path"))?;
    // SAFETY: a NUL-terminated path; valid flags.
    let dl = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if dl.is_null() {
        return Err(format!("Failed to open library \"{path}\": {}", dlerror()));
    }
    let library = Library(dl);
    // SAFETY: a live handle and a NUL-terminated symbol name.
    let symbol = unsafe { libc::dlsym(library.0, c"create_instance".as_ptr()) };
    if symbol.is_null() {
        return Err(format!(
            "Could not find symbol \"create_instance\" in {path}: {}",
            dlerror()
        ));
    }
    // SAFETY: an engine library's `create_instance` has this signature (the interface's
    // contract); POSIX lets a function pointer round-trip through `void *`.
    let create = unsafe { std::mem::transmute::<*mut c_void, CreateInstance>(symbol) };
    // SAFETY: a live handle and a NUL-terminated symbol name.
    let end_turn = unsafe { libc::dlsym(library.0, END_TURN_SYMBOL.as_ptr()) };
    // SAFETY: our engine libraries export this symbol as an `EndTurn` (meta_ext's contract);
    // as above for the cast.
    let end_turn = (!end_turn.is_null())
        .then(|| unsafe { std::mem::transmute::<*mut c_void, EndTurn>(end_turn) });
    // An engine may exist from here on: see the module docs.
    std::mem::forget(library);
    // SAFETY: the library's `create_instance` and `get_server_api` meet `create_with`'s
    // contract (this function's own).
    let created = unsafe { create_with(create, path, get_server_api) }?;
    Ok(Created {
        end_turn,
        ..created
    })
}

/// Creates an engine through `create` (named `what` in errors) with `get_server_api`.
///
/// # Safety
/// `create` is an engine's `create_instance`: called with interface 1, it either fails or
/// stores a handle that points at a live `ENGINE_HANDLE` whose `interface` says which table it
/// heads (1: an `ENGINE_HANDLE_V1`), valid until the engine's `destroy`. `get_server_api` is
/// `None` or returns a server API that stays valid while the engine lives.
pub unsafe fn create_with(
    create: CreateInstance,
    what: &str,
    get_server_api: GET_SERVER_API,
) -> Result<Created, String> {
    let mut handle: *mut ENGINE_HANDLE = ptr::null_mut();
    // SAFETY: `create` is a `create_instance` (the caller's contract); interface 1, the
    // caller's get_server_api, a live out-parameter.
    let rc = unsafe { create(ENGINE_INTERFACE_VERSION, get_server_api, &mut handle) };
    if rc != ENGINE_SUCCESS || handle.is_null() {
        return Err(format!(
            "Failed to create instance of {what}. Error code: {}",
            rc.0
        ));
    }
    // SAFETY: a non-NULL handle from a successful create_instance points at a live
    // ENGINE_HANDLE (the caller's contract).
    let interface = unsafe { (*handle).interface };
    if interface != ENGINE_INTERFACE_VERSION {
        return Err(format!(
            "{what} created an engine of interface {interface}, not 1"
        ));
    }
    // SAFETY: an interface-1 handle heads an ENGINE_HANDLE_V1 (the caller's contract).
    let v1 = unsafe { *handle.cast::<ENGINE_HANDLE_V1>() };
    let required = [
        ("initialize", v1.initialize.is_some()),
        ("destroy", v1.destroy.is_some()),
        ("allocate", v1.allocate.is_some()),
        ("remove", v1.remove.is_some()),
        ("release", v1.release.is_some()),
        ("get", v1.get.is_some()),
        ("store", v1.store.is_some()),
        ("arithmetic", v1.arithmetic.is_some()),
        ("flush", v1.flush.is_some()),
        ("get_stats", v1.get_stats.is_some()),
        ("reset_stats", v1.reset_stats.is_some()),
        ("unknown_command", v1.unknown_command.is_some()),
        ("item_set_cas", v1.item_set_cas.is_some()),
        ("get_item_info", v1.get_item_info.is_some()),
    ];
    if let Some((slot, _)) = required.iter().find(|(_, set)| !set) {
        return Err(format!("the engine of {what} has no {slot} function"));
    }
    Ok(Created {
        handle,
        v1,
        end_turn: None,
    })
}
