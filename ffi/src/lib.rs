//! The C boundary: thin functions that check what C hands them, call `mcb_core`, and map the
//! results to codes.
//!
//! - [`abi`]: `#[repr(C)]` mirrors of memcached's engine interface v1.
//! - `bucket_engine`: `libbucket_engine.so`'s `create_instance`, a drop-in bucket engine.

pub mod abi;
mod boundary;
mod bucket_engine;

pub use bucket_engine::create_instance;
