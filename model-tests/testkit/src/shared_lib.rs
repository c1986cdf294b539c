//! The shared libraries cargo builds for a test run, and what they export.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A library cargo built for this test run: `target/<profile>/<name>`, next to
/// `target/<profile>/deps/` where the test binary lives. `hint` says how to build it when absent.
pub fn built_library(name: &str, hint: &str) -> PathBuf {
    let lib = profile_dir().join(name);
    assert!(lib.exists(), "{} was not built: {hint}", lib.display());
    lib
}

/// One of our engine libraries (`libmcb_engine.so` or `libbucket_engine.so`), built for this
/// test run: `cargo test` does not build a cdylib that no test can link, so the first call in
/// a test binary builds both (`cargo build`, into the target dir and profile the test runs
/// from, with the engine-pu features when `engine_pu`; a no-op when they are current).
pub fn engine_library(name: &str, engine_pu: bool) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        let profile_dir = profile_dir();
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
        if engine_pu {
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
    built_library(
        name,
        "cargo build -p mcb-storage-engine -p mcb-bucket-engine",
    )
}

/// `target/<profile>`: where cargo puts the libraries of this test run, above the test
/// binary's `deps/`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_owned()
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
