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
