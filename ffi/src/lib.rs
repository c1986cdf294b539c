//! The C boundary: thin functions that check what C hands them, call `mcb_core`, and map the
//! results to codes.
//!
//! - [`abi`]: `#[repr(C)]` mirrors of memcached's engine interface v1.
//! - [`bucket_engine`]: the drop-in bucket engine; `ffi/bucket-engine` exports it as
//!   `libbucket_engine.so`.
//! - [`storage`]: the built-in storage engine over `mcb_core::store`; `ffi/storage-engine`
//!   exports it as `libmcb_engine.so`, and the bucket engine creates it for `engine=builtin`.

pub mod abi;
pub mod boundary;
pub mod bucket_engine;
pub mod engine_lib;
mod host_api;
pub mod storage;
mod wire;
