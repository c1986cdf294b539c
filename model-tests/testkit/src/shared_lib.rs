//! The shared libraries cargo builds for a test run, and what they export.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A library cargo built for this test run: `target/<profile>/<name>`, next to
/// `target/<profile>/deps/` where the test binary lives. `hint` says how to build it when absent.
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
