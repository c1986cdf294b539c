//! The source walker checks itself: it sees every spelling of a reference and no comment or
//! literal, finds a planted circle between files and one between folders, and reports each;
//! and this crate's own tree has none.

use mcb_testkit::source::{
    circles, mod_path, strip_comments, strip_comments_and_literals, Graph, Level, Tree,
};
use std::path::Path;

/// Every byte keeps its offset, every newline its place.
fn assert_aligned(text: &str, code: &str) {
    assert_eq!(code.len(), text.len(), "{code:?}");
    let newlines = |s: &str| s.match_indices('\n').map(|(i, _)| i).collect::<Vec<_>>();
    assert_eq!(newlines(code), newlines(text), "{code:?}");
}

#[test]
fn comments_go_and_lines_stay() {
    let text = "a // b\n/* c\n /* nested */ d */ e\n\"// f\" g /// h é\n";
    let code = strip_comments(text);
    assert_aligned(text, &code);
    assert_eq!(
        code.split_whitespace().collect::<Vec<_>>(),
        ["a", "e", "\"//", "f\"", "g"]
    );
}

#[test]
fn literals_go_for_the_import_reader() {
    let text = r####"x("crate::é") y(r#"super::b "quoted""#) z('"') w(b'\'') 'life: v<'a>"####;
    let code = strip_comments_and_literals(text);
    assert_aligned(text, &code);
    assert_eq!(
        code.split_whitespace().collect::<Vec<_>>(),
        ["x(\"", "\")", "y(r#\"", "\"#)", "z('", "')", "w(b'", "')", "'life:", "v<'a>"]
    );
    let escaped = strip_comments_and_literals(r#"p("\" // not a comment") q"#);
    assert_eq!(
        escaped.split_whitespace().collect::<Vec<_>>(),
        ["p(\"", "\")", "q"]
    );
}

/// The checker itself: it sees each spelling of a reference, and finds a circle when one is
/// there.
#[test]
fn the_checker_finds_cycles() {
    let acyclic = [
        ("a", "use crate::b::{self, x};\n// use crate::c;"),
        ("b", "use crate::c::Y;\nconst S: &str = \"crate::a\";"),
        ("c", "pub struct Y;"),
        ("p", "mod q;\nfn f() { q::g() }"),
        ("p::q", "pub fn g() { crate::c::Y; }"),
    ];
    let edges = Graph::of(&Tree::from_sources(&acyclic));
    assert!(circles(&Tree::from_sources(&acyclic)).is_empty());
    assert!(edges.has_arrow("a", "b"));
    assert!(!edges.has_arrow("a", "c"), "a comment is no reference");
    assert!(!edges.has_arrow("b", "a"), "a string is no reference");
    assert!(edges.has_arrow("p", "p::q"), "a child by its name");
    for (from, spelling) in [
        ("c", "use crate::a;"),
        ("c", "use crate::{a, b};"),
        ("c", "fn f() { crate::a::f() }"),
        ("p::q", "use super::super::a;"),
        ("p::q", "use super::f;"),
        ("p::q", "mod inner { use super::super::f; }"),
    ] {
        let mut cyclic = acyclic.to_vec();
        if from == "p::q" {
            cyclic.push(("a", "use crate::p::q;"));
            cyclic.retain(|(m, s)| *m != "a" || s.contains("p::q"));
        }
        cyclic.retain(|(m, _)| *m != from);
        cyclic.push((from, spelling));
        assert!(
            !circles(&Tree::from_sources(&cyclic)).is_empty(),
            "{from}: {spelling} closes no cycle"
        );
    }
}

#[test]
fn a_test_module_naming_its_file_is_no_circle() {
    let tree = Tree::from_sources(&[
        ("a", "mod b;\nuse b::B;"),
        (
            "a::b",
            "pub struct B;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}",
        ),
    ]);
    assert!(circles(&tree).is_empty(), "{:?}", circles(&tree));
    // Outside the test module, the same `super` is the parent.
    let tree = Tree::from_sources(&[("a", "use b::B;"), ("a::b", "use super::*;")]);
    assert_eq!(circles(&tree).len(), 1);
}

#[test]
fn the_cycle_finder_lists_every_circle() {
    let graph = Graph::from_arrows([
        ("a", "b"),
        ("b", "c"),
        ("c", "a"),
        ("c", "d"),
        ("x", "y"),
        ("y", "x"),
    ]);
    let found = graph.components();
    assert_eq!(
        found,
        [
            vec![mod_path("a"), mod_path("b"), mod_path("c")],
            vec![mod_path("x"), mod_path("y")],
        ]
    );
}

/// No two files name each other, but the folders do: `store::item` names `tiers::l2`, and
/// `tiers::cache` names `store::meta`.
#[test]
fn a_circle_between_folders_is_found() {
    let tree = Tree::from_sources(&[
        ("store", "mod item; mod meta;"),
        ("store::item", "use crate::tiers::l2::Node;"),
        ("store::meta", "pub struct Meta;"),
        ("tiers", "mod cache; mod l2;"),
        ("tiers::cache", "use crate::store::meta::Meta;"),
        ("tiers::l2", "pub struct Node;"),
        ("util", "pub fn f() {}"),
    ]);
    let found = circles(&tree);
    assert_eq!(found.len(), 1, "{found:?}");
    let circle = &found[0];
    assert_eq!(circle.level, Level::Folder(Vec::new()));
    assert_eq!(circle.members, [mod_path("store"), mod_path("tiers")]);
    let report = circle.to_string();
    assert!(
        report.contains("store -> tiers (by store::item -> tiers::l2)")
            && report.contains("tiers -> store (by tiers::cache -> store::meta)"),
        "{report}"
    );
}

#[test]
fn a_circle_through_a_folders_mod_rs_is_found() {
    // The top of the folder (its mod.rs builds from `calls`) is also its bottom.
    let tree = Tree::from_sources(&[
        (
            "engine",
            "mod calls;\npub fn table() { calls::get() }\npub fn instance() {}",
        ),
        (
            "engine::calls",
            "use super::instance;\npub fn get() { instance() }",
        ),
    ]);
    let found = circles(&tree);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].level, Level::Files);
    assert_eq!(
        found[0].shortest_loop,
        [
            mod_path("engine"),
            mod_path("engine::calls"),
            mod_path("engine")
        ]
    );
}

#[test]
fn this_crates_tree_has_no_circle() {
    mcb_testkit::source::assert_acyclic(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}
