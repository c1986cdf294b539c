//! The bucket engine's modules (`ffi/src/bucket_engine/*.rs`) import each other in one
//! direction only: this test reads every `super::NAME` and `crate::bucket_engine::NAME` path
//! naming a sibling module and fails on a cycle, printing it. (Paths into `mod.rs` itself, such
//! as `super::instance`, are the parent's, not a sibling's, and do not count.)

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// The sibling modules each module of `dir` names.
fn imports(dir: &Path) -> Graph {
    let modules: BTreeMap<String, String> = fs::read_dir(dir)
        .expect("read ffi/src/bucket_engine")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
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
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bucket_engine");
    let graph = imports(&dir);
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
