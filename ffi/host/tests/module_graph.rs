//! The host's modules depend on each other in one direction: no module reaches, through
//! `crate::`, `super::`, `self::` or a child's name, back to a module that reaches it, and no
//! folder (`api/`, `ascii/`) reaches back to a module that reaches into it. Within that order,
//! the protocols are layered as Pelikan's are: the ASCII parser turns bytes into a command and
//! names nothing that reaches the engine, the executors run commands, the composer words their
//! results without an engine call, and the engine transport (`ext`) knows no protocol. The
//! protocol files hold no `unsafe` (each denies it), and the files that do are a fixed list, so
//! that a new one is a deliberate change here. The reader and the cycle finder are
//! `mcb_testkit::source`, whose own tests plant circles for it to find.

use mcb_testkit::source::{strip_comments_and_literals, Graph, ModPath, Tree};
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn host_modules_have_no_cycle() {
    mcb_testkit::source::assert_acyclic(&src());
}

/// The modules `from` names.
fn named_by(graph: &Graph, from: &str) -> Vec<String> {
    let from: ModPath = mcb_testkit::source::mod_path(from);
    graph
        .arrows()
        .filter(|(f, _)| **f == from)
        .map(|(_, to)| to.join("::"))
        .collect()
}

#[test]
fn the_ascii_protocol_reads_as_parse_execute_compose() {
    let graph = Graph::of(&Tree::read(&src()));
    // The reader sees the layers' imports at all (a test that finds no arrow proves nothing).
    assert!(
        graph.has_arrow("ascii", "ascii::parse")
            && graph.has_arrow("ascii", "ascii::execute")
            && graph.has_arrow("ascii", "ascii::compose")
            && graph.has_arrow("ascii::execute", "ascii::parse")
            && graph.has_arrow("ascii::compose", "ascii::execute")
            && graph.has_arrow("ascii::execute", "engine")
            && graph.has_arrow("ascii::meta", "ext"),
        "the import reader missed known imports"
    );
    // Parse: bytes to a command. It may read numbers and words (text) and know the protocol's
    // limits (codec), nothing that holds a connection or reaches the engine.
    let parse = named_by(&graph, "ascii::parse");
    let allowed = ["codec", "text"];
    let extra: Vec<&String> = parse
        .iter()
        .filter(|m| !allowed.contains(&m.as_str()))
        .collect();
    assert!(
        extra.is_empty(),
        "ascii/parse.rs names {extra:?}: the parser names only {allowed:?}"
    );
    // Compose: words what was found; no engine call, no engine transport, no cookie.
    for module in ["ascii::compose"] {
        let names = named_by(&graph, module);
        for engine_side in ["engine", "ext", "conn", "packet", "server_handle"] {
            assert!(
                !names.iter().any(|n| n == engine_side),
                "{module} names {engine_side}: the composer makes no engine call"
            );
        }
    }
    // The executors hand their results up to the composer, never the other way.
    for executor in ["ascii::execute", "ascii::meta"] {
        assert!(
            !graph.has_arrow(executor, "ascii::compose") && !graph.has_arrow(executor, "ascii"),
            "{executor} names the composer or the state machine"
        );
    }
    // The engine transport serves both protocols and knows neither.
    let ext = named_by(&graph, "ext");
    assert!(
        ext.iter()
            .all(|m| m != "binary" && m != "ascii" && !m.starts_with("ascii::")),
        "ext names a protocol: {ext:?}"
    );
}

/// Whether `code` (comments and literals stripped) uses the `unsafe` keyword.
fn uses_unsafe(code: &str) -> bool {
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .any(|word| word == "unsafe")
}

#[test]
fn the_protocols_hold_no_unsafe() {
    let tree = Tree::read(&src());
    let protocol = |m: &str| {
        m == "ascii"
            || m.starts_with("ascii::")
            || [
                "binary", "codec", "ext", "io", "session", "stats", "text", "worker",
            ]
            .contains(&m)
    };
    // Where `unsafe` may be: the C boundary (the server API tables, cookies, the engine's
    // calls, packets handed to it), the process calls and the command line's entry point.
    let inventory = [
        "api::callback",
        "api::extension",
        "api::hooks",
        "api::log",
        "api::logger",
        "api::server_core",
        "api::stat",
        "config",
        "conn",
        "engine",
        "main",
        "packet",
        "process",
        "server",
        "server_handle",
    ];
    let mut protocols = 0;
    let mut with_unsafe = Vec::new();
    for module in tree.files() {
        let rel = module.file.strip_prefix(src()).expect("under src");
        let name = rel
            .with_extension("")
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .filter(|c| c != "mod")
            .collect::<Vec<_>>()
            .join("::");
        let code = strip_comments_and_literals(&module.text);
        if uses_unsafe(&code) {
            with_unsafe.push(name.clone());
        }
        if protocol(&name) {
            protocols += 1;
            assert!(
                module.text.contains("#![deny(unsafe_code)]"),
                "{} does not deny unsafe code",
                rel.display()
            );
        }
    }
    assert!(protocols >= 11, "found only {protocols} protocol files");
    with_unsafe.sort();
    assert_eq!(
        with_unsafe, inventory,
        "the files holding `unsafe` changed: protocol files must not, and a new boundary file \
         belongs in this test's inventory"
    );
}

#[test]
fn the_unsafe_reader_sees_the_keyword() {
    assert!(uses_unsafe("fn f() { unsafe { g() } }"));
    assert!(!uses_unsafe("#![deny(unsafe_code)] fn unsafely() {}"));
}
