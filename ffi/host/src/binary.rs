//! memcached's binary protocol: 24-byte request headers (magic 0x80), responses (magic 0x81)
//! echoing the opcode and opaque. A connection is a state machine ([`Pending`]) its worker
//! steps ([`step`]) as bytes arrive: values of storage commands are copied into the item the
//! engine allocated as they arrive; every other packet runs once buffered whole (up to
//! `MAX_PACKET`); a get's large value is written out from the held item. Quiet
//! commands answer only on error (gets: only on a hit). TOUCH and the GATs (memcached 1.6's
//! GATK and GATKQ too) run as the engine's TOUCH or GAT and are worded here, as memcached
//! words them. Opcodes the host does not handle go to the engine's `unknown_command`,
//! answering through `ADD_RESPONSE`.
//!
//! A bad magic byte, a header whose extras and key do not fit its body, a request whose extras,
//! key or value do not fit its opcode (a key over 250 bytes included), or a packet over
//! `MAX_PACKET` ends the connection (after an error response where one can be framed), as
//! memcached 1.6 does: the stream cannot be trusted past them.

#![deny(unsafe_code)]

use crate::api::extension::log;
use crate::api::log::set_log_level;
use crate::api::logger::level_of_verbosity;
use crate::api::server_core::{to_rel_time, MEMCACHED_VERSION};
use crate::codec::{encode_head, encode_response, Response, HEADER, KEY_MAX};
use crate::counters::{Op, Stat};
use crate::engine::{Arith, Blank, StoreOp, Value};
use crate::ext;
use crate::io::{Landing, Output, COPY_MAX};
use crate::packet::Packet;
use crate::session::{ok, Flow, Peer, Session, Step};
use crate::stats::{self, End};
use mcb_abi::abi::*;

/// Largest non-storage packet body read whole (bucket admin commands stop at 64 KiB; touch,
/// stats and friends are tiny).
const MAX_PACKET: usize = 1024 * 1024;

/// memcached 1.6's GAT that answers with the key, and its quiet twin (opcodes the v1 headers
/// do not name): the host serves them through the engine's GAT.
const CMD_GATK: u8 = 0x23;
const CMD_GATKQ: u8 = 0x24;

/// A request header.
#[derive(Debug, Clone, Copy)]
struct Header {
    opcode: u8,
    keylen: usize,
    extlen: usize,
    vbucket: u16,
    bodylen: usize,
    opaque: u32,
    cas: u64,
}

impl Header {
    fn parse(b: &[u8]) -> Header {
        let be16 = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let be32 = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Header {
            opcode: b[1],
            keylen: usize::from(be16(2)),
            extlen: usize::from(b[4]),
            vbucket: be16(6),
            bodylen: be32(8) as usize,
            opaque: be32(12),
            cas: (u64::from(be32(16)) << 32) | u64::from(be32(20)),
        }
    }

    fn reply(&self, status: u16, cas: u64) -> Response {
        Response {
            opcode: self.opcode,
            opaque: self.opaque,
            status,
            cas,
            datatype: PROTOCOL_BINARY_RAW_BYTES,
        }
    }
}

/// memcached's status for an engine code; `None` for DISCONNECT.
fn status_of(rc: ENGINE_ERROR_CODE) -> Option<u16> {
    Some(match rc {
        ENGINE_SUCCESS => PROTOCOL_BINARY_RESPONSE_SUCCESS,
        ENGINE_KEY_ENOENT => PROTOCOL_BINARY_RESPONSE_KEY_ENOENT,
        ENGINE_KEY_EEXISTS => PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS,
        ENGINE_ENOMEM => PROTOCOL_BINARY_RESPONSE_ENOMEM,
        ENGINE_NOT_STORED => PROTOCOL_BINARY_RESPONSE_NOT_STORED,
        ENGINE_EINVAL => PROTOCOL_BINARY_RESPONSE_EINVAL,
        ENGINE_ENOTSUP => PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED,
        ENGINE_E2BIG => PROTOCOL_BINARY_RESPONSE_E2BIG,
        ENGINE_NOT_MY_VBUCKET => PROTOCOL_BINARY_RESPONSE_NOT_MY_VBUCKET,
        ENGINE_TMPFAIL => PROTOCOL_BINARY_RESPONSE_ETMPFAIL,
        ENGINE_ERANGE => PROTOCOL_BINARY_RESPONSE_ERANGE,
        ENGINE_EACCESS => PROTOCOL_BINARY_RESPONSE_AUTH_ERROR,
        ENGINE_DISCONNECT => return None,
        _ => PROTOCOL_BINARY_RESPONSE_EINTERNAL,
    })
}

/// memcached's text for an error status.
fn message(status: u16) -> &'static [u8] {
    match status {
        PROTOCOL_BINARY_RESPONSE_KEY_ENOENT => b"Not found",
        PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS => b"Data exists for key.",
        PROTOCOL_BINARY_RESPONSE_E2BIG => b"Too large.",
        PROTOCOL_BINARY_RESPONSE_EINVAL => b"Invalid arguments",
        PROTOCOL_BINARY_RESPONSE_NOT_STORED => b"Not stored.",
        PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL => b"Non-numeric server-side value for incr or decr",
        PROTOCOL_BINARY_RESPONSE_NOT_MY_VBUCKET => b"I'm not responsible for this vbucket",
        PROTOCOL_BINARY_RESPONSE_AUTH_ERROR => b"Auth failure.",
        PROTOCOL_BINARY_RESPONSE_ERANGE => b"Out of range",
        PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND => b"Unknown command",
        PROTOCOL_BINARY_RESPONSE_ENOMEM => b"Out of memory",
        PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED => b"Not supported",
        PROTOCOL_BINARY_RESPONSE_ETMPFAIL => b"Temporary failure",
        _ => b"Internal error",
    }
}

/// Appends an error response (with memcached's text) or an empty success.
fn status_reply(out: &mut Vec<u8>, h: &Header, status: u16) {
    let text: &[u8] = if status == PROTOCOL_BINARY_RESPONSE_SUCCESS {
        b""
    } else {
        message(status)
    };
    encode_response(out, &h.reply(status, 0), &[], &[], std::iter::once(text));
}

/// A request whose extras, key or value do not fit its opcode: EINVAL, and the connection is
/// closed, as memcached 1.6 closes it (the stream cannot be trusted past it).
fn malformed(out: &mut Vec<u8>, h: &Header) -> Flow {
    status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINVAL);
    Flow::Close
}

/// Answers an engine code: an error's response, nothing for a quiet success, `Close` for
/// DISCONNECT.
fn answer(out: &mut Vec<u8>, h: &Header, rc: ENGINE_ERROR_CODE, cas: u64, quiet: bool) -> Flow {
    match status_of(rc) {
        None => Flow::Close,
        Some(PROTOCOL_BINARY_RESPONSE_SUCCESS) => {
            if !quiet {
                encode_response(out, &h.reply(0, cas), &[], &[], std::iter::empty());
            }
            Flow::Continue
        }
        Some(status) => {
            status_reply(out, h, status);
            Flow::Continue
        }
    }
}

/// Whether an opcode is a storage command (value read into an allocated item), its store
/// operation (before the CAS adjustment) and whether it is quiet.
fn storage(opcode: u8) -> Option<(StoreOp, bool)> {
    Some(match opcode {
        PROTOCOL_BINARY_CMD_SET => (OPERATION_SET, false),
        PROTOCOL_BINARY_CMD_SETQ => (OPERATION_SET, true),
        PROTOCOL_BINARY_CMD_ADD => (OPERATION_ADD, false),
        PROTOCOL_BINARY_CMD_ADDQ => (OPERATION_ADD, true),
        PROTOCOL_BINARY_CMD_REPLACE => (OPERATION_REPLACE, false),
        PROTOCOL_BINARY_CMD_REPLACEQ => (OPERATION_REPLACE, true),
        PROTOCOL_BINARY_CMD_APPEND => (OPERATION_APPEND, false),
        PROTOCOL_BINARY_CMD_APPENDQ => (OPERATION_APPEND, true),
        PROTOCOL_BINARY_CMD_PREPEND => (OPERATION_PREPEND, false),
        PROTOCOL_BINARY_CMD_PREPENDQ => (OPERATION_PREPEND, true),
        _ => return None,
    })
}

/// Commands an unauthenticated connection may send when SASL is required (memcached 1.6's).
fn allowed_before_auth(opcode: u8) -> bool {
    matches!(
        opcode,
        PROTOCOL_BINARY_CMD_SASL_LIST_MECHS
            | PROTOCOL_BINARY_CMD_SASL_AUTH
            | PROTOCOL_BINARY_CMD_SASL_STEP
            | PROTOCOL_BINARY_CMD_VERSION
    )
}

/// Where a connection is within the binary protocol between steps.
#[derive(Debug, Default)]
pub enum Pending {
    /// Between requests.
    #[default]
    Idle,
    /// A storage command's value arriving into its item.
    Data(Box<Fill>),
    /// A storage command with all its value, to store.
    Store(Box<Fill>),
    /// A body nobody reads: this many more bytes to drop.
    Swallow(usize),
}

/// A storage command's item, its value arriving.
#[derive(Debug)]
pub struct Fill {
    landing: Landing,
    h: Header,
    op: StoreOp,
    quiet: bool,
}

/// The item a connection's value is arriving into, when it is: its worker reads the socket
/// straight into it.
pub fn landing(p: &mut Pending) -> Option<&mut Landing> {
    match p {
        Pending::Data(fill) => Some(&mut fill.landing),
        _ => None,
    }
}

/// Runs the connection's next step: a request whose header is buffered, or the rest of one.
pub fn step(s: &mut Session, p: &mut Pending) -> Step {
    match std::mem::take(p) {
        Pending::Idle => request(s, p),
        Pending::Data(fill) => data(s, p, fill),
        Pending::Store(fill) => store(s, p, fill),
        Pending::Swallow(n) => match s.input.discard(n) {
            0 => Step::Done,
            left => {
                *p = Pending::Swallow(left);
                Step::NeedInput
            }
        },
    }
}

/// A request whose header may be buffered: answered once whole (a storage command once its
/// key is in: its value then arrives into the item).
fn request(s: &mut Session, p: &mut Pending) -> Step {
    let head = s.input.buffered();
    if head.len() < HEADER {
        return Step::NeedInput;
    }
    if head[0] != PROTOCOL_BINARY_REQ {
        log(
            EXTENSION_LOG_INFO,
            &format!("closing a connection that sent bad magic 0x{:02x}", head[0]),
        );
        return Step::Close;
    }
    let h = Header::parse(&head[..HEADER]);
    if h.extlen + h.keylen > h.bodylen {
        status_reply(s.out.tail(), &h, PROTOCOL_BINARY_RESPONSE_EINVAL);
        return Step::Close;
    }
    // memcached 1.6 refuses a key over 250 bytes on any opcode, and a command before
    // authenticating, and closes the connection.
    let refused = if h.keylen > KEY_MAX {
        Some(PROTOCOL_BINARY_RESPONSE_EINVAL)
    } else if s.peer.needs_auth() && !allowed_before_auth(h.opcode) {
        Some(PROTOCOL_BINARY_RESPONSE_AUTH_ERROR)
    } else {
        None
    };
    if let Some(status) = refused {
        status_reply(s.out.tail(), &h, status);
        return Step::Close;
    }
    if let Some((op, quiet)) = storage(h.opcode) {
        return allocate(s, p, &h, op, quiet);
    }
    if h.bodylen > MAX_PACKET {
        status_reply(s.out.tail(), &h, PROTOCOL_BINARY_RESPONSE_E2BIG);
        return Step::Close;
    }
    if head.len() < HEADER + h.bodylen {
        return Step::NeedInput;
    }
    let mark = s.out.mark();
    let flow = dispatch(s, &h);
    if s.peer.take_parked() {
        // The request runs again, whole, once the engine notifies.
        s.out.truncate(mark);
        return Step::Parked;
    }
    s.input.consume(HEADER + h.bodylen);
    match flow {
        Flow::Continue => answered(h.opcode),
        Flow::Close => Step::Close,
    }
}

/// How a served request ends its step: a quiet command (GETKQ, SETQ, ...) is a part of the
/// batch a client pipelines, which the next loud one (NOOP, usually) ends, so it does not
/// count as a request of its own towards the turn's `-R` (the batch is answered in one
/// `writev`, as an ASCII multi-get is).
fn answered(opcode: u8) -> Step {
    let quiet = matches!(
        opcode,
        PROTOCOL_BINARY_CMD_GETQ
            | PROTOCOL_BINARY_CMD_GETKQ
            | PROTOCOL_BINARY_CMD_SETQ
            | PROTOCOL_BINARY_CMD_ADDQ
            | PROTOCOL_BINARY_CMD_REPLACEQ
            | PROTOCOL_BINARY_CMD_DELETEQ
            | PROTOCOL_BINARY_CMD_INCREMENTQ
            | PROTOCOL_BINARY_CMD_DECREMENTQ
            | PROTOCOL_BINARY_CMD_FLUSHQ
            | PROTOCOL_BINARY_CMD_APPENDQ
            | PROTOCOL_BINARY_CMD_PREPENDQ
            | PROTOCOL_BINARY_CMD_GATQ
    );
    if quiet {
        Step::More
    } else {
        Step::Done
    }
}

/// A storage command whose extras and key are buffered: allocates the item its value will
/// arrive into.
fn allocate(s: &mut Session, p: &mut Pending, h: &Header, op: StoreOp, quiet: bool) -> Step {
    let want_extras = if op == OPERATION_APPEND || op == OPERATION_PREPEND {
        0
    } else {
        8
    };
    let len = h.bodylen - h.extlen - h.keylen;
    if h.extlen != want_extras || h.keylen == 0 {
        malformed(s.out.tail(), h);
        return Step::Close;
    }
    let head = HEADER + h.extlen + h.keylen;
    let packet = s.input.buffered();
    if packet.len() < head {
        return Step::NeedInput;
    }
    let peer = &s.peer;
    let engine = peer.engine();
    let extras = &packet[HEADER..HEADER + h.extlen];
    let key = &packet[HEADER + h.extlen..head];
    let (flags, exptime) = match extras {
        // The flags stay in network byte order, as memcached stores them.
        [f0, f1, f2, f3, e0, e1, e2, e3] => (
            u32::from_ne_bytes([*f0, *f1, *f2, *f3]),
            to_rel_time(libc::time_t::from(u32::from_be_bytes([*e0, *e1, *e2, *e3]))),
        ),
        _ => (0, 0),
    };
    let allocated = peer.retry(|| engine.allocate(&peer.cookie, key, len, flags, exptime));
    if matches!(allocated, Err(ENGINE_EWOULDBLOCK)) {
        peer.take_parked();
        return Step::Parked;
    }
    // As memcached: a SET (quiet or not) that cannot be stored takes the old value away.
    peer.storing(key, &allocated, op == OPERATION_SET);
    peer.detail(key, Op::Set);
    s.input.consume(head);
    let item = match allocated {
        Ok(item) => item,
        Err(rc) => {
            *p = Pending::Swallow(len);
            return match answer(s.out.tail(), h, rc, 0, false) {
                Flow::Continue => Step::More,
                Flow::Close => Step::Close,
            };
        }
    };
    let Some(blank) = Blank::of(item, len) else {
        status_reply(s.out.tail(), h, PROTOCOL_BINARY_RESPONSE_EINTERNAL);
        *p = Pending::Swallow(len);
        return Step::More;
    };
    *p = Pending::Data(Box::new(Fill {
        landing: Landing::new(blank),
        h: *h,
        op,
        quiet,
    }));
    Step::More
}

/// Moves arriving value bytes into the item; stores it once whole.
fn data(s: &mut Session, p: &mut Pending, mut fill: Box<Fill>) -> Step {
    fill.landing.take_from(&mut s.input);
    if !fill.landing.is_full() {
        *p = Pending::Data(fill);
        return Step::NeedInput;
    }
    store(s, p, fill)
}

/// Stores a filled item.
fn store(s: &mut Session, p: &mut Pending, fill: Box<Fill>) -> Step {
    let peer = &s.peer;
    let engine = peer.engine();
    let h = &fill.h;
    let item = fill.landing.blank().item();
    engine.item_set_cas(item, h.cas);
    // As memcached: a CAS on a set, an add or a replace makes it a compare-and-swap.
    let op = match fill.op {
        OPERATION_SET | OPERATION_ADD | OPERATION_REPLACE if h.cas != 0 => OPERATION_CAS,
        op => op,
    };
    let mut cas = h.cas;
    let rc = peer
        .retry(|| ok(engine.store(item, &mut cas, op, h.vbucket)))
        .err()
        .unwrap_or(ENGINE_SUCCESS);
    let rc = match (rc, op) {
        (ENGINE_EWOULDBLOCK, _) => {
            peer.take_parked();
            *p = Pending::Store(fill);
            return Step::Parked;
        }
        (ENGINE_NOT_STORED, OPERATION_ADD) => ENGINE_KEY_EEXISTS,
        (ENGINE_NOT_STORED, OPERATION_REPLACE) => ENGINE_KEY_ENOENT,
        (rc, _) => rc,
    };
    match answer(s.out.tail(), h, rc, cas, fill.quiet) {
        Flow::Continue => answered(h.opcode),
        Flow::Close => Step::Close,
    }
}

/// A whole request in the read buffer.
struct Request<'a> {
    h: Header,
    extras: &'a [u8],
    key: &'a [u8],
    value: &'a [u8],
    packet: &'a [u8],
}

fn dispatch(s: &mut Session, h: &Header) -> Flow {
    let Session {
        peer,
        input,
        out: output,
        packet: scratch,
    } = s;
    let packet = &input.buffered()[..HEADER + h.bodylen];
    let body = &packet[HEADER..];
    let req = Request {
        h: *h,
        extras: &body[..h.extlen],
        key: &body[h.extlen..h.extlen + h.keylen],
        value: &body[h.extlen + h.keylen..],
        packet,
    };
    if matches!(
        h.opcode,
        PROTOCOL_BINARY_CMD_GET
            | PROTOCOL_BINARY_CMD_GETQ
            | PROTOCOL_BINARY_CMD_GETK
            | PROTOCOL_BINARY_CMD_GETKQ
    ) {
        return get(peer, &req, output);
    }
    let out = output.tail();
    let bare = req.extras.is_empty() && req.key.is_empty() && req.value.is_empty();
    let misframed = match h.opcode {
        PROTOCOL_BINARY_CMD_NOOP
        | PROTOCOL_BINARY_CMD_VERSION
        | PROTOCOL_BINARY_CMD_QUIT
        | PROTOCOL_BINARY_CMD_QUITQ
        | PROTOCOL_BINARY_CMD_SASL_LIST_MECHS => !bare,
        // The mechanism is the key.
        PROTOCOL_BINARY_CMD_SASL_AUTH | PROTOCOL_BINARY_CMD_SASL_STEP => {
            !req.extras.is_empty() || req.key.is_empty()
        }
        _ => false,
    };
    if misframed {
        return malformed(out, h);
    }
    match h.opcode {
        PROTOCOL_BINARY_CMD_DELETE => delete(peer, &req, out, false),
        PROTOCOL_BINARY_CMD_DELETEQ => delete(peer, &req, out, true),
        PROTOCOL_BINARY_CMD_INCREMENT => arithmetic(peer, &req, out, scratch, (true, false)),
        PROTOCOL_BINARY_CMD_INCREMENTQ => arithmetic(peer, &req, out, scratch, (true, true)),
        PROTOCOL_BINARY_CMD_DECREMENT => arithmetic(peer, &req, out, scratch, (false, false)),
        PROTOCOL_BINARY_CMD_DECREMENTQ => arithmetic(peer, &req, out, scratch, (false, true)),
        PROTOCOL_BINARY_CMD_TOUCH
        | PROTOCOL_BINARY_CMD_GAT
        | PROTOCOL_BINARY_CMD_GATQ
        | CMD_GATK
        | CMD_GATKQ => touch(peer, &req, out, scratch),
        PROTOCOL_BINARY_CMD_FLUSH => flush(peer, &req, out, false),
        PROTOCOL_BINARY_CMD_FLUSHQ => flush(peer, &req, out, true),
        PROTOCOL_BINARY_CMD_QUIT => {
            answer(out, h, ENGINE_SUCCESS, 0, false);
            Flow::Close
        }
        PROTOCOL_BINARY_CMD_QUITQ => Flow::Close,
        PROTOCOL_BINARY_CMD_NOOP => answer(out, h, ENGINE_SUCCESS, 0, false),
        PROTOCOL_BINARY_CMD_VERSION => {
            let version = MEMCACHED_VERSION.as_bytes();
            encode_response(out, &h.reply(0, 0), &[], &[], std::iter::once(version));
            Flow::Continue
        }
        PROTOCOL_BINARY_CMD_STAT => stat(peer, &req, out),
        PROTOCOL_BINARY_CMD_VERBOSITY => verbosity(&req, out),
        // memcached 1.6 without SASL knows no SASL commands; with no password file none
        // could succeed here either.
        PROTOCOL_BINARY_CMD_SASL_LIST_MECHS
        | PROTOCOL_BINARY_CMD_SASL_AUTH
        | PROTOCOL_BINARY_CMD_SASL_STEP
            if peer.ctx.pwdb.is_none() =>
        {
            status_reply(out, h, PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND);
            Flow::Continue
        }
        PROTOCOL_BINARY_CMD_SASL_LIST_MECHS => {
            let mechs = crate::sasl::MECHANISMS;
            encode_response(out, &h.reply(0, 0), &[], &[], std::iter::once(mechs));
            Flow::Continue
        }
        PROTOCOL_BINARY_CMD_SASL_AUTH => sasl_auth(peer, &req, out),
        PROTOCOL_BINARY_CMD_SASL_STEP => {
            // PLAIN finishes in one step: there is never a step to take.
            sasl_failed(peer, out, h);
            Flow::Continue
        }
        _ => unknown(peer, &req, out, scratch),
    }
}

/// GET, GETQ, GETK, GETKQ: a hit's large value is held in the output, not copied.
fn get(peer: &Peer, req: &Request<'_>, output: &mut Output) -> Flow {
    let h = &req.h;
    let quiet = matches!(
        h.opcode,
        PROTOCOL_BINARY_CMD_GETQ | PROTOCOL_BINARY_CMD_GETKQ
    );
    let with_key = matches!(
        h.opcode,
        PROTOCOL_BINARY_CMD_GETK | PROTOCOL_BINARY_CMD_GETKQ
    );
    let out = output.tail();
    if !req.extras.is_empty() || req.key.is_empty() || !req.value.is_empty() {
        return malformed(out, h);
    }
    let engine = peer.engine();
    let key: &[u8] = if with_key { req.key } else { &[] };
    match peer.retry(|| engine.get(&peer.cookie, req.key, h.vbucket)) {
        Ok(item) => {
            let Some(value) = Value::of(item) else {
                status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINTERNAL);
                return Flow::Continue;
            };
            peer.fetched_classic(req.key, true, false);
            let info = value.info();
            let flags = info.flags().to_ne_bytes();
            let reply = h.reply(0, info.cas());
            if value.len() <= COPY_MAX {
                encode_response(out, &reply, &flags, key, value.value());
            } else {
                encode_head(out, &reply, &flags, key, value.len());
                output.push_value(value);
            }
            Flow::Continue
        }
        Err(ENGINE_KEY_ENOENT) => {
            peer.fetched_classic(req.key, false, false);
            if !quiet {
                let status = PROTOCOL_BINARY_RESPONSE_KEY_ENOENT;
                let text = if with_key { &b""[..] } else { message(status) };
                encode_response(out, &h.reply(status, 0), &[], key, std::iter::once(text));
            }
            Flow::Continue
        }
        Err(rc) => answer(out, h, rc, 0, false),
    }
}

fn delete(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>, quiet: bool) -> Flow {
    let h = &req.h;
    if !req.extras.is_empty() || req.key.is_empty() || !req.value.is_empty() {
        return malformed(out, h);
    }
    peer.detail(req.key, Op::Delete);
    let engine = peer.engine();
    let mut cas = h.cas;
    let rc = peer.retry(|| ok(engine.remove(&peer.cookie, req.key, &mut cas, h.vbucket)));
    // memcached 1.6 answers a delete without a CAS (there is no item left to have one).
    answer(out, h, rc.err().unwrap_or(ENGINE_SUCCESS), 0, quiet)
}

fn arithmetic(
    peer: &Peer,
    req: &Request<'_>,
    out: &mut Vec<u8>,
    packet: &mut Packet,
    (incr, quiet): (bool, bool),
) -> Flow {
    let h = &req.h;
    let e = req.extras;
    if e.len() != 20 || req.key.is_empty() || !req.value.is_empty() {
        return malformed(out, h);
    }
    let be64 = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8 bytes"));
    let expiration = u32::from_be_bytes(e[16..20].try_into().expect("4 bytes"));
    let a = Arith {
        incr,
        create: expiration != u32::MAX,
        delta: be64(&e[0..8]),
        initial: be64(&e[8..16]),
        exptime: expiration,
    };
    // A CAS to compare goes through our engines' private arithmetic (v1's cannot take one);
    // an engine without it counts as v1 lets it, ignoring the CAS.
    let mut done = Err(ENGINE_ENOTSUP);
    if h.cas != 0 {
        let with_cas = ext::MetaArith {
            incr,
            create: a.create.then_some(expiration),
            touch: None,
            delta: a.delta,
            initial: a.initial,
            cas: h.cas,
        };
        done = ext::arithmetic(peer, packet, req.key, &with_cas).map(|c| (c.cas, c.value));
    }
    if done == Err(ENGINE_ENOTSUP) {
        done = peer.arithmetic(req.key, &a, h.vbucket);
    }
    match done {
        Ok(_) if quiet => Flow::Continue,
        Ok((cas, result)) => {
            let value = result.to_be_bytes();
            encode_response(out, &h.reply(0, cas), &[], &[], std::iter::once(&value[..]));
            Flow::Continue
        }
        Err(ENGINE_EINVAL) => {
            status_reply(out, h, PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL);
            Flow::Continue
        }
        Err(rc) => answer(out, h, rc, 0, quiet),
    }
}

fn flush(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>, quiet: bool) -> Flow {
    let h = &req.h;
    let when = match (req.extras, req.key.is_empty() && req.value.is_empty()) {
        ([], true) => 0,
        ([a, b, c, d], true) => libc::time_t::from(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => return malformed(out, h),
    };
    peer.count(Stat::CmdFlush);
    if !peer.ctx.options.flush_enabled {
        // `-F`: memcached 1.6 answers a binary flush so.
        status_reply(out, h, PROTOCOL_BINARY_RESPONSE_AUTH_ERROR);
        return Flow::Continue;
    }
    let engine = peer.engine();
    let rc = peer.retry(|| ok(engine.flush(&peer.cookie, when)));
    answer(out, h, rc.err().unwrap_or(ENGINE_SUCCESS), 0, quiet)
}

/// STAT: the key names the group and its arguments (`detail dump`), as in ASCII.
fn stat(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>) -> Flow {
    let h = &req.h;
    if !req.extras.is_empty() || !req.value.is_empty() {
        return malformed(out, h);
    }
    let mut words = req.key.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let group = words.next().unwrap_or_default();
    let args: Vec<&[u8]> = words.collect();
    peer.open_sink(false, h.opcode, h.opaque);
    let end = stats::stats(peer, group, &args);
    peer.take_sink(out);
    match end {
        End::Engine(ENGINE_EWOULDBLOCK) => Flow::Continue,
        End::Engine(rc) if rc != ENGINE_SUCCESS => answer(out, h, rc, 0, false),
        End::Refused(_) => {
            status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINVAL);
            Flow::Continue
        }
        _ => {
            // The empty key ends the stream.
            encode_response(out, &h.reply(0, 0), &[], &[], std::iter::empty());
            Flow::Continue
        }
    }
}

fn verbosity(req: &Request<'_>, out: &mut Vec<u8>) -> Flow {
    let h = &req.h;
    let Ok(level) = <[u8; 4]>::try_from(req.extras) else {
        return malformed(out, h);
    };
    set_log_level(level_of_verbosity(u32::from_be_bytes(level)));
    answer(out, h, ENGINE_SUCCESS, 0, false)
}

fn sasl_auth(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>) -> Flow {
    let h = &req.h;
    peer.count(Stat::AuthCmds);
    let user = match (&peer.ctx.pwdb, req.key) {
        (Some(db), b"PLAIN") => db.plain(req.value),
        _ => None,
    };
    match user {
        Some((user, config)) => {
            peer.authenticated(&user, config.as_deref());
            let text = &b"Authenticated"[..];
            encode_response(out, &h.reply(0, 0), &[], &[], std::iter::once(text));
        }
        None => sasl_failed(peer, out, h),
    }
    Flow::Continue
}

/// A failed SASL step: counted, and the connection is no longer authenticated (memcached's
/// rule: a client cannot keep one identity while failing to take another).
fn sasl_failed(peer: &Peer, out: &mut Vec<u8>, h: &Header) {
    peer.count(Stat::AuthErrors);
    peer.auth_failed();
    status_reply(out, h, PROTOCOL_BINARY_RESPONSE_AUTH_ERROR);
}

/// TOUCH, GAT, GATQ, GATK and GATKQ through the engine's TOUCH or GAT, worded as memcached
/// 1.6 words them: a touch answers the item's flags, GATK and GATKQ the key, a quiet one
/// nothing on a miss, an error memcached's text.
fn touch(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>, packet: &mut Packet) -> Flow {
    let h = &req.h;
    let (Ok(exptime), false) = (<[u8; 4]>::try_from(req.extras), req.key.is_empty()) else {
        return malformed(out, h);
    };
    peer.count(Stat::CmdTouch);
    let quiet = matches!(h.opcode, PROTOCOL_BINARY_CMD_GATQ | CMD_GATKQ);
    let key: &[u8] = if matches!(h.opcode, CMD_GATK | CMD_GATKQ) {
        req.key
    } else {
        &[]
    };
    let opcode = match h.opcode {
        PROTOCOL_BINARY_CMD_TOUCH => PROTOCOL_BINARY_CMD_TOUCH,
        _ => PROTOCOL_BINARY_CMD_GAT,
    };
    let exptime = u32::from_be_bytes(exptime);
    let flow = match ext::touch_answer(peer, packet, opcode, req.key, exptime) {
        Ok(a) => {
            match a.status {
                PROTOCOL_BINARY_RESPONSE_SUCCESS => {
                    let value: &[u8] = if opcode == PROTOCOL_BINARY_CMD_GAT {
                        &a.value
                    } else {
                        &[]
                    };
                    encode_response(out, &h.reply(0, a.cas), &a.ext, key, std::iter::once(value));
                }
                PROTOCOL_BINARY_RESPONSE_KEY_ENOENT if quiet => {}
                PROTOCOL_BINARY_RESPONSE_KEY_ENOENT if !key.is_empty() => {
                    let miss = h.reply(PROTOCOL_BINARY_RESPONSE_KEY_ENOENT, 0);
                    encode_response(out, &miss, &[], key, std::iter::empty());
                }
                status => status_reply(out, h, status),
            }
            peer.keep_answer(a.ext, a.value);
            Flow::Continue
        }
        Err(ENGINE_DISCONNECT) => Flow::Close,
        Err(ENGINE_ENOTSUP) => {
            status_reply(out, h, PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND);
            Flow::Continue
        }
        Err(rc) => answer(out, h, rc, 0, false),
    };
    // memcached reads no value for these: the bytes past the key are no request it can frame,
    // and it ends the connection on them once it has answered.
    if req.value.is_empty() {
        flow
    } else {
        Flow::Close
    }
}

/// Hands the whole packet to the engine (a copy in the session's aligned [`Packet`]).
fn unknown(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>, packet: &mut Packet) -> Flow {
    let h = &req.h;
    let start = out.len();
    let (rc, status) = ext::forward(peer, packet, req.packet, h.opaque, out);
    let responded = status.is_some();
    // An engine's bare refusal (its one answer, without a body) gets memcached's text, as the
    // host's own refusals do.
    let bare = out.len() == start + HEADER;
    if bare && status == Some(PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND) {
        out.truncate(start);
        status_reply(out, h, PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND);
    }
    match rc {
        Ok(()) => Flow::Continue,
        Err(ENGINE_DISCONNECT) => Flow::Close,
        Err(ENGINE_ENOTSUP) if !responded => {
            status_reply(out, h, PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND);
            Flow::Continue
        }
        Err(_) if responded => Flow::Continue,
        Err(rc) => answer(out, h, rc, 0, false),
    }
}
