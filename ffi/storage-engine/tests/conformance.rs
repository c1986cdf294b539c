//! The built-in storage engine through the C ABI: `libmcb_engine.so` exports only
//! `create_instance` and our host's end of turn (`mcb_end_turn`), and the C suite `examples-c/engine/storage_conformance.c` passes against
//! it directly and through `libbucket_engine.so` with `engine=builtin`, also under valgrind
//! memcheck when valgrind is on PATH (CI installs it; a local run without it says so, and a run
//! with `CI` set fails instead), and with the suite built with gcc's AddressSanitizer and UBSan
//! (`make SAN=1`).
//!
//! Both libraries come from target/<profile>, built for the run by
//! `mcb_testkit::shared_lib::engine_library` (`cargo test` does not build a cdylib that no test
//! can link).
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use mcb_testkit::c_harness::{
    assert_success, build, build_sanitized, valgrind_available, Variant, MEMCHECK, SANITIZER_ENV,
};
use mcb_testkit::shared_lib::{engine_library, exported_functions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The harness in the ABI variant of this crate's features.
const VARIANT: Variant = Variant::of(cfg!(feature = "engine-pu"));

fn storage_engine() -> PathBuf {
    engine_library("libmcb_engine.so", cfg!(feature = "engine-pu"))
}

fn bucket_engine() -> PathBuf {
    engine_library("libbucket_engine.so", cfg!(feature = "engine-pu"))
}

/// Runs the C suite in `mode` on `lib`, under `wrapper` when given.
fn suite(harness: &Path, wrapper: &[&str], mode: &str, lib: PathBuf) -> Output {
    let program = harness.join("storage_conformance");
    let mut cmd = match wrapper.split_first() {
        Some((first, rest)) => {
            let mut cmd = Command::new(first);
            cmd.args(rest).arg(&program);
            cmd
        }
        None => Command::new(&program),
    };
    cmd.arg(mode)
        .arg(lib)
        // Read only by a sanitized build.
        .envs(SANITIZER_ENV)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", program.display()))
}

#[test]
fn only_create_instance_and_the_end_of_turn_are_exported() {
    let lib = storage_engine();
    assert_eq!(
        exported_functions(&lib),
        ["create_instance", "mcb_end_turn"],
        "exported functions of {}",
        lib.display()
    );
}

#[test]
fn conformance_on_the_library() {
    assert_success(
        "direct",
        &suite(build(VARIANT), &[], "direct", storage_engine()),
    );
}

#[test]
fn conformance_through_the_bucket_engine_with_engine_builtin() {
    assert_success(
        "bucket",
        &suite(build(VARIANT), &[], "bucket", bucket_engine()),
    );
}

#[test]
fn conformance_is_clean_under_valgrind() {
    if !valgrind_available("conformance_is_clean_under_valgrind") {
        return;
    }
    for (mode, lib) in [("direct", storage_engine()), ("bucket", bucket_engine())] {
        let out = suite(build(VARIANT), &MEMCHECK, mode, lib);
        assert_success(&format!("{mode} under valgrind memcheck"), &out);
    }
}

#[test]
fn conformance_is_clean_under_asan_and_ubsan() {
    for (mode, lib) in [("direct", storage_engine()), ("bucket", bucket_engine())] {
        let out = suite(build_sanitized(VARIANT), &[], mode, lib);
        assert_success(&format!("{mode} under ASan and UBSan"), &out);
    }
}
