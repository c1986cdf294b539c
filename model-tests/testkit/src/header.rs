//! The header tests of the cdylib crates under ffi/: the committed header in `include/` must be
//! exactly what cbindgen makes of the crate's source, and must compile with warnings as errors.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One crate's generated header.
#[derive(Debug)]
pub struct Header {
    /// The crate's directory (its `CARGO_MANIFEST_DIR`).
    pub crate_dir: &'static str,
    /// The header's file name in `include/`.
    pub name: &'static str,
    /// The crate's package name, for the regenerate command.
    pub package: &'static str,
    /// What a C file includes before the header (the header's own prerequisites).
    pub prelude: &'static str,
}

impl Header {
    fn include_dir(&self) -> PathBuf {
        Path::new(self.crate_dir).join("../../include")
    }

    fn generate(&self) -> String {
        let dir = Path::new(self.crate_dir);
        let config = cbindgen::Config::from_file(dir.join("cbindgen.toml")).expect("config");
        let mut out = Vec::new();
        cbindgen::Builder::new()
            .with_config(config)
            .with_src(dir.join("src/lib.rs"))
            .generate()
            .expect("cbindgen")
            .write(&mut out);
        String::from_utf8(out).expect("utf-8")
    }

    /// Fails when the committed header differs from a fresh one (MCB_BLESS_HEADER=1 rewrites it).
    pub fn assert_current(&self) {
        let fresh = self.generate();
        let path = self.include_dir().join(self.name);
        if std::env::var_os("MCB_BLESS_HEADER").is_some() {
            std::fs::write(&path, &fresh).expect("write header");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == fresh,
            "include/{} is stale; regenerate it with:\n    \
             MCB_BLESS_HEADER=1 cargo test -p {} --test header",
            self.name,
            self.package
        );
    }

    /// Compiles a C file including the prelude and the header, with warnings as errors.
    pub fn assert_compiles(&self, extra_include: &Path) {
        let dir = std::env::temp_dir().join(format!(
            "mcb_header_{}_{}",
            self.package,
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let source = dir.join("only_the_header.c");
        let text = format!(
            "{}#include \"{}\"\nint main(void) {{ return 0; }}\n",
            self.prelude, self.name
        );
        std::fs::write(&source, text).expect("write");
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
            .arg(self.include_dir())
            .arg("-I")
            .arg(extra_include)
            .arg(&source)
            .status()
            .expect("a C compiler (`cc`) is required to test the C header");
        assert!(status.success(), "include/{} does not compile", self.name);
        std::fs::remove_dir_all(&dir).ok();
    }
}
