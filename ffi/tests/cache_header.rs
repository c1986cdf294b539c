//! The committed C header of the cache tiers is what cbindgen makes of `ffi/src/cache.rs`, and
//! it compiles on its own with warnings as errors.

use std::path::{Path, PathBuf};
use std::process::Command;

fn ffi_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn header_path() -> PathBuf {
    ffi_dir().join("../include/mcb_cache.h")
}

fn generate() -> String {
    let config = cbindgen::Config::from_file(ffi_dir().join("cbindgen.toml")).expect("config");
    let mut out = Vec::new();
    cbindgen::Builder::new()
        .with_config(config)
        .with_src(ffi_dir().join("src/cache.rs"))
        .generate()
        .expect("cbindgen")
        .write(&mut out);
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn the_committed_header_is_current() {
    let fresh = generate();
    if std::env::var_os("MCB_BLESS_HEADER").is_some() {
        std::fs::write(header_path(), &fresh).expect("write header");
    }
    let committed = std::fs::read_to_string(header_path()).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/mcb_cache.h is stale; regenerate it with:\n    \
         MCB_BLESS_HEADER=1 cargo test -p mcb-ffi --test cache_header"
    );
}

#[test]
fn the_header_compiles_alone_with_warnings_as_errors() {
    let dir = std::env::temp_dir().join(format!("mcb_cache_header_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let source = dir.join("only_the_header.c");
    std::fs::write(
        &source,
        "#include \"mcb_cache.h\"\nint main(void) { return 0; }\n",
    )
    .expect("write");
    let status = Command::new("cc")
        .args([
            "-std=c11",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-fsyntax-only",
            "-I",
        ])
        .arg(ffi_dir().join("../include"))
        .arg(&source)
        .status()
        .expect("a C compiler (`cc`) is required to test the C header");
    assert!(status.success(), "the header does not compile alone");
    std::fs::remove_dir_all(&dir).ok();
}
