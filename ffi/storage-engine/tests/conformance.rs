//! The built-in storage engine through the C ABI: `libmcb_engine.so` exports only
//! `create_instance` and our host's end of turn (`mcb_end_turn`), and the C suite `examples-c/engine/storage_conformance.c` passes against
//! it directly and through `libbucket_engine.so` with `engine=builtin`, also under valgrind
//! memcheck when valgrind is on PATH (CI installs it; a local run without it says so, and a run
//! with `CI` set fails instead), and with the suite built with gcc's AddressSanitizer and UBSan
//! (`make SAN=1`).
//!
//! Both libraries come from target/<profile>. `cargo test` does not build a cdylib that no
//! test can link, so this test builds the two (`cargo build`, same profile and features; a
//! no-op when they are current) before it looks for them.
#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use mcb_testkit::c_harness::{
    assert_success, build, build_sanitized, valgrind_available, Variant, MEMCHECK, SANITIZER_ENV,
};
use mcb_testkit::shared_lib::{built_library, exported_functions};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The harness in the ABI variant of this crate's features.
const VARIANT: Variant = Variant::of(cfg!(feature = "engine-pu"));

/// Builds both libraries once per test binary, into the target dir this test runs from.
fn build_libraries() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let exe = std::env::current_exe().expect("test binary path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps");
        let target_dir = profile_dir.parent().expect("target/");
        let mut cargo = Command::new(env!("CARGO"));
        cargo
            .args([
                "build",
                "-p",
                "mcb-storage-engine",
                "-p",
                "mcb-bucket-engine",
            ])
            .arg("--target-dir")
            .arg(target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if profile_dir.ends_with("release") {
            cargo.arg("--release");
        }
        if cfg!(feature = "engine-pu") {
            cargo.args([
                "--features",
                "mcb-storage-engine/engine-pu,mcb-bucket-engine/engine-pu",
            ]);
        }
        let out = cargo.output().expect("run cargo build");
        assert!(
            out.status.success(),
            "building the engine libraries failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
}

fn storage_engine() -> PathBuf {
    build_libraries();
    built_library("libmcb_engine.so", "cargo build -p mcb-storage-engine")
}

fn bucket_engine() -> PathBuf {
    build_libraries();
    built_library("libbucket_engine.so", "cargo build -p mcb-bucket-engine")
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
