//! Connections that stop making progress do not stay: a client that sends part of a value and
//! half-closes is closed at once (its slot, descriptor and half-filled item given back), in
//! both protocols and for values of 1 MB and 64 KB; and `-o idle_timeout` closes a connection
//! stuck in the middle of a value, as it closes one idle between requests.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// How many clients each case half-closes (issue 20's repro: 50).
const CLIENTS: usize = 50;

/// The server's `curr_connections`, as a probe connection (counted itself) reads it.
fn connections(probe: &mut Bin) -> u64 {
    probe
        .stats(b"")
        .into_iter()
        .find(|(k, _)| k == "curr_connections")
        .and_then(|(_, v)| v.parse().ok())
        .expect("curr_connections")
}

/// The first part of a SET of `size` bytes: its header and half its value.
fn partial_set(binary: bool, key: &str, size: usize) -> Vec<u8> {
    let half = vec![b'v'; size / 2];
    if binary {
        let mut p = packet(SET, &[0; 8], key.as_bytes(), &vec![b'v'; size], 0);
        p.truncate(p.len() - (size - half.len()));
        p
    } else {
        let mut p = format!("set {key} 0 0 {size}\r\n").into_bytes();
        p.extend_from_slice(&half);
        p
    }
}

/// `CLIENTS` clients each send part of a SET of `size` bytes and half-close; the server must
/// close every one of them (each client then reads the end of its stream).
fn half_close_partial_sets(s: &Server, binary: bool, size: usize) {
    let mut probe = s.binary();
    let mut clients: Vec<TcpStream> = (0..CLIENTS)
        .map(|i| {
            let mut c = s.connect();
            c.write_all(&partial_set(binary, &format!("p{i}"), size))
                .expect("send");
            c.shutdown(Shutdown::Write).expect("half-close");
            c
        })
        .collect();
    let what = format!(
        "{} SETs of {size} bytes",
        if binary { "binary" } else { "ASCII" }
    );
    // Each client reads its end of stream (the server closed it), or its read times out
    // (all of them by one deadline).
    let start = Instant::now();
    let mut stuck = 0;
    for c in &mut clients {
        let left = TIMEOUT.saturating_sub(start.elapsed());
        c.set_read_timeout(Some(left.max(Duration::from_millis(1))))
            .expect("timeout");
        let mut rest = Vec::new();
        stuck += usize::from(c.read_to_end(&mut rest).is_err());
        assert!(rest.is_empty(), "an answer to a partial SET: {rest:?}");
    }
    assert_eq!(
        stuck, 0,
        "{stuck} of {CLIENTS} half-closed {what} never closed"
    );
    eprintln!(
        "{CLIENTS} half-closed {what}: all closed within {:?}",
        start.elapsed()
    );
    // The server closes a socket after counting it out: only the probe is left.
    assert_eq!(connections(&mut probe), 1, "after {what}");
    // Nothing of the half-sent values was stored.
    assert_eq!(probe.get(b"p0").status, KEY_ENOENT);
}

#[test]
fn half_closed_partial_sets_are_closed_at_once() {
    let s = Server::start(&[]);
    for binary in [false, true] {
        for size in [1_000_000, 64 * 1024] {
            half_close_partial_sets(&s, binary, size);
        }
    }
}

#[test]
fn idle_timeout_closes_a_connection_stuck_in_a_value() {
    let s = Server::start(&["-o", "idle_timeout=1"]);
    for binary in [false, true] {
        let mut c = s.connect();
        c.write_all(&partial_set(binary, "stuck", 64 * 1024))
            .expect("send");
        let start = Instant::now();
        // The server closes it: the read sees the end (before the client's own timeout).
        let mut rest = Vec::new();
        c.read_to_end(&mut rest).expect("closed by the server");
        assert!(rest.is_empty(), "{rest:?}");
        let took = start.elapsed();
        assert!(took >= Duration::from_secs(1), "closed after {took:?}");
        assert!(took < TIMEOUT, "closed after {took:?}");
    }
    // A connection that sends its value slowly, for longer than the timeout in all but never
    // pausing that long, is making progress: it stays and its SET is stored.
    let mut c = s.ascii();
    c.send(b"set slow 0 0 4\r\n");
    for part in [&b"a"[..], b"b", b"c", b"d\r\n"] {
        std::thread::sleep(Duration::from_millis(600));
        c.send(part);
    }
    assert_eq!(c.line(), "STORED");
}
