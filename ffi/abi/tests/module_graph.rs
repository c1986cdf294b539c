//! The ABI mirrors' modules depend on each other in one direction (between files and between
//! folders), as the headers they mirror include each other. The reader and the cycle finder
//! are `mcb_testkit::source`, whose own tests plant circles for it to find.

use std::path::Path;

#[test]
fn abi_modules_have_no_cycle() {
    mcb_testkit::source::assert_acyclic(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
}
