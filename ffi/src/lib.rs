//! The C boundary: thin functions that check what C hands them, call `mcb_core`, and map the
//! results to codes. The bucket engine ABI lands with the ffi issue.

pub mod abi;
mod boundary;
pub mod cache;
