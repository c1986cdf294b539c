//! The module graph of a source tree and its import circles.
//!
//! Between files: an arrow from a module to every other module of the tree its code names
//! (the longest prefix of the path that is a module: `crate::tiers::Cache` names `tiers`, the
//! folder's `mod.rs`, unless `tiers::cache` is meant). Between folders: for each folder, its
//! children (files and subfolders, each subfolder standing for everything below it), with an
//! arrow from one child to another when anything below the first names anything below the
//! second. A circle between folders can hide in files that form none (`store::item` names
//! `tiers::l2` while `tiers::cache` names `store::meta`).
//!
//! A circle is reported as a strongly connected component (every member reaches every other):
//! its members, the shortest loop through the first, and every arrow between members, so that
//! each arrow to cut can be read off the message.

use super::lex::strip_comments_and_literals;
use super::paths::references;
use super::tree::{mod_path, ModPath, Tree};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::Path;

/// An arrow: (from, to).
pub type Arrow = (ModPath, ModPath);

/// The modules (or, one level of folders, their children) and which names which.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    edges: BTreeMap<ModPath, BTreeSet<ModPath>>,
    /// For a graph between a folder's children: the file arrows behind each arrow.
    via: BTreeMap<Arrow, BTreeSet<Arrow>>,
}

impl Graph {
    /// The file-level graph of `tree`.
    pub fn of(tree: &Tree) -> Graph {
        let mut graph = Graph::default();
        for (module, source) in &tree.modules {
            graph.edges.entry(module.clone()).or_default();
            let children: BTreeSet<String> = tree.children(module).cloned().collect();
            let code = strip_comments_and_literals(&source.text);
            for path in references(module, &code, &children) {
                let target = (1..=path.len())
                    .rev()
                    .map(|n| &path[..n])
                    .find(|p| tree.modules.contains_key(*p));
                if let Some(target) = target.filter(|t| *t != module.as_slice()) {
                    graph.add(module.clone(), target.to_vec());
                }
            }
        }
        graph
    }

    /// A graph with exactly these arrows (for checking the cycle finder).
    pub fn from_arrows<'a>(arrows: impl IntoIterator<Item = (&'a str, &'a str)>) -> Graph {
        let mut graph = Graph::default();
        for (from, to) in arrows {
            graph.edges.entry(mod_path(to)).or_default();
            graph.add(mod_path(from), mod_path(to));
        }
        graph
    }

    fn add(&mut self, from: ModPath, to: ModPath) {
        self.edges.entry(from).or_default().insert(to);
    }

    /// Whether `from` names `to` (both spelled `a::b`).
    pub fn has_arrow(&self, from: &str, to: &str) -> bool {
        self.edges
            .get(&mod_path(from))
            .is_some_and(|targets| targets.contains(&mod_path(to)))
    }

    /// Every arrow, in order.
    pub fn arrows(&self) -> impl Iterator<Item = (&ModPath, &ModPath)> {
        self.edges
            .iter()
            .flat_map(|(from, targets)| targets.iter().map(move |to| (from, to)))
    }

    /// The graph between the children of `folder` (a module, or `[]` for the crate root): each
    /// child stands for itself and everything below it; arrows from or to `folder` itself are
    /// not part of it (the file level has them).
    pub fn between_children(&self, folder: &[String]) -> Graph {
        let child = |m: &ModPath| -> Option<ModPath> {
            (m.len() > folder.len() && m.starts_with(folder)).then(|| m[..=folder.len()].to_vec())
        };
        let mut graph = Graph::default();
        for node in self.edges.keys().filter_map(child) {
            graph.edges.entry(node).or_default();
        }
        for (from, to) in self.arrows() {
            if let (Some(a), Some(b)) = (child(from), child(to)) {
                if a != b {
                    graph
                        .via
                        .entry((a.clone(), b.clone()))
                        .or_default()
                        .insert((from.clone(), to.clone()));
                    graph.add(a, b);
                }
            }
        }
        graph
    }

    /// The strongly connected components of more than one node: the circles of this graph.
    pub fn components(&self) -> Vec<Vec<ModPath>> {
        Tarjan::run(self)
    }

    /// The shortest loop from `start` back to itself, if there is one.
    fn shortest_loop(&self, start: &ModPath) -> Option<Vec<ModPath>> {
        let mut came_from: BTreeMap<&ModPath, &ModPath> = BTreeMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(node) = queue.pop_front() {
            for next in self.edges.get(node).into_iter().flatten() {
                if next == start {
                    let mut path = vec![start.clone()];
                    let mut at = node;
                    while at != start {
                        path.push(at.clone());
                        at = came_from[at];
                    }
                    path.push(start.clone());
                    path.reverse();
                    return Some(path);
                }
                if !came_from.contains_key(next) {
                    came_from.insert(next, node);
                    queue.push_back(next);
                }
            }
        }
        None
    }

    /// The circles of this graph, described (`level`: where they were found).
    fn circles(&self, level: Level) -> Vec<Circle> {
        self.components()
            .into_iter()
            .map(|members| {
                let inside: BTreeSet<&ModPath> = members.iter().collect();
                let arrows = self
                    .arrows()
                    .filter(|(from, to)| inside.contains(from) && inside.contains(to))
                    .map(|(from, to)| {
                        let arrow = (from.clone(), to.clone());
                        let via = self.via.get(&arrow).cloned().unwrap_or_default();
                        (arrow, via)
                    })
                    .collect();
                Circle {
                    level: level.clone(),
                    shortest_loop: self.shortest_loop(&members[0]).expect("a loop"),
                    members,
                    arrows,
                }
            })
            .collect()
    }
}

/// Tarjan's strongly connected components (Tarjan, "Depth-first search and linear graph
/// algorithms", SIAM J. Comput. 1972), recursive: module graphs are shallow.
struct Tarjan<'g> {
    graph: &'g Graph,
    /// The order in which each node was first visited.
    index: BTreeMap<&'g ModPath, usize>,
    stack: Vec<&'g ModPath>,
    on_stack: BTreeSet<&'g ModPath>,
    found: Vec<Vec<ModPath>>,
}

impl<'g> Tarjan<'g> {
    fn run(graph: &'g Graph) -> Vec<Vec<ModPath>> {
        let mut t = Tarjan {
            graph,
            index: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for node in graph.edges.keys() {
            if !t.index.contains_key(node) {
                t.visit(node);
            }
        }
        t.found.sort();
        t.found
    }

    /// Visits `node`; returns its low link.
    fn visit(&mut self, node: &'g ModPath) -> usize {
        let number = self.index.len();
        self.index.insert(node, number);
        self.stack.push(node);
        self.on_stack.insert(node);
        let mut low = number;
        for next in self.graph.edges.get(node).into_iter().flatten() {
            match self.index.get(next) {
                None => low = low.min(self.visit(next)),
                Some(&seen) if self.on_stack.contains(next) => low = low.min(seen),
                Some(_) => {}
            }
        }
        if low == number {
            let mut component = Vec::new();
            while let Some(top) = self.stack.pop() {
                self.on_stack.remove(top);
                component.push(top.clone());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                self.found.push(component);
            }
        }
        low
    }
}

/// Where a circle runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Level {
    /// Between files.
    Files,
    /// Between the children of this folder (`[]`: the crate root).
    Folder(ModPath),
}

/// One import circle: modules (or folders) each reaching every other.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    /// Where it runs.
    pub level: Level,
    /// Its members, sorted.
    pub members: Vec<ModPath>,
    /// The shortest loop through the first member, which is also its last.
    pub shortest_loop: Vec<ModPath>,
    /// Every arrow between members; between folders, with the file arrows behind it.
    pub arrows: Vec<(Arrow, BTreeSet<Arrow>)>,
}

fn spell(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self.members.iter().map(|m| spell(m)).collect();
        match &self.level {
            Level::Files => write!(f, "between {} files", names.len())?,
            Level::Folder(folder) => write!(f, "between the parts of {}", spell(folder))?,
        }
        writeln!(f, ": {}", names.join(", "))?;
        let shortest: Vec<String> = self.shortest_loop.iter().map(|m| spell(m)).collect();
        writeln!(f, "    loop: {}", shortest.join(" -> "))?;
        for ((from, to), via) in &self.arrows {
            write!(f, "    {} -> {}", spell(from), spell(to))?;
            let via: Vec<String> = via
                .iter()
                .map(|(a, b)| format!("{} -> {}", spell(a), spell(b)))
                .collect();
            if !via.is_empty() {
                write!(f, " (by {})", via.join(", "))?;
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

/// Every import circle of `tree`: between files, then between the children of each folder.
/// A circle between folders is reported only when a subfolder is part of it (between plain
/// files, it is one of the file level's).
pub fn circles(tree: &Tree) -> Vec<Circle> {
    let files = Graph::of(tree);
    let mut out = files.circles(Level::Files);
    let is_folder = |m: &ModPath| tree.children(m).next().is_some();
    let folders =
        std::iter::once(Vec::new()).chain(tree.modules.keys().filter(|m| is_folder(m)).cloned());
    for folder in folders {
        let level = files.between_children(&folder);
        out.extend(
            level
                .circles(Level::Folder(folder))
                .into_iter()
                .filter(|c| c.members.iter().any(is_folder)),
        );
    }
    out
}

/// Fails, listing every import circle, unless the tree at `dir` (a crate's `src/`) has none.
pub fn assert_acyclic(dir: &Path) {
    let tree = Tree::read(dir);
    assert!(
        tree.modules.len() > 1,
        "{}: no modules to check (a crate of one file has no circle)",
        dir.display()
    );
    let found = circles(&tree);
    if !found.is_empty() {
        let list: Vec<String> = found.iter().map(|c| format!("  {c}")).collect();
        panic!(
            "{} import circle(s) in {}:\n{}",
            found.len(),
            dir.display(),
            list.join("")
        );
    }
}
