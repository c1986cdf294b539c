//! The one place `core` takes its shared-state primitives from.
//!
//! Built normally, these are std's types; built with `RUSTFLAGS="--cfg mcb_loom"` they are loom's,
//! so the loom models in `model-tests` run the real code. The shape is tokio's `loom` module:
//! this file chooses the build, `std.rs` holds the std build and `loom.rs` the loom one, both
//! under the same names, and only those two files name std's or loom's primitives (beside the
//! deliberate bugs' switch in `mutant.rs`, which is std's in both on purpose, and the
//! thread-local of `counts.rs`, declared by the build's macro: a build file that declared it
//! would import `counts` back). What both builds share is written once, over whichever is
//! built: `atomic` (the build's atomics and the handshake token), `lock` (Mutex and Condvar),
//! `striped`, `read_mostly`, `counts` and `tally` (which takes its rows from `counts`' slot
//! numbers).
//!
//! Mutexes here do not poison: a panic in one caller must not wedge every tenant afterwards.
//! A test (core/tests/sync_shim_only.rs) and a clippy `disallowed-methods` rule (core/clippy.toml)
//! keep the rest of the crate on this path. The items mirror std's API of the same name and are
//! documented there.
//!
//! The hooks the loom models drive (the deliberate bugs of `mutant`, and `Counts`) are public
//! only in loom builds, and hidden from the docs even there: they are a test harness, not API.

#![allow(missing_docs)]

#[cfg(mcb_loom)]
#[doc(hidden)]
pub mod mutant;
#[cfg(not(mcb_loom))]
#[allow(dead_code)] // some variants are named only on loom-only code paths
pub(crate) mod mutant;

#[cfg(mcb_loom)]
mod loom;
#[cfg(not(mcb_loom))]
mod std;

#[cfg(mcb_loom)]
use self::loom as build;
#[cfg(not(mcb_loom))]
use self::std as build;

pub mod atomic;
mod counts;
mod lock;
mod read_mostly;
mod striped;
mod tally;

pub(crate) use build::epoch;
#[cfg(mcb_loom)]
pub(crate) use build::AccessLog;
pub(crate) use build::Watched;
pub use build::{cpu_count, thread, time, Arc, UnsafeCell};
#[cfg(mcb_loom)]
#[doc(hidden)]
pub use counts::Counts;
#[cfg(not(mcb_loom))]
pub(crate) use counts::Counts;
pub use lock::{Condvar, Mutex, MutexGuard};
pub use read_mostly::ReadMostly;
pub(crate) use striped::Striped;
pub(crate) use tally::Tally;

/// std's `Arc` in every build, for immutable payloads (cached values and keys) whose reference
/// count is part of no protocol a model checks: loom's `Arc` would make every value clone a
/// modelled atomic and report values still parked in the epoch collector's garbage as leaks.
pub use ::std::sync::Arc as PayloadArc;
