//! Binary requests with the answers Debian's memcached 1.6.18 gave them, on the built-in
//! engine's default bucket (`tests/binary.rs` replays them). Each session runs on a fresh
//! connection, each request followed by a NOOP whose answer ends the request's answers; CAS
//! values are only told apart as zero or not, since the two servers number items differently.
//! The rows are those the binary differential fuzz (by hand, as `tests/differential.py` for
//! ASCII) found different before ours matched them.

/// A request: opcode, extras, key, value, and the CAS to send ([`LAST`]: the last nonzero CAS
/// an answer carried on this connection).
pub struct Req(
    pub u8,
    pub &'static [u8],
    pub &'static [u8],
    pub &'static [u8],
    pub u64,
);

/// An answer to the request (same opcode and opaque): status, extras, key, value, and whether
/// its CAS is nonzero. [`CLOSED`] stands for the server ending the connection.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct Ans(pub u16, pub Vec<u8>, pub Vec<u8>, pub Vec<u8>, pub bool);

pub const LAST: u64 = u64::MAX;
pub const CLOSED: u16 = 0xffff;

pub const TOUCH: u8 = 0x1c;
pub const GAT: u8 = 0x1d;
pub const GATQ: u8 = 0x1e;
pub const GATK: u8 = 0x23;
pub const GATKQ: u8 = 0x24;
const GET: u8 = 0x00;
const SET: u8 = 0x01;
const ADD: u8 = 0x02;
const DELETE: u8 = 0x04;
const INCR: u8 = 0x05;
const FLUSH: u8 = 0x08;
const STAT: u8 = 0x10;
const SASL_LIST: u8 = 0x20;
const SASL_AUTH: u8 = 0x21;
const UNASSIGNED: u8 = 0x55;

const FLAGS7: &[u8] = b"\0\0\0\x07";
const SET7: &[u8] = b"\0\0\0\x07\0\0\0\0";
const SET0: &[u8] = b"\0\0\0\0\0\0\0\0";
const EXP100: &[u8] = b"\0\0\0\x64";
/// incr by 1 from 10 if absent, no expiry.
const BY1: &[u8] = b"\0\0\0\0\0\0\0\x01\0\0\0\0\0\0\0\x0a\0\0\0\0";

fn ok(extras: &[u8], key: &[u8], value: &[u8]) -> Ans {
    Ans(0, extras.to_vec(), key.to_vec(), value.to_vec(), true)
}

fn error(status: u16, text: &str) -> Ans {
    Ans(status, vec![], vec![], text.as_bytes().to_vec(), false)
}

fn closed() -> Ans {
    Ans(CLOSED, vec![], vec![], vec![], false)
}

/// The sessions: requests and memcached's answers to each.
pub fn sessions() -> Vec<Vec<(Req, Vec<Ans>)>> {
    let not_found = || error(1, "Not found");
    let exists = || error(2, "Data exists for key.");
    let invalid = || vec![error(4, "Invalid arguments"), closed()];
    let unknown = || error(0x81, "Unknown command");
    vec![
        // The touch family: a touch answers the flags, GATK and GATKQ the key; quiet misses
        // say nothing, GATK's miss says its key.
        vec![
            (Req(SET, SET7, b"a", b"hello", 0), vec![ok(b"", b"", b"")]),
            (Req(TOUCH, EXP100, b"a", b"", 0), vec![ok(FLAGS7, b"", b"")]),
            (
                Req(GAT, EXP100, b"a", b"", 0),
                vec![ok(FLAGS7, b"", b"hello")],
            ),
            (
                Req(GATQ, EXP100, b"a", b"", 0),
                vec![ok(FLAGS7, b"", b"hello")],
            ),
            (
                Req(GATK, EXP100, b"a", b"", 0),
                vec![ok(FLAGS7, b"a", b"hello")],
            ),
            (
                Req(GATKQ, EXP100, b"a", b"", 0),
                vec![ok(FLAGS7, b"a", b"hello")],
            ),
            (Req(TOUCH, EXP100, b"b", b"", 0), vec![not_found()]),
            (Req(GAT, EXP100, b"b", b"", 0), vec![not_found()]),
            (Req(GATQ, EXP100, b"b", b"", 0), vec![]),
            (
                Req(GATK, EXP100, b"b", b"", 0),
                vec![Ans(1, vec![], b"b".to_vec(), vec![], false)],
            ),
            (Req(GATKQ, EXP100, b"b", b"", 0), vec![]),
            // A delete answers no CAS.
            (Req(SET, SET0, b"d", b"x", 0), vec![ok(b"", b"", b"")]),
            (
                Req(DELETE, b"", b"d", b"", 0),
                vec![Ans(0, vec![], vec![], vec![], false)],
            ),
            // An opcode nobody serves, and SASL in a server without it.
            (Req(UNASSIGNED, b"", b"", b"", 0), vec![unknown()]),
            (Req(SASL_LIST, b"", b"", b"", 0), vec![unknown()]),
        ],
        // A CAS makes an add, and an incr, a compare-and-swap.
        vec![
            (Req(ADD, SET7, b"n", b"x", 5), vec![not_found()]),
            (Req(SET, SET0, b"n", b"7", 0), vec![ok(b"", b"", b"")]),
            (Req(ADD, SET0, b"n", b"8", 99_999), vec![exists()]),
            (Req(INCR, BY1, b"n", b"", 99_999), vec![exists()]),
            (
                Req(INCR, BY1, b"n", b"", LAST),
                vec![ok(b"", b"", &8u64.to_be_bytes())],
            ),
            (Req(ADD, SET0, b"n", b"9", LAST), vec![ok(b"", b"", b"")]),
            (
                Req(GET, b"", b"n", b"", 0),
                vec![ok(b"\0\0\0\0", b"", b"9")],
            ),
            (Req(SET, SET0, b"s", b"x", 0), vec![ok(b"", b"", b"")]),
            // The CAS is compared before the value is read as a number.
            (Req(INCR, BY1, b"s", b"", 99_999), vec![exists()]),
            (
                Req(INCR, BY1, b"s", b"", LAST),
                vec![error(6, "Non-numeric server-side value for incr or decr")],
            ),
        ],
        // Requests whose parts do not fit their opcode end the connection.
        vec![(Req(TOUCH, b"", b"a", b"", 0), invalid())],
        vec![(Req(TOUCH, EXP100, b"", b"", 0), invalid())],
        vec![(Req(GATK, SET0, b"a", b"", 0), invalid())],
        vec![(Req(FLUSH, b"", b"x", b"", 0), invalid())],
        vec![(Req(FLUSH, b"", b"", b"x", 0), invalid())],
        vec![(Req(STAT, EXP100, b"", b"", 0), invalid())],
        vec![(Req(SASL_LIST, b"", b"PLAIN", b"", 0), invalid())],
        vec![(Req(SASL_AUTH, b"", b"", b"\0u\0p", 0), invalid())],
        // memcached reads no value for a touch: answered, then the bytes past the key end it.
        vec![(
            Req(TOUCH, EXP100, b"z", b"x", 0),
            vec![not_found(), closed()],
        )],
    ]
}
