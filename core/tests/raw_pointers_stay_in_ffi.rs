//! C's "fill the value after allocate" contract and the engines' per-connection C word live in
//! `ffi`, not here: the item store has no `unsafe` at all, and a bucket connection holds no raw
//! pointer. (core's `unsafe` is for its lock-free structures and the sync shim only.)

use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).expect("read a source directory") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

fn src(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(path)
}

#[test]
fn the_item_store_has_no_unsafe() {
    let files = rust_files(&src("store"));
    assert!(files.len() >= 2, "the store's sources were not found");
    for file in files {
        let text = fs::read_to_string(&file).expect("read a source file");
        assert!(
            !text.contains("unsafe"),
            "{} uses unsafe: raw-pointer contracts belong in ffi",
            file.display()
        );
    }
}

#[test]
fn a_bucket_connection_holds_no_raw_pointer() {
    let text = fs::read_to_string(src("bucket/connection.rs")).expect("read connection.rs");
    for raw in ["*mut ", "*const ", "AtomicPtr"] {
        assert!(
            !text.contains(raw),
            "core/src/bucket/connection.rs holds a raw pointer ({raw}): keep C words in ffi"
        );
    }
}
