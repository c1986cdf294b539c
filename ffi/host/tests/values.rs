//! Values read straight into their items: a storage command's data is copied from what is
//! buffered, then read from the socket into the item itself (one `readv` that also fills the
//! input buffer behind the value). Whatever pieces the data arrives in, and whatever follows it
//! in the same segment, the stored value is the one sent and the next request is read whole.
//! Served by the default engine (the bucket engine, the built-in engine as its default bucket).

mod common;
use common::*;
use std::io::Read;

/// `n` bytes in which no piece repeats at a nearby offset, so a misplaced piece shows.
fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
}

#[test]
fn ascii_values_arrive_whole_in_any_pieces() {
    let s = Server::start(&[]);
    let mut c = s.ascii();
    let value = pattern(700_000);
    c.send(b"set big 3 0 700000\r\n");
    let mut at = 0;
    for piece in [1, 4095, 100_000, 250_000, 345_904] {
        c.send(&value[at..at + piece]);
        at += piece;
    }
    assert_eq!(at, value.len());
    // The end of the data and the next command in one write: the command lands behind it.
    c.send(b"\r\nget big\r\n");
    assert_eq!(c.line(), "STORED");
    assert_eq!(c.line(), "VALUE big 3 700000");
    let mut got = vec![0; value.len() + 2];
    c.r.read_exact(&mut got).expect("the value");
    assert!(
        got[..value.len()] == value[..],
        "the value came back changed"
    );
    assert_eq!(&got[value.len()..], b"\r\n");
    assert_eq!(c.line(), "END");
    // `ms` data goes the same way.
    let mut ms = b"ms m 700000 T0\r\n".to_vec();
    ms.extend_from_slice(&value);
    ms.extend_from_slice(b"\r\nmg m s v\r\n");
    c.send(&ms);
    assert_eq!(c.line(), "HD");
    assert_eq!(c.line(), "VA 700000 s700000");
    c.r.read_exact(&mut got).expect("the value");
    assert!(
        got[..value.len()] == value[..],
        "the ms value came back changed"
    );
}

#[test]
fn binary_values_arrive_whole_with_the_next_request_behind() {
    let s = Server::start(&[]);
    let mut b = s.binary();
    let value = pattern(700_000);
    let set = packet(0x01, &[0, 0, 0, 7, 0, 0, 0, 0], b"big", &value, 0);
    let get = packet(0x00, &[], b"big", &[], 0);
    // The SET's header and a little of its value, then the rest with the GET behind it.
    let head = 24 + 8 + 3 + 10;
    b.send(&set[..head]);
    let mut rest = set[head..].to_vec();
    rest.extend_from_slice(&get);
    b.send(&rest);
    assert_eq!(b.recv().status, SUCCESS);
    let r = b.recv();
    assert_eq!((r.status, r.extras), (SUCCESS, 7u32.to_be_bytes().to_vec()));
    assert!(r.value == value, "the value came back changed");
    // Many SETs in one write, each value of several KiB: each lands in its own item.
    let mut batch = Vec::new();
    for i in 0..50u32 {
        let key = format!("k{i}");
        let value = pattern(3000 + i as usize * 97);
        batch.extend(packet(0x11, &[0; 8], key.as_bytes(), &value, 0)); // SETQ
    }
    batch.extend(packet(0x0a, &[], &[], &[], 0)); // NOOP
    b.send(&batch);
    assert_eq!(b.recv().opcode, 0x0a, "every SETQ stored quietly");
    for i in 0..50u32 {
        let r = b.get(format!("k{i}").as_bytes());
        assert!(
            r.value == pattern(3000 + i as usize * 97),
            "value {i} changed"
        );
    }
}
