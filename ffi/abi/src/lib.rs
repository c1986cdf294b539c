//! The C interface between memcached and its engines, as either side sees it, and nothing of
//! our engines: the crate a host depends on, as memcached knows engines only through the header.
//!
//! - [`abi`]: `#[repr(C)]` mirrors of memcached's engine interface v1.
//! - [`boundary`]: the panic guard every function called from C runs its body in.
//! - [`engine_lib`]: engines from shared libraries, created as memcached creates them.
//! - [`meta_ext`]: our engines' private opcodes for the meta commands' stale items.

pub mod abi;
pub mod boundary;
pub mod engine_lib;
pub mod meta_ext;
