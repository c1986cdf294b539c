//! Rules that the compiler does not check, read from the sources (through
//! `mcb_testkit::source`):
//!
//! - nothing in `ffi/src` deallocates through a pointer derived from a reference (undefined
//!   behaviour under Stacked and Tree Borrows; a function argument's reference is protected for
//!   the whole call): owned objects are freed through the raw pointer `Box::into_raw` gave
//!   (`NonNull` owners such as the bucket engine's `OwnedHost`);
//! - C's contracts stay here, out of `core`: its item store has `unsafe` in one module only,
//!   the one that owns the raw segment memory (`core/src/store/seg/memory.rs`: the mappings,
//!   accessed only atomically from Rust), and a bucket connection holds no raw pointer (the
//!   engines' per-connection C word is `ffi`'s);
//! - no source of the workspace includes another crate's file with `#[path]`: what test
//!   crates share is the crate `mcb-testkit`.
//!
//! (The import direction of `ffi`'s modules is `module_graph.rs`'s.)

use mcb_testkit::source::{rust_files, strip_comments_and_literals};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// A path below this crate's directory.
fn here(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
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
    let files = rust_files(&here("src"));
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

#[test]
fn the_item_store_has_unsafe_only_in_its_memory_module() {
    let memory = here("../core/src/store/seg/memory.rs");
    let files = rust_files(&here("../core/src/store"));
    assert!(
        files.len() >= 2 && files.contains(&memory),
        "the store's sources were not found"
    );
    for file in files {
        let text = fs::read_to_string(&file).expect("read a source file");
        let unsafe_code = strip_comments_and_literals(&text).contains("unsafe");
        if file == memory {
            assert!(
                unsafe_code,
                "the rule no longer sees the memory module's unsafe code"
            );
        } else {
            assert!(
                !unsafe_code,
                "{} uses unsafe: only core/src/store/seg/memory.rs owns raw memory; \
                 raw-pointer contracts with C belong in ffi",
                file.display()
            );
        }
    }
}

#[test]
fn a_bucket_connection_holds_no_raw_pointer() {
    let text =
        fs::read_to_string(here("../core/src/bucket/connection.rs")).expect("read connection.rs");
    for raw in ["*mut ", "*const ", "AtomicPtr"] {
        assert!(
            !text.contains(raw),
            "core/src/bucket/connection.rs holds a raw pointer ({raw}): keep C words in ffi"
        );
    }
}

/// `path` with `.` and `..` taken out, without touching the file system.
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The directory of the crate a file belongs to: the nearest one above it with a Cargo.toml.
fn crate_of(file: &Path) -> Option<&Path> {
    file.ancestors()
        .skip(1)
        .find(|dir| dir.join("Cargo.toml").is_file())
}

/// The `#[path = "..."]` attributes in `text`, the source of `file`, that name a file of another
/// crate (found in the code, outside comments and literals; read from the text).
fn cross_crate_paths(file: &Path, text: &str) -> Vec<String> {
    let dir = file.parent().expect("a file has a directory");
    strip_comments_and_literals(text)
        .match_indices("#[path")
        .filter_map(|(at, _)| {
            let rest = &text[at..];
            let value = rest[..rest.find(']')?].split('"').nth(1)?;
            let target = normalized(&dir.join(value));
            (crate_of(&target) != crate_of(file)).then(|| value.to_owned())
        })
        .collect()
}

#[test]
fn no_path_include_crosses_crates() {
    let root = normalized(&here(".."));
    let files = rust_files(&root);
    assert!(files.len() > 100, "the workspace's sources were not found");
    let offenders: Vec<String> = files
        .iter()
        .flat_map(|file| {
            let text = fs::read_to_string(file).expect("read a source file");
            cross_crate_paths(file, &text)
                .into_iter()
                .map(move |value| format!("{}: #[path = {value:?}]", file.display()))
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "sources include another crate's file (share it through mcb-testkit instead):\n{}",
        offenders.join("\n")
    );
}

#[test]
fn the_path_check_sees_an_include_across_crates() {
    let root = normalized(&here(".."));
    let file = root.join("ffi/bucket-engine/tests/header.rs");
    let across = "#[path = \"../../tests/header_common/mod.rs\"]\nmod header_common;";
    assert_eq!(
        cross_crate_paths(&file, across),
        ["../../tests/header_common/mod.rs"]
    );
    let within = "#[path = \"common/mod.rs\"]\nmod common;";
    assert!(cross_crate_paths(&file, within).is_empty());
    let quoted =
        "// #[path = \"../../tests/x.rs\"]\nconst S: &str = \"#[path = \\\"../../x.rs\\\"]\";";
    assert!(
        cross_crate_paths(&file, quoted).is_empty(),
        "in a comment or a string"
    );
}
