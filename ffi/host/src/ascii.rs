//! memcached's ASCII protocol: get/gets, set/add/replace/append/prepend/cas, delete,
//! incr/decr, touch (through the engine's `unknown_command` as binary TOUCH 0x1c, when the
//! engine implements it), stats, flush_all, version, verbosity, quit. Item data is read straight
//! into the allocated item and must end in `\r\n`. Flags are stored in network byte order, as
//! memcached stores them, so both protocols see the same flags.

use crate::api::log::set_log_level;
use crate::api::logger::level_of_verbosity;
use crate::api::server_core::{to_rel_time, VERSION};
use crate::codec::KEY_MAX;
use crate::engine::{Arith, StoreOp};
use crate::io::Io;
use crate::session::{ok, Aligned, Counters, Flow, Peer, Session};
use mcb_abi::abi::*;
use std::io::{self, Write};

/// Longest command line (long multi-key gets included).
const MAX_LINE: usize = 64 * 1024;
/// Most tokens a command line may have (keys of a get beyond it are still served: see `get`).
const MAX_TOKENS: usize = 24;

const BAD_FORMAT: &str = "CLIENT_ERROR bad command line format";

fn reply(out: &mut Vec<u8>, line: &str) {
    out.extend_from_slice(line.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// memcached's line for an engine error.
fn error_line(rc: ENGINE_ERROR_CODE) -> &'static str {
    match rc {
        ENGINE_ENOMEM => "SERVER_ERROR out of memory",
        ENGINE_TMPFAIL => "SERVER_ERROR temporary failure",
        ENGINE_ENOTSUP => "SERVER_ERROR not supported",
        ENGINE_NOT_MY_VBUCKET => "SERVER_ERROR not my vbucket",
        ENGINE_E2BIG => "SERVER_ERROR object too large for cache",
        ENGINE_EACCESS => "SERVER_ERROR access denied",
        ENGINE_EINVAL => "CLIENT_ERROR invalid arguments",
        _ => "SERVER_ERROR unhandled error",
    }
}

/// Splits a command line at spaces.
fn tokenize(line: &[u8]) -> ([&[u8]; MAX_TOKENS], usize) {
    let mut tokens: [&[u8]; MAX_TOKENS] = [&[]; MAX_TOKENS];
    let mut n = 0;
    for t in line.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
        if n == MAX_TOKENS {
            break;
        }
        tokens[n] = t;
        n += 1;
    }
    (tokens, n)
}

fn number<T: std::str::FromStr>(token: &[u8]) -> Option<T> {
    std::str::from_utf8(token).ok()?.parse().ok()
}

/// Serves ASCII commands until the client leaves or sends `quit`.
pub fn serve(s: &mut Session) -> io::Result<()> {
    loop {
        let end = loop {
            let buffered = s.io.buffered();
            if let Some(i) = buffered.iter().position(|&b| b == b'\n') {
                break i;
            }
            if buffered.len() > MAX_LINE {
                reply(&mut s.io.wbuf, "CLIENT_ERROR line is too long");
                return s.io.flush();
            }
            if s.io.read_more()? == 0 {
                return Ok(());
            }
        };
        if command(s, end)? == Flow::Close {
            return s.io.flush();
        }
        s.io.flush_if_large()?;
    }
}

/// One command whose line (without its `\n`) is the first `end` buffered bytes.
fn command(s: &mut Session, end: usize) -> io::Result<Flow> {
    let (line, out) = s.io.packet_and_out(end);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (tokens, n) = tokenize(line);
    let tokens = &tokens[..n];
    let peer = &s.peer;
    let Some(&verb) = tokens.first() else {
        reply(out, "ERROR");
        s.io.consume(end + 1);
        return Ok(Flow::Continue);
    };
    if peer.needs_auth() && !matches!(verb, b"version" | b"quit") {
        reply(out, "CLIENT_ERROR unauthenticated");
        s.io.consume(end + 1);
        return Ok(Flow::Continue);
    }
    let storage = match verb {
        b"set" => Some(OPERATION_SET),
        b"add" => Some(OPERATION_ADD),
        b"replace" => Some(OPERATION_REPLACE),
        b"append" => Some(OPERATION_APPEND),
        b"prepend" => Some(OPERATION_PREPEND),
        b"cas" => Some(OPERATION_CAS),
        _ => None,
    };
    if let Some(op) = storage {
        return store(s, end, op);
    }
    let flow = match verb {
        b"get" | b"bget" => get(peer, line, out, false),
        b"gets" => get(peer, line, out, true),
        b"delete" => delete(peer, tokens, out),
        b"incr" => arithmetic(peer, tokens, out, true),
        b"decr" => arithmetic(peer, tokens, out, false),
        b"touch" => touch(peer, tokens, out, &mut s.scratch),
        b"flush_all" => flush_all(peer, tokens, out),
        // version, quit and stats take no noreply, and version and quit no arguments.
        b"version" | b"quit" | b"stats" if noreply(tokens) => {
            reply(out, "ERROR");
            Flow::Continue
        }
        b"version" | b"quit" if tokens.len() > 1 => {
            reply(out, "ERROR");
            Flow::Continue
        }
        b"version" => {
            reply(out, &format!("VERSION {}", VERSION));
            Flow::Continue
        }
        b"stats" => stats(peer, tokens, out),
        b"verbosity" => verbosity(tokens, out),
        b"quit" => Flow::Close,
        _ => {
            reply(out, "ERROR");
            Flow::Continue
        }
    };
    s.io.consume(end + 1);
    Ok(flow)
}

/// Whether the last token asks for no reply.
fn noreply(tokens: &[&[u8]]) -> bool {
    tokens.last() == Some(&&b"noreply"[..])
}

/// Answers with `line` unless the client asked for no reply.
fn say(out: &mut Vec<u8>, quiet: bool, line: &str) -> Flow {
    if !quiet {
        reply(out, line);
    }
    Flow::Continue
}

fn get(peer: &Peer, line: &[u8], out: &mut Vec<u8>, with_cas: bool) -> Flow {
    let keys = line.split(|&b| b == b' ').filter(|t| !t.is_empty()).skip(1);
    if keys.clone().next().is_none() || keys.clone().any(|k| k.len() > KEY_MAX) {
        reply(out, BAD_FORMAT);
        return Flow::Continue;
    }
    let engine = peer.engine();
    let counters = &peer.ctx.counters;
    for key in keys {
        Counters::bump(&counters.cmd_get);
        match peer.retry(|| engine.get(peer.cookie(), key, 0)) {
            Ok(item) => {
                let Some(info) = item.info() else {
                    reply(out, "SERVER_ERROR failed to get item details");
                    return Flow::Continue;
                };
                Counters::bump(&counters.get_hits);
                out.extend_from_slice(b"VALUE ");
                out.extend_from_slice(key);
                let _ = write!(out, " {} {}", u32::from_be(info.flags()), info.nbytes());
                if with_cas {
                    let _ = write!(out, " {}", info.cas());
                }
                out.extend_from_slice(b"\r\n");
                for piece in info.value() {
                    out.extend_from_slice(piece);
                }
                out.extend_from_slice(b"\r\n");
            }
            Err(ENGINE_KEY_ENOENT) => Counters::bump(&counters.get_misses),
            Err(ENGINE_DISCONNECT) => return Flow::Close,
            Err(rc) => {
                reply(out, error_line(rc));
                return Flow::Continue;
            }
        }
    }
    reply(out, "END");
    Flow::Continue
}

/// The parsed storage command line.
struct StoreLine {
    flags: u32,
    exptime: libc::time_t,
    bytes: usize,
    cas: u64,
    quiet: bool,
}

fn parse_store(tokens: &[&[u8]], op: StoreOp) -> Result<StoreLine, &'static str> {
    let base = if op == OPERATION_CAS { 6 } else { 5 };
    if tokens.len() != base && tokens.len() != base + 1 {
        return Err("ERROR");
    }
    if tokens[1].len() > KEY_MAX {
        return Err(BAD_FORMAT);
    }
    let (Some(flags), Some(exptime), Some(bytes)) = (
        number::<u32>(tokens[2]),
        number::<libc::time_t>(tokens[3]),
        number::<i32>(tokens[4]).and_then(|b| usize::try_from(b).ok()),
    ) else {
        return Err(BAD_FORMAT);
    };
    let cas = if op == OPERATION_CAS {
        number::<u64>(tokens[5]).ok_or(BAD_FORMAT)?
    } else {
        0
    };
    Ok(StoreLine {
        flags,
        exptime,
        bytes,
        cas,
        quiet: tokens.len() == base + 1 && noreply(tokens),
    })
}

fn store(s: &mut Session, end: usize, op: StoreOp) -> io::Result<Flow> {
    let line = &s.io.buffered()[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (tokens, n) = tokenize(line);
    let tokens = &tokens[..n];
    let parsed = parse_store(tokens, op);
    let peer = &s.peer;
    let engine = peer.engine();
    let allocated = parsed.map(|p| {
        Counters::bump(&peer.ctx.counters.cmd_set);
        let exptime = to_rel_time(p.exptime);
        let item = peer
            .retry(|| engine.allocate(peer.cookie(), tokens[1], p.bytes, p.flags.to_be(), exptime));
        (p, item)
    });
    s.io.consume(end + 1);
    let (p, mut item) = match allocated {
        Err(line) => {
            reply(&mut s.io.wbuf, line);
            return Ok(Flow::Continue);
        }
        Ok((p, Err(rc))) => {
            s.io.skip(p.bytes as u64 + 2)?;
            let line = match rc {
                ENGINE_E2BIG => "SERVER_ERROR object too large for cache",
                ENGINE_ENOMEM => "SERVER_ERROR out of memory storing object",
                ENGINE_DISCONNECT => return Ok(Flow::Close),
                rc => error_line(rc),
            };
            return Ok(say(&mut s.io.wbuf, p.quiet, line));
        }
        Ok((p, Ok(item))) => (p, item),
    };
    let Some(value) = item.value_mut() else {
        s.io.skip(p.bytes as u64 + 2)?;
        return Ok(say(
            &mut s.io.wbuf,
            p.quiet,
            "SERVER_ERROR failed to get item details",
        ));
    };
    for piece in value {
        s.io.read_exact_into(piece)?;
    }
    let mut crlf = [0u8; 2];
    s.io.read_exact_into(&mut crlf)?;
    if &crlf != b"\r\n" {
        reply(&mut s.io.wbuf, "CLIENT_ERROR bad data chunk");
        // The data ran past its length: the rest of that line is data too, not a command.
        if crlf[1] != b'\n' {
            return skip_line(&mut s.io);
        }
        return Ok(Flow::Continue);
    }
    engine.item_set_cas(&item, p.cas);
    let mut cas = p.cas;
    let rc = peer.retry(|| ok(engine.store(&item, &mut cas, op, 0)));
    let line = match rc.err().unwrap_or(ENGINE_SUCCESS) {
        ENGINE_SUCCESS => "STORED",
        ENGINE_KEY_EEXISTS => "EXISTS",
        ENGINE_KEY_ENOENT => "NOT_FOUND",
        ENGINE_NOT_STORED => "NOT_STORED",
        ENGINE_ENOMEM => "SERVER_ERROR out of memory storing object",
        ENGINE_DISCONNECT => return Ok(Flow::Close),
        rc => error_line(rc),
    };
    Ok(say(&mut s.io.wbuf, p.quiet, line))
}

/// Discards input through the next newline (closing when none comes within a line's length).
fn skip_line(io: &mut Io) -> io::Result<Flow> {
    loop {
        let buffered = io.buffered();
        if let Some(i) = buffered.iter().position(|&b| b == b'\n') {
            io.consume(i + 1);
            return Ok(Flow::Continue);
        }
        if buffered.len() > MAX_LINE {
            return Ok(Flow::Close);
        }
        if io.read_more()? == 0 {
            return Ok(Flow::Close);
        }
    }
}

fn delete(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    let quiet = noreply(tokens);
    let args = tokens.len() - usize::from(quiet);
    // `delete <key> [0] [noreply]`: a time other than 0 is no longer supported.
    let valid = match args {
        2 => true,
        3 => tokens[2] == b"0",
        _ => false,
    };
    if !valid {
        reply(
            out,
            "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]",
        );
        return Flow::Continue;
    }
    if tokens[1].len() > KEY_MAX {
        reply(out, BAD_FORMAT);
        return Flow::Continue;
    }
    let engine = peer.engine();
    let mut cas = 0;
    let line = match peer.retry(|| ok(engine.remove(peer.cookie(), tokens[1], &mut cas, 0))) {
        Ok(()) => "DELETED",
        Err(ENGINE_KEY_ENOENT) => "NOT_FOUND",
        Err(ENGINE_DISCONNECT) => return Flow::Close,
        Err(rc) => error_line(rc),
    };
    say(out, quiet, line)
}

fn arithmetic(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>, incr: bool) -> Flow {
    let quiet = noreply(tokens);
    if tokens.len() - usize::from(quiet) != 3 {
        reply(out, "ERROR");
        return Flow::Continue;
    }
    if tokens[1].len() > KEY_MAX {
        reply(out, BAD_FORMAT);
        return Flow::Continue;
    }
    let Some(delta) = number::<u64>(tokens[2]) else {
        reply(out, "CLIENT_ERROR invalid numeric delta argument");
        return Flow::Continue;
    };
    let a = Arith {
        incr,
        create: false,
        delta,
        initial: 0,
        exptime: 0,
    };
    let engine = peer.engine();
    let (mut cas, mut result) = (0, 0);
    let rc = peer
        .retry(|| ok(engine.arithmetic(peer.cookie(), tokens[1], &a, &mut cas, &mut result, 0)));
    match rc {
        Ok(()) => say(out, quiet, &result.to_string()),
        Err(ENGINE_KEY_ENOENT) => say(out, quiet, "NOT_FOUND"),
        Err(ENGINE_EINVAL) => say(
            out,
            quiet,
            "CLIENT_ERROR cannot increment or decrement non-numeric value",
        ),
        Err(ENGINE_DISCONNECT) => Flow::Close,
        Err(rc) => say(out, quiet, error_line(rc)),
    }
}

/// `touch <key> <exptime> [noreply]`, as a binary TOUCH packet to the engine.
fn touch(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>, scratch: &mut Aligned) -> Flow {
    let quiet = noreply(tokens);
    if tokens.len() - usize::from(quiet) != 3 {
        reply(out, "ERROR");
        return Flow::Continue;
    }
    let key = tokens[1];
    let Some(exptime) = number::<u32>(tokens[2]).filter(|_| key.len() <= KEY_MAX) else {
        reply(out, BAD_FORMAT);
        return Flow::Continue;
    };
    let keylen = (key.len() as u16).to_be_bytes();
    let bodylen = (4 + key.len() as u32).to_be_bytes();
    #[rustfmt::skip]
    let header = [
        PROTOCOL_BINARY_REQ, PROTOCOL_BINARY_CMD_TOUCH, keylen[0], keylen[1],
        4, PROTOCOL_BINARY_RAW_BYTES, 0, 0,
        bodylen[0], bodylen[1], bodylen[2], bodylen[3],
        0, 0, 0, 0, // opaque
        0, 0, 0, 0, 0, 0, 0, 0, // cas
    ];
    let aligned = scratch.fill(&[&header, &exptime.to_be_bytes(), key]);
    peer.open_sink(true, PROTOCOL_BINARY_CMD_TOUCH, 0);
    let engine = peer.engine();
    // SAFETY: a whole packet, 8-byte aligned, writable, alive across the call.
    let rc = peer.retry(|| ok(unsafe { engine.unknown_command(peer.cookie(), aligned) }));
    let status = peer.take_sink(out);
    let line = match (rc, status) {
        (Err(ENGINE_DISCONNECT), _) => return Flow::Close,
        (_, Some(PROTOCOL_BINARY_RESPONSE_SUCCESS)) => "TOUCHED",
        (_, Some(PROTOCOL_BINARY_RESPONSE_KEY_ENOENT)) | (Err(ENGINE_KEY_ENOENT), None) => {
            "NOT_FOUND"
        }
        (Ok(()), None) => "TOUCHED",
        (Err(rc), None) => error_line(rc),
        (_, Some(_)) => "SERVER_ERROR touch failed",
    };
    say(out, quiet, line)
}

fn stats(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    let group = tokens.get(1).copied().unwrap_or_default();
    peer.open_sink(true, PROTOCOL_BINARY_CMD_STAT, 0);
    let rc = peer.stats(group);
    peer.take_sink(out);
    match rc {
        ENGINE_SUCCESS if group == b"reset" => reply(out, "RESET"),
        ENGINE_SUCCESS => reply(out, "END"),
        ENGINE_DISCONNECT => return Flow::Close,
        ENGINE_KEY_ENOENT => reply(out, "ERROR"),
        rc => reply(out, error_line(rc)),
    }
    Flow::Continue
}

fn flush_all(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    let quiet = noreply(tokens);
    let when = match &tokens[1..tokens.len() - usize::from(quiet)] {
        [] => 0,
        [delay] => match number::<libc::time_t>(delay) {
            Some(d) => d,
            None => {
                reply(out, BAD_FORMAT);
                return Flow::Continue;
            }
        },
        _ => {
            reply(out, "ERROR");
            return Flow::Continue;
        }
    };
    Counters::bump(&peer.ctx.counters.cmd_flush);
    let engine = peer.engine();
    match peer.retry(|| ok(engine.flush(peer.cookie(), when))) {
        Ok(()) => say(out, quiet, "OK"),
        Err(ENGINE_DISCONNECT) => Flow::Close,
        Err(rc) => say(out, quiet, error_line(rc)),
    }
}

fn verbosity(tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    // memcached: `verbosity [level] [noreply]`; with noreply nothing is said, even of a bad
    // level; without it, the level is required.
    let quiet = noreply(tokens);
    let level = match tokens.len() - usize::from(quiet) {
        2 => number::<u32>(tokens[1]),
        1 if quiet => None,
        _ => {
            reply(out, "ERROR");
            return Flow::Continue;
        }
    };
    if let Some(level) = level {
        set_log_level(level_of_verbosity(level));
    }
    match (level, quiet) {
        (_, true) => Flow::Continue,
        (Some(_), false) => say(out, false, "OK"),
        (None, false) => say(out, false, "ERROR"),
    }
}
