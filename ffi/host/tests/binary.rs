//! The binary protocol end to end: mcb-memcached serving the C test engine, loaded directly.

mod common;
#[path = "transcript/binary.rs"]
mod transcript;
use common::*;

fn server() -> Server {
    Server::start(&["-E", test_engine().to_str().unwrap(), "-e", "cache_size=1m"])
}

fn expiry(flags: u32) -> Vec<u8> {
    let mut e = flags.to_be_bytes().to_vec();
    e.extend_from_slice(&0u32.to_be_bytes());
    e
}

#[test]
fn store_get_cas_delete() {
    let s = server();
    let mut c = s.binary();
    let set = c.set(b"k", b"hello", 0xcafe);
    assert_eq!((set.status, set.opaque), (SUCCESS, 0xdead_beef));
    assert_ne!(set.cas, 0);
    let got = c.get(b"k");
    assert_eq!((got.status, got.value.as_slice()), (SUCCESS, &b"hello"[..]));
    assert_eq!(got.extras, 0xcafeu32.to_be_bytes());
    assert_eq!(got.cas, set.cas);
    assert!(got.key.is_empty());
    let getk = c.call(GETK, &[], b"k", &[], 0);
    assert_eq!(
        (getk.key.as_slice(), getk.value.as_slice()),
        (&b"k"[..], &b"hello"[..])
    );

    // add fails on a present key, replace on an absent one.
    assert_eq!(c.call(ADD, &expiry(0), b"k", b"x", 0).status, KEY_EEXISTS);
    assert_eq!(
        c.call(REPLACE, &expiry(0), b"nope", b"x", 0).status,
        KEY_ENOENT
    );
    assert_eq!(c.call(ADD, &expiry(0), b"new", b"x", 0).status, SUCCESS);
    assert_eq!(c.call(REPLACE, &expiry(0), b"new", b"y", 0).status, SUCCESS);

    // CAS: a stale CAS is refused, the current one accepted.
    let stale = c.call(SET, &expiry(0), b"k", b"v2", set.cas + 1000).status;
    assert_eq!(stale, KEY_EEXISTS);
    let fresh = c.call(SET, &expiry(0), b"k", b"v2", set.cas);
    assert_eq!(fresh.status, SUCCESS);
    assert_eq!(c.get(b"k").value, b"v2");

    // append/prepend.
    assert_eq!(c.call(APPEND, &[], b"k", b"]", 0).status, SUCCESS);
    assert_eq!(c.call(PREPEND, &[], b"k", b"[", 0).status, SUCCESS);
    assert_eq!(c.get(b"k").value, b"[v2]");
    assert_eq!(c.call(APPEND, &[], b"absent", b"x", 0).status, NOT_STORED);

    // delete, with a CAS check.
    let cas = c.get(b"k").cas;
    assert_eq!(c.call(DELETE, &[], b"k", &[], cas + 1).status, KEY_EEXISTS);
    assert_eq!(c.call(DELETE, &[], b"k", &[], cas).status, SUCCESS);
    let miss = c.get(b"k");
    assert_eq!(
        (miss.status, miss.value.as_slice()),
        (KEY_ENOENT, &b"Not found"[..])
    );
    assert_eq!(c.call(DELETE, &[], b"k", &[], 0).status, KEY_ENOENT);
}

fn arith(delta: u64, initial: u64, exptime: u32) -> Vec<u8> {
    let mut e = delta.to_be_bytes().to_vec();
    e.extend_from_slice(&initial.to_be_bytes());
    e.extend_from_slice(&exptime.to_be_bytes());
    e
}

#[test]
fn incr_decr_and_flush() {
    let s = server();
    let mut c = s.binary();
    // Absent and not to be created.
    assert_eq!(
        c.call(INCR, &arith(1, 0, u32::MAX), b"n", &[], 0).status,
        KEY_ENOENT
    );
    // Created with the initial value.
    let r = c.call(INCR, &arith(1, 40, 0), b"n", &[], 0);
    assert_eq!(
        (r.status, r.value.as_slice()),
        (SUCCESS, &40u64.to_be_bytes()[..])
    );
    let r = c.call(INCR, &arith(2, 0, 0), b"n", &[], 0);
    assert_eq!(r.value, 42u64.to_be_bytes());
    let r = c.call(DECR, &arith(100, 0, 0), b"n", &[], 0);
    assert_eq!(r.value, 0u64.to_be_bytes());
    c.set(b"text", b"abc", 0);
    assert_eq!(
        c.call(INCR, &arith(1, 0, 0), b"text", &[], 0).status,
        DELTA_BADVAL
    );

    assert_eq!(c.call(FLUSH, &[], &[], &[], 0).status, SUCCESS);
    assert_eq!(c.get(b"n").status, KEY_ENOENT);
    assert_eq!(c.get(b"text").status, KEY_ENOENT);
}

#[test]
fn quiet_commands_answer_only_misses_and_errors() {
    let s = server();
    let mut c = s.binary();
    let mut batch = Vec::new();
    for i in 0..10u8 {
        batch.extend(packet(SETQ, &expiry(0), &[b'q', i], &[i], 0));
    }
    batch.extend(packet(GETQ, &[], b"missing", &[], 0)); // a quiet miss: nothing
    batch.extend(packet(GETKQ, &[], &[b'q', 3], &[], 0)); // a quiet hit: answered
    batch.extend(packet(DELETEQ, &[], &[b'q', 4], &[], 0));
    batch.extend(packet(DELETEQ, &[], b"missing", &[], 0)); // an error: answered
    batch.extend(packet(INCRQ, &arith(1, 0, u32::MAX), b"missing", &[], 0));
    batch.extend(packet(NOOP, &[], &[], &[], 0));
    c.send(&batch);
    let hit = c.recv();
    assert_eq!(
        (hit.opcode, hit.key.as_slice(), hit.value.as_slice()),
        (GETKQ, &[b'q', 3][..], &[3][..])
    );
    assert_eq!((c.recv().opcode, c.recv().opcode), (DELETEQ, INCRQ));
    assert_eq!(c.recv().opcode, NOOP);
    assert_eq!(c.get(&[b'q', 4]).status, KEY_ENOENT);
    assert_eq!(c.get(&[b'q', 9]).value, [9]);
}

#[test]
fn version_stats_verbosity_quit() {
    let s = server();
    let mut c = s.binary();
    let v = c.call(VERSION, &[], &[], &[], 0);
    assert_eq!(v.value, b"1.6.18");
    c.set(b"a", b"1", 0);
    let stats = c.stats(b"");
    let find = |k: &str| {
        stats
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(find("cmd_set").as_deref(), Some("1"));
    assert_eq!(
        find("curr_items").as_deref(),
        Some("1"),
        "the engine's stats follow the host's"
    );
    assert!(find("pid").is_some());
    let settings = c.stats(b"settings");
    assert!(settings.iter().any(|(k, _)| k == "maxconns"));
    assert_eq!(c.call(STAT, &[], b"nosuchgroup", &[], 0).status, KEY_ENOENT);
    assert_eq!(
        c.call(VERBOSITY, &1u32.to_be_bytes(), &[], &[], 0).status,
        SUCCESS
    );
    assert_eq!(c.call(QUIT, &[], &[], &[], 0).status, SUCCESS);
    assert!(c.try_recv().is_none(), "quit closes the connection");
}

#[test]
fn unknown_opcodes_go_to_the_engine() {
    let s = server();
    let mut c = s.binary();
    // ECHO (0xe0): the engine answers through ADD_RESPONSE.
    let echo = c.call(0xe0, b"ex", b"key", b"value", 0);
    assert_eq!(echo.status, SUCCESS);
    assert_eq!(
        (echo.extras.as_slice(), echo.key.as_slice()),
        (&b"ex"[..], &b"key"[..])
    );
    assert_eq!((echo.value.as_slice(), echo.cas), (&b"value"[..], 0xabc));
    // Anything the engine does not know.
    assert_eq!(c.call(0xee, &[], &[], &[], 0).status, UNKNOWN_COMMAND);
}

#[test]
fn ewouldblock_parks_the_connection_until_notified() {
    // One worker: the parked connection and the others share its event loop.
    let s = Server::start(&[
        "-E",
        test_engine().to_str().unwrap(),
        "-e",
        "cache_size=1m",
        "-t",
        "1",
    ]);
    let mut parked = s.binary();
    let mut other = s.binary();
    // ASYNC "wait": EWOULDBLOCK, completed from the engine's thread only after GATE.
    parked.send(&packet(0xe1, &[], &[], b"wait", 0));
    // The engine answered EWOULDBLOCK and cannot complete before GATE: `parked` is parked.
    other.wait_for_stat("async_pending", "1");
    // Other connections are served meanwhile.
    assert_eq!(other.set(b"x", b"y", 0).status, SUCCESS);
    assert_eq!(other.call(0xe2, &[], &[], &[], 0).status, SUCCESS);
    let done = parked.recv();
    assert_eq!((done.opcode, done.status), (0xe1, SUCCESS));
    assert_eq!(done.value, b"async done");
    // And the parked connection goes on serving.
    assert_eq!(parked.get(b"x").value, b"y");
}

#[test]
fn bad_input_never_affects_another_connection() {
    let s = server();
    let mut good = s.binary();
    good.set(b"survivor", b"alive", 0);

    // A key over 250 bytes on any opcode, extras, a key or a value an opcode does not take:
    // EINVAL, and the connection is closed (as memcached 1.6).
    let long = vec![b'k'; 251];
    for request in [
        packet(SET, &expiry(0), &long, b"v", 0),
        packet(INCR, &arith(1, 0, 0), &long, &[], 0),
        packet(GET, &[], &long, &[], 0),
        packet(DELETE, &[], &long, &[], 0),
        packet(GET, b"x", b"k", &[], 0),
        packet(SET, &[], b"k", b"v", 0),
        packet(INCR, &[], b"k", &[], 0),
        packet(VERSION, &[], b"k", &[], 0),
        packet(FLUSH, b"xx", &[], &[], 0),
    ] {
        let mut c = s.binary();
        c.send(&request);
        assert_eq!(c.recv().status, EINVAL, "{:x?}", &request[..8]);
        assert!(c.try_recv().is_none(), "{:x?} left open", &request[..8]);
    }

    // Bad magic after a binary request (the first byte chose the protocol): closed.
    let mut c = s.binary();
    assert_eq!(c.call(NOOP, &[], &[], &[], 0).status, SUCCESS);
    let mut bad = packet(NOOP, &[], &[], &[], 0);
    bad[0] = 0x42;
    c.send(&bad);
    assert!(c.try_recv().is_none());

    // Extras and key longer than the body: EINVAL, closed.
    let mut c = s.binary();
    let mut lying = packet(GET, &[], b"key", &[], 0);
    lying[8..12].copy_from_slice(&1u32.to_be_bytes());
    c.send(&lying);
    assert_eq!(c.recv().status, EINVAL);
    assert!(c.try_recv().is_none());

    // A huge non-storage packet: E2BIG, closed.
    let mut c = s.binary();
    let mut huge = packet(0xee, &[], &[], &[], 0);
    huge[8..12].copy_from_slice(&(64u32 << 20).to_be_bytes());
    c.send(&huge);
    assert_eq!(c.recv().status, E2BIG);
    assert!(c.try_recv().is_none());

    // A value over the engine's limit: the engine's E2BIG, the value skipped, still serving.
    let mut c = s.binary();
    let r = c.call(SET, &expiry(0), b"big", &vec![b'x'; 2 << 20], 0);
    assert_eq!((r.status, r.value.as_slice()), (E2BIG, &b"Too large."[..]));
    assert_eq!(c.call(NOOP, &[], &[], &[], 0).status, SUCCESS);

    // A truncated packet, then the client goes away.
    let mut c = s.binary();
    let whole = packet(SET, &expiry(0), b"cut", b"0123456789", 0);
    c.send(&whole[..whole.len() - 4]);
    drop(c);
    let mut c = s.binary();
    c.send(&whole[..10]);
    drop(c);

    assert_eq!(good.get(b"survivor").value, b"alive");
    assert_eq!(good.get(b"cut").status, KEY_ENOENT);
}

#[test]
fn sasl_is_required_with_dash_s() {
    let dir = std::env::temp_dir().join(format!("mcb-host-sasl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pwdb = dir.join("pw");
    std::fs::write(&pwdb, "alice secret\nbob hunter2\n").unwrap();
    let s = Server::start(&[
        "-E",
        test_engine().to_str().unwrap(),
        "-S",
        "--sasl-pwdb",
        pwdb.to_str().unwrap(),
    ]);
    // A command before authenticating: AUTH_ERROR, and the connection is closed (memcached 1.6).
    let mut c = s.binary();
    assert_eq!(c.get(b"k").status, AUTH_ERROR);
    assert!(c.try_recv().is_none());
    let mut c = s.binary();
    assert_eq!(c.call(VERSION, &[], &[], &[], 0).status, SUCCESS);
    assert_eq!(c.call(SASL_LIST, &[], &[], &[], 0).value, b"PLAIN");
    assert_eq!(c.auth("alice", "wrong").status, AUTH_ERROR);
    assert_eq!(c.auth("alice", "secret").status, SUCCESS);
    assert_eq!(c.get(b"k").status, KEY_ENOENT);
    let mut a = s.ascii();
    assert_eq!(a.cmd("get k\r\n"), "CLIENT_ERROR unauthenticated");

    // A failed step de-authenticates: bob failing as alice is no longer bob.
    let mut c = s.binary();
    assert_eq!(c.auth("bob", "hunter2").status, SUCCESS);
    assert_eq!(c.get(b"k").status, KEY_ENOENT);
    assert_eq!(c.auth("alice", "wrong").status, AUTH_ERROR);
    assert_eq!(c.get(b"k").status, AUTH_ERROR);
    assert!(c.try_recv().is_none());

    // PLAIN's authzid must be empty or the authcid.
    let mut c = s.binary();
    let as_other = c.call(SASL_AUTH, &[], b"PLAIN", b"bob\0alice\0secret", 0);
    assert_eq!(as_other.status, AUTH_ERROR);
    let as_self = c.call(SASL_AUTH, &[], b"PLAIN", b"alice\0alice\0secret", 0);
    assert_eq!(as_self.status, SUCCESS);
}

#[test]
fn no_stat_is_named_twice() {
    let s = server();
    let mut c = s.binary();
    c.set(b"k", b"v", 0);
    c.get(b"k");
    let stats = c.stats(b"");
    let mut names: Vec<&str> = stats.iter().map(|(k, _)| k.as_str()).collect();
    names.sort_unstable();
    let total = names.len();
    names.dedup();
    assert_eq!(names.len(), total, "{stats:?}");
    for name in [
        "cmd_get",
        "get_hits",
        "cmd_set",
        "curr_connections",
        "threads",
    ] {
        assert!(names.contains(&name), "{name} missing: {stats:?}");
    }
}

#[test]
fn connection_events_reach_the_engine() {
    let s = server();
    for _ in 0..3 {
        let mut c = s.binary();
        assert_eq!(c.call(NOOP, &[], &[], &[], 0).status, SUCCESS);
    }
    let mut c = s.binary();
    // ON_DISCONNECT fires as each connection's thread ends: wait for the three.
    c.wait_for_stat("disconnects", "3");
}

#[test]
fn connections_over_the_limit_are_refused() {
    let s = Server::start(&["-E", test_engine().to_str().unwrap(), "-c", "1"]);
    let mut first = s.binary();
    assert_eq!(first.call(NOOP, &[], &[], &[], 0).status, SUCCESS);
    let mut second = s.binary();
    second.send(&packet(NOOP, &[], &[], &[], 0));
    assert!(
        second.try_recv().is_none(),
        "the second connection is closed"
    );
    let stats = first.stats(b"");
    assert!(
        stats.contains(&("rejected_connections".into(), "1".into())),
        "{stats:?}"
    );
}

#[test]
fn a_reserved_cookie_outlives_its_connection() {
    let s = server();
    // ASYNC "wait" reserves the cookie and parks the connection; the client leaves.
    let mut parked = s.binary();
    let mut other = s.binary();
    parked.send(&packet(0xe1, &[], &[], b"wait", 0));
    other.wait_for_stat("async_pending", "1");
    drop(parked);
    // GATE: the engine notifies and releases the closed connection's cookie; the woken
    // connection retries (which joins the engine's thread, so the release happened), finds its
    // client gone and ends with ON_DISCONNECT.
    assert_eq!(other.call(0xe2, &[], &[], &[], 0).status, SUCCESS);
    other.wait_for_stat("disconnects", "1");
    other.wait_for_stat("async_pending", "0");
    assert_eq!(other.call(NOOP, &[], &[], &[], 0).status, SUCCESS);
    assert_eq!(s.binary().set(b"still", b"serving", 0).status, SUCCESS);
}

#[test]
fn a_long_pipeline_is_answered_in_order() {
    // Served in turns of one request (-R 1) as well as memcached's default 20.
    for per_turn in ["20", "1"] {
        let engine = test_engine().to_str().unwrap();
        long_pipeline(&Server::start(&["-E", engine, "-R", per_turn, "-t", "1"]));
    }
}

fn long_pipeline(s: &Server) {
    let mut c = s.binary();
    assert_eq!(c.set(b"pipe", &[b'p'; 1000], 0).status, SUCCESS);
    const N: usize = 5000;
    let mut writer = c.0.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        use std::io::Write;
        let get = packet(GETK, &[], b"pipe", &[], 0);
        let batch: Vec<u8> = get.iter().copied().cycle().take(get.len() * N).collect();
        writer.write_all(&batch).unwrap();
    });
    for _ in 0..N {
        let r = c.recv();
        assert_eq!((r.opcode, r.status, r.value.len()), (GETK, SUCCESS, 1000));
    }
    sender.join().unwrap();
}

#[test]
fn large_values_stream_intact_through_a_pipeline() {
    let s = server();
    let mut c = s.binary();
    // Over the size copied into the output: written from the held item.
    let value: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(c.set(b"large", &value, 5).status, SUCCESS);
    const N: usize = 50;
    let mut batch = Vec::new();
    for _ in 0..N {
        batch.extend_from_slice(&packet(GETK, &[], b"large", &[], 0));
        batch.extend_from_slice(&packet(NOOP, &[], &[], &[], 0));
    }
    c.send(&batch);
    for _ in 0..N {
        let r = c.recv();
        assert_eq!(
            (r.opcode, r.status, r.key.as_slice()),
            (GETK, SUCCESS, &b"large"[..])
        );
        assert_eq!(r.extras, 5u32.to_be_bytes());
        assert!(r.value == value, "a streamed value differs");
        assert_eq!(c.recv().opcode, NOOP);
    }
}

/// The `conn_yields` count in the default stats group.
fn yields(c: &mut Bin) -> u64 {
    let stats = c.stats(b"");
    let (_, value) = stats
        .iter()
        .find(|(k, _)| k == "conn_yields")
        .expect("conn_yields");
    value.parse().expect("a number")
}

#[test]
fn a_pipelined_multi_get_is_one_request_to_the_turn() {
    let engine = test_engine().to_str().unwrap();
    // A batch of quiet gets ended by a NOOP: one request of -R's, answered in one turn (memcached
    // yields inside it every 20 gets).
    let s = Server::start(&["-E", engine, "-R", "20", "-t", "1"]);
    let mut c = s.binary();
    assert_eq!(c.set(b"m", b"v", 0).status, SUCCESS);
    let mut batch = Vec::new();
    for _ in 0..100 {
        batch.extend(packet(GETKQ, &[], b"m", &[], 0));
    }
    batch.extend(packet(NOOP, &[], &[], &[], 0));
    let before = yields(&mut c);
    c.send(&batch);
    for _ in 0..100 {
        assert_eq!(c.recv().opcode, GETKQ);
    }
    assert_eq!(c.recv().opcode, NOOP);
    assert_eq!(yields(&mut c), before, "the batch was served in one turn");
    // Quiet commands still end a turn after 16 x -R steps: with -R 1 the batch yields about
    // every 16 gets (not after each, as it would if each counted as a request, nor never).
    let s = Server::start(&["-E", engine, "-R", "1", "-t", "1"]);
    let mut c = s.binary();
    assert_eq!(c.set(b"m", b"v", 0).status, SUCCESS);
    let before = yields(&mut c);
    c.send(&batch);
    for _ in 0..100 {
        assert_eq!(c.recv().opcode, GETKQ);
    }
    assert_eq!(c.recv().opcode, NOOP);
    // The first stats request's own yield, then the batch's.
    let during = yields(&mut c) - before;
    assert!((3..=20).contains(&during), "{during} yields");
}

/// Replays `transcript`'s sessions on `port`; the mismatches, worded.
fn replay(port: u16) -> Vec<String> {
    use transcript::{Ans, Req, CLOSED, LAST};
    let mut mismatches = Vec::new();
    let mut noop = packet(NOOP, &[], &[], &[], 0);
    noop[12..16].copy_from_slice(&0x4e4f_4f50u32.to_be_bytes());
    for session in transcript::sessions() {
        let mut c = Bin(connect(port));
        let mut last = 0;
        for (Req(opcode, extras, key, value, cas), expected) in session {
            let cas = if cas == LAST { last } else { cas };
            let mut request = packet(opcode, extras, key, value, cas);
            request.extend_from_slice(&noop);
            c.send(&request);
            let mut got = Vec::new();
            loop {
                let Some(r) = c.try_recv() else {
                    got.push(Ans(CLOSED, vec![], vec![], vec![], false));
                    break;
                };
                if r.opcode == NOOP && r.opaque == 0x4e4f_4f50 {
                    break;
                }
                if r.opcode != opcode || r.opaque != 0xdead_beef {
                    mismatches.push(format!("{opcode:#x} {key:?}: answered as {r:?}"));
                }
                if r.cas != 0 {
                    last = r.cas;
                }
                got.push(Ans(r.status, r.extras, r.key, r.value, r.cas != 0));
            }
            if got != expected {
                mismatches.push(format!(
                    "{opcode:#x} {key:?} {value:?}: expected {expected:?}, got {got:?}"
                ));
            }
            if got.last().is_some_and(|a| a.0 == CLOSED) {
                break;
            }
        }
    }
    mismatches
}

/// The binary protocol answers as memcached 1.6 does (the built-in engine's default bucket).
#[test]
fn binary_commands_answer_as_memcached_does() {
    let s = Server::start(&[]);
    let mismatches = replay(s.port);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn the_binary_transcript_is_memcacheds() {
    let Some(memcached) = Memcached::start(&[], "the binary transcript") else {
        return;
    };
    let mismatches = replay(memcached.port);
    drop(memcached);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
