//! Runs the bucket engine's C conformance suite (`examples-c/engine/bucket_conformance/`: one
//! file per area, `runner.c` with the test table) against the `libbucket_engine.so` this crate
//! builds:
//!
//! - the suite on its own: every test in a child process of its own, one line per test, exit
//!   status 0 only when all passed;
//! - the suite again under valgrind memcheck (leaks and errors fail the test that made them;
//!   valgrind follows the suite's forks) when valgrind is on PATH. A local run without it says
//!   so; a run with `CI` set fails instead (.ci/run installs it);
//! - the suite built with gcc's AddressSanitizer and UBSan (`make SAN=1`), any report failing.
//!
//! The harness is built as the `abi_*` tests of `mcb-abi` build it (`mcb_testkit::c_harness`:
//! make in the variant matching the features, under one lock file). A
//! missing make or C compiler is a failure, not a skip. The cdylib is the one cargo built for
//! this test run, next to this test binary. `BUCKET_CONFORMANCE_ARGS` (space-separated test names)
//! narrows a run while debugging. A full run must run exactly [`EXPECTED_TESTS`] tests: a test
//! lost from the suite's table (or one added without updating the count) fails the run.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use mcb_testkit::c_harness::{
    build, build_sanitized, valgrind_available, Variant, MEMCHECK, SANITIZER_ENV,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The harness in the ABI variant of this crate's features.
const VARIANT: Variant = Variant::of(cfg!(feature = "engine-pu"));

/// The number of tests in the suite's table (`bucket_conformance/runner.c`).
const EXPECTED_TESTS: usize = 73;

/// The `libbucket_engine.so` cargo built for this test run, next to this test binary in
/// `target/<profile>/deps` (the copy in `target/<profile>` is only refreshed by `cargo build`).
fn bucket_engine_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let lib = exe.with_file_name("libbucket_engine.so");
    assert!(
        lib.is_file(),
        "{} is missing: `cargo test -p mcb-bucket-engine` builds it",
        lib.display()
    );
    lib
}

fn selected_tests() -> Vec<String> {
    std::env::var("BUCKET_CONFORMANCE_ARGS")
        .map(|s| s.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Runs the suite of the harness built in `harness`, under the command `prefix` if any.
fn suite(harness: &Path, prefix: &[&str], timeout_s: u32) -> Output {
    let program = harness.join("bucket_conformance");
    let (first, rest) = match prefix.split_first() {
        Some((first, rest)) => (PathBuf::from(first), rest),
        None => (program.clone(), &[][..]),
    };
    let mut cmd = Command::new(first);
    cmd.args(rest);
    if !prefix.is_empty() {
        cmd.arg(&program);
    }
    cmd.arg(bucket_engine_lib())
        .arg(harness.join("libtest_engine.so"))
        .args(selected_tests())
        // Read only by a sanitized build.
        .envs(SANITIZER_ENV)
        .env("BUCKET_CONFORMANCE_TIMEOUT", timeout_s.to_string())
        .env_remove("MEMCACHED_TOP_KEYS")
        .env_remove("BUCKET_ENGINE_DIABLE_AUTH_PHASE");
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()))
}

fn assert_passed(what: &str, out: &Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
    );
    let summary = stdout.lines().last().unwrap_or_default();
    let selected = selected_tests();
    let expected = if selected.is_empty() {
        EXPECTED_TESTS
    } else {
        selected.len()
    };
    assert_eq!(
        summary,
        format!("{expected} passed, 0 failed"),
        "{what}: unexpected summary"
    );
    let ran = stdout.lines().filter(|l| l.starts_with("ok   ")).count();
    assert_eq!(ran, expected, "{what}: tests reported as passed");
    // The per-test lines, for `--nocapture` runs.
    println!("{stdout}");
}

#[test]
fn bucket_engine_conformance_suite_passes() {
    let out = suite(build(VARIANT), &[], 120);
    assert_passed("bucket_conformance", &out);
}

#[test]
fn bucket_engine_conformance_is_clean_under_asan_and_ubsan() {
    let out = suite(build_sanitized(VARIANT), &[], 120);
    assert_passed("bucket_conformance under ASan and UBSan", &out);
}

#[test]
fn bucket_engine_conformance_is_clean_under_valgrind() {
    if !valgrind_available("bucket_engine_conformance_is_clean_under_valgrind") {
        return;
    }
    let out = suite(build(VARIANT), &MEMCHECK, 600);
    assert_passed("bucket_conformance under valgrind memcheck", &out);
}
