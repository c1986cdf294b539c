//! The host's modules depend on each other in one direction: no module reaches, through
//! `crate::`, `super::`, `self::` or a child's name, back to a module that reaches it. The
//! checker reads the sources (any tree of a crate, given where it sits in its crate), so other
//! trees of the workspace can be checked the same way by adding a test here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// A module's path from its crate root, e.g. `["api", "log"]`.
type ModPath = Vec<String>;

/// The modules of the tree at `dir` (which is the module `prefix` of its crate), by path, with
/// their source text. `lib.rs`/`main.rs` are the crate root and are not part of the graph.
fn read_tree(dir: &Path, prefix: &[&str]) -> BTreeMap<ModPath, String> {
    let mut modules = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(dir)
                .expect("under dir")
                .with_extension("");
            let mut module: ModPath = prefix.iter().map(|s| s.to_string()).collect();
            module.extend(rel.iter().map(|c| c.to_string_lossy().into_owned()));
            if module.last().is_some_and(|l| l == "mod") {
                module.pop();
            }
            if module.len() == 1 && matches!(module[0].as_str(), "lib" | "main") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("a source file");
            modules.insert(module, text);
        }
    }
    modules
}

/// The source without comments (line comments and doc comments; block comments are not used).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths written after `at` in `src` (`a::b`, `a::{b, c::d}`), each as its segments.
fn paths_after(src: &str, at: usize) -> Vec<Vec<String>> {
    let rest = &src[at..];
    let ident_len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
    if ident_len > 0 {
        let head = rest[..ident_len].to_string();
        let after = &rest[ident_len..];
        if let Some(tail) = after.strip_prefix("::") {
            let next = at + ident_len + 2;
            let tails = paths_after(src, next + (tail.len() - tail.trim_start().len()));
            return tails
                .into_iter()
                .map(|t| std::iter::once(head.clone()).chain(t).collect())
                .collect();
        }
        return vec![vec![head]];
    }
    if rest.starts_with('{') {
        // The items of the group, split at its top-level commas, each a path of its own.
        let mut out = Vec::new();
        let (mut depth, mut item) = (0usize, at + 1);
        for (i, c) in rest.char_indices().skip(1) {
            match c {
                '{' => depth += 1,
                '}' | ',' if depth == 0 => {
                    let text = &src[item..at + i];
                    if !text.trim().is_empty() {
                        out.extend(paths_after(
                            src,
                            item + text.len() - text.trim_start().len(),
                        ));
                    }
                    if c == '}' {
                        break;
                    }
                    item = at + i + 1;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        return out;
    }
    vec![Vec::new()]
}

/// The modules `module` refers to, as absolute paths (not yet resolved to modules).
fn references(module: &ModPath, src: &str, children: &BTreeSet<String>) -> Vec<ModPath> {
    let mut out = Vec::new();
    let bytes = src.as_bytes();
    for (i, _) in src.match_indices("::") {
        // The identifier just before `::`, starting a path (not preceded by `::` or an ident).
        let start = src[..i].rfind(|c: char| !is_ident(c)).map_or(0, |j| j + 1);
        if start == i || (start >= 2 && &src[start - 2..start] == "::") {
            continue;
        }
        if start > 0 && bytes[start - 1] == b'$' {
            continue; // `$crate::` in macros
        }
        let head = &src[start..i];
        let base: Option<ModPath> = match head {
            "crate" => Some(Vec::new()),
            "self" => Some(module.clone()),
            "super" => {
                // `super::super::...` climbs once per segment.
                let mut base = module.clone();
                let mut at = start;
                while src[at..].starts_with("super::") {
                    base.pop();
                    at += "super::".len();
                }
                for path in paths_after(src, at) {
                    out.push(base.iter().cloned().chain(path).collect());
                }
                None
            }
            child if children.contains(child) => {
                out.push(module.iter().cloned().chain([child.to_string()]).collect());
                None
            }
            _ => None,
        };
        if let Some(base) = base {
            for path in paths_after(src, i + 2) {
                out.push(base.iter().cloned().chain(path).collect());
            }
        }
    }
    out
}

/// The dependency graph between the modules of `modules`: an edge for every reference that
/// resolves (longest prefix) to another module of the tree.
fn graph(modules: &BTreeMap<ModPath, String>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, text) in modules {
        let children: BTreeSet<String> = modules
            .keys()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| m[module.len()].clone())
            .collect();
        let targets = edges.entry(module.clone()).or_default();
        for path in references(module, &code(text), &children) {
            let target = (1..=path.len())
                .rev()
                .map(|n| path[..n].to_vec())
                .find(|p| modules.contains_key(p));
            if let Some(target) = target.filter(|t| t != module) {
                targets.insert(target);
            }
        }
    }
    edges
}

/// A cycle of the graph, if there is one, as the modules along it.
fn find_cycle(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &ModPath,
        edges: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        marks: &mut BTreeMap<ModPath, Mark>,
        stack: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|n| n == node).expect("on the stack");
                let mut cycle = stack[from..].to_vec();
                cycle.push(node.clone());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.clone(), Mark::Open);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(node.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    edges
        .keys()
        .find_map(|n| visit(n, edges, &mut marks, &mut Vec::new()))
}

/// Fails with the cycle, if the tree at `dir` (module `prefix` of its crate) has one.
fn assert_acyclic(dir: &Path, prefix: &[&str]) {
    let modules = read_tree(dir, prefix);
    assert!(modules.len() > 1, "no modules under {}", dir.display());
    if let Some(cycle) = find_cycle(&graph(&modules)) {
        let names: Vec<String> = cycle.iter().map(|m| m.join("::")).collect();
        panic!(
            "module import cycle under {}: {}",
            dir.display(),
            names.join(" -> ")
        );
    }
}

#[test]
fn host_modules_have_no_cycle() {
    assert_acyclic(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &[]);
}

/// The checker itself: it sees each spelling of a reference, and finds a cycle when one is
/// there.
#[test]
fn the_checker_finds_cycles() {
    let tree = |files: &[(&str, &str)]| -> BTreeMap<ModPath, String> {
        files
            .iter()
            .map(|(m, s)| (m.split("::").map(String::from).collect(), s.to_string()))
            .collect()
    };
    let acyclic = tree(&[
        ("a", "use crate::b::{self, x};\n// use crate::c;"),
        ("b", "use crate::c::Y;"),
        ("c", "pub struct Y;"),
        ("p", "mod q;\nfn f() { q::g() }"),
        ("p::q", "pub fn g() { crate::c::Y; }"),
    ]);
    let edges = graph(&acyclic);
    assert_eq!(find_cycle(&edges), None);
    let path = |s: &str| -> ModPath { s.split("::").map(String::from).collect() };
    assert!(edges[&path("a")].contains(&path("b")));
    assert!(
        !edges[&path("a")].contains(&path("c")),
        "a comment is no reference"
    );
    assert!(
        edges[&path("p")].contains(&path("p::q")),
        "a child by its name"
    );
    for (from, spelling) in [
        ("c", "use crate::a;"),
        ("c", "use crate::{a, b};"),
        ("c", "fn f() { crate::a::f() }"),
        ("p::q", "use super::super::a;"),
        ("p::q", "use super::f;"),
    ] {
        let mut cyclic = acyclic.clone();
        if from == "p::q" {
            cyclic.insert(path("a"), "use crate::p::q;".into());
        }
        cyclic.insert(path(from), spelling.into());
        assert!(
            find_cycle(&graph(&cyclic)).is_some(),
            "{from}: {spelling} closes no cycle"
        );
    }
}
