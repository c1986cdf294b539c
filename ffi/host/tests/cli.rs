//! The command line: bad options and engines that fail to load end the process with a clear
//! message and a non-zero status.

mod common;
use common::*;

#[test]
fn bad_options_exit_with_status_2() {
    for args in [&["-p", "notaport"][..], &["-x"], &["-c", "0"], &["-E"]] {
        let (code, stderr) = run_to_exit(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("usage:"), "{args:?}: {stderr}");
    }
    let (code, _) = run_to_exit(&["--help"]);
    assert_eq!(code, Some(0));
}

#[test]
fn engines_that_fail_exit_with_status_1() {
    let (code, stderr) = run_to_exit(&["-p", "0", "-E", "/nonexistent/libnothing.so"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("failed to open engine library"), "{stderr}");
    // A library without create_instance.
    let libc_path = "libc.so.6";
    let (code, stderr) = run_to_exit(&["-p", "0", "-E", libc_path]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("create_instance"), "{stderr}");
    // An engine whose initialize refuses its configuration.
    let engine = test_engine().to_str().unwrap();
    let (code, stderr) = run_to_exit(&["-p", "0", "-E", engine, "-e", "no_such_key=1"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("failed to initialize"), "{stderr}");
    // A password file that cannot be read.
    let (code, stderr) = run_to_exit(&["-p", "0", "-E", engine, "--sasl-pwdb", "/nonexistent/pw"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("SASL password file"), "{stderr}");
}
