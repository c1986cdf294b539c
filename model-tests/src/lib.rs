//! Shared pieces of the model tests: [`fixtures`] (a test engine and environment) and, under
//! `--cfg mcb_loom`, the loom drivers. (The allocation-counting global allocator is
//! `mcb_testkit::alloc`, which the ffi tests use too.)
//!
//! Every model runs through `check` (the real code must pass) or `caught` (a deliberate bug,
//! see `mcb_core::sync::mutant`, must make loom fail). Both bound preemptions so that the
//! default `cargo loom` run stays short; `LOOM_MAX_PREEMPTIONS=N cargo loom` runs deeper.

pub mod fixtures;

// `cargo loom` sets MCB_LOOM_RUN. Without `--cfg mcb_loom` as well, RUSTFLAGS or a
// `target.*.rustflags` setting has replaced the alias's rustflags: every model file would compile
// to nothing and the run would pass with no model run. Stop the build instead.
#[cfg(not(mcb_loom))]
const _: () = assert!(
    option_env!("MCB_LOOM_RUN").is_none(),
    "cargo loom: `--cfg mcb_loom` is off, so no loom model would run. RUSTFLAGS or a \
     `target.*.rustflags` setting replaces the alias's build.rustflags: unset it, or add \
     `--cfg mcb_loom --cfg crossbeam_loom` to it."
);

#[cfg(mcb_loom)]
mod models;
#[cfg(mcb_loom)]
pub use models::*;
