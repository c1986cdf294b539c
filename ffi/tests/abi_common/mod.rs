//! Shared by the `abi_*` tests that need the C harness: builds `examples-c/engine` with make
//! (once per test binary) in the variant matching the crate's features.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The harness's sources.
pub fn harness_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples-c/engine")
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
    BUILD.get_or_init(|| {
        let (name, args) = variant();
        let dir = harness_dir();
        let out = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(&dir)
            .args(args)
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
        dir.join("../build").join(format!("engine-{name}"))
    })
}
