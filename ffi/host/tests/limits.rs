//! The attacker's inputs of issue 10, measured on the server process (`/proc/PID/status`):
//! a multi-get naming a 1 MB value 1,000 times streams (RSS stays within 64 MB of what the
//! cache holds), 100 binary headers declaring 1 MiB bodies that never come allocate nothing
//! for them, and 5,000 idle connections cost at most 16 KiB each and no threads.

mod common;
use common::*;
use std::io::{Read, Write};

const MB: u64 = 1 << 20;

fn server(extra: &[&str]) -> Server {
    let engine = test_engine().to_str().unwrap().to_owned();
    let mut args = vec!["-E", &engine, "-e", "cache_size=64m"];
    args.extend_from_slice(extra);
    Server::start(&args)
}

#[test]
fn a_multi_get_of_a_gigabyte_streams() {
    let s = server(&[]);
    let value = vec![b'v'; 1_000_000];
    assert_eq!(s.binary().set(b"big", &value, 0).status, SUCCESS);
    let before = s.rss();
    let mut c = s.connect();
    let mut request = b"get".to_vec();
    for _ in 0..1000 {
        request.extend_from_slice(b" big");
    }
    request.extend_from_slice(b"\r\n");
    c.write_all(&request).unwrap();
    // Read the whole reply (1,000 values), sampling the server's RSS as it streams.
    let header = b"VALUE big 0 1000000\r\n";
    let expected = 1000 * (header.len() + value.len() + 2) + b"END\r\n".len();
    let mut buf = vec![0u8; 1 << 16];
    let (mut got, mut peak, mut next_sample) = (0usize, before, 0usize);
    let mut tail = Vec::new();
    while got < expected {
        let n = c.read(&mut buf).expect("read the reply");
        assert!(n > 0, "the server closed after {got} of {expected} bytes");
        got += n;
        tail.extend_from_slice(&buf[..n]);
        let keep = tail.len().saturating_sub(8);
        tail.drain(..keep);
        if got >= next_sample {
            peak = peak.max(s.rss());
            next_sample += 16 << 20;
        }
    }
    assert_eq!(got, expected);
    assert!(tail.ends_with(b"END\r\n"));
    let grew = peak.saturating_sub(before);
    eprintln!(
        "multi-get of 1,000 x 1 MB: RSS {} KiB before, peak +{} KiB",
        before / 1024,
        grew / 1024
    );
    assert!(grew <= 64 * MB, "RSS grew by {} MB", grew / MB);
}

#[test]
fn headers_declaring_bodies_that_never_come_cost_nothing() {
    // One worker: the probe's second round trip below comes after it handled every event
    // of the headers (they were readable before the probe's first request was sent).
    let s = server(&["-t", "1"]);
    let mut probe = s.binary();
    assert_eq!(probe.call(NOOP, &[], &[], &[], 0).status, SUCCESS);
    let before = s.rss();
    let mut conns = Vec::new();
    for i in 0..100u32 {
        // Alternately a packet read whole (an unknown opcode) and a storage command, each
        // declaring a 1 MiB body, then nothing more.
        // (The SET's header alone: its extras and key, which it declares, never come either.)
        let mut header = if i % 2 == 0 {
            packet(0xee, &[], &[], &[], 0)
        } else {
            packet(SET, &[0; 8], b"k", &[], 0)[..24].to_vec()
        };
        header[8..12].copy_from_slice(&(1u32 << 20).to_be_bytes());
        let mut c = s.binary();
        c.send(&header);
        conns.push(c);
    }
    probe.wait_for_stat("curr_connections", "101");
    for _ in 0..2 {
        assert_eq!(probe.call(NOOP, &[], &[], &[], 0).status, SUCCESS);
    }
    let grew = s.rss().saturating_sub(before);
    eprintln!("100 unfinished 1 MiB headers: RSS +{} KiB", grew / 1024);
    assert!(grew <= 10 * MB, "RSS grew by {} KiB", grew / 1024);
}

/// Raises this process's descriptor limit to `want` if the hard limit allows; what it is.
fn raise_nofile(want: u64) -> u64 {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a live out-parameter.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) }, 0);
    if l.rlim_cur < want {
        l.rlim_cur = want.min(l.rlim_max);
        // SAFETY: a live in-parameter.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) }, 0);
    }
    l.rlim_cur
}

#[test]
fn idle_connections_cost_little_memory_and_no_threads() {
    // 5,000 connections where the descriptor limit allows (each needs one here and one in
    // the server); fewer, said on stderr, where it does not.
    let limit = raise_nofile(5_000 + 200);
    let n = 5_000.min(limit.saturating_sub(200)) as usize;
    if n < 5_000 {
        eprintln!("RLIMIT_NOFILE allows only {limit} descriptors: measuring {n} connections");
    }
    assert!(n >= 1_000, "too few descriptors ({limit}) to measure");
    let s = server(&["-t", "4", "-c", "6000"]);
    let mut probe = s.binary();
    assert_eq!(probe.call(NOOP, &[], &[], &[], 0).status, SUCCESS);
    let before = s.rss();
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        // Each connection has served a request (its buffers were used), then idles.
        let mut c = s.ascii();
        assert!(c.cmd("version\r\n").starts_with("VERSION "));
        conns.push(c);
    }
    probe.wait_for_stat("curr_connections", &(n + 1).to_string());
    let per = s.rss().saturating_sub(before) / n as u64;
    let threads = s.status("Threads");
    eprintln!("{n} idle connections: {per} bytes each, {threads} threads (-t 4)");
    assert!(per <= 16 * 1024, "{per} bytes per idle connection");
    assert!(threads <= 4 + 4, "{threads} threads");
    // And they are still served.
    for c in conns.iter_mut().step_by(97) {
        assert!(c.cmd("version\r\n").starts_with("VERSION "));
    }
}
