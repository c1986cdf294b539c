//! `core`'s modules depend on each other in one direction, between files and between folders:
//! no module reaches, through `crate::`, `super::`, `self::` or a child's name, back to a module
//! that reaches it (a folder's `mod.rs` included: it is the top of its folder, not also its
//! bottom). On failure every circle is listed, with the arrows that make it. The reader and the
//! cycle finder are `mcb_testkit::source`, whose own tests plant circles for it to find.

use std::path::Path;

#[test]
fn core_modules_have_no_cycle() {
    mcb_testkit::source::assert_acyclic(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}
