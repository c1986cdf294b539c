//! The bottom of the storage engine: an instance (the handle memcached holds, its host and its
//! store), how each call finds it from the handle ([`engine`], [`store`]), and what the v1
//! calls and the private opcodes share (an item's value, v1's store operations). The function
//! table in `mod.rs` builds and frees instances; the calls only read them, from here.

use super::host::HostApi;
use crate::abi::*;
use mcb_core::store::{ItemRef, StoreOp};
use std::sync::OnceLock;

/// The store.
pub(super) type Store = mcb_core::store::Store;

/// One engine instance: the handle memcached holds (its first field) and our state.
#[repr(C)]
pub(crate) struct StorageEngine {
    pub(super) v1: ENGINE_HANDLE_V1,
    pub(super) info: engine_info_n<1>,
    pub(super) host: HostApi,
    pub(super) store: OnceLock<Store>,
}

// SAFETY: `v1` and `info` are immutable tables of function pointers and static strings; `host`
// holds copies of the host's thread-safe function tables; `store` is a OnceLock of Sync data.
unsafe impl Sync for StorageEngine {}
// SAFETY: as for `Sync`.
unsafe impl Send for StorageEngine {}

/// Our instance behind a handle memcached passes back, or `None` for NULL.
///
/// # Safety
/// `handle` is NULL or a handle [`create_instance`](super::create_instance) returned and
/// `destroy` has not freed.
pub(super) unsafe fn engine<'a>(handle: *mut ENGINE_HANDLE) -> Option<&'a StorageEngine> {
    // SAFETY: the caller's contract; `v1.interface` is the first field of the repr(C) struct,
    // so the handle points at a whole StorageEngine.
    unsafe { handle.cast::<StorageEngine>().as_ref() }
}

/// The initialised store of `handle`.
///
/// # Safety
/// As for [`engine`].
pub(super) unsafe fn store<'a>(handle: *mut ENGINE_HANDLE) -> Option<&'a Store> {
    // SAFETY: the caller's contract.
    unsafe { engine(handle) }?.store.get()
}

/// The bytes of a value the caller holds (an item the store keeps unchanged while held).
pub(super) fn value_of<'a>(item: &'a ItemRef<'_>) -> &'a [u8] {
    let (_, value) = item.raw_parts();
    // SAFETY: the store writes a held item's value bytes never (they change only once the
    // segment is reused, which the hold prevents); `value_len` bytes lie there.
    unsafe { std::slice::from_raw_parts(value.cast_const(), item.value_len()) }
}

/// v1's store operation as the store's (`None`: not one of v1's).
pub(super) fn store_op(operation: ENGINE_STORE_OPERATION) -> Option<StoreOp> {
    Some(match operation {
        OPERATION_ADD => StoreOp::Add,
        OPERATION_SET => StoreOp::Set,
        OPERATION_REPLACE => StoreOp::Replace,
        OPERATION_APPEND => StoreOp::Append,
        OPERATION_PREPEND => StoreOp::Prepend,
        OPERATION_CAS => StoreOp::Cas,
        _ => return None,
    })
}
