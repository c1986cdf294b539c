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
    assert!(stderr.contains("Failed to open library"), "{stderr}");
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

#[test]
fn engines_log_through_the_stderr_logger() {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Command, Stdio};
    let engine = test_engine().to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcb-memcached"))
        .args([
            "-p",
            "0",
            "-v",
            "-E",
            engine,
            "-e",
            "verbose=true;name=logged",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mcb-memcached");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(
        line.starts_with("mcb-memcached listening on 127.0.0.1:"),
        "{line}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(
        stderr.contains("[info] test engine logged: cache_size=67108864"),
        "{stderr}"
    );
}

/// The host knows engines through mcb-abi alone: nothing of our engines or of mcb-core is linked
/// into it (the mcb-bucket-engine dependency only makes cargo build the default engine), as
/// memcached knows engines only through the header.
#[test]
fn the_host_links_no_engine_code() {
    let binary = std::fs::read(env!("CARGO_BIN_EXE_mcb-memcached")).expect("read the binary");
    for crate_name in ["mcb_ffi", "mcb_core"] {
        let linked = binary
            .windows(crate_name.len())
            .any(|w| w == crate_name.as_bytes());
        assert!(!linked, "mcb-memcached contains {crate_name} symbols");
    }
}
