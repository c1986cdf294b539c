//! How answers are encoded, below the protocols and the engine callbacks that produce them:
//! binary response packets, `STAT` lines, and the [`Sink`] an engine's `ADD_RESPONSE` and
//! `ADD_STAT` write a request's answers into.

#![deny(unsafe_code)]

use mcb_abi::abi::*;

/// A binary packet's header.
pub const HEADER: usize = PROTOCOL_BINARY_HEADER_SIZE;
/// Longest key memcached accepts.
pub const KEY_MAX: usize = 250;

/// A response header's fields (lengths come from the parts).
#[derive(Debug, Clone, Copy)]
pub struct Response {
    pub opcode: u8,
    pub opaque: u32,
    pub status: u16,
    pub cas: u64,
    pub datatype: u8,
}

/// Appends one response packet to `buf`.
pub fn encode_response<'b>(
    buf: &mut Vec<u8>,
    r: &Response,
    ext: &[u8],
    key: &[u8],
    body: impl Iterator<Item = &'b [u8]> + Clone,
) {
    let value_len: usize = body.clone().map(<[u8]>::len).sum();
    buf.reserve(HEADER + ext.len() + key.len() + value_len);
    encode_head(buf, r, ext, key, value_len);
    for piece in body {
        buf.extend_from_slice(piece);
    }
}

/// Appends a response's header, extras and key; its `value_len` bytes of value follow
/// separately (a value streamed from the item).
pub fn encode_head(buf: &mut Vec<u8>, r: &Response, ext: &[u8], key: &[u8], value_len: usize) {
    let total = ext.len() + key.len() + value_len;
    let keylen = (key.len() as u16).to_be_bytes();
    let status = r.status.to_be_bytes();
    let body = (total as u32).to_be_bytes();
    let opaque = r.opaque.to_be_bytes();
    let cas = r.cas.to_be_bytes();
    // One append of the whole header: 24 pushes each check the capacity and bump the length.
    #[rustfmt::skip]
    let header: [u8; HEADER] = [
        PROTOCOL_BINARY_RES, r.opcode, keylen[0], keylen[1],
        ext.len() as u8, r.datatype, status[0], status[1],
        body[0], body[1], body[2], body[3],
        opaque[0], opaque[1], opaque[2], opaque[3],
        cas[0], cas[1], cas[2], cas[3], cas[4], cas[5], cas[6], cas[7],
    ];
    buf.extend_from_slice(&header);
    buf.extend_from_slice(ext);
    buf.extend_from_slice(key);
}

/// Appends `v` in decimal: what `write!(out, "{v}")` writes, without the formatting
/// machinery (about 200 instructions a number on a meta or `VALUE` line).
pub fn push_decimal(out: &mut Vec<u8>, v: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = v;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Appends `v` in decimal with its sign (as [`push_decimal`]).
pub fn push_signed(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_decimal(out, v.unsigned_abs());
}

/// Where an engine's answers for the current command go.
#[derive(Debug, Default)]
pub struct Sink {
    /// Encoded output, moved to the connection's write buffer after the call.
    pub buf: Vec<u8>,
    /// The current binary request's opcode and opaque (a response echoes them).
    pub opcode: u8,
    pub opaque: u32,
    /// ASCII: stats become `STAT key value` lines and a response only records its status.
    pub ascii: bool,
    /// The status of the last `ADD_RESPONSE` (what ASCII `touch` reports).
    pub status: Option<u16>,
    /// While set, statistics are collected here instead of encoded: the host reads the
    /// engine's before it answers in memcached's shape.
    pub capture: Option<Vec<(Vec<u8>, Vec<u8>)>>,
    /// While set, a response is recorded here as the engine hands it (`ADD_RESPONSE`'s
    /// arguments), not encoded: the host reads the engine's answer to a packet it built itself
    /// from these fields, with no binary response to encode and parse again.
    pub answer: Option<Answer>,
    /// The buffers of an answer read and given back ([`Sink::keep`]), for the next one: a
    /// meta request's answer allocates nothing.
    pub spare: Answer,
}

/// The most an answer's buffer may hold to be kept for the next answer: a connection keeps at
/// most two such buffers, idle or not.
const SPARE_MAX: usize = 1 << 10;

impl Sink {
    /// Prepares the sink for the engine's answers to one request.
    pub fn open(&mut self, ascii: bool, opcode: u8, opaque: u32) {
        self.buf.clear();
        self.ascii = ascii;
        self.opcode = opcode;
        self.opaque = opaque;
        self.status = None;
        self.capture = None;
        self.answer = None;
    }

    /// Keeps an answer's buffers (cleared) for the next answer, unless they grew large.
    pub fn keep(&mut self, ext: Vec<u8>, value: Vec<u8>) {
        for (spare, mut buf) in [(&mut self.spare.ext, ext), (&mut self.spare.value, value)] {
            if buf.capacity() <= SPARE_MAX && buf.capacity() > spare.capacity() {
                buf.clear();
                *spare = buf;
            }
        }
    }
}

/// An engine's response to a packet the host built, as `ADD_RESPONSE` handed it.
#[derive(Debug, Default)]
pub struct Answer {
    pub status: u16,
    pub cas: u64,
    pub ext: Vec<u8>,
    pub value: Vec<u8>,
}

/// Encodes one statistic for the sink's protocol (or captures it).
pub fn push_stat(sink: &mut Sink, key: &[u8], val: &[u8]) {
    if let Some(captured) = &mut sink.capture {
        if !key.is_empty() {
            captured.push((key.to_vec(), val.to_vec()));
        }
        return;
    }
    if sink.ascii {
        if key.is_empty() {
            return;
        }
        sink.buf.extend_from_slice(b"STAT ");
        sink.buf.extend_from_slice(key);
        sink.buf.push(b' ');
        sink.buf.extend_from_slice(val);
        sink.buf.extend_from_slice(b"\r\n");
    } else {
        let response = Response {
            opcode: PROTOCOL_BINARY_CMD_STAT,
            opaque: sink.opaque,
            status: PROTOCOL_BINARY_RESPONSE_SUCCESS,
            cas: 0,
            datatype: PROTOCOL_BINARY_RAW_BYTES,
        };
        encode_response(&mut sink.buf, &response, &[], key, std::iter::once(val));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_answer_lends_its_buffers_unless_they_grew_large() {
        let mut sink = Sink::default();
        let (mut ext, value) = (Vec::with_capacity(32), vec![7u8; SPARE_MAX + 1]);
        ext.extend_from_slice(b"mcbM");
        sink.keep(ext, value);
        assert!(sink.spare.ext.is_empty() && sink.spare.ext.capacity() >= 32);
        assert_eq!(sink.spare.value.capacity(), 0, "a large buffer is not kept");
        // A smaller buffer does not replace a larger spare.
        sink.keep(Vec::with_capacity(8), Vec::with_capacity(64));
        assert!(sink.spare.ext.capacity() >= 32 && sink.spare.value.capacity() >= 64);
    }

    #[test]
    fn decimals_are_written_as_format_writes_them() {
        for v in [0, 7, 10, 99, 100, 4_294_967_295, u64::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(&mut out, v);
            assert_eq!(out, format!("x{v}").into_bytes());
        }
        for v in [0, -1, 5, -42, i64::MIN, i64::MAX] {
            let mut out = Vec::new();
            push_signed(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
    }
}
