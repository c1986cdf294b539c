//! The committed `include/bucket_engine.h` is what cbindgen makes of `ffi/bucket-engine/src/lib.rs`,
//! and it compiles after our C declaration of the engine interface with warnings as errors.

use mcb_testkit::header::Header;
use std::path::Path;

const HEADER: Header = Header {
    crate_dir: env!("CARGO_MANIFEST_DIR"),
    name: "bucket_engine.h",
    package: "mcb-bucket-engine",
    prelude: "#include \"engine_abi.h\"\n",
};

#[test]
fn the_committed_header_is_current() {
    HEADER.assert_current();
}

#[test]
fn the_header_compiles_after_the_engine_interface() {
    HEADER.assert_compiles(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples-c/engine"));
}
