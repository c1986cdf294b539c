//! Builds `src/logger.c`: the logger extension's `log` slot is a C variadic function
//! (printf-style), which stable Rust can call but not define. The C side formats the message
//! with `vsnprintf` and hands the text to Rust.
//!
//! Also records the default engine: the `libbucket_engine.so` this same cargo invocation builds
//! as our dependency, in `<target>/<profile>/deps/` (cargo's layout: `OUT_DIR` is
//! `<target>/<profile>/build/mcb-host-<hash>/out`). The path is compiled in as
//! `MCB_BUCKET_ENGINE`, so the default is one exact file, not a guess.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=src/logger.c");
    cc::Build::new()
        .file("src/logger.c")
        .flag_if_supported("-std=c11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("mcb_host_logger");

    let out_dir = std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    let profile_dir = Path::new(&out_dir)
        .ancestors()
        .nth(3)
        .expect("OUT_DIR is <target>/<profile>/build/<pkg>/out");
    let engine = profile_dir.join("deps").join("libbucket_engine.so");
    let engine = engine.to_str().expect("a UTF-8 target directory");
    println!("cargo:rustc-env=MCB_BUCKET_ENGINE={engine}");
}
