//! What an operator who replaces memcached by mcb-memcached relies on beyond the transcript
//! (`tests/meta.rs`), on the default host (the bucket engine, the built-in storage engine as
//! the default bucket): items that counters create expire when the client said, and a SET
//! refused as too large leaves no older value behind, in the binary protocol too.

mod common;
use common::*;

/// A binary INCR/DECR's extras: delta, initial value, expiration.
fn arith(delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
    let mut e = delta.to_be_bytes().to_vec();
    e.extend_from_slice(&initial.to_be_bytes());
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

#[test]
fn a_counter_created_by_binary_incr_expires_when_the_client_said() {
    let s = Server::start(&[]);
    let mut c = s.binary();
    let mut ascii = s.ascii();
    for (opcode, key) in [(INCR, "bi"), (DECR, "bd")] {
        let r = c.call(opcode, &arith(1, 5, 90), key.as_bytes(), &[], 0);
        assert_eq!((r.status, r.value), (SUCCESS, 5u64.to_be_bytes().to_vec()));
        // 90 seconds from now, not 90 plus the server's uptime.
        assert_eq!(ascii.cmd(&format!("mg {key} t\r\n")), "HD t90", "{key}");
    }
    // Expiration 0: never.
    c.call(INCR, &arith(1, 5, 0), b"b0", &[], 0);
    assert_eq!(ascii.cmd("mg b0 t\r\n"), "HD t-1");
}

#[test]
fn a_binary_set_refused_as_too_large_unlinks_the_old_value() {
    let s = Server::start(&[]);
    let mut c = s.binary();
    let big = vec![b'x'; 2 << 20];
    for opcode in [SET, SETQ] {
        assert_eq!(c.set(b"k", b"old", 0).status, SUCCESS);
        c.send(&packet(opcode, &[0; 8], b"k", &big, 0));
        assert_eq!(c.recv().status, E2BIG, "{opcode:#x}");
        assert_eq!(c.get(b"k").status, KEY_ENOENT, "{opcode:#x}");
    }
    // ADD and REPLACE refused as too large leave the value, as memcached does.
    assert_eq!(c.set(b"k", b"old", 0).status, SUCCESS);
    for opcode in [ADD, REPLACE] {
        assert_eq!(c.call(opcode, &[0; 8], b"k", &big, 0).status, E2BIG);
        assert_eq!(c.get(b"k").value, b"old", "{opcode:#x}");
    }
}

/// A directory of its own for a test, removed on drop; world-writable, so that a server that
/// dropped root can write its pid file there.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("mcb-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Debian's /etc/memcached.conf, as its systemd wrapper hands it over (`-m 64 -p 11211 -u
/// memcache -l 127.0.0.1 -P /var/run/memcached/memcached.pid`), with values other than the
/// defaults so that each shows its meaning, and the -I and -c operators add to it.
#[test]
fn debian_memcached_conf_options_mean_what_they_mean_to_memcached() {
    let dir = TempDir::new("conf");
    let pid_file = dir.0.join("memcached.pid");
    let s = Server::start(&[
        "-m",
        "48",
        "-u",
        "nobody",
        "-l",
        "127.0.0.1",
        "-P",
        pid_file.to_str().unwrap(),
        "-I",
        "2m",
        "-c",
        "100",
    ]);
    let mut c = s.ascii();
    let stats = c.stats("");
    assert_eq!(
        stat_value(&stats, "limit_maxbytes"),
        Some("50331648"),
        "-m 48"
    );
    assert_eq!(stat_value(&stats, "max_connections"), Some("100"), "-c 100");
    let settings = c.stats("settings");
    for (name, value) in [
        ("maxbytes", "50331648"),
        ("item_size_max", "2097152"),
        ("maxconns", "100"),
        ("inter", "127.0.0.1"),
        ("evictions", "on"),
        ("cas_enabled", "yes"),
    ] {
        assert_eq!(
            stat_value(&settings, name),
            Some(value),
            "stats settings {name}"
        );
    }
    // -I 2m: a value over the default 1 MiB is stored.
    let big = vec![b'x'; 1_500_000];
    assert_eq!(s.binary().set(b"big", &big, 0).status, SUCCESS);
    // -P: the pid, as memcached writes it.
    let written = std::fs::read_to_string(&pid_file).expect("the pid file");
    assert_eq!(written, format!("{}\n", s.pid()));
    // -u: started as root, the server became nobody (its pid file too); otherwise -u does
    // nothing, as in memcached.
    // SAFETY: no preconditions; getpwnam's answer is read at once.
    let (root, nobody) = unsafe {
        let pw = libc::getpwnam(c"nobody".as_ptr())
            .as_ref()
            .expect("user nobody");
        (libc::geteuid() == 0, (pw.pw_uid, pw.pw_gid))
    };
    let uid = format!("Uid:\t{0}\t{0}\t{0}\t{0}", nobody.0);
    let gid = format!("Gid:\t{0}\t{0}\t{0}\t{0}", nobody.1);
    let status = std::fs::read_to_string(format!("/proc/{}/status", s.pid())).unwrap();
    if root {
        assert!(status.contains(&uid) && status.contains(&gid), "{status}");
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&pid_file).unwrap().uid(), nobody.0);
    } else {
        eprintln!("not run as root: the privilege drop of -u is not exercised");
    }
}

/// `-d`: the command returns once the server listens, the daemon's pid in its `-P` file; the
/// daemon serves, and removes its pid file when it stops.
#[test]
fn dash_d_returns_once_the_daemon_listens() {
    let dir = TempDir::new("daemon");
    let pid_file = dir.0.join("d.pid");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcb-memcached"))
        .args(["-d", "-p", "0", "-P", pid_file.to_str().unwrap()])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run mcb-memcached -d");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let line = String::from_utf8_lossy(&out.stdout);
    let port: u16 = line.trim().rsplit(':').next().unwrap().parse().unwrap();
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    c.set_read_timeout(Some(TIMEOUT)).unwrap();
    std::io::Write::write_all(&mut c, b"version\r\n").unwrap();
    let mut answer = [0u8; 8];
    std::io::Read::read_exact(&mut c, &mut answer).unwrap();
    assert_eq!(&answer, b"VERSION ");
    // SAFETY: kill(2) on the daemon's pid, which it wrote itself.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = std::time::Instant::now() + TIMEOUT;
    while pid_file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon kept running"
        );
        // A pause between polls only saves CPU: the loop ends on the file's removal.
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// `-Y`: an ASCII connection authenticates with a `set` of `user password` before anything
/// else, and then works in that user's own bucket (as a SASL user does).
#[test]
fn ascii_authentication_lands_users_in_their_buckets() {
    let dir = TempDir::new("auth");
    let file = dir.0.join("auth");
    std::fs::write(&file, "alice:apw\nbob:bpw\n").unwrap();
    let s = Server::start(&["-Y", file.to_str().unwrap()]);
    let mut anonymous = s.ascii();
    for command in ["get k\r\n", "version\r\n", "mg k v\r\n"] {
        assert_eq!(anonymous.cmd(command), "CLIENT_ERROR unauthenticated");
    }
    assert_eq!(
        anonymous.cmd("set x 0 0 9\r\nalice bad\r\n"),
        "CLIENT_ERROR authentication failure"
    );
    assert_eq!(
        anonymous.cmd("set x 0 0 9\r\nalice:apw\r\n"),
        "CLIENT_ERROR bad authentication token format"
    );
    let login = |user: &str, password: &str| {
        let mut c = s.ascii();
        let token = format!("{user} {password}");
        let set = format!("set x 0 0 {} noreply\r\n{token}\r\n", token.len());
        assert_eq!(
            c.cmd(&set),
            "STORED",
            "{user}: memcached answers even noreply"
        );
        c
    };
    let mut alice = login("alice", "apw");
    let mut bob = login("bob", "bpw");
    assert_eq!(alice.cmd("set k 0 0 5\r\nalice\r\n"), "STORED");
    assert_eq!(bob.cmd("get k\r\n"), "END", "bob's bucket is his own");
    assert_eq!(bob.cmd("set k 0 0 3\r\nbob\r\n"), "STORED");
    alice.send(b"get k\r\n");
    assert_eq!(
        (alice.line(), alice.line()),
        ("VALUE k 0 5".into(), "alice".into())
    );
    assert_eq!(alice.line(), "END");
    // The binary protocol is not asked to authenticate by -Y.
    assert_eq!(s.binary().get(b"k").status, KEY_ENOENT);

    // Each tenant's stats detail is its own: bob sees none of alice's key prefixes.
    assert_eq!(alice.cmd("stats detail on\r\n"), "OK");
    assert_eq!(alice.cmd("set user:1 0 0 1\r\nx\r\n"), "STORED");
    assert_eq!(alice.cmd("delete user:2\r\n"), "NOT_FOUND");
    assert_eq!(
        alice.cmd("stats detail dump\r\n"),
        "PREFIX user get 0 hit 0 set 1 del 1"
    );
    assert_eq!(alice.line(), "END");
    assert_eq!(bob.cmd("set user:1 0 0 1\r\nx\r\n"), "STORED");
    assert_eq!(bob.cmd("stats detail dump\r\n"), "END");
    // stats conns: every connection, the asking one running its command.
    let conns = alice.stats("conns");
    let states: Vec<&str> = conns
        .iter()
        .filter(|(k, _)| k.ends_with(":state"))
        .map(|(_, v)| v.as_str())
        .collect();
    assert_eq!(states.iter().filter(|s| **s == "conn_listening").count(), 1);
    assert_eq!(states.iter().filter(|s| **s == "conn_parse_cmd").count(), 1);
    assert!(states.len() >= 4, "{conns:?}");
    let addr = format!("tcp:127.0.0.1:{}", s.port);
    assert!(conns
        .iter()
        .any(|(k, v)| k.ends_with(":listen_addr") && *v == addr));
}

#[test]
fn dash_f_refuses_flush_all_and_dash_a_allows_shutdown() {
    let mut s = Server::start(&["-F", "-A"]);
    let mut c = s.ascii();
    assert_eq!(c.cmd("set k 0 0 1\r\nx\r\n"), "STORED");
    assert_eq!(c.cmd("flush_all\r\n"), "CLIENT_ERROR flush_all not allowed");
    // memcached 1.6 answers a binary flush AUTH_ERROR under -F.
    assert_eq!(s.binary().call(FLUSH, &[], &[], &[], 0).status, AUTH_ERROR);
    assert_eq!(c.cmd("get k\r\n"), "VALUE k 0 1");
    assert_eq!((c.line(), c.line()), ("x".into(), "END".into()));
    assert_eq!(
        c.cmd("shutdown now\r\n"),
        "CLIENT_ERROR invalid shutdown mode"
    );
    // The connection closes unanswered, then the server stops with status 0.
    assert_eq!(c.cmd("shutdown\r\n"), "");
    assert_eq!(s.wait(), Some(0));
}

#[test]
fn a_request_that_looks_like_http_closes_the_connection() {
    let s = Server::start(&[]);
    for request in ["GET / HTTP/1.0\r\n\r\n", "POST /x HTTP/1.1\r\n"] {
        let mut c = s.ascii();
        assert_eq!(c.cmd(request), "", "{request:?} is answered");
    }
    // Not a request line of HTTP: a get of two keys.
    assert_eq!(s.ascii().cmd("get / HTTP/1.1\r\n"), "END");
}
