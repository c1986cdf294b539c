//! Rules of the C boundary that the compiler does not check, read from the sources:
//!
//! - the bucket engine's modules (`ffi/src/bucket_engine/*.rs`) import each other in one
//!   direction only: every `super::NAME` and `crate::bucket_engine::NAME` path naming a sibling
//!   module is read, and a cycle fails, printed (paths into `mod.rs` itself, such as
//!   `super::instance`, are the parent's and do not count);
//! - nothing in `ffi/src` deallocates through a pointer derived from a reference (undefined
//!   behaviour under Stacked and Tree Borrows; a function argument's reference is protected for
//!   the whole call): owned objects are freed through the raw pointer `Box::into_raw` gave
//!   (`NonNull` owners such as the bucket engine's `OwnedHost`);
//! - C's contracts stay here, out of `core`: its item store has `unsafe` in one module only,
//!   the one that owns the raw segment memory (`core/src/store/seg/memory.rs`: the mappings,
//!   accessed only atomically from Rust), and a bucket connection holds no raw pointer (the
//!   engines' per-connection C word is `ffi`'s).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The `.rs` files below `dir`.
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

/// A path below this crate's directory.
fn here(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The sibling modules each module of `dir` names.
fn imports(dir: &Path) -> Graph {
    let modules: BTreeMap<String, String> = rust_files(dir)
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            (name, fs::read_to_string(&path).expect("read a module"))
        })
        .filter(|(name, _)| name != "mod")
        .collect();
    let mut graph = Graph::new();
    for (name, text) in &modules {
        let uses = graph.entry(name.clone()).or_default();
        for prefix in ["super::", "crate::bucket_engine::"] {
            for (at, _) in text.match_indices(prefix) {
                let rest = &text[at + prefix.len()..];
                // `super::{a, b}` names several.
                let named: Vec<&str> = match rest.strip_prefix('{') {
                    Some(list) => list[..list.find('}').unwrap_or(0)]
                        .split(',')
                        .map(|item| item.trim().split("::").next().unwrap_or_default())
                        .collect(),
                    None => vec![rest
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .next()
                        .unwrap_or_default()],
                };
                for target in named {
                    if target != name && modules.contains_key(target) {
                        uses.insert(target.to_owned());
                    }
                }
            }
        }
    }
    graph
}

/// A cycle of `graph`, if it has one (as the list of modules along it).
fn cycle(graph: &Graph) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &Graph,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut found = path[at..].to_vec();
            found.push(node.to_owned());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

#[test]
fn bucket_engine_modules_import_in_one_direction() {
    let graph = imports(&here("src/bucket_engine"));
    // The reader sees the imports at all (a test that finds no edge proves nothing).
    assert!(
        graph["calls"].contains("conn") && graph["conn"].contains("host"),
        "the import reader missed known imports: {graph:?}"
    );
    if let Some(found) = cycle(&graph) {
        panic!(
            "ffi/src/bucket_engine imports in a circle: {}",
            found.join(" -> ")
        );
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let graph: Graph = [("a", "b"), ("b", "c"), ("c", "a")]
        .into_iter()
        .map(|(from, to)| (from.to_owned(), BTreeSet::from([to.to_owned()])))
        .collect();
    assert_eq!(
        cycle(&graph),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
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
        let unsafe_code = text.lines().any(|line| {
            let code = line.split("//").next().unwrap_or_default();
            code.contains("unsafe")
        });
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
