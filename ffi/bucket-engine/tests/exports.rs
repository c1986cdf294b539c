//! `libbucket_engine.so` exports exactly what memcached looks up, `create_instance`, and our
//! host's end of turn (`mcb_end_turn`: `mcb_abi::meta_ext::END_TURN_SYMBOL`), and nothing else
//! that could clash with the host or another engine.

use mcb_testkit::shared_lib::exported_functions;

#[test]
fn only_create_instance_and_the_end_of_turn_are_exported() {
    // The library cargo built for this test run, next to this test binary in target/<profile>/deps
    // (the copy in target/<profile> is only refreshed by `cargo build`).
    let exe = std::env::current_exe().expect("test binary path");
    let lib = exe.with_file_name("libbucket_engine.so");
    assert!(lib.exists(), "{} was not built", lib.display());
    assert_eq!(
        exported_functions(&lib),
        ["create_instance", "mcb_end_turn"],
        "exported functions of {}",
        lib.display()
    );
}
