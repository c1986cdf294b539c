//! Shared helpers for the loom models in `tests/`.
//!
//! Every model runs through [`check`] (the real code must pass) or [`caught`] (a deliberate
//! bug, see `mcb_core::sync::mutant`, must make loom fail). Both bound preemptions so that the
//! default `cargo loom` run stays short; `LOOM_MAX_PREEMPTIONS=N cargo loom` runs deeper.

#![cfg(mcb_loom)]

use mcb_core::sync::mutant::{self, Mutant};
use std::panic::{self, AssertUnwindSafe};

/// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set.
pub const DEFAULT_PREEMPTIONS: usize = 2;

fn builder() -> loom::model::Builder {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(DEFAULT_PREEMPTIONS);
    }
    builder
}

/// Runs `model` on the real code; panics (fails the test) on any interleaving loom rejects.
pub fn check<F>(model: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let _real = mutant::set(Mutant::None);
    builder().check(model);
}

/// Runs `model` with `bug` switched on and asserts that loom finds an interleaving that fails,
/// with a panic message containing `expected` (so an unrelated failure does not count).
pub fn caught<F>(bug: Mutant, expected: &str, model: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let _bug = mutant::set(bug);
    let quiet = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    let result = panic::catch_unwind(AssertUnwindSafe(|| builder().check(model)));
    panic::set_hook(quiet);
    let payload = match result {
        Ok(()) => {
            panic!("loom found no failing interleaving with {bug:?}: the model proves nothing")
        }
        Err(payload) => payload,
    };
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("<non-string panic>");
    assert!(
        message.contains(expected),
        "{bug:?} failed, but not as expected: {message:?} does not contain {expected:?}"
    );
    println!("{bug:?}: caught ({message})");
}
