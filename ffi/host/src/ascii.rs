//! memcached's ASCII protocol: get/gets, gat/gats and touch (through the engine's
//! `unknown_command` as binary GAT 0x1d and TOUCH 0x1c, when the engine implements them),
//! set/add/replace/append/prepend/cas, delete, incr/decr, stats, flush_all, version,
//! verbosity, quit, and the meta commands ([`crate::meta`]; `ms` data arrives as a set's). A connection is a state
//! machine ([`Pending`]) its worker steps ([`step`]): a command runs once its line is buffered;
//! item data is copied into the allocated item as it arrives and must end in `\r\n`; a get
//! serves its keys as the output has room, large values written from the held items. Flags are
//! stored in network byte order, as memcached stores them, so both protocols see the same flags.

use crate::api::log::set_log_level;
use crate::api::logger::level_of_verbosity;
use crate::api::server_core::{request_shutdown, to_rel_time, MEMCACHED_VERSION};
use crate::codec::KEY_MAX;
use crate::counters::{Op, Stat};
use crate::engine::{copy_into, Arith, Item, StoreOp, Value};
use crate::io::COPY_MAX;
use crate::meta;
use crate::session::{ok, Aligned, Flow, Peer, Session, Step};
use crate::stats::{self, End};
use crate::text::{c_i32, c_u32, c_u64, error_line, reply, tokenize, BAD_FORMAT};
use mcb_abi::abi::*;
use std::io::Write;

/// Longest command line (long multi-key gets included).
const MAX_LINE: usize = 64 * 1024;
/// Longest command line other than a multi-get's, as memcached 1.6 bounds them.
const SHORT_LINE: usize = 2048;

/// Whether an unfinished line is a multi-get (`get ` or `gets `, after at most 100 spaces), the
/// one command memcached lets grow past [`SHORT_LINE`].
fn multi_get(line: &[u8]) -> bool {
    let spaces = line.iter().take_while(|&&b| b == b' ').count();
    let rest = &line[spaces..];
    spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

/// Where a connection is within the ASCII protocol between steps.
#[derive(Debug, Default)]
pub enum Pending {
    /// Between requests.
    #[default]
    Idle,
    /// A get whose line is the first `end` buffered bytes (consumed when it ends), served up
    /// to byte `next` of the line; a gat/gats touches each key with `touch`.
    Get {
        end: usize,
        next: usize,
        with_cas: bool,
        touch: Option<u32>,
    },
    /// A storage command's data arriving into its item.
    Data(Box<Fill>),
    /// A storage command with all its data, to store.
    Store(Box<Fill>),
    /// Data nobody stores: this many more bytes to drop.
    Swallow(usize),
    /// A `-Y` authentication's data arriving: its bytes so far, and how many in all (with the
    /// `\r\n`).
    Auth(Vec<u8>, usize),
}

/// Longest `-Y` authentication data taken (`user password`): longer is refused unread.
const AUTH_MAX: usize = 1024;

/// A storage command's item and how much of its data arrived.
#[derive(Debug)]
pub struct Fill {
    item: Item<'static>,
    line: StoreLine,
    op: StoreOp,
    /// Data bytes copied into the item so far (the item's size, then the `\r\n`).
    at: usize,
}

/// Runs the connection's next step: a request whose line is buffered, or the rest of one.
pub fn step(s: &mut Session, p: &mut Pending) -> Step {
    match std::mem::take(p) {
        Pending::Idle => {
            let buffered = s.input.buffered();
            let Some(end) = buffered.iter().position(|&b| b == b'\n') else {
                if buffered.len() > SHORT_LINE && !multi_get(buffered) {
                    // memcached 1.6: only a multi-get may be this long; anything else is no
                    // client of ours, closed unanswered.
                    return Step::Close;
                }
                if buffered.len() > MAX_LINE {
                    reply(s.out.tail(), "CLIENT_ERROR line is too long");
                    return Step::Close;
                }
                return Step::NeedInput;
            };
            command(s, p, end)
        }
        Pending::Get {
            end,
            next,
            with_cas,
            touch,
        } => get(s, p, end, next, with_cas, touch),
        Pending::Data(fill) => data(s, p, fill),
        Pending::Store(fill) => store(s, p, fill),
        Pending::Swallow(n) => match s.input.discard(n) {
            0 => Step::Done,
            left => {
                *p = Pending::Swallow(left);
                Step::NeedInput
            }
        },
        Pending::Auth(mut token, want) => {
            let take = s.input.buffered().len().min(want - token.len());
            token.extend_from_slice(&s.input.buffered()[..take]);
            s.input.consume(take);
            if token.len() < want {
                *p = Pending::Auth(token, want);
                return Step::NeedInput;
            }
            check_credentials(s, &token)
        }
    }
}

/// `set <any key> <flags> <exptime> <bytes>` from a connection that must authenticate (`-Y`):
/// its data is read as credentials.
fn authenticate(s: &mut Session, p: &mut Pending, end: usize) -> Step {
    let line = &s.input.buffered()[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (tokens, n) = tokenize(line);
    let parsed = parse_store(&tokens[..n], OPERATION_SET);
    s.input.consume(end + 1);
    match parsed {
        Ok(line) if line.bytes <= AUTH_MAX => {
            *p = Pending::Auth(Vec::with_capacity(line.bytes + 2), line.bytes + 2);
            Step::More
        }
        Ok(_) => {
            reply(s.out.tail(), "CLIENT_ERROR bad authentication token format");
            Step::Close
        }
        Err((text, quiet)) => {
            say(s.out.tail(), quiet, text);
            Step::Done
        }
    }
}

/// A `-Y` authentication's data (`user password`, then `\r\n`): on success the connection is
/// that user's, as after SASL (its bucket too), and memcached's answer is `STORED`.
fn check_credentials(s: &mut Session, token: &[u8]) -> Step {
    let out = s.out.tail();
    let Some(token) = token.strip_suffix(b"\r\n") else {
        reply(out, "CLIENT_ERROR bad data chunk");
        return Step::Done;
    };
    let Some(space) = token.iter().position(|&b| b == b' ') else {
        reply(out, "CLIENT_ERROR bad authentication token format");
        return Step::Done;
    };
    let (user, password) = (&token[..space], token[space..].trim_ascii_start());
    let peer = &s.peer;
    peer.count(Stat::AuthCmds);
    let users = peer.ctx.ascii_users.as_ref();
    match users.and_then(|u| u.check(user, password)) {
        Some((user, config)) => {
            peer.authenticated(&user, config.as_deref());
            reply(out, "STORED");
        }
        None => {
            peer.count(Stat::AuthErrors);
            reply(out, "CLIENT_ERROR authentication failure");
        }
    }
    Step::Done
}

/// One command whose line (without its `\n`) is the first `end` buffered bytes.
fn command(s: &mut Session, p: &mut Pending, end: usize) -> Step {
    let mark = s.out.mark();
    let line = &s.input.buffered()[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (tokens, n) = tokenize(line);
    let tokens = &tokens[..n];
    let peer = &s.peer;
    let out = s.out.tail();
    let Some(&verb) = tokens.first() else {
        reply(out, "ERROR");
        s.input.consume(end + 1);
        return Step::Done;
    };
    // `-Y`: a connection authenticates with a `set` whose data is `user password` before
    // anything else, even version (as memcached 1.6); `-S` lets version and quit through.
    let ascii_auth = peer.ctx.ascii_users.is_some() && !peer.conn.is_authenticated();
    if ascii_auth && verb == b"set" {
        return authenticate(s, p, end);
    }
    if ascii_auth || (peer.needs_auth() && !matches!(verb, b"version" | b"quit")) {
        reply(out, "CLIENT_ERROR unauthenticated");
        s.input.consume(end + 1);
        return Step::Done;
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
    if matches!(verb, b"mg" | b"ms" | b"md" | b"ma" | b"mn" | b"me") {
        peer.count(Stat::CmdMeta);
    }
    if storage.is_some() || verb == b"ms" {
        return allocate(s, p, end, storage);
    }
    if let (b"mg" | b"md" | b"ma" | b"me", [_, key, flags @ ..]) = (verb, tokens) {
        let flow = match verb {
            _ if tokens.len() >= meta::TOO_MANY_TOKENS => {
                reply(out, "CLIENT_ERROR options flags are too long");
                Flow::Continue
            }
            b"me" if !flags.is_empty() || key.len() > KEY_MAX => {
                reply(out, BAD_FORMAT);
                Flow::Continue
            }
            b"me" => meta::debug(peer, out, &mut s.scratch, key),
            _ => {
                let kind = match verb {
                    b"mg" => &meta::MG,
                    b"md" => &meta::MD,
                    _ => &meta::MA,
                };
                match meta::parse(kind, key, flags) {
                    Err(line) => {
                        reply(out, line);
                        Flow::Continue
                    }
                    Ok(r) if verb == b"mg" => meta::get(peer, &mut s.out, &mut s.scratch, &r),
                    Ok(r) if verb == b"md" => meta::delete(peer, s.out.tail(), &mut s.scratch, &r),
                    Ok(r) => meta::arithmetic(peer, s.out.tail(), &mut s.scratch, &r),
                }
            }
        };
        return finish(s, mark, end, flow);
    }
    let gat = match (verb, tokens) {
        (b"gat" | b"gats", [_, exptime, ..]) => match c_i32(exptime) {
            Some(t) => Some(meta::wire_exptime(t.into())),
            None => {
                reply(out, "CLIENT_ERROR invalid exptime argument");
                s.input.consume(end + 1);
                return Step::Done;
            }
        },
        _ => None,
    };
    let with_cas = match verb {
        b"get" | b"bget" => Some(false),
        b"gets" => Some(true),
        b"gat" if gat.is_some() => Some(false),
        b"gats" if gat.is_some() => Some(true),
        _ => None,
    };
    if let Some(with_cas) = with_cas {
        // gat and gats: the keys follow the expiration time (and may be none).
        let skip = 1 + usize::from(gat.is_some());
        let keys = line
            .split(|&b| b == b' ')
            .filter(|t| !t.is_empty())
            .skip(skip);
        if gat.is_none() && keys.clone().next().is_none() {
            reply(out, "ERROR");
            s.input.consume(end + 1);
            return Step::Done;
        }
        if keys.clone().any(|k| k.len() > KEY_MAX) {
            reply(out, BAD_FORMAT);
            s.input.consume(end + 1);
            return Step::Done;
        }
        let next = after_tokens(line, skip);
        return get(s, p, end, next, with_cas, gat);
    }
    let flow = match verb {
        b"delete" => delete(peer, tokens, out),
        b"incr" => arithmetic(peer, tokens, out, true),
        b"decr" => arithmetic(peer, tokens, out, false),
        b"touch" => touch(peer, tokens, out, &mut s.scratch),
        b"flush_all" => flush_all(peer, tokens, out),
        // memcached ignores what follows version and quit.
        b"version" => {
            reply(out, &format!("VERSION {MEMCACHED_VERSION}"));
            Flow::Continue
        }
        b"stats" => stats(peer, tokens, out),
        b"verbosity" => verbosity(tokens, out),
        b"quit" => Flow::Close,
        b"mn" => {
            reply(out, "MN");
            Flow::Continue
        }
        b"shutdown" => shutdown(peer, tokens, out),
        b"cache_memlimit" => cache_memlimit(peer, tokens, out),
        // A request that looks like HTTP is no memcached client: closed unanswered, as
        // memcached 1.6 does.
        _ if tokens.last().is_some_and(|t| t.starts_with(b"HTTP/")) => Flow::Close,
        _ => {
            reply(out, "ERROR");
            Flow::Continue
        }
    };
    finish(s, mark, end, flow)
}

/// Ends a one-line command: it consumes its line, unless it parked (then it runs again, whole,
/// once the engine notifies, and what it wrote so far is dropped).
fn finish(s: &mut Session, mark: usize, end: usize, flow: Flow) -> Step {
    if s.peer.take_parked() {
        s.out.truncate(mark);
        return Step::Parked;
    }
    s.input.consume(end + 1);
    match flow {
        Flow::Continue => Step::Done,
        Flow::Close => Step::Close,
    }
}

/// Where the `n`th token of `line` ends.
fn after_tokens(line: &[u8], n: usize) -> usize {
    let mut at = 0;
    for _ in 0..n {
        at += line[at..]
            .iter()
            .position(|&b| b != b' ')
            .unwrap_or(line.len() - at);
        at += line[at..]
            .iter()
            .position(|&b| b == b' ')
            .unwrap_or(line.len() - at);
    }
    at
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

/// Serves a get's keys from byte `next` of its line until the line ends (then `END`) or the
/// output is full (then the rest waits in `p` for the socket to drain). A hit's value is held
/// in the output, not copied, when it is large.
fn get(
    s: &mut Session,
    p: &mut Pending,
    end: usize,
    mut next: usize,
    with_cas: bool,
    touch: Option<u32>,
) -> Step {
    let peer = &s.peer;
    let engine = peer.engine();
    loop {
        let line = &s.input.buffered()[..end];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let rest = &line[next..];
        let Some(skip) = rest.iter().position(|&b| b != b' ') else {
            reply(s.out.tail(), "END");
            s.input.consume(end + 1);
            return Step::Done;
        };
        let key = &rest[skip..];
        let key = &key[..key.iter().position(|&b| b == b' ').unwrap_or(key.len())];
        if s.out.is_full() {
            *p = Pending::Get {
                end,
                next,
                with_cas,
                touch,
            };
            return Step::More;
        }
        if touch.is_some() {
            peer.count(Stat::CmdTouch);
        }
        let found = match touch {
            None => peer
                .retry(|| engine.get(&peer.cookie, key, 0))
                .map(Held::Item),
            Some(exptime) => match meta::get_and_touch(peer, &mut s.scratch, key, exptime) {
                Ok(Some(hit)) => Ok(Held::Copied(hit)),
                Ok(None) => Err(ENGINE_KEY_ENOENT),
                Err(ENGINE_ENOTSUP) => {
                    reply(s.out.tail(), meta::UNSUPPORTED);
                    s.input.consume(end + 1);
                    return Step::Done;
                }
                Err(rc) => Err(rc),
            },
        };
        let item = match found {
            Err(ENGINE_EWOULDBLOCK) => {
                peer.take_parked();
                *p = Pending::Get {
                    end,
                    next,
                    with_cas,
                    touch,
                };
                return Step::Parked;
            }
            Ok(item) => item,
            Err(ENGINE_KEY_ENOENT) => {
                peer.fetched_classic(key, false);
                next += skip + key.len();
                continue;
            }
            Err(ENGINE_DISCONNECT) => return Step::Close,
            Err(rc) => {
                reply(s.out.tail(), error_line(rc));
                s.input.consume(end + 1);
                return Step::Done;
            }
        };
        let value = match item {
            Held::Item(item) => match Value::of(item) {
                Some(value) => Ok(value),
                None => {
                    reply(s.out.tail(), "SERVER_ERROR failed to get item details");
                    s.input.consume(end + 1);
                    return Step::Done;
                }
            },
            Held::Copied(hit) => Err(hit),
        };
        peer.fetched_classic(key, true);
        let (flags, nbytes, cas) = match &value {
            Ok(value) => {
                let info = value.info();
                (u32::from_be(info.flags()), info.nbytes(), info.cas())
            }
            Err(hit) => (hit.flags, hit.value.len(), hit.cas),
        };
        let out = s.out.tail();
        out.extend_from_slice(b"VALUE ");
        out.extend_from_slice(key);
        let _ = write!(out, " {flags} {nbytes}");
        if with_cas {
            let _ = write!(out, " {cas}");
        }
        out.extend_from_slice(b"\r\n");
        match value {
            Ok(value) if value.len() <= COPY_MAX => {
                value.value().for_each(|piece| out.extend_from_slice(piece))
            }
            Ok(value) => s.out.push_value(value),
            Err(hit) => out.extend_from_slice(&hit.value),
        }
        s.out.tail().extend_from_slice(b"\r\n");
        next += skip + key.len();
    }
}

/// A get's hit: the engine's item, or what a get-and-touch copied.
enum Held<'e> {
    Item(Item<'e>),
    Copied(meta::Touched),
}

/// The parsed storage command line.
#[derive(Debug)]
struct StoreLine {
    flags: u32,
    exptime: libc::time_t,
    bytes: usize,
    cas: u64,
    quiet: bool,
    /// An `ms` line (kept to word its answer).
    meta: Option<Box<[u8]>>,
}

/// A storage command line, as memcached 1.6 reads it: 5 tokens (6 for `cas`) and an optional
/// last one (`noreply` silences every complaint after the count; another is ignored). Numbers
/// are C's (`text::c_*`): flags and the length in 32 bits, the length at most 2^31 - 3. A
/// complaint is its line and whether `noreply` silences it.
fn parse_store(tokens: &[&[u8]], op: StoreOp) -> Result<StoreLine, (&'static str, bool)> {
    let base = if op == OPERATION_CAS { 6 } else { 5 };
    if tokens.len() != base && tokens.len() != base + 1 {
        return Err(("ERROR", false));
    }
    let quiet = noreply(tokens);
    let bad = (BAD_FORMAT, quiet);
    if tokens[1].len() > KEY_MAX {
        return Err(bad);
    }
    let (Some(flags), Some(exptime), Some(bytes)) =
        (c_u32(tokens[2]), c_i32(tokens[3]), c_i32(tokens[4]))
    else {
        return Err(bad);
    };
    let cas = match op {
        OPERATION_CAS => c_u64(tokens[5]).ok_or(bad)?,
        _ => 0,
    };
    // The data and its `\r\n` must fit in a C int.
    let bytes = usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= i32::MAX as usize - 2)
        .ok_or(bad)?;
    Ok(StoreLine {
        flags,
        exptime: libc::time_t::from(exptime),
        bytes,
        cas,
        quiet,
        meta: None,
    })
}

/// A storage line, its operation and its key.
type Parsed<'a> = (StoreLine, StoreOp, std::borrow::Cow<'a, [u8]>);

/// An `ms` line as a storage line; a complaint and how many data bytes to drop after it (none
/// when the length is unreadable).
fn parse_meta_store<'a>(
    line: &[u8],
    tokens: &'a [&'a [u8]],
) -> Result<Parsed<'a>, (&'static str, usize)> {
    let [_, key, len, flags @ ..] = tokens else {
        return Err((
            if tokens.len() < 2 {
                "ERROR"
            } else {
                BAD_FORMAT
            },
            0,
        ));
    };
    if tokens.len() >= meta::TOO_MANY_TOKENS {
        // memcached drops no data after this one: it is read as commands.
        return Err(("CLIENT_ERROR options flags too long", 0));
    }
    let bytes = c_i32(len)
        .and_then(|b| usize::try_from(b).ok())
        .filter(|&b| b <= i32::MAX as usize - 2)
        .ok_or((BAD_FORMAT, 0))?;
    let r = meta::parse(&meta::MS, key, flags).map_err(|e| (e, bytes + 2))?;
    let set = meta::set_line(&r).map_err(|e| (e, bytes + 2))?;
    let line = StoreLine {
        flags: set.flags,
        exptime: set.exptime,
        bytes,
        cas: set.cas,
        quiet: false,
        meta: Some(line.into()),
    };
    Ok((line, set.op, r.key))
}

/// A storage command's line (`op`; `None` for `ms`, whose flags give it): allocates its item
/// (the data then arrives into it).
fn allocate(s: &mut Session, p: &mut Pending, end: usize, op: Option<StoreOp>) -> Step {
    let line = &s.input.buffered()[..end];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (tokens, n) = tokenize(line);
    let tokens = &tokens[..n];
    let peer = &s.peer;
    let engine = peer.engine();
    let parsed = match op {
        Some(op) => parse_store(tokens, op)
            .map(|l| (l, op, tokens[1].into()))
            .map_err(|(text, quiet)| ((!quiet).then_some(text), 0)),
        None => parse_meta_store(line, tokens).map_err(|(text, swallow)| (Some(text), swallow)),
    };
    let (line, op, key) = match parsed {
        Ok(parsed) => parsed,
        Err((text, swallow)) => {
            if let Some(text) = text {
                reply(s.out.tail(), text);
            }
            s.input.consume(end + 1);
            if swallow == 0 {
                return Step::Done;
            }
            *p = Pending::Swallow(swallow);
            return Step::More;
        }
    };
    let exptime = to_rel_time(line.exptime);
    let allocated =
        peer.retry(|| engine.allocate(&peer.cookie, &key, line.bytes, line.flags.to_be(), exptime));
    if matches!(allocated, Err(ENGINE_EWOULDBLOCK)) {
        peer.take_parked();
        return Step::Parked;
    }
    peer.storing(&key, &allocated, line.meta.is_some() || op == OPERATION_SET);
    if line.meta.is_none() {
        peer.detail(&key, Op::Set);
    }
    s.input.consume(end + 1);
    let mut item = match allocated {
        Ok(item) => item,
        Err(rc) => {
            let text = match rc {
                ENGINE_E2BIG => "SERVER_ERROR object too large for cache",
                ENGINE_ENOMEM => "SERVER_ERROR out of memory storing object",
                ENGINE_DISCONNECT => return Step::Close,
                rc => error_line(rc),
            };
            say(s.out.tail(), line.quiet, text);
            *p = Pending::Swallow(line.bytes + 2);
            return Step::More;
        }
    };
    if item.value_mut().is_none() {
        say(
            s.out.tail(),
            line.quiet,
            "SERVER_ERROR failed to get item details",
        );
        *p = Pending::Swallow(line.bytes + 2);
        return Step::More;
    }
    *p = Pending::Data(Box::new(Fill {
        item,
        line,
        op,
        at: 0,
    }));
    Step::More
}

/// Copies arriving data into the item; then checks the `\r\n` after it.
fn data(s: &mut Session, p: &mut Pending, mut fill: Box<Fill>) -> Step {
    let size = fill.line.bytes;
    if fill.at < size {
        let copied = copy_into(&mut fill.item, fill.at, s.input.buffered());
        s.input.consume(copied);
        fill.at += copied;
        if fill.at < size {
            *p = Pending::Data(fill);
            return Step::NeedInput;
        }
    }
    let buffered = s.input.buffered();
    if buffered.len() < 2 {
        *p = Pending::Data(fill);
        return Step::NeedInput;
    }
    let crlf = [buffered[0], buffered[1]];
    s.input.consume(2);
    if &crlf != b"\r\n" {
        // As memcached 1.6: the two bytes after the data are dropped with it, and what follows
        // them is read as the next command (so data that ran past its length ends in `ERROR`).
        say(s.out.tail(), fill.line.quiet, "CLIENT_ERROR bad data chunk");
        return Step::Done;
    }
    store(s, p, fill)
}

/// Stores a filled item.
fn store(s: &mut Session, p: &mut Pending, fill: Box<Fill>) -> Step {
    let peer = &s.peer;
    let engine = peer.engine();
    let cas_in = fill.line.cas;
    let mut cas = cas_in;
    let invalid = match &fill.line.meta {
        Some(line) => store_invalid(peer, &mut s.scratch, &fill.item, line),
        None => None,
    };
    let rc = match invalid {
        Some(stored) => stored.map(|new| cas = new),
        None => {
            engine.item_set_cas(&fill.item, cas_in);
            peer.retry(|| ok(engine.store(&fill.item, &mut cas, fill.op, 0)))
        }
    };
    let rc = rc.err().unwrap_or(ENGINE_SUCCESS);
    if rc == ENGINE_EWOULDBLOCK {
        peer.take_parked();
        *p = Pending::Store(fill);
        return Step::Parked;
    }
    if let Some(line) = &fill.line.meta {
        let (tokens, n) = tokenize(line);
        let flow = match meta::parse(&meta::MS, tokens[1], &tokens[3..n]) {
            Ok(r) => meta::set_answer(s.out.tail(), &r, rc, cas),
            Err(text) => say(s.out.tail(), false, text),
        };
        return match flow {
            Flow::Continue => Step::Done,
            Flow::Close => Step::Close,
        };
    }
    let text = match rc {
        ENGINE_SUCCESS => "STORED",
        ENGINE_KEY_EEXISTS => "EXISTS",
        ENGINE_KEY_ENOENT => "NOT_FOUND",
        ENGINE_NOT_STORED => "NOT_STORED",
        ENGINE_ENOMEM => "SERVER_ERROR out of memory storing object",
        ENGINE_DISCONNECT => return Step::Close,
        rc => error_line(rc),
    };
    say(s.out.tail(), fill.line.quiet, text);
    Step::Done
}

/// An `ms … I` (`line`): stores the filled item's value through our engines' private opcode;
/// `None` for any other `ms`.
fn store_invalid(
    peer: &Peer,
    scratch: &mut Aligned,
    item: &Item<'static>,
    line: &[u8],
) -> Option<Result<u64, ENGINE_ERROR_CODE>> {
    let (tokens, n) = tokenize(line);
    let r = meta::parse(&meta::MS, tokens[1], &tokens[3..n]).ok()?;
    if !r.has(b'I') {
        return None;
    }
    let set = meta::set_line(&r).ok()?;
    let value: Vec<u8> = item.info()?.value().flatten().copied().collect();
    Some(meta::store_invalid(peer, scratch, &r.key, &set, &value))
}

/// `delete <key> [0] [noreply]`, as memcached 1.6 reads it: the legacy time must be 0, and
/// with `noreply` nothing is said, not even a complaint.
fn delete(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    if !(2..=4).contains(&tokens.len()) {
        reply(out, "ERROR");
        return Flow::Continue;
    }
    // A lone key is a key, even one spelled `noreply`.
    let quiet = tokens.len() > 2 && noreply(tokens);
    let zero = tokens.get(2) == Some(&&b"0"[..]);
    let valid = match tokens.len() {
        3 => zero || quiet,
        4 => zero && quiet,
        _ => true,
    };
    if !valid {
        let usage = "CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]";
        return say(out, quiet, usage);
    }
    if tokens[1].len() > KEY_MAX {
        return say(out, quiet, BAD_FORMAT);
    }
    peer.detail(tokens[1], Op::Delete);
    let engine = peer.engine();
    let mut cas = 0;
    let line = match peer.retry(|| ok(engine.remove(&peer.cookie, tokens[1], &mut cas, 0))) {
        Ok(()) => "DELETED",
        Err(ENGINE_KEY_ENOENT) => "NOT_FOUND",
        Err(ENGINE_DISCONNECT) => return Flow::Close,
        Err(rc) => error_line(rc),
    };
    say(out, quiet, line)
}

/// `incr|decr <key> <delta> [noreply]` (another fourth token is ignored, as memcached does).
fn arithmetic(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>, incr: bool) -> Flow {
    if !(3..=4).contains(&tokens.len()) {
        reply(out, "ERROR");
        return Flow::Continue;
    }
    let quiet = noreply(tokens);
    if tokens[1].len() > KEY_MAX {
        return say(out, quiet, BAD_FORMAT);
    }
    let Some(delta) = c_u64(tokens[2]) else {
        return say(out, quiet, "CLIENT_ERROR invalid numeric delta argument");
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
    let rc =
        peer.retry(|| ok(engine.arithmetic(&peer.cookie, tokens[1], &a, &mut cas, &mut result, 0)));
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

/// `touch <key> <exptime> [noreply]` (another fourth token is ignored), as a binary TOUCH
/// packet to the engine.
fn touch(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>, scratch: &mut Aligned) -> Flow {
    if !(3..=4).contains(&tokens.len()) {
        reply(out, "ERROR");
        return Flow::Continue;
    }
    let quiet = noreply(tokens);
    let key = tokens[1];
    if key.len() > KEY_MAX {
        return say(out, quiet, BAD_FORMAT);
    }
    let Some(exptime) = c_i32(tokens[2]) else {
        return say(out, quiet, "CLIENT_ERROR invalid exptime argument");
    };
    let exptime = meta::wire_exptime(exptime.into());
    peer.count(Stat::CmdTouch);
    let aligned = meta::touch_packet(scratch, PROTOCOL_BINARY_CMD_TOUCH, key, exptime);
    peer.open_sink(true, PROTOCOL_BINARY_CMD_TOUCH, 0);
    let engine = peer.engine();
    // SAFETY: a whole packet, 8-byte aligned, writable, alive across the call.
    let rc = peer.retry(|| ok(unsafe { engine.unknown_command(&peer.cookie, aligned) }));
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

/// `stats [group [args]]`, ended as memcached ends each group ([`stats::End`]).
fn stats(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    let group = tokens.get(1).copied().unwrap_or_default();
    let args = tokens.get(2..).unwrap_or_default();
    peer.open_sink(true, PROTOCOL_BINARY_CMD_STAT, 0);
    let end = stats::stats(peer, group, args);
    peer.take_sink(out);
    match end {
        End::List | End::Engine(ENGINE_SUCCESS) => reply(out, "END"),
        End::Reset => reply(out, "RESET"),
        End::Ok => reply(out, "OK"),
        End::Bare | End::Engine(ENGINE_EWOULDBLOCK) => {}
        End::Refused(line) => reply(out, line),
        End::Engine(ENGINE_DISCONNECT) => return Flow::Close,
        End::Engine(ENGINE_KEY_ENOENT) => reply(out, "ERROR"),
        End::Engine(rc) => reply(out, error_line(rc)),
    }
    Flow::Continue
}

/// `flush_all [delay] [noreply]`: a delay that is not a number is refused, one of 0 or less
/// flushes now (as memcached 1.6 reads them).
fn flush_all(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    if tokens.len() > 3 {
        reply(out, "ERROR");
        return Flow::Continue;
    }
    let quiet = noreply(tokens);
    let when = if tokens.len() == 1 + usize::from(quiet) {
        0
    } else {
        match c_i32(tokens[1]) {
            Some(delay) => libc::time_t::from(delay.max(0)),
            None => return say(out, quiet, "CLIENT_ERROR invalid exptime argument"),
        }
    };
    peer.count(Stat::CmdFlush);
    if !peer.ctx.options.flush_enabled {
        return say(out, quiet, "CLIENT_ERROR flush_all not allowed");
    }
    let engine = peer.engine();
    match peer.retry(|| ok(engine.flush(&peer.cookie, when))) {
        Ok(()) => say(out, quiet, "OK"),
        Err(ENGINE_DISCONNECT) => Flow::Close,
        Err(rc) => say(out, quiet, error_line(rc)),
    }
}

/// `shutdown [graceful]`, allowed by `-A`: the server stops as on SIGTERM (always gracefully:
/// requests in flight are answered) and this connection closes unanswered.
fn shutdown(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    if !peer.ctx.options.allow_shutdown {
        reply(out, "ERROR: shutdown not enabled");
        return Flow::Continue;
    }
    match tokens {
        [_] | [_, b"graceful"] => {
            request_shutdown("the shutdown command");
            Flow::Close
        }
        _ => {
            reply(out, "CLIENT_ERROR invalid shutdown mode");
            Flow::Continue
        }
    }
}

/// `cache_memlimit <megabytes> [noreply]`, checked as memcached 1.6 checks it. No engine here
/// resizes its cache while it runs: a limit other than the engine's own gets memcached's
/// answer for a limit it cannot set.
fn cache_memlimit(peer: &Peer, tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    if !(2..=3).contains(&tokens.len()) {
        reply(out, "ERROR");
        return Flow::Continue;
    }
    let quiet = noreply(tokens);
    let Some(megabytes) = c_u32(tokens[1]) else {
        return say(out, quiet, "ERROR");
    };
    let line = if megabytes < 8 {
        "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m"
    } else if megabytes > 1_000_000_000 {
        "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes"
    } else if stats::engine_maxbytes(peer) == Some(u64::from(megabytes) << 20) {
        "OK"
    } else {
        "MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust"
    };
    say(out, quiet, line)
}

/// `verbosity <level> [noreply]` (another third token is ignored, as memcached does).
fn verbosity(tokens: &[&[u8]], out: &mut Vec<u8>) -> Flow {
    if !(2..=3).contains(&tokens.len()) {
        reply(out, "ERROR");
        return Flow::Continue;
    }
    let quiet = noreply(tokens);
    match c_u32(tokens[1]) {
        Some(level) => {
            set_log_level(level_of_verbosity(level));
            say(out, quiet, "OK")
        }
        None => say(out, quiet, BAD_FORMAT),
    }
}
