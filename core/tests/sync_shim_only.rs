//! `core` reaches shared-state primitives, threads and time only through `crate::sync`, so that
//! loom can stand in for std in the models. (A clippy `disallowed-types` rule cannot say this for
//! types: it sees through the shim's re-exports and flags the shim's own users. core/clippy.toml
//! does forbid the functions the shim wraps.)

use std::fs;
use std::path::Path;

const FORBIDDEN: &[&str] = &[
    "std::sync",
    "std::thread",
    "Instant::now",
    "std::cell::UnsafeCell",
    "parking_lot",
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in fs::read_dir(dir).expect("read core/src") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn only_the_shim_touches_std_sync() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let shim = src.join("sync");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(
        files.len() > 5,
        "found too few sources under {}",
        src.display()
    );
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with(&shim))
        .flat_map(|f| {
            let text = fs::read_to_string(f).expect("read source");
            text.lines()
                .enumerate()
                .filter(|(_, line)| !line.trim_start().starts_with("//"))
                .filter(|(_, line)| FORBIDDEN.iter().any(|p| line.contains(p)))
                .map(|(n, line)| format!("{}:{}: {}", f.display(), n + 1, line.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "use crate::sync instead:\n{}",
        offenders.join("\n")
    );
}
