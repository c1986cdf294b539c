//! Builds the C examples of the cache tiers with their Makefile, runs them (exit 0), and runs
//! them again under valgrind's memcheck when valgrind is installed (CI installs it; without it a
//! local run says so and a run with `CI` set fails), and built
//! with gcc's AddressSanitizer and UBSan (`make SAN=1`: the example is instrumented, the Rust
//! library's heap goes through the sanitizer's malloc).

use mcb_testkit::c_harness::{valgrind_available, MEMCHECK};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where `cargo test` just built `libmcb_cache.so`: next to this test binary (the copy in
/// `target/<profile>` is only refreshed by `cargo build`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().expect("target/<profile>/deps").to_path_buf()
}

fn run(command: &mut Command) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_c_examples_run_clean() {
    let lib = lib_dir();
    assert!(
        lib.join("libmcb_cache.so").exists(),
        "no libmcb_cache.so in {}",
        lib.display()
    );
    let out = std::env::temp_dir().join(format!("mcb_cache_examples_{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temp dir");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples-c/cache");
    // A missing `make` or C compiler fails here, loudly.
    let make = |out: &Path, extra: &[&str]| {
        run(Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(&dir)
            .arg(format!("LIBDIR={}", lib.display()))
            .arg(format!("OUT={}", out.display()))
            .args(extra));
    };
    make(&out, &[]);
    let example = out.join("threads");
    // cargo's LD_LIBRARY_PATH would win over the example's rpath and may name a stale copy.
    run(Command::new(&example).env("LD_LIBRARY_PATH", &lib));
    let sanitized = out.join("asan");
    std::fs::create_dir_all(&sanitized).expect("temp dir");
    make(&sanitized, &["SAN=1"]);
    run(Command::new(sanitized.join("threads"))
        .env("LD_LIBRARY_PATH", &lib)
        .env("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=1")
        .env("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1"));
    if valgrind_available("the example under valgrind memcheck") {
        run(Command::new(MEMCHECK[0])
            .args(&MEMCHECK[1..])
            .arg(format!(
                "--suppressions={}",
                dir.join("valgrind.supp").display()
            ))
            .arg(&example)
            .env("LD_LIBRARY_PATH", &lib));
    }
    std::fs::remove_dir_all(&out).ok();
}
