//! Shared by the `abi_*` tests and, included by path, the engines' C suite runners
//! (`ffi/bucket-engine/tests`, `ffi/storage-engine/tests`, `ffi/tests`) and the host's tests:
//! builds the C harness in
//! `examples-c/engine` with make (once per test binary) in the variant matching the crate's
//! features, plain or sanitized, and reads typed constants as plain integers.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

use mcb_abi::abi::*;

use std::fs::{self, File};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The harness's sources (found from whichever crate under ffi/ includes this module).
pub fn harness_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|dir| dir.join("examples-c/engine"))
        .find(|dir| dir.is_dir())
        .expect("examples-c/engine in the workspace")
}

/// A library cargo built for this test run: target/<profile>/`name`, next to
/// target/<profile>/deps/ where the test binary lives. `hint` says how to build it when absent.
pub fn built_library(name: &str, hint: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let lib = profile_dir.join(name);
    assert!(lib.exists(), "{} was not built: {hint}", lib.display());
    lib
}

/// The functions a shared library exports (`nm -D --defined-only`, type T).
pub fn exported_functions(lib: &Path) -> Vec<String> {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("nm (binutils) is needed to inspect the library");
    assert!(
        out.status.success(),
        "nm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().skip(1);
            match (fields.next(), fields.next()) {
                (Some("T"), Some(name)) => Some(name.to_owned()),
                _ => None,
            }
        })
        .collect()
}

/// The variant's name and the make arguments that select it.
pub fn variant() -> (&'static str, &'static [&'static str]) {
    if cfg!(feature = "engine-pu") {
        ("engine-pu", &["ENGINE_PU=1"])
    } else {
        ("v2.5.1", &[])
    }
}

/// Builds once per test binary (its tests run in parallel) and returns the build directory. A
/// missing make or C compiler fails loudly.
pub fn build() -> &'static Path {
    static BUILD: OnceLock<PathBuf> = OnceLock::new();
    BUILD.get_or_init(|| make_all(false))
}

/// The same harness built with gcc's AddressSanitizer and UndefinedBehaviorSanitizer (`make
/// SAN=1`: every error aborts the program). Run its programs with [`SANITIZER_ENV`]. A Rust
/// library they load is not instrumented itself, but its heap goes through the sanitizer's
/// malloc, so the C side's misuse of memory the library hands out is caught, and leaks too.
pub fn build_sanitized() -> &'static Path {
    static BUILD: OnceLock<PathBuf> = OnceLock::new();
    BUILD.get_or_init(|| make_all(true))
}

/// What a sanitized run needs: errors fail the program, leaks are checked at exit.
pub const SANITIZER_ENV: [(&str, &str); 2] = [
    ("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0:exitcode=1"),
    ("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1"),
];

fn make_all(sanitized: bool) -> PathBuf {
    let (name, variant_args) = variant();
    let mut args = variant_args.to_vec();
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
    build_root.join(format!("engine-{name}{suffix}"))
}

/// The integer a typed constant carries.
pub trait Raw {
    fn raw(self) -> i64;
}

macro_rules! raw_newtype {
    ($($t:ty),*) => {$(
        impl Raw for $t {
            fn raw(self) -> i64 {
                i64::from(self.0)
            }
        }
    )*};
}
raw_newtype!(
    ENGINE_ERROR_CODE,
    ENGINE_STORE_OPERATION,
    ENGINE_EVENT_TYPE,
    tap_event_t,
    engine_feature_t,
    EXTENSION_ERROR_CODE,
    extension_type_t,
    EXTENSION_LOG_LEVEL,
    config_datatype,
    vbucket_state_t
);

macro_rules! raw_int {
    ($($t:ty),*) => {$(
        impl Raw for $t {
            fn raw(self) -> i64 {
                i64::try_from(self).expect("fits")
            }
        }
    )*};
}
raw_int!(u8, u16, u32, u64, usize);

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
