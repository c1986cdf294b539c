//! The C engine harness in `examples-c/engine` (our `engine_abi.h`, the mock memcached host, the
//! test engines and the suites that drive them), built with make once per test binary in the
//! variant of the caller's features, plain or sanitized; and what the tests that run its
//! programs share. Used by the `abi_*` tests of `mcb-abi`, the engines' suite runners
//! (`ffi/bucket-engine/tests`, `ffi/storage-engine/tests`, `ffi/tests`) and the host's tests.

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The engine interface the harness is built for. It must be the one the caller's Rust side
/// was built for, so it comes from the caller's own `engine-pu` feature:
/// `Variant::of(cfg!(feature = "engine-pu"))` (a feature of this crate would be one for the
/// whole build, not the caller's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Couchbase memcached v2.5.1 (the default).
    V2_5_1,
    /// Upstream memcached's engine-pu branch (`make ENGINE_PU=1`).
    EnginePu,
}

impl Variant {
    /// The variant a crate with the `engine-pu` feature on (`true`) or off selects.
    pub const fn of(engine_pu: bool) -> Variant {
        if engine_pu {
            Variant::EnginePu
        } else {
            Variant::V2_5_1
        }
    }

    /// The variant's name, as in its build directory `examples-c/build/engine-<name>`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::V2_5_1 => "v2.5.1",
            Variant::EnginePu => "engine-pu",
        }
    }

    /// The make arguments that select it.
    pub fn make_args(self) -> &'static [&'static str] {
        match self {
            Variant::V2_5_1 => &[],
            Variant::EnginePu => &["ENGINE_PU=1"],
        }
    }
}

/// The harness's sources: `examples-c/engine` of the workspace.
pub fn harness_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("examples-c/engine"))
        .find(|dir| dir.is_dir())
        .expect("examples-c/engine in the workspace")
}

/// Builds once per test binary (its tests run in parallel) and returns the build directory. A
/// missing make or C compiler fails loudly.
pub fn build(variant: Variant) -> &'static Path {
    once(variant, false)
}

/// The same harness built with gcc's AddressSanitizer and UndefinedBehaviorSanitizer (`make
/// SAN=1`: every error aborts the program). Run its programs with [`SANITIZER_ENV`]. A Rust
/// library they load is not instrumented itself, but its heap goes through the sanitizer's
/// malloc, so the C side's misuse of memory the library hands out is caught, and leaks too.
pub fn build_sanitized(variant: Variant) -> &'static Path {
    once(variant, true)
}

/// What a sanitized run needs: errors fail the program, leaks are checked at exit.
pub const SANITIZER_ENV: [(&str, &str); 2] = [
    ("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=1"),
    ("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1"),
];

/// One build per variant and sanitizing, made by the first test that asks.
fn once(variant: Variant, sanitized: bool) -> &'static Path {
    static BUILDS: [[OnceLock<PathBuf>; 2]; 2] = [const { [const { OnceLock::new() }; 2] }; 2];
    let slot = &BUILDS[usize::from(variant == Variant::EnginePu)][usize::from(sanitized)];
    slot.get_or_init(|| make_all(variant, sanitized))
}

fn make_all(variant: Variant, sanitized: bool) -> PathBuf {
    let mut args = variant.make_args().to_vec();
    if sanitized {
        args.push("SAN=1");
    }
    let dir = harness_dir();
    // Test binaries may run at once (e.g. under nextest): one make at a time per tree.
    let build_root = dir.join("../build");
    fs::create_dir_all(&build_root).expect("create examples-c/build");
    let lock = File::create(build_root.join(".make.lock")).expect("create the make lock");
    // SAFETY: flock on a file descriptor we own; it is released when `lock` is closed.
    let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(rc, 0, "flock examples-c/build/.make.lock");
    let out = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(&dir)
        .args(&args)
        .arg("all")
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run make ({e}): the C harness needs make and a C compiler (cc)")
        });
    assert!(
        out.status.success(),
        "building the C harness failed (make -C {} {}):\n{}{}",
        dir.display(),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    drop(lock);
    let suffix = if sanitized { "-asan" } else { "" };
    build_root.join(format!("engine-{}{suffix}", variant.name()))
}

/// valgrind memcheck as the suites run it: leaks and errors fail the run. `--fair-sched=yes`
/// because valgrind runs one thread at a time and its default lock lets a spinning thread take
/// it back again and again: the bucket suite's churn test (seven threads calling while "hot" is
/// deleted) took 336 s under the default, past CI's timeout when the machine was busy, and 3.8 s
/// with fair scheduling.
pub const MEMCHECK: [&str; 6] = [
    "valgrind",
    "--quiet",
    "--error-exitcode=1",
    "--leak-check=full",
    "--errors-for-leak-kinds=definite,possible",
    "--fair-sched=yes",
];

/// Whether valgrind is installed. Without it a local run skips (saying so, for `test`), and a CI
/// run fails: .ci/run installs it.
pub fn valgrind_available(test: &str) -> bool {
    let found = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "valgrind is not on PATH but CI is set: .ci/run installs it"
        );
        eprintln!("SKIPPED {test}: valgrind not on PATH (CI runs it)");
    }
    found
}

/// Fails the test with the program's status and output unless it exited 0.
pub fn assert_success(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}
