//! The loom drivers: run a model on the real code, or on a deliberate bug that it must catch.

use mcb_core::sync::mutant::{self, Mutant};
use std::process::Command;

/// Preemption bound used when `LOOM_MAX_PREEMPTIONS` is not set.
pub const DEFAULT_PREEMPTIONS: usize = 3;

/// Set in the child process that runs a broken variant (see [`caught`]).
const CHILD: &str = "MCB_MODEL_BROKEN_CHILD";
/// When set, [`caught`] runs nothing: `model-tests/mutate.sh` sets it so that a mutant counts
/// as caught only when a model of the real code fails, not when a deliberate-bug test fails
/// for a reason of the mutant's making.
pub const SKIP_BROKEN: &str = "MCB_MODELS_SKIP_BROKEN";

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

/// Runs `model` on the real code as [`check`] does, then again with the L2's retired nodes
/// handed to the collector 64 at a time, as the std build does: with a batch of one, each
/// write's handover runs SeqCst fences that would stand in for orderings the model checks.
pub fn check_batched<F>(model: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let model = std::sync::Arc::new(model);
    for batch in [1, 64] {
        let _real = mutant::set_batched(Mutant::None, batch);
        let model = model.clone();
        builder().check(move || model());
    }
}

/// Runs `model` with `bug` switched on and asserts that loom finds an interleaving that fails,
/// with output containing `expected` (so an unrelated failure does not count).
///
/// The broken run happens in a child process (this test binary, filtered to the calling test):
/// loom reports some failures, deadlocks among them, in ways that abort rather than unwind.
pub fn caught<F>(bug: Mutant, expected: &str, model: F)
where
    F: Fn() + Sync + Send + 'static,
{
    if std::env::var_os(SKIP_BROKEN).is_some() {
        println!("{bug:?}: not run ({SKIP_BROKEN})");
        return;
    }
    if std::env::var_os(CHILD).is_some() {
        let _bug = mutant::set(bug);
        builder().check(model);
        return;
    }
    let test = std::thread::current()
        .name()
        .expect("the test harness names each test's thread")
        .to_owned();
    let output = Command::new(std::env::current_exe().expect("test binary"))
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run the broken variant");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !output.status.success(),
        "loom found no failing interleaving with {bug:?}: the model proves nothing\n{text}"
    );
    let line = text
        .lines()
        .find(|l| l.contains(expected))
        .unwrap_or_else(|| panic!("{bug:?} failed, but not with {expected:?}:\n{text}"));
    println!("{bug:?}: caught: {}", line.trim());
}
