//! A crate's source tree as modules: each `.rs` file below a directory, named by its path from
//! the crate root, with its text and its code (comments stripped).

use super::lex::strip_comments;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A module's path from its crate root, e.g. `["api", "log"]` (`[]`: the crate root).
pub type ModPath = Vec<String>;

/// `"api::log"` as a [`ModPath`] (`""`: the crate root).
pub fn mod_path(spelled: &str) -> ModPath {
    spelled
        .split("::")
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// One source file.
#[derive(Debug, Clone)]
pub struct Module {
    /// Its file (as given to [`Tree::from_sources`] for a tree made in memory).
    pub file: PathBuf,
    /// The file as written.
    pub text: String,
    /// The file without its comments, line for line (see [`strip_comments`]).
    pub code: String,
}

impl Module {
    fn new(file: PathBuf, text: String) -> Module {
        let code = strip_comments(&text);
        Module { file, text, code }
    }
}

/// The modules of a source tree, by path, and its crate roots.
#[derive(Debug, Clone)]
pub struct Tree {
    /// Where the tree was read from (for messages).
    pub dir: PathBuf,
    /// Its modules.
    pub modules: BTreeMap<ModPath, Module>,
    /// `lib.rs` and `main.rs`: they declare the modules, and are none of the graph's (a name
    /// they define is `crate::NAME`, which no module's path starts with).
    pub roots: Vec<Module>,
}

impl Tree {
    /// The tree at `dir`, a crate's `src/`.
    pub fn read(dir: &Path) -> Tree {
        let (mut modules, mut roots) = (BTreeMap::new(), Vec::new());
        for file in rust_files(dir) {
            let rel = file
                .strip_prefix(dir)
                .expect("under dir")
                .with_extension("");
            let mut module: ModPath = rel
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            if module.last().is_some_and(|l| l == "mod") {
                module.pop();
            }
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            if module.len() == 1 && matches!(module[0].as_str(), "lib" | "main") {
                roots.push(Module::new(file, text));
            } else {
                modules.insert(module, Module::new(file, text));
            }
        }
        Tree {
            dir: dir.to_path_buf(),
            modules,
            roots,
        }
    }

    /// A tree made in memory: `("a::b", source)` for each module (for checking the checkers).
    pub fn from_sources(sources: &[(&str, &str)]) -> Tree {
        let modules = sources
            .iter()
            .map(|(path, text)| {
                let module = Module::new(PathBuf::from(path), text.to_string());
                (mod_path(path), module)
            })
            .collect();
        Tree {
            dir: PathBuf::from("(in memory)"),
            modules,
            roots: Vec::new(),
        }
    }

    /// Every file of the tree: its crate roots, then its modules.
    pub fn files(&self) -> impl Iterator<Item = &Module> {
        self.roots.iter().chain(self.modules.values())
    }

    /// The names of `module`'s child modules.
    pub fn children<'a>(&'a self, module: &'a [String]) -> impl Iterator<Item = &'a String> + 'a {
        self.modules
            .keys()
            .filter(move |m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(move |m| &m[module.len()])
    }
}

/// The `.rs` files below `dir`, sorted, leaving out build output (`target/`) and hidden
/// directories.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}
