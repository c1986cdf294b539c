//! `libbucket_engine.so` exports exactly what memcached looks up: `create_instance`, and nothing
//! else that could clash with the host or another engine.

use std::path::PathBuf;
use std::process::Command;

/// The library cargo built for this test run, next to this test binary in target/<profile>/deps
/// (the copy in target/<profile> is only refreshed by `cargo build`).
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let lib = exe.with_file_name("libbucket_engine.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

#[test]
fn only_create_instance_is_exported() {
    let lib = library();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("nm (binutils) is needed to inspect the library");
    assert!(
        out.status.success(),
        "nm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let functions: Vec<&str> = text
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace().skip(1);
            match (fields.next(), fields.next()) {
                (Some("T"), Some(name)) => Some(name),
                _ => None,
            }
        })
        .collect();
    assert_eq!(
        functions,
        ["create_instance"],
        "exported functions of {}",
        lib.display()
    );
}
