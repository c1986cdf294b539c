//! Our engines behind the C boundary: thin functions that check what C hands them, call
//! `mcb_core`, and map the results to codes.
//!
//! - [`bucket_engine`]: the drop-in bucket engine; `ffi/bucket-engine` exports it as
//!   `libbucket_engine.so`.
//! - [`storage`]: the built-in storage engine over `mcb_core::store`; `ffi/storage-engine`
//!   exports it as `libmcb_engine.so`, and the bucket engine creates it for `engine=builtin`.
//!
//! The interface itself (the `abi` mirrors, the panic `boundary`, `engine_lib`) is the crate
//! `mcb_abi`, which a host uses without any of this; it is re-exported here under the same
//! paths, so engine code reads `crate::abi::*` as before.

pub use mcb_abi::{abi, boundary, engine_lib, meta_ext};
pub mod bucket_engine;
mod host_api;
pub mod storage;
mod wire;
