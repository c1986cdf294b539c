//! Nothing in `ffi/src` deallocates through a pointer derived from a reference (undefined
//! behaviour under Stacked and Tree Borrows, and a function argument's reference is protected
//! for the whole call): owned objects are freed through the raw pointer `Box::into_raw` gave
//! (`NonNull` owners such as the bucket engine's `OwnedHost`), never `Box::from_raw` of a
//! `ptr::from_ref(..)` or of a reference cast.

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

/// Whether a line frees through a pointer made from a reference.
fn frees_through_a_reference(line: &str) -> bool {
    let Some(at) = line.find("::from_raw(") else {
        return false;
    };
    let argument = &line[at..];
    argument.contains("from_ref(")
        || argument.contains("::from_raw(&")
        || argument.contains(" as *")
}

#[test]
fn no_free_through_a_reference() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = rust_files(&src);
    assert!(files.len() > 10, "ffi's sources were not found");
    let mut offenders = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).expect("read a source file");
        for (n, line) in text.lines().enumerate() {
            if frees_through_a_reference(line) {
                offenders.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "frees through references:\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_check_sees_the_shape_it_forbids() {
    assert!(frees_through_a_reference(
        "drop(unsafe { Box::from_raw(ptr::from_ref(host).cast_mut()) });"
    ));
    assert!(!frees_through_a_reference(
        "drop(unsafe { Box::from_raw(self.0.as_ptr()) });"
    ));
}
