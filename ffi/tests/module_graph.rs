//! `ffi`'s modules depend on each other in one direction, between files and between folders:
//! no module reaches, through `crate::`, `super::`, `self::` or a child's name, back to a module
//! that reaches it. In particular each engine's `mod.rs` is the top of its folder (it builds the
//! engine's function table from the modules below) and never also its bottom: what every call
//! needs (the instance and its state) is a module of its own below the table. The reader and
//! the cycle finder are `mcb_testkit::source`, whose own tests plant circles for it to find.

use mcb_testkit::source::{assert_acyclic, Graph, Tree};
use std::path::Path;

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn ffi_modules_have_no_cycle() {
    assert_acyclic(&src());
}

#[test]
fn each_engines_mod_rs_is_the_top_of_its_folder() {
    let tree = Tree::read(&src());
    let graph = Graph::of(&tree);
    // The reader sees the imports at all (a test that finds no arrow proves nothing).
    assert!(
        graph.has_arrow("bucket_engine::calls", "bucket_engine::conn")
            && graph.has_arrow("bucket_engine::conn", "bucket_engine::host")
            && graph.has_arrow("bucket_engine", "bucket_engine::calls"),
        "the import reader missed known imports"
    );
    for top in ["bucket_engine", "storage"] {
        let up: Vec<String> = graph
            .arrows()
            .filter(|(from, to)| to.join("::") == top && from.first().is_some_and(|f| f == top))
            .map(|(from, _)| from.join("::"))
            .collect();
        assert!(
            up.is_empty(),
            "{top}/mod.rs is imported from below: {}",
            up.join(", ")
        );
    }
}
