//! `core` reaches shared-state primitives, threads and time only through `crate::sync`, so that
//! loom can stand in for std in the models. (A clippy `disallowed-types` rule cannot say this for
//! types: it sees through the shim's re-exports and flags the shim's own users. core/clippy.toml
//! does forbid the functions the shim wraps.)

use mcb_testkit::source::Tree;
use std::path::Path;

const FORBIDDEN: &[&str] = &[
    "std::sync",
    "std::thread",
    "Instant::now",
    "std::cell::UnsafeCell",
    "parking_lot",
];

#[test]
fn only_the_shim_touches_std_sync() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let shim = src.join("sync");
    let tree = Tree::read(&src);
    assert!(
        tree.files().count() > 5,
        "found too few sources under {}",
        src.display()
    );
    // Code only: comments may name what the code must not use.
    let offenders: Vec<String> = tree
        .files()
        .filter(|m| !m.file.starts_with(&shim))
        .flat_map(|m| {
            m.code
                .lines()
                .enumerate()
                .filter(|(_, line)| FORBIDDEN.iter().any(|p| line.contains(p)))
                .map(|(n, line)| format!("{}:{}: {}", m.file.display(), n + 1, line.trim()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        offenders.is_empty(),
        "use crate::sync instead:\n{}",
        offenders.join("\n")
    );
}
