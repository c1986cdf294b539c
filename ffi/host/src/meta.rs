//! memcached 1.6's meta commands (`mg`, `ms`, `md`, `ma`, `mn`, `me`) and the get-and-touch
//! call that `gat`, `gats` and `mg … T` share.
//!
//! A meta line is `<verb> <key> [<datalen>] <flag>*`; each flag is one letter, some with a
//! token (`T30`, `Oabc`). The answer's flags follow the request's order. A flag is served only
//! by one engine call: v1's `get`, binary GAT through `unknown_command` (`T`), `store` with a
//! CAS and a mode (`ms`), `remove` with a CAS (`md`), `arithmetic` with create, initial value
//! and TTL (`ma`); or, for stale items, the recache token, access times and arithmetic with a
//! CAS or a TTL (`mg` `h l N R`, `md I`, `ms I`, `ma C T t`), our engines' private opcodes
//! ([`mcb_abi::meta_ext`]). An engine that lacks what a flag needs gets [`UNSUPPORTED`], never
//! a guess. `P` and `L` (proxy hints) are ignored, as memcached ignores them; `u`
//! (no LRU bump) leaves the access marks alone and changes nothing else.
//!
//! The text of the protocol's error lines follows memcached 1.6.18's answers to the same
//! input (`tests/meta.rs` compares the two byte for byte).

use crate::api::server_core::{current_time, to_rel_time, REALTIME_MAXDELTA};
use crate::codec::KEY_MAX;
use crate::counters::Stat;
use crate::engine::{Arith, Value};
use crate::io::{Output, COPY_MAX};
use crate::session::{ok, Aligned, Flow, Peer};
use crate::text::{c_i32, c_u32, c_u64, error_line, reply, BAD_FORMAT};
use mcb_abi::abi::*;
use mcb_abi::meta_ext::*;
use std::borrow::Cow;
use std::io::Write;

/// The answer to a flag the engine cannot honour.
pub const UNSUPPORTED: &str = "CLIENT_ERROR flag not supported by this engine";
const BAD_TOKEN: &str = "CLIENT_ERROR bad token in command line format";
const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";
/// A meta line of this many tokens or more is refused (memcached 1.6.18's bound).
pub const TOO_MANY_TOKENS: usize = 20;
/// Longest opaque (`O`) token.
const OPAQUE_MAX: usize = 32;

/// What one meta command accepts and how memcached words its complaints.
#[derive(Debug)]
pub struct Verb {
    /// Flags the command takes.
    allowed: &'static [u8],
    /// Flags the command takes that a v1 engine cannot honour.
    unsupported: &'static [u8],
    invalid: &'static str,
    duplicate: &'static str,
    /// A flag's token that is not a number.
    bad_number: fn(u8) -> &'static str,
}

pub const MG: Verb = Verb {
    allowed: b"bcfhklOqstuvNRTPL",
    unsupported: b"",
    invalid: "CLIENT_ERROR invalid flag",
    duplicate: "CLIENT_ERROR duplicate flag",
    bad_number: |_| BAD_TOKEN,
};

pub const MS: Verb = Verb {
    allowed: b"bcCFIkOqTMPL",
    unsupported: b"",
    invalid: "CLIENT_ERROR invalid flag",
    duplicate: "CLIENT_ERROR duplicate flag",
    bad_number: |flag| if flag == b'F' { BAD_FORMAT } else { BAD_TOKEN },
};

pub const MD: Verb = Verb {
    allowed: b"bCIkOqTPL",
    unsupported: b"",
    invalid: "CLIENT_ERROR invalid or duplicate flag",
    duplicate: "CLIENT_ERROR invalid or duplicate flag",
    bad_number: |_| "CLIENT_ERROR invalid or duplicate flag",
};

pub const MA: Verb = Verb {
    allowed: b"bCNJDTMqtcvkOPL",
    unsupported: b"",
    invalid: "CLIENT_ERROR invalid or duplicate flag",
    duplicate: "CLIENT_ERROR invalid or duplicate flag",
    bad_number: |_| "CLIENT_ERROR invalid or duplicate flag",
};

/// A checked meta request: its key (decoded from base64 with `b`) and its flags.
#[derive(Debug)]
pub struct Request<'a> {
    pub key: Cow<'a, [u8]>,
    /// The key as sent (what `k` echoes).
    sent_key: &'a [u8],
    base64: bool,
    flags: &'a [&'a [u8]],
    bad_number: fn(u8) -> &'static str,
}

/// Checks a meta request's key and flags against `verb`.
pub fn parse<'a>(
    verb: &Verb,
    key: &'a [u8],
    flags: &'a [&'a [u8]],
) -> Result<Request<'a>, &'static str> {
    let mut seen = [false; 128];
    for flag in flags {
        let f = flag[0];
        if !verb.allowed.contains(&f) {
            return Err(verb.invalid);
        }
        if std::mem::replace(&mut seen[usize::from(f)], true) {
            return Err(verb.duplicate);
        }
        if f == b'O' && flag.len() - 1 > OPAQUE_MAX {
            return Err("CLIENT_ERROR opaque token too long");
        }
    }
    if key.len() > KEY_MAX {
        return Err(BAD_FORMAT);
    }
    let base64 = seen[usize::from(b'b')];
    let decoded = if base64 {
        Cow::Owned(decode_base64(key).ok_or("CLIENT_ERROR error decoding key")?)
    } else {
        Cow::Borrowed(key)
    };
    // Checked after the syntax, so a bad line gets memcached's own complaint.
    if flags.iter().any(|f| verb.unsupported.contains(&f[0])) {
        return Err(UNSUPPORTED);
    }
    Ok(Request {
        key: decoded,
        sent_key: key,
        base64,
        flags,
        bad_number: verb.bad_number,
    })
}

impl Request<'_> {
    pub fn has(&self, flag: u8) -> bool {
        self.flags.iter().any(|f| f[0] == flag)
    }

    /// The token after `flag`, when the request has it.
    fn token(&self, flag: u8) -> Option<&[u8]> {
        self.flags.iter().find(|f| f[0] == flag).map(|f| &f[1..])
    }

    /// `flag`'s numeric token, read by `read` (one of memcached's C readers, `text::c_*`):
    /// `Ok(None)` without the flag, memcached's complaint when it is not a number.
    fn number<T>(&self, flag: u8, read: fn(&[u8]) -> Option<T>) -> Result<Option<T>, &'static str> {
        match self.token(flag) {
            None => Ok(None),
            Some(t) => read(t).map(Some).ok_or((self.bad_number)(flag)),
        }
    }

    /// A time flag's token (`T`, `N`, `R`): 32 bits, as memcached reads it (2^31 is already
    /// past, 2^32 is 0).
    pub fn time(&self, flag: u8) -> Result<Option<libc::time_t>, &'static str> {
        Ok(self.number(flag, c_i32)?.map(libc::time_t::from))
    }

    /// A 64-bit flag's token (`C`, `J`, `D`).
    pub fn u64(&self, flag: u8) -> Result<Option<u64>, &'static str> {
        self.number(flag, c_u64)
    }

    pub fn quiet(&self) -> bool {
        self.has(b'q')
    }

    /// Appends the answer's flags, in the request's order: `k` and `O` always, the others
    /// when `known` has their value.
    fn echo(&self, out: &mut Vec<u8>, known: &Known) {
        for flag in self.flags {
            let _ = match flag[0] {
                b'k' => {
                    out.extend_from_slice(b" k");
                    out.extend_from_slice(self.sent_key);
                    if self.base64 {
                        out.extend_from_slice(b" b");
                    }
                    Ok(())
                }
                b'O' => {
                    out.extend_from_slice(b" ");
                    out.extend_from_slice(flag);
                    Ok(())
                }
                b'c' => known.cas.map_or(Ok(()), |v| write!(out, " c{v}")),
                b'f' => known.flags.map_or(Ok(()), |v| write!(out, " f{v}")),
                b's' => known.size.map_or(Ok(()), |v| write!(out, " s{v}")),
                b't' => known.ttl.map_or(Ok(()), |v| write!(out, " t{v}")),
                b'h' => known
                    .hit_before
                    .map_or(Ok(()), |v| write!(out, " h{}", u8::from(v))),
                b'l' => known.idle.map_or(Ok(()), |v| write!(out, " l{v}")),
                _ => Ok(()),
            };
        }
        // memcached's order: Z, X, W.
        for (bit, text) in [(STATE_LOST, " Z"), (STATE_STALE, " X"), (STATE_WON, " W")] {
            if known.state & bit != 0 {
                out.extend_from_slice(text.as_bytes());
            }
        }
    }

    /// A whole answer line: `code`, the echoed flags, `\r\n`.
    pub fn answer(&self, out: &mut Vec<u8>, code: &str, known: &Known) {
        out.extend_from_slice(code.as_bytes());
        self.echo(out, known);
        out.extend_from_slice(b"\r\n");
    }
}

/// What an answer can report of its item.
#[derive(Debug, Default)]
pub struct Known {
    pub cas: Option<u64>,
    pub flags: Option<u32>,
    pub size: Option<usize>,
    pub ttl: Option<i64>,
    pub hit_before: Option<bool>,
    /// Seconds since the last access.
    pub idle: Option<u32>,
    /// Stale and recache-token answers (`mcb_abi::meta_ext`'s `STATE_*` bits).
    pub state: u8,
}

/// The remaining TTL of an item expiring at server time `exptime`, as `t` reports it.
fn ttl_of(exptime: rel_time_t) -> i64 {
    if exptime == 0 {
        -1
    } else {
        i64::from(exptime) - i64::from(current_time())
    }
}

/// A client's expiration time as the 32-bit field of a binary TOUCH or GAT: a negative
/// time (already past) becomes a Unix time before the server started.
pub fn wire_exptime(exptime: libc::time_t) -> u32 {
    if exptime < 0 {
        (REALTIME_MAXDELTA + 1) as u32
    } else {
        u32::try_from(exptime).unwrap_or(u32::MAX)
    }
}

/// A binary TOUCH or GAT request for `key`, built in `scratch` (aligned for the engine).
pub fn touch_packet(scratch: &mut Aligned, opcode: u8, key: &[u8], exptime: u32) -> *mut u64 {
    let keylen = (key.len() as u16).to_be_bytes();
    let bodylen = (4 + key.len() as u32).to_be_bytes();
    #[rustfmt::skip]
    let header = [
        PROTOCOL_BINARY_REQ, opcode, keylen[0], keylen[1],
        4, PROTOCOL_BINARY_RAW_BYTES, 0, 0,
        bodylen[0], bodylen[1], bodylen[2], bodylen[3],
        0, 0, 0, 0, // opaque
        0, 0, 0, 0, 0, 0, 0, 0, // cas
    ];
    scratch.fill(&[&header, &exptime.to_be_bytes(), key])
}

/// An item that a get-and-touch returned (its value copied out of the engine's answer).
#[derive(Debug)]
pub struct Touched {
    /// The client's flags.
    pub flags: u32,
    pub cas: u64,
    pub value: Vec<u8>,
}

/// An engine's answer to a packet we built.
#[derive(Debug)]
struct Answer {
    status: u16,
    cas: u64,
    ext: Vec<u8>,
    value: Vec<u8>,
}

/// Sends the engine a binary packet of `opcode` through `unknown_command` and reads its answer
/// (`ENGINE_ENOTSUP` when the engine does not know the opcode).
fn call(
    peer: &Peer,
    scratch: &mut Aligned,
    opcode: u8,
    extras: &[u8],
    key: &[u8],
    value: &[u8],
) -> Result<Answer, ENGINE_ERROR_CODE> {
    let keylen = (key.len() as u16).to_be_bytes();
    let bodylen = ((extras.len() + key.len() + value.len()) as u32).to_be_bytes();
    #[rustfmt::skip]
    let header = [
        PROTOCOL_BINARY_REQ, opcode, keylen[0], keylen[1],
        extras.len() as u8, PROTOCOL_BINARY_RAW_BYTES, 0, 0,
        bodylen[0], bodylen[1], bodylen[2], bodylen[3],
        0, 0, 0, 0, // opaque
        0, 0, 0, 0, 0, 0, 0, 0, // cas
    ];
    let packet = scratch.fill(&[&header, extras, key, value]);
    peer.open_sink(false, opcode, 0);
    let engine = peer.engine();
    // SAFETY: a whole packet, 8-byte aligned, writable, alive across the call.
    let rc = peer.retry(|| ok(unsafe { engine.unknown_command(&peer.cookie, packet) }));
    let mut answer = Vec::new();
    let status = peer.take_sink(&mut answer);
    match (rc, status) {
        (Err(ENGINE_EWOULDBLOCK | ENGINE_DISCONNECT), _) => Err(rc.unwrap_err()),
        (
            _,
            Some(PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND | PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED),
        )
        | (Ok(()), None) => Err(ENGINE_ENOTSUP),
        (_, Some(status)) => parse_answer(status, &answer).ok_or(ENGINE_FAILED),
        (Err(ENGINE_KEY_ENOENT), None) => Ok(Answer {
            status: PROTOCOL_BINARY_RESPONSE_KEY_ENOENT,
            cas: 0,
            ext: Vec::new(),
            value: Vec::new(),
        }),
        (Err(rc), None) => Err(rc),
    }
}

/// A binary response packet's parts (it echoes no key).
fn parse_answer(status: u16, packet: &[u8]) -> Option<Answer> {
    let header = packet.get(..24)?;
    let extlen = usize::from(header[4]);
    let keylen = usize::from(u16::from_be_bytes([header[2], header[3]]));
    let bodylen = u32::from_be_bytes(header[8..12].try_into().ok()?) as usize;
    let body = packet.get(24..24 + bodylen)?;
    Some(Answer {
        status,
        cas: u64::from_be_bytes(header[16..24].try_into().ok()?),
        ext: body.get(..extlen)?.to_vec(),
        value: body.get(extlen + keylen..)?.to_vec(),
    })
}

/// The client's flags in an answer's first 4 extras bytes (stored, and sent, in network order).
fn flags_of(ext: &[u8]) -> u32 {
    match ext.get(..4) {
        Some(&[a, b, c, d]) => u32::from_be_bytes([a, b, c, d]),
        _ => 0,
    }
}

/// Get-and-touch as one engine call (binary GAT through `unknown_command`): `Ok(None)` on a
/// miss, `ENGINE_ENOTSUP` when the engine does not know GAT.
pub fn get_and_touch(
    peer: &Peer,
    scratch: &mut Aligned,
    key: &[u8],
    exptime: u32,
) -> Result<Option<Touched>, ENGINE_ERROR_CODE> {
    let a = call(
        peer,
        scratch,
        PROTOCOL_BINARY_CMD_GAT,
        &exptime.to_be_bytes(),
        key,
        &[],
    )?;
    match a.status {
        PROTOCOL_BINARY_RESPONSE_SUCCESS => Ok(Some(Touched {
            flags: flags_of(&a.ext),
            cas: a.cas,
            value: a.value,
        })),
        PROTOCOL_BINARY_RESPONSE_KEY_ENOENT => Ok(None),
        _ => Err(ENGINE_FAILED),
    }
}

/// An answer to one of our private opcodes, from an engine that knows them (see
/// [`ANSWER_MAGIC`]): any other is `ENGINE_ENOTSUP`.
fn ours(answer: Result<Answer, ENGINE_ERROR_CODE>) -> Result<Answer, ENGINE_ERROR_CODE> {
    match answer {
        Ok(a) if !a.ext.starts_with(&ANSWER_MAGIC) => Err(ENGINE_ENOTSUP),
        other => other,
    }
}

/// `mg` through our engines' private opcode ([`mcb_abi::meta_ext`]): stale items and the
/// recache token. `ENGINE_ENOTSUP` from an engine without it.
fn fetch_ext(
    peer: &Peer,
    scratch: &mut Aligned,
    r: &Request,
    touch: Option<libc::time_t>,
) -> Result<Option<(Known, Held)>, Result<ENGINE_ERROR_CODE, &'static str>> {
    let vivify = r.time(b'N').map_err(Err)?;
    // A negative recache time is never reached.
    let recache = r
        .time(b'R')
        .map_err(Err)?
        .map(|t| u32::try_from(t).unwrap_or(0));
    let mut x = [0u8; 16];
    for (on, bit, at, value) in [
        (
            vivify.is_some(),
            GET_VIVIFY,
            4,
            vivify.map_or(0, wire_exptime),
        ),
        (recache.is_some(), GET_RECACHE, 8, recache.unwrap_or(0)),
        (
            touch.is_some(),
            GET_TOUCH,
            12,
            touch.map_or(0, wire_exptime),
        ),
    ] {
        if on {
            x[0] |= bit;
            x[at..at + 4].copy_from_slice(&value.to_be_bytes());
        }
    }
    if r.has(b'u') {
        x[0] |= GET_NO_BUMP;
    }
    let a = ours(call(peer, scratch, CMD_META_GET, &x, &r.key, &[])).map_err(Ok)?;
    match (a.status, a.ext.get(4..17)) {
        (
            PROTOCOL_BINARY_RESPONSE_SUCCESS,
            Some(&[f0, f1, f2, f3, e0, e1, e2, e3, state, l0, l1, l2, l3]),
        ) => {
            let known = Known {
                hit_before: Some(state & STATE_FETCHED != 0),
                idle: Some(u32::from_be_bytes([l0, l1, l2, l3])),
                cas: Some(a.cas),
                flags: Some(u32::from_be_bytes([f0, f1, f2, f3])),
                size: Some(a.value.len()),
                ttl: Some(ttl_of(u32::from_be_bytes([e0, e1, e2, e3]))),
                state,
            };
            Ok(Some((known, Held::Copied(a.value))))
        }
        (PROTOCOL_BINARY_RESPONSE_KEY_ENOENT, _) => Ok(None),
        _ => Err(Ok(ENGINE_FAILED)),
    }
}

/// `mg <key> <flag>*`: a get (a get-and-touch with `T`).
pub fn get(peer: &Peer, out: &mut Output, scratch: &mut Aligned, r: &Request) -> Flow {
    let touch = match r.time(b'T') {
        Ok(t) => t,
        Err(e) => return say_error(out.tail(), e),
    };
    if touch.is_some() {
        peer.count(Stat::CmdTouch);
    }
    let found = match fetch_ext(peer, scratch, r, touch) {
        // An engine without our opcode: what v1 does (no stale items, token, access times).
        Err(Ok(ENGINE_ENOTSUP)) if !b"NRhl".iter().any(|&f| r.has(f)) => {
            fetch_v1(peer, scratch, r, touch)
        }
        found => found,
    };
    let found = match found {
        Err(Err(text)) => return say_error(out.tail(), text),
        Err(Ok(rc)) => Err(rc),
        Ok(found) => Ok(found),
    };
    match found {
        Ok(Some((known, held))) => {
            peer.fetched(true);
            if !r.has(b'v') {
                r.answer(out.tail(), "HD", &known);
                return Flow::Continue;
            }
            let tail = out.tail();
            let _ = write!(tail, "VA {}", known.size.unwrap_or(0));
            r.echo(tail, &known);
            tail.extend_from_slice(b"\r\n");
            match held {
                Held::Copied(v) => tail.extend_from_slice(&v),
                Held::Item(value) if value.len() <= COPY_MAX => value
                    .value()
                    .for_each(|piece| tail.extend_from_slice(piece)),
                Held::Item(value) => out.push_value(value),
            }
            out.tail().extend_from_slice(b"\r\n");
            Flow::Continue
        }
        Ok(None) => {
            peer.fetched(false);
            if !r.quiet() {
                r.answer(out.tail(), "EN", &Known::default());
            }
            Flow::Continue
        }
        Err(rc) => engine_error(out.tail(), rc),
    }
}

/// `mg` through the v1 calls: `get`, or binary GAT for a touch.
fn fetch_v1(
    peer: &Peer,
    scratch: &mut Aligned,
    r: &Request,
    touch: Option<libc::time_t>,
) -> Result<Option<(Known, Held)>, Result<ENGINE_ERROR_CODE, &'static str>> {
    if let Some(t) = touch {
        let hit = get_and_touch(peer, scratch, &r.key, wire_exptime(t)).map_err(Ok)?;
        return Ok(hit.map(|hit| {
            let known = Known {
                cas: Some(hit.cas),
                flags: Some(hit.flags),
                size: Some(hit.value.len()),
                ttl: Some(ttl_of(to_rel_time(t))),
                state: 0,
                ..Known::default()
            };
            (known, Held::Copied(hit.value))
        }));
    }
    match peer.retry(|| peer.engine().get(&peer.cookie, &r.key, 0)) {
        Ok(item) => {
            let value = Value::of(item).ok_or(Err("SERVER_ERROR failed to get item details"))?;
            let info = value.info();
            let known = Known {
                cas: Some(info.cas()),
                flags: Some(u32::from_be(info.flags())),
                size: Some(info.nbytes()),
                ttl: Some(ttl_of(info.exptime())),
                state: 0,
                ..Known::default()
            };
            Ok(Some((known, Held::Item(value))))
        }
        Err(ENGINE_KEY_ENOENT) => Ok(None),
        Err(rc) => Err(Ok(rc)),
    }
}

/// A hit's value: held in the engine's item, or copied from an engine's answer.
enum Held {
    Item(Value<'static>),
    Copied(Vec<u8>),
}

/// `md <key> <flag>*`: a delete, with a CAS to compare when `C` is given.
pub fn delete(peer: &Peer, out: &mut Vec<u8>, scratch: &mut Aligned, r: &Request) -> Flow {
    let (mut cas, ttl) = match (r.u64(b'C'), r.time(b'T')) {
        (Ok(cas), Ok(ttl)) => (cas.unwrap_or(0), ttl),
        (Err(e), _) | (_, Err(e)) => return say_error(out, e),
    };
    let engine = peer.engine();
    let removed = if r.has(b'I') {
        invalidate(peer, scratch, &r.key, cas, ttl)
    } else {
        peer.retry(|| ok(engine.remove(&peer.cookie, &r.key, &mut cas, 0)))
    };
    let code = match removed {
        Ok(()) if r.quiet() => return Flow::Continue,
        Ok(()) => "HD",
        Err(ENGINE_KEY_ENOENT) => "NF",
        Err(ENGINE_KEY_EEXISTS) => "EX",
        Err(rc) => return engine_error(out, rc),
    };
    r.answer(out, code, &Known::default());
    Flow::Continue
}

/// `md … I`: the item becomes a stale copy (with expiry `ttl`, when given), through our engines'
/// private opcode.
fn invalidate(
    peer: &Peer,
    scratch: &mut Aligned,
    key: &[u8],
    cas: u64,
    ttl: Option<libc::time_t>,
) -> Result<(), ENGINE_ERROR_CODE> {
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&cas.to_be_bytes());
    if let Some(t) = ttl {
        x[8..12].copy_from_slice(&wire_exptime(t).to_be_bytes());
        x[12] = INVALIDATE_SET_EXPTIME;
    }
    status_rc(ours(call(peer, scratch, CMD_META_INVALIDATE, &x, key, &[]))?.status)
}

/// `ms … I`: stores `value` if `cas` is the item's, and marked stale if it is older, through
/// our engines' private opcode; the new CAS.
pub fn store_invalid(
    peer: &Peer,
    scratch: &mut Aligned,
    key: &[u8],
    line: &SetLine,
    value: &[u8],
) -> Result<u64, ENGINE_ERROR_CODE> {
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&line.cas.to_be_bytes());
    x[8..12].copy_from_slice(&line.flags.to_be_bytes());
    x[12..].copy_from_slice(&wire_exptime(line.exptime).to_be_bytes());
    let a = ours(call(peer, scratch, CMD_META_SET_INVALID, &x, key, value))?;
    status_rc(a.status).map(|()| a.cas)
}

/// An engine's binary status as its v1 code.
fn status_rc(status: u16) -> Result<(), ENGINE_ERROR_CODE> {
    Err(match status {
        PROTOCOL_BINARY_RESPONSE_SUCCESS => return Ok(()),
        PROTOCOL_BINARY_RESPONSE_KEY_ENOENT => ENGINE_KEY_ENOENT,
        PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS => ENGINE_KEY_EEXISTS,
        PROTOCOL_BINARY_RESPONSE_NOT_STORED => ENGINE_NOT_STORED,
        PROTOCOL_BINARY_RESPONSE_E2BIG => ENGINE_E2BIG,
        PROTOCOL_BINARY_RESPONSE_ENOMEM => ENGINE_ENOMEM,
        PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL => ENGINE_EINVAL,
        _ => ENGINE_FAILED,
    })
}

/// `ma <key> <flag>*`: incr or decr, creating the item on a miss with `N`.
pub fn arithmetic(peer: &Peer, out: &mut Vec<u8>, scratch: &mut Aligned, r: &Request) -> Flow {
    let incr = match r.token(b'M') {
        None | Some(b"I" | b"+") => true,
        Some(b"D" | b"-") => false,
        Some(_) => return say_error(out, "CLIENT_ERROR invalid mode for ma M token"),
    };
    let parsed = (r.time(b'N'), r.u64(b'J'), r.u64(b'D'));
    let (create, initial, delta) = match parsed {
        (Ok(n), Ok(j), Ok(d)) => (n, j.unwrap_or(0), d.unwrap_or(1)),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return say_error(out, e),
    };
    let (cas_in, touch) = match (r.u64(b'C'), r.time(b'T')) {
        (Ok(c), Ok(t)) => (c.unwrap_or(0), t),
        (Err(e), _) | (_, Err(e)) => return say_error(out, e),
    };
    let a = Arith {
        incr,
        create: create.is_some(),
        delta,
        initial,
        exptime: create.map_or(0, wire_exptime),
    };
    let engine = peer.engine();
    let (mut cas, mut result, mut ttl, mut created) = (0, 0, None, false);
    // A CAS, a TTL to set or to report need our engines' private opcode; `N q` asks it too,
    // since memcached 1.6.18 answers a created item though `q` hides a hit (an engine without
    // the opcode then serves it through v1, which cannot tell, and the answer stays hidden).
    let needs_ext = cas_in != 0 || touch.is_some() || r.has(b't');
    let mut rc = Err(ENGINE_ENOTSUP);
    if needs_ext || (a.create && r.quiet()) {
        let mut x = [0u8; 40];
        x[0] = if incr { ARITH_INCR } else { 0 };
        if let Some(n) = create {
            x[0] |= ARITH_CREATE;
            x[4..8].copy_from_slice(&wire_exptime(n).to_be_bytes());
        }
        if let Some(t) = touch {
            x[0] |= ARITH_TOUCH;
            x[8..12].copy_from_slice(&wire_exptime(t).to_be_bytes());
        }
        x[16..24].copy_from_slice(&delta.to_be_bytes());
        x[24..32].copy_from_slice(&initial.to_be_bytes());
        x[32..].copy_from_slice(&cas_in.to_be_bytes());
        rc = ours(call(peer, scratch, CMD_META_ARITHMETIC, &x, &r.key, &[])).and_then(|a| {
            status_rc(a.status)?;
            match (a.ext.get(4..9), <[u8; 8]>::try_from(&a.value[..])) {
                (Some(&[e0, e1, e2, e3, made]), Ok(number)) => {
                    cas = a.cas;
                    result = u64::from_be_bytes(number);
                    ttl = Some(ttl_of(u32::from_be_bytes([e0, e1, e2, e3])));
                    created = made != 0;
                    Ok(())
                }
                _ => Err(ENGINE_FAILED),
            }
        });
    }
    if !needs_ext && rc == Err(ENGINE_ENOTSUP) {
        ttl = None;
        rc = peer
            .retry(|| ok(engine.arithmetic(&peer.cookie, &r.key, &a, &mut cas, &mut result, 0)));
    }
    let code = match rc {
        Ok(()) if r.quiet() && !created => return Flow::Continue,
        Ok(()) => {
            let known = Known {
                cas: Some(cas),
                ttl,
                ..Known::default()
            };
            if r.has(b'v') {
                let number = result.to_string();
                let _ = write!(out, "VA {}", number.len());
                r.echo(out, &known);
                out.extend_from_slice(b"\r\n");
                reply(out, &number);
            } else {
                r.answer(out, "HD", &known);
            }
            return Flow::Continue;
        }
        Err(ENGINE_KEY_ENOENT) => "NF",
        Err(ENGINE_NOT_STORED) => "NS",
        Err(ENGINE_KEY_EEXISTS) => "EX",
        Err(ENGINE_EINVAL) => return say_error(out, NON_NUMERIC),
        Err(rc) => return engine_error(out, rc),
    };
    r.answer(out, code, &Known::default());
    Flow::Continue
}

/// `me <key>`: the item's expiry and CAS, and on our engines (through the meta get's private
/// opcode, with `u` so that looking changes nothing) also the seconds since its last access
/// and whether it was fetched, in memcached 1.6's order. memcached's slab class and item size
/// (`cls`, `size`) describe its slab allocator, which no engine here has: left out.
pub fn debug(peer: &Peer, out: &mut Vec<u8>, scratch: &mut Aligned, key: &[u8]) -> Flow {
    const UNBUMPED: &[&[u8]] = &[b"u"];
    let request = match parse(&MG, key, UNBUMPED) {
        Ok(r) => r,
        Err(text) => return say_error(out, text),
    };
    let known = match fetch_ext(peer, scratch, &request, None) {
        Ok(Some((known, _))) => Ok(known),
        Ok(None) => Err(ENGINE_KEY_ENOENT),
        Err(Ok(ENGINE_ENOTSUP)) => debug_v1(peer, key),
        Err(Ok(rc)) => Err(rc),
        Err(Err(text)) => return say_error(out, text),
    };
    match known {
        Ok(known) => {
            out.extend_from_slice(b"ME ");
            out.extend_from_slice(key);
            let _ = write!(out, " exp={}", known.ttl.unwrap_or(-1));
            if let Some(idle) = known.idle {
                let _ = write!(out, " la={idle}");
            }
            let _ = write!(out, " cas={}", known.cas.unwrap_or(0));
            if let Some(fetched) = known.hit_before {
                let _ = write!(out, " fetch={}", if fetched { "yes" } else { "no" });
            }
            out.extend_from_slice(b"\r\n");
            Flow::Continue
        }
        Err(ENGINE_KEY_ENOENT) => say_error(out, "EN"),
        Err(ENGINE_FAILED) => say_error(out, "SERVER_ERROR failed to get item details"),
        Err(rc) => engine_error(out, rc),
    }
}

/// What v1 tells `me` of an item: its expiry and CAS.
fn debug_v1(peer: &Peer, key: &[u8]) -> Result<Known, ENGINE_ERROR_CODE> {
    let item = peer.retry(|| peer.engine().get(&peer.cookie, key, 0))?;
    let info = item.info().ok_or(ENGINE_FAILED)?;
    Ok(Known {
        cas: Some(info.cas()),
        ttl: Some(ttl_of(info.exptime())),
        ..Known::default()
    })
}

/// The parsed `ms <key> <datalen> <flag>*` line.
#[derive(Debug)]
pub struct SetLine {
    pub flags: u32,
    pub exptime: libc::time_t,
    /// The CAS to compare (`C`), 0 for none.
    pub cas: u64,
    pub op: ENGINE_STORE_OPERATION,
}

/// Reads an `ms` request's flags.
pub fn set_line(r: &Request) -> Result<SetLine, &'static str> {
    let mut op = match r.token(b'M') {
        None | Some(b"S") => OPERATION_SET,
        Some(b"E") => OPERATION_ADD,
        Some(b"A") => OPERATION_APPEND,
        Some(b"P") => OPERATION_PREPEND,
        Some(b"R") => OPERATION_REPLACE,
        Some(_) => return Err("CLIENT_ERROR invalid mode for ms M token"),
    };
    let cas = r.u64(b'C')?.unwrap_or(0);
    if cas != 0 && op == OPERATION_SET {
        op = OPERATION_CAS;
    }
    Ok(SetLine {
        flags: r.number(b'F', c_u32)?.unwrap_or(0),
        exptime: r.time(b'T')?.unwrap_or(0),
        cas,
        op,
    })
}

/// The answer to a finished `ms`: `rc` is the store's status, `cas` the stored item's CAS.
pub fn set_answer(out: &mut Vec<u8>, r: &Request, rc: ENGINE_ERROR_CODE, cas: u64) -> Flow {
    let code = match rc {
        ENGINE_SUCCESS if r.quiet() => return Flow::Continue,
        ENGINE_SUCCESS => "HD",
        ENGINE_KEY_EEXISTS => "EX",
        ENGINE_KEY_ENOENT => "NF",
        ENGINE_NOT_STORED => "NS",
        ENGINE_ENOMEM => return say_error(out, "SERVER_ERROR out of memory storing object"),
        rc => return engine_error(out, rc),
    };
    let known = Known {
        cas: Some(if rc == ENGINE_SUCCESS { cas } else { 0 }),
        ..Known::default()
    };
    r.answer(out, code, &known);
    Flow::Continue
}

fn say_error(out: &mut Vec<u8>, line: &str) -> Flow {
    reply(out, line);
    Flow::Continue
}

fn engine_error(out: &mut Vec<u8>, rc: ENGINE_ERROR_CODE) -> Flow {
    match rc {
        ENGINE_DISCONNECT => Flow::Close,
        // The caller sees the parked mark and runs the command again.
        ENGINE_EWOULDBLOCK => Flow::Continue,
        ENGINE_ENOTSUP => say_error(out, UNSUPPORTED),
        rc => say_error(out, error_line(rc)),
    }
}

/// Standard base64 (with padding), as memcached's `b` flag reads keys.
fn decode_base64(text: &[u8]) -> Option<Vec<u8>> {
    fn sextet(c: u8) -> Option<u32> {
        Some(u32::from(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        }))
    }
    if text.is_empty() || text.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let last = text.len() / 4 - 1;
    for (i, quad) in text.chunks(4).enumerate() {
        let pad = quad.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && i != last) {
            return None;
        }
        let mut bits = 0;
        for &c in &quad[..4 - pad] {
            bits = bits << 6 | sextet(c)?;
        }
        bits <<= 6 * pad as u32;
        out.extend_from_slice(&bits.to_be_bytes()[1..4 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::decode_base64;

    #[test]
    fn base64_keys() {
        assert_eq!(decode_base64(b"Zm9v").as_deref(), Some(&b"foo"[..]));
        assert_eq!(decode_base64(b"Zm9vYg==").as_deref(), Some(&b"foob"[..]));
        assert_eq!(decode_base64(b"Zm9vYmE=").as_deref(), Some(&b"fooba"[..]));
        assert_eq!(decode_base64(b"AP8="), Some(vec![0, 255]));
        for bad in [&b"foo"[..], b"", b"Zm9!", b"Z===", b"Zg==Zm9v"] {
            assert_eq!(decode_base64(bad), None, "{bad:?}");
        }
    }
}
