//! `types.h` and `engine_common.h`: error codes, store operations, items and their info, the
//! authentication data, the engine handle header and the two response callbacks.

use core::ffi::{c_char, c_void};

pub use libc::iovec;

/// Time relative to the server's start, in seconds (`typedef uint32_t rel_time_t`).
pub type rel_time_t = u32;

/// The result of nearly every engine call (`typedef enum { ... } ENGINE_ERROR_CODE`, 4 bytes).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ENGINE_ERROR_CODE(pub u32);

/// The command executed successfully.
pub const ENGINE_SUCCESS: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x00);
/// The key does not exist.
pub const ENGINE_KEY_ENOENT: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x01);
/// The key already exists.
pub const ENGINE_KEY_EEXISTS: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x02);
/// Could not allocate memory.
pub const ENGINE_ENOMEM: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x03);
/// The item was not stored.
pub const ENGINE_NOT_STORED: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x04);
/// Invalid arguments.
pub const ENGINE_EINVAL: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x05);
/// The engine does not support this.
pub const ENGINE_ENOTSUP: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x06);
/// The call would block; the engine calls `notify_io_complete` later and the server retries.
pub const ENGINE_EWOULDBLOCK: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x07);
/// The data is too big for the engine.
pub const ENGINE_E2BIG: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x08);
/// The engine wants more data (TAP).
pub const ENGINE_WANT_MORE: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x09);
/// Tell the server to disconnect this client.
pub const ENGINE_DISCONNECT: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x0a);
/// Access control violation.
pub const ENGINE_EACCESS: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x0b);
/// This vbucket does not belong to this engine.
pub const ENGINE_NOT_MY_VBUCKET: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x0c);
/// Temporary failure; try again later.
pub const ENGINE_TMPFAIL: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x0d);
/// Value outside the legal range.
pub const ENGINE_ERANGE: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0x0e);
/// Generic failure.
pub const ENGINE_FAILED: ENGINE_ERROR_CODE = ENGINE_ERROR_CODE(0xff);

/// How `store` stores (`ENGINE_STORE_OPERATION`, 4 bytes; the first value is 1, not 0).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ENGINE_STORE_OPERATION(pub u32);

/// Store only if the key does not exist.
pub const OPERATION_ADD: ENGINE_STORE_OPERATION = ENGINE_STORE_OPERATION(1);
/// Store unconditionally.
pub const OPERATION_SET: ENGINE_STORE_OPERATION = ENGINE_STORE_OPERATION(2);
/// Store only if the key exists.
pub const OPERATION_REPLACE: ENGINE_STORE_OPERATION = ENGINE_STORE_OPERATION(3);
/// Append to an existing value.
pub const OPERATION_APPEND: ENGINE_STORE_OPERATION = ENGINE_STORE_OPERATION(4);
/// Prepend to an existing value.
pub const OPERATION_PREPEND: ENGINE_STORE_OPERATION = ENGINE_STORE_OPERATION(5);
/// Set, if the CAS matches.
pub const OPERATION_CAS: ENGINE_STORE_OPERATION = ENGINE_STORE_OPERATION(6);

/// An engine's opaque item (`typedef void item`).
pub type item = c_void;

/// What `get_item_info` reports about an item.
///
/// `nvalue` is IN (how many `iovec`s the caller's `value` array holds) and OUT (how many the
/// engine filled). The struct ends in a one-element array that callers may over-allocate; see
/// [`item_info_iov`] for a Rust way to do that.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct item_info {
    pub cas: u64,
    /// When the item expires (relative to process start).
    pub exptime: rel_time_t,
    /// Total size of the data, in bytes.
    pub nbytes: u32,
    /// The item's flags (in network byte order).
    pub flags: u32,
    /// Slab class id.
    pub clsid: u8,
    /// Length of the key, in bytes.
    pub nkey: u16,
    /// IN: elements available in `value`; OUT: elements used.
    pub nvalue: u16,
    pub key: *const c_void,
    pub value: [iovec; 1],
}

/// An [`item_info`] followed by `N` more `iovec`s, laid out exactly as C code over-allocating
/// `item_info` would (the struct has no tail padding after `value`), so `info.nvalue` may be
/// set to `N + 1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct item_info_iov<const N: usize> {
    pub info: item_info,
    pub more: [iovec; N],
}

/// Authentication data of a connection (`get_auth_data`, the `ON_AUTH` event data).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct auth_data_t {
    pub username: *const c_char,
    pub config: *const c_char,
}

/// The header of every engine handle: the interface version (`struct engine_interface`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ENGINE_HANDLE {
    pub interface: u64,
}

/// The C struct tag of [`ENGINE_HANDLE`].
pub type engine_interface = ENGINE_HANDLE;

/// Adds one statistic to a stats response (`ADD_STAT`).
pub type ADD_STAT = Option<
    unsafe extern "C" fn(
        key: *const c_char,
        klen: u16,
        val: *const c_char,
        vlen: u32,
        cookie: *const c_void,
    ),
>;

/// Sends a binary-protocol response (`ADD_RESPONSE`); returns false when it could not.
pub type ADD_RESPONSE = Option<
    unsafe extern "C" fn(
        key: *const c_void,
        keylen: u16,
        ext: *const c_void,
        extlen: u8,
        body: *const c_void,
        bodylen: u32,
        datatype: u8,
        status: u16,
        cas: u64,
        cookie: *const c_void,
    ) -> bool,
>;
