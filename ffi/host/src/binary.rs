//! memcached's binary protocol: 24-byte request headers (magic 0x80), responses (magic 0x81)
//! echoing the opcode and opaque. Values of storage commands are read straight into the item
//! the engine allocated; every other packet is read whole (up to `MAX_PACKET`). Quiet
//! commands answer only on error (gets: only on a hit). Opcodes the host does not handle go to
//! the engine's `unknown_command`, answering through `ADD_RESPONSE`.
//!
//! A bad magic byte, a header whose extras and key do not fit its body, or a packet over
//! `MAX_PACKET` ends the connection (after an error response where one can be framed), as
//! memcached does: the stream cannot be trusted past them.

use crate::api::extension::log;
use crate::api::log::set_log_level;
use crate::api::logger::level_of_verbosity;
use crate::api::server_core::{to_rel_time, VERSION};
use crate::codec::{encode_response, Response, HEADER, KEY_MAX};
use crate::engine::{Arith, StoreOp};
use crate::session::{ok, Aligned, Counters, Flow, Peer, Session};
use mcb_abi::abi::*;
use std::io;

/// Largest non-storage packet body read whole (bucket admin commands stop at 64 KiB; touch,
/// stats and friends are tiny).
const MAX_PACKET: usize = 1024 * 1024;

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
        PROTOCOL_BINARY_RESPONSE_AUTH_ERROR => b"Auth failure",
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

/// Commands an unauthenticated connection may send when SASL is required.
fn allowed_before_auth(opcode: u8) -> bool {
    matches!(
        opcode,
        PROTOCOL_BINARY_CMD_SASL_LIST_MECHS
            | PROTOCOL_BINARY_CMD_SASL_AUTH
            | PROTOCOL_BINARY_CMD_SASL_STEP
            | PROTOCOL_BINARY_CMD_VERSION
            | PROTOCOL_BINARY_CMD_NOOP
            | PROTOCOL_BINARY_CMD_QUIT
            | PROTOCOL_BINARY_CMD_QUITQ
    )
}

/// Serves binary requests until the client leaves or the stream goes bad.
pub fn serve(s: &mut Session) -> io::Result<()> {
    loop {
        if !s.io.fill(HEADER)? {
            return Ok(());
        }
        let head = s.io.buffered();
        if head[0] != PROTOCOL_BINARY_REQ {
            log(
                EXTENSION_LOG_INFO,
                &format!("closing a connection that sent bad magic 0x{:02x}", head[0]),
            );
            return s.io.flush();
        }
        let h = Header::parse(&head[..HEADER]);
        if h.extlen + h.keylen > h.bodylen {
            status_reply(&mut s.io.wbuf, &h, PROTOCOL_BINARY_RESPONSE_EINVAL);
            return s.io.flush();
        }
        if s.peer.needs_auth() && !allowed_before_auth(h.opcode) {
            s.io.consume(HEADER);
            s.io.skip(h.bodylen as u64)?;
            status_reply(&mut s.io.wbuf, &h, PROTOCOL_BINARY_RESPONSE_AUTH_ERROR);
            continue;
        }
        let flow = match storage(h.opcode) {
            Some((op, quiet)) => store(s, &h, op, quiet)?,
            None => {
                if h.bodylen > MAX_PACKET {
                    status_reply(&mut s.io.wbuf, &h, PROTOCOL_BINARY_RESPONSE_E2BIG);
                    return s.io.flush();
                }
                if !s.io.fill(HEADER + h.bodylen)? {
                    return Ok(()); // truncated: the client went away mid-packet
                }
                let flow = dispatch(s, &h);
                s.io.consume(HEADER + h.bodylen);
                flow
            }
        };
        if flow == Flow::Close {
            return s.io.flush();
        }
        s.io.flush_if_large()?;
    }
}

/// A storage command: allocate, read the value into the item, store.
fn store(s: &mut Session, h: &Header, op: StoreOp, quiet: bool) -> io::Result<Flow> {
    let want_extras = if op == OPERATION_APPEND || op == OPERATION_PREPEND {
        0
    } else {
        8
    };
    let vlen = h.bodylen - h.extlen - h.keylen;
    if h.extlen != want_extras || h.keylen == 0 || h.keylen > KEY_MAX {
        s.io.consume(HEADER);
        s.io.skip(h.bodylen as u64)?;
        status_reply(&mut s.io.wbuf, h, PROTOCOL_BINARY_RESPONSE_EINVAL);
        return Ok(Flow::Continue);
    }
    let head = HEADER + h.extlen + h.keylen;
    if !s.io.fill(head)? {
        return Ok(Flow::Close);
    }
    let peer = &s.peer;
    let engine = peer.engine();
    Counters::bump(&peer.ctx.counters.cmd_set);
    let packet = s.io.buffered();
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
    let allocated = peer.retry(|| engine.allocate(peer.cookie(), key, vlen, flags, exptime));
    s.io.consume(head);
    let mut item = match allocated {
        Ok(item) => item,
        Err(rc) => {
            s.io.skip(vlen as u64)?;
            return Ok(answer(&mut s.io.wbuf, h, rc, 0, false));
        }
    };
    let Some(value) = item.value_mut() else {
        s.io.skip(vlen as u64)?;
        status_reply(&mut s.io.wbuf, h, PROTOCOL_BINARY_RESPONSE_EINTERNAL);
        return Ok(Flow::Continue);
    };
    for piece in value {
        s.io.read_exact_into(piece)?;
    }
    engine.item_set_cas(&item, h.cas);
    let op = match op {
        OPERATION_SET | OPERATION_REPLACE if h.cas != 0 => OPERATION_CAS,
        op => op,
    };
    let mut cas = h.cas;
    let rc = peer
        .retry(|| ok(engine.store(&item, &mut cas, op, h.vbucket)))
        .err()
        .unwrap_or(ENGINE_SUCCESS);
    let rc = match (rc, op) {
        (ENGINE_NOT_STORED, OPERATION_ADD) => ENGINE_KEY_EEXISTS,
        (ENGINE_NOT_STORED, OPERATION_REPLACE) => ENGINE_KEY_ENOENT,
        (rc, _) => rc,
    };
    Ok(answer(&mut s.io.wbuf, h, rc, cas, quiet))
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
    let Session { peer, io, scratch } = s;
    let (packet, out) = io.packet_and_out(HEADER + h.bodylen);
    let body = &packet[HEADER..];
    let req = Request {
        h: *h,
        extras: &body[..h.extlen],
        key: &body[h.extlen..h.extlen + h.keylen],
        value: &body[h.extlen + h.keylen..],
        packet,
    };
    match h.opcode {
        PROTOCOL_BINARY_CMD_GET => get(peer, &req, out, false, false),
        PROTOCOL_BINARY_CMD_GETQ => get(peer, &req, out, true, false),
        PROTOCOL_BINARY_CMD_GETK => get(peer, &req, out, false, true),
        PROTOCOL_BINARY_CMD_GETKQ => get(peer, &req, out, true, true),
        PROTOCOL_BINARY_CMD_DELETE => delete(peer, &req, out, false),
        PROTOCOL_BINARY_CMD_DELETEQ => delete(peer, &req, out, true),
        PROTOCOL_BINARY_CMD_INCREMENT => arithmetic(peer, &req, out, true, false),
        PROTOCOL_BINARY_CMD_INCREMENTQ => arithmetic(peer, &req, out, true, true),
        PROTOCOL_BINARY_CMD_DECREMENT => arithmetic(peer, &req, out, false, false),
        PROTOCOL_BINARY_CMD_DECREMENTQ => arithmetic(peer, &req, out, false, true),
        PROTOCOL_BINARY_CMD_FLUSH => flush(peer, &req, out, false),
        PROTOCOL_BINARY_CMD_FLUSHQ => flush(peer, &req, out, true),
        PROTOCOL_BINARY_CMD_QUIT => {
            answer(out, h, ENGINE_SUCCESS, 0, false);
            Flow::Close
        }
        PROTOCOL_BINARY_CMD_QUITQ => Flow::Close,
        PROTOCOL_BINARY_CMD_NOOP => answer(out, h, ENGINE_SUCCESS, 0, false),
        PROTOCOL_BINARY_CMD_VERSION => {
            let version = VERSION.as_bytes();
            encode_response(out, &h.reply(0, 0), &[], &[], std::iter::once(version));
            Flow::Continue
        }
        PROTOCOL_BINARY_CMD_STAT => stat(peer, &req, out),
        PROTOCOL_BINARY_CMD_VERBOSITY => verbosity(&req, out),
        PROTOCOL_BINARY_CMD_SASL_LIST_MECHS => {
            let mechs = crate::sasl::MECHANISMS;
            encode_response(out, &h.reply(0, 0), &[], &[], std::iter::once(mechs));
            Flow::Continue
        }
        PROTOCOL_BINARY_CMD_SASL_AUTH => sasl_auth(peer, &req, out),
        PROTOCOL_BINARY_CMD_SASL_STEP => {
            // PLAIN finishes in one step: there is never a step to take.
            Counters::bump(&peer.ctx.counters.auth_errors);
            status_reply(out, h, PROTOCOL_BINARY_RESPONSE_AUTH_ERROR);
            Flow::Continue
        }
        _ => unknown(peer, &req, out, scratch),
    }
}

fn get(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>, quiet: bool, with_key: bool) -> Flow {
    let h = &req.h;
    if !req.extras.is_empty() || req.key.is_empty() || !req.value.is_empty() {
        status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINVAL);
        return Flow::Continue;
    }
    let counters = &peer.ctx.counters;
    Counters::bump(&counters.cmd_get);
    let engine = peer.engine();
    let key: &[u8] = if with_key { req.key } else { &[] };
    match peer.retry(|| engine.get(peer.cookie(), req.key, h.vbucket)) {
        Ok(item) => {
            let Some(info) = item.info() else {
                status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINTERNAL);
                return Flow::Continue;
            };
            Counters::bump(&counters.get_hits);
            let flags = info.flags().to_ne_bytes();
            encode_response(out, &h.reply(0, info.cas()), &flags, key, info.value());
            Flow::Continue
        }
        Err(ENGINE_KEY_ENOENT) => {
            Counters::bump(&counters.get_misses);
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
        status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINVAL);
        return Flow::Continue;
    }
    let engine = peer.engine();
    let mut cas = h.cas;
    let rc = peer.retry(|| ok(engine.remove(peer.cookie(), req.key, &mut cas, h.vbucket)));
    answer(out, h, rc.err().unwrap_or(ENGINE_SUCCESS), cas, quiet)
}

fn arithmetic(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>, incr: bool, quiet: bool) -> Flow {
    let h = &req.h;
    let e = req.extras;
    if e.len() != 20 || req.key.is_empty() || !req.value.is_empty() {
        status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINVAL);
        return Flow::Continue;
    }
    let be64 = |b: &[u8]| u64::from_be_bytes(b.try_into().expect("8 bytes"));
    let expiration = u32::from_be_bytes(e[16..20].try_into().expect("4 bytes"));
    let a = Arith {
        incr,
        create: expiration != u32::MAX,
        delta: be64(&e[0..8]),
        initial: be64(&e[8..16]),
        exptime: to_rel_time(libc::time_t::from(expiration)),
    };
    let engine = peer.engine();
    let (mut cas, mut result) = (0, 0);
    let rc = peer.retry(|| {
        ok(engine.arithmetic(peer.cookie(), req.key, &a, &mut cas, &mut result, h.vbucket))
    });
    match rc {
        Ok(()) if quiet => Flow::Continue,
        Ok(()) => {
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
    let when = match req.extras {
        [] => 0,
        [a, b, c, d] => libc::time_t::from(u32::from_be_bytes([*a, *b, *c, *d])),
        _ => {
            status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINVAL);
            return Flow::Continue;
        }
    };
    Counters::bump(&peer.ctx.counters.cmd_flush);
    let engine = peer.engine();
    let rc = peer.retry(|| ok(engine.flush(peer.cookie(), when)));
    answer(out, h, rc.err().unwrap_or(ENGINE_SUCCESS), 0, quiet)
}

fn stat(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>) -> Flow {
    let h = &req.h;
    peer.open_sink(false, h.opcode, h.opaque);
    let rc = peer.stats(req.key);
    peer.take_sink(out);
    match rc {
        ENGINE_SUCCESS => {
            // The empty key ends the stream.
            encode_response(out, &h.reply(0, 0), &[], &[], std::iter::empty());
            Flow::Continue
        }
        rc => answer(out, h, rc, 0, false),
    }
}

fn verbosity(req: &Request<'_>, out: &mut Vec<u8>) -> Flow {
    let h = &req.h;
    let Ok(level) = <[u8; 4]>::try_from(req.extras) else {
        status_reply(out, h, PROTOCOL_BINARY_RESPONSE_EINVAL);
        return Flow::Continue;
    };
    set_log_level(level_of_verbosity(u32::from_be_bytes(level)));
    answer(out, h, ENGINE_SUCCESS, 0, false)
}

fn sasl_auth(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>) -> Flow {
    let h = &req.h;
    let counters = &peer.ctx.counters;
    Counters::bump(&counters.auth_cmds);
    let user = match (&peer.ctx.pwdb, req.key) {
        (Some(db), b"PLAIN") => db.plain(req.value),
        _ => None,
    };
    match user {
        Some((user, config)) => {
            peer.conn.authenticate(&user, config.as_deref());
            let text = &b"Authenticated"[..];
            encode_response(out, &h.reply(0, 0), &[], &[], std::iter::once(text));
        }
        None => {
            Counters::bump(&counters.auth_errors);
            status_reply(out, h, PROTOCOL_BINARY_RESPONSE_AUTH_ERROR);
        }
    }
    Flow::Continue
}

/// Hands the whole packet to the engine (in the session's aligned scratch buffer).
fn unknown(peer: &Peer, req: &Request<'_>, out: &mut Vec<u8>, scratch: &mut Aligned) -> Flow {
    let h = &req.h;
    let packet = scratch.fill(&[req.packet]);
    peer.open_sink(false, h.opcode, h.opaque);
    let engine = peer.engine();
    // SAFETY: a whole packet, 8-byte aligned, writable, alive across the call.
    let rc = peer.retry(|| ok(unsafe { engine.unknown_command(peer.cookie(), packet) }));
    let responded = peer.take_sink(out).is_some();
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
