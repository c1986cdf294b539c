//! The committed C header of the cache tiers is what cbindgen makes of `ffi/cache/src/lib.rs`,
//! and it compiles on its own with warnings as errors.

use mcb_testkit::header::Header;

const HEADER: Header = Header {
    crate_dir: env!("CARGO_MANIFEST_DIR"),
    name: "mcb_cache.h",
    package: "mcb-cache",
    prelude: "",
};

#[test]
fn the_committed_header_is_current() {
    HEADER.assert_current();
}

#[test]
fn the_header_compiles_alone_with_warnings_as_errors() {
    HEADER.assert_compiles(std::path::Path::new(env!("CARGO_MANIFEST_DIR")));
}
