//! Shared pieces of the model tests: [`fixtures`] (a test engine and environment), [`alloc`]
//! (an allocation-counting global allocator) and, under
//! `--cfg mcb_loom`, the loom drivers.
//!
//! Every model runs through `check` (the real code must pass) or `caught` (a deliberate bug,
//! see `mcb_core::sync::mutant`, must make loom fail). Both bound preemptions so that the
//! default `cargo loom` run stays short; `LOOM_MAX_PREEMPTIONS=N cargo loom` runs deeper.

pub mod alloc;
pub mod fixtures;

#[cfg(mcb_loom)]
mod models;
#[cfg(mcb_loom)]
pub use models::*;
