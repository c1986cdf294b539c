//! Builds `src/logger.c`: the logger extension's `log` slot is a C variadic function
//! (printf-style), which stable Rust can call but not define. The C side formats the message
//! with `vsnprintf` and hands the text to Rust.

fn main() {
    println!("cargo:rerun-if-changed=src/logger.c");
    cc::Build::new()
        .file("src/logger.c")
        .flag_if_supported("-std=c11")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .compile("mcb_host_logger");
}
