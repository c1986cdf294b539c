//! The workspace's sources as data: a crate's tree read into modules ([`Tree`]), comments and
//! literals stripped ([`strip_comments`]), the paths each module names turned into a module
//! graph ([`Graph`]), and its import circles, between files and between folders ([`circles`],
//! [`assert_acyclic`]). The module-graph tests and the source-rule tests all read sources
//! through here.
//!
//! This folder keeps the rule it checks: `mod.rs` only declares and re-exports, and no module
//! below names it (`tests/source.rs` checks this crate's own tree).

mod graph;
mod lex;
mod paths;
mod tree;

pub use graph::{assert_acyclic, circles, Arrow, Circle, Graph, Level};
pub use lex::{strip_comments, strip_comments_and_literals};
pub use tree::{mod_path, rust_files, ModPath, Module, Tree};
