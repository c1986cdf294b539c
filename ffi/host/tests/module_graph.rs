//! The host's modules depend on each other in one direction: no module reaches, through
//! `crate::`, `super::`, `self::` or a child's name, back to a module that reaches it, and no
//! folder (`api/`) reaches back to a module that reaches into it. The reader and the cycle
//! finder are `mcb_testkit::source`, whose own tests plant circles for it to find.

use std::path::Path;

#[test]
fn host_modules_have_no_cycle() {
    mcb_testkit::source::assert_acyclic(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}
