//! What an operator who replaces memcached by mcb-memcached relies on beyond the transcript
//! (`tests/meta.rs`), on the default host (the bucket engine, the built-in storage engine as
//! the default bucket): items that counters create expire when the client said.

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
