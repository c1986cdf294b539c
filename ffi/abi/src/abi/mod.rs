//! `#[repr(C)]` mirrors of memcached's storage-engine interface, version 1, as declared by
//! Couchbase memcached v2.5.1 (`include/memcached/`), the interface the bucket engine is loaded
//! through and the one it loads its buckets' engines through.
//!
//! One module per header family; Rust names equal the C names (types, fields, constants), so a
//! reader can hold the C declaration next to the Rust one. Layouts are pinned, field by field, in
//! `ffi/abi/tests/abi_layout.rs` against numbers measured from the real headers on x86_64 Linux.
//!
//! Conventions:
//! - C enums that cross the ABI by value (`ENGINE_ERROR_CODE`, `ENGINE_EVENT_TYPE`, ...) are
//!   `#[repr(transparent)]` newtypes over `u32` with one free constant per C
//!   enumerator. A Rust `enum` would make an out-of-range value from a foreign engine undefined
//!   behaviour; a newtype keeps every bit pattern valid and still reads like C.
//! - Every function-pointer slot and function-pointer typedef is an `Option<unsafe extern "C"
//!   fn ...>`, so that a NULL slot coming from C is representable and must be checked.
//! - Pointers are raw pointers with C's constness. Nothing here dereferences anything.
//!
//! The `engine-pu` Cargo feature selects the variant of upstream memcached's `engine-pu` branch:
//! `remove` takes the CAS by value, `ENGINE_HANDLE_V1` has no `get_engine_vb_map` slot,
//! `SERVER_HANDLE_V1` has no trailing `alloc_hooks`, `config_datatype` has no `DT_SSIZE` (so the
//! later enumerators shift down by one), the ASCII-extension token is named `token_t`, and the
//! protocol lacks `PROTOCOL_BINARY_CMD_ISASL_REFRESH` and the two TAP byte-order flags.

// C's names, on purpose (see above).
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]
// Slot signatures are spelled out inline, parameter names included, so each reads like the C
// declaration it mirrors; naming every one as a type alias would hide that.
#![allow(clippy::type_complexity)]

pub mod config;
pub mod engine;
pub mod protocol;
pub mod server;
pub mod tap;
pub mod types;

pub use config::*;
pub use engine::*;
pub use protocol::*;
pub use server::*;
pub use tap::*;
pub use types::*;
