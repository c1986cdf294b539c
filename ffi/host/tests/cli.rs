//! The command line: bad options and engines that fail to load end the process with a clear
//! message and a non-zero status; signals stop it with status 0; `-s`, `-B` and
//! `-o idle_timeout` do what memcached's do.

mod common;
use common::*;

#[test]
fn bad_options_exit_with_status_2() {
    for args in [&["-p", "notaport"][..], &["-x"], &["-c", "0"], &["-E"]] {
        let (code, stderr) = run_to_exit(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("-h lists the options"),
            "{args:?}: {stderr}"
        );
    }
    let (code, _) = run_to_exit(&["--help"]);
    assert_eq!(code, Some(0));
}

/// Options memcached has but that cannot mean here what they mean there are refused with the
/// reason; so are engine settings given both ways.
#[test]
fn options_that_cannot_mean_what_they_say_are_refused() {
    for (args, why) in [
        (&["-U", "11211"][..], "UDP is not supported"),
        (&["-S", "-B", "ascii"], "ASCII protocol while using SASL"),
        (&["-Z"], "TLS is not supported"),
        (&["-o", "ext_path=/tmp/x:64m"], "extstore"),
        (&["-o", "nosuchkey"], "unknown -o option"),
        (&["--memory-file=/dev/shm/x"], "restartable cache"),
        (&["-e", "/dev/shm/x"], "-e is the engine configuration"),
    ] {
        let (code, stderr) = run_to_exit(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
    let config = r"engine=builtin;default=true;default_bucket_config=cache_size\=1m";
    let (code, stderr) = run_to_exit(&["-p", "0", "-m", "32", "-e", config]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("cache_size is given twice"), "{stderr}");
    // Accepted and ignored, with the reason in -h.
    let (code, _) = run_to_exit(&["-o", "hashpower=20,lru_crawler", "-h"]);
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

#[test]
fn dash_s_without_a_password_file_refuses_to_start() {
    let engine = test_engine().to_str().unwrap();
    let (code, stderr) = run_to_exit(&["-p", "0", "-E", engine, "-S"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("-S requires a SASL password file"),
        "{stderr}"
    );
}

#[test]
fn sigterm_finishes_requests_in_flight_destroys_the_engine_and_exits_0() {
    let engine = test_engine().to_str().unwrap();
    let mut s = Server::spawn(&["-E", engine, "-v"], &[], std::process::Stdio::piped());
    let mut parked = s.binary();
    let mut other = s.binary();
    // In flight at the signal: a parked request, and a SET whose value is half sent.
    parked.send(&packet(0xe1, &[], &[], b"wait", 0));
    other.wait_for_stat("async_pending", "1");
    let mut extras = 0u32.to_be_bytes().to_vec();
    extras.extend_from_slice(&0u32.to_be_bytes());
    let set = packet(SET, &extras, b"k", b"0123456789", 0);
    other.send(&set[..set.len() - 5]);
    s.signal(libc::SIGTERM);
    // Once the listener is gone, the rest of the SET and the GATE that completes the parked
    // request arrive: both requests are answered.
    let deadline = std::time::Instant::now() + TIMEOUT;
    while std::net::TcpStream::connect(("127.0.0.1", s.port)).is_ok() {
        assert!(std::time::Instant::now() < deadline, "still accepting");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let mut rest = set[set.len() - 5..].to_vec();
    rest.extend_from_slice(&packet(0xe2, &[], &[], &[], 0));
    other.send(&rest);
    assert_eq!(other.recv().status, SUCCESS, "the SET");
    assert_eq!(other.recv().status, SUCCESS, "the GATE");
    let done = parked.recv();
    assert_eq!(
        (done.opcode, done.value.as_slice()),
        (0xe1, &b"async done"[..])
    );
    // Then the idle connections are closed, the engine destroyed, and the status is 0.
    assert!(other.try_recv().is_none());
    assert_eq!(s.wait(), Some(0));
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut s.take_stderr().unwrap(), &mut stderr).unwrap();
    assert!(stderr.contains("the engine is destroyed"), "{stderr}");
}

#[test]
fn sigint_stops_an_idle_server_with_status_0() {
    let engine = test_engine().to_str().unwrap();
    let mut s = Server::start(&["-E", engine]);
    let _idle = s.binary();
    s.signal(libc::SIGINT);
    assert_eq!(s.wait(), Some(0));
}

#[test]
fn a_unix_socket_serves_with_dash_s() {
    use std::io::{BufRead, BufReader, Write};
    let path = std::env::temp_dir().join(format!("mcb-host-{}.sock", std::process::id()));
    let engine = test_engine().to_str().unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_mcb-memcached"))
        .args(["-E", engine, "-s"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains(&format!("unix:{}", path.display())), "{line}");
    let mut c = std::os::unix::net::UnixStream::connect(&path).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    c.write_all(b"set k 0 0 1\r\nx\r\nget k\r\n").unwrap();
    let mut r = BufReader::new(c);
    let mut reply = Vec::new();
    for _ in 0..4 {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        reply.push(l.trim_end().to_owned());
    }
    assert_eq!(reply, ["STORED", "VALUE k 0 1", "x", "END"]);
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&path);
}

#[test]
fn dash_b_restricts_the_protocol_and_idle_timeout_closes_idle_connections() {
    let engine = test_engine().to_str().unwrap();
    let s = Server::start(&["-E", engine, "-B", "binary", "-o", "idle_timeout=1"]);
    let mut ascii = s.ascii();
    ascii.send(b"version\r\n");
    assert_eq!(
        ascii.line(),
        "",
        "an ASCII client is closed under -B binary"
    );
    let mut c = s.binary();
    assert_eq!(c.call(NOOP, &[], &[], &[], 0).status, SUCCESS);
    // Idle past the timeout: the server closes the connection (the read sees the end).
    assert!(c.try_recv().is_none());
}
