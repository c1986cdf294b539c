//! The C boundary: thin functions that check what C hands them, call `mcb_core`, and map the
//! results to codes.
//!
//! - [`abi`]: `#[repr(C)]` mirrors of memcached's engine interface v1.
//! - [`bucket_engine`]: the drop-in bucket engine; `ffi/bucket-engine` exports it as
//!   `libbucket_engine.so`.

pub mod abi;
mod boundary;
pub mod bucket_engine;
pub mod cache;
