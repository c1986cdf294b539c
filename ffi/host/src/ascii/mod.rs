//! memcached's ASCII protocol: get/gets, gat/gats and touch (through the engine's
//! `unknown_command` as binary GAT 0x1d and TOUCH 0x1c, when the engine implements them),
//! set/add/replace/append/prepend/cas, delete, incr/decr, stats, flush_all, version,
//! verbosity, quit, shutdown, cache_memlimit, and memcached 1.6's meta commands (`meta`; `ms`
//! data arrives as a set's).
//!
//! In three layers, as Pelikan's protocol crates are: [`parse`] turns a line into a
//! [`parse::Command`] borrowing its bytes (no engine call); `execute` and `meta` run it
//! against the engine; `compose` (and `meta` for its own answers) writes the reply. Around
//! them, a connection is a state machine ([`Pending`]) its worker steps ([`step`]): a command
//! runs once its line is buffered; a storage command's data goes straight into the allocated
//! item, copied from what is buffered and then read from the socket into the item itself
//! ([`Landing`], [`landing`]), and must end in `\r\n`; a get serves its keys as the output has
//! room, large values written from the held items. Flags are stored in network byte order, as
//! memcached stores them, so both protocols see the same flags.

#![deny(unsafe_code)]

mod compose;
mod execute;
mod meta;
pub mod parse;

use crate::counters::Stat;
use crate::engine::StoreOp;
use crate::io::{Landing, Output};
use crate::packet::Packet;
use crate::session::{Flow, Peer, Session, Step};
use crate::text::{reply, tokenize, BAD_FORMAT};
use execute::{Fetch, Unallocated};
use mcb_abi::abi::*;
use parse::{Command, MetaVerb};

/// Longest command line (long multi-key gets included).
const MAX_LINE: usize = 64 * 1024;
/// Longest command line other than a multi-get's, as memcached 1.6 bounds them.
const SHORT_LINE: usize = 2048;
/// Longest `-Y` authentication data taken (`user password`): longer is refused unread.
const AUTH_MAX: usize = 1024;

/// Whether an unfinished line is a multi-get (`get ` or `gets `, after at most 100 spaces), the
/// one command memcached lets grow past [`SHORT_LINE`].
fn multi_get(line: &[u8]) -> bool {
    let spaces = line.iter().take_while(|&&b| b == b' ').count();
    let rest = &line[spaces..];
    spaces <= 100 && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

/// A line without its `\r` (the `\n` is already off).
fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Where a connection is within the ASCII protocol between steps.
#[derive(Debug, Default)]
pub enum Pending {
    /// Between requests.
    #[default]
    Idle,
    /// A get part-way.
    Get(Getting),
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

/// A get whose line is the first `end` buffered bytes (consumed when it ends), served up to
/// byte `next` of the line; a gat/gats touches each key with `touch`.
#[derive(Debug, Clone, Copy)]
pub struct Getting {
    end: usize,
    next: usize,
    with_cas: bool,
    touch: Option<u32>,
    /// Where a key too long starts (see `parse::Command::Get`).
    too_long: Option<usize>,
}

/// A storage command's item, its data arriving, and what the store needs.
#[derive(Debug)]
pub struct Fill {
    landing: Landing,
    op: StoreOp,
    cas: u64,
    quiet: bool,
    /// An `ms` line (kept to word its answer).
    meta: Option<Box<[u8]>>,
}

/// The item a connection's data is arriving into, when it is: its worker reads the socket
/// straight into it.
pub fn landing(p: &mut Pending) -> Option<&mut Landing> {
    match p {
        Pending::Data(fill) => Some(&mut fill.landing),
        _ => None,
    }
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
            line(s, p, end)
        }
        Pending::Get(getting) => get(s, p, getting),
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

/// What a command line came to, for its step to apply to the connection's input.
enum Next {
    /// Answered: the line is consumed, unless the engine parked the command.
    Answered(Flow),
    /// A get, to serve key by key.
    Get {
        next: usize,
        with_cas: bool,
        touch: Option<u32>,
        too_long: Option<usize>,
    },
    /// The line is consumed and its data follows, into this item.
    Data(Box<Fill>),
    /// The line is consumed and this many bytes after it are dropped.
    Swallow(usize),
    /// The engine parked the line's allocation: it runs again once the engine notifies.
    Parked,
    /// A `-Y` authentication's line.
    Authenticate,
}

/// One command whose line (without its `\n`) is the first `end` buffered bytes.
fn line(s: &mut Session, p: &mut Pending, end: usize) -> Step {
    let mark = s.out.mark();
    let next = {
        let Session {
            peer,
            input,
            out,
            packet,
        } = s;
        let line = trim_cr(&input.buffered()[..end]);
        let (tokens, n) = tokenize(line);
        run(peer, out, packet, line, &tokens[..n])
    };
    match next {
        Next::Answered(flow) => finish(s, mark, end, flow),
        Next::Get {
            next,
            with_cas,
            touch,
            too_long,
        } => get(
            s,
            p,
            Getting {
                end,
                next,
                with_cas,
                touch,
                too_long,
            },
        ),
        Next::Data(fill) => {
            s.input.consume(end + 1);
            *p = Pending::Data(fill);
            Step::More
        }
        Next::Swallow(n) => {
            s.input.consume(end + 1);
            if n == 0 {
                return Step::Done;
            }
            *p = Pending::Swallow(n);
            Step::More
        }
        Next::Parked => Step::Parked,
        Next::Authenticate => authenticate(s, p, end),
    }
}

/// Parses a command line and runs it: parse, execute, compose.
fn run(peer: &Peer, out: &mut Output, packet: &mut Packet, line: &[u8], tokens: &[&[u8]]) -> Next {
    if let Some(&verb) = tokens.first() {
        // `-Y`: a connection authenticates with a `set` whose data is `user password` before
        // anything else, even version (as memcached 1.6); `-S` lets version and quit through.
        let ascii_auth = peer.ctx.ascii_users.is_some() && !peer.conn.is_authenticated();
        if ascii_auth && verb == b"set" {
            return Next::Authenticate;
        }
        if ascii_auth || (peer.needs_auth() && !matches!(verb, b"version" | b"quit")) {
            reply(out.tail(), "CLIENT_ERROR unauthenticated");
            return Next::Answered(Flow::Continue);
        }
        // memcached counts a flush_all it dispatches, one it then refuses included.
        if verb == b"flush_all" && tokens.len() <= 3 {
            peer.count(Stat::CmdFlush);
        }
    }
    match parse::command(line, tokens) {
        Command::Get {
            keys,
            with_cas,
            touch,
            too_long,
        } => Next::Get {
            next: keys,
            with_cas,
            touch,
            too_long,
        },
        Command::Store(store) => allocate(peer, out.tail(), store),
        Command::Meta(verb, r) => Next::Answered(match verb {
            MetaVerb::Get => meta::get(peer, out, packet, &r),
            MetaVerb::Delete => meta::delete(peer, out.tail(), packet, &r),
            MetaVerb::Arithmetic => meta::arithmetic(peer, out.tail(), packet, &r),
        }),
        Command::MetaDebug { key } => {
            // memcached 1.6.18 counts `me` alone in cmd_meta (mg, ms, md and ma count as the
            // classic commands they stand for), and only a line it could read.
            peer.count(Stat::CmdMeta);
            Next::Answered(meta::debug(peer, out.tail(), packet, &key))
        }
        Command::OneLine(command) => {
            let quiet = command.quiet();
            let tail = out.tail();
            let answer = execute::one_line(peer, packet, tail, command);
            Next::Answered(compose::reply(tail, answer, quiet))
        }
        Command::Refused {
            line,
            quiet,
            swallow,
        } => {
            if !quiet {
                reply(out.tail(), line);
            }
            Next::Swallow(swallow)
        }
    }
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

/// Serves a get's keys from where it stopped until the line ends (then `END`) or the output is
/// full (then the rest waits in `p` for the socket to drain).
fn get(s: &mut Session, p: &mut Pending, mut getting: Getting) -> Step {
    loop {
        let line = trim_cr(&s.input.buffered()[..getting.end]);
        let Some((at, key)) = parse::next_key(line, getting.next) else {
            reply(s.out.tail(), "END");
            s.input.consume(getting.end + 1);
            return Step::Done;
        };
        if getting.too_long.is_some_and(|bad| at >= bad) {
            reply(s.out.tail(), BAD_FORMAT);
            s.input.consume(getting.end + 1);
            return Step::Done;
        }
        if s.out.is_full() {
            *p = Pending::Get(getting);
            return Step::More;
        }
        match execute::fetch(&s.peer, &mut s.packet, key, getting.touch) {
            Fetch::Hit(hit) => {
                s.peer.fetched_classic(key, true, getting.touch.is_some());
                // A line refused further on answers no value (the hit is let go).
                if getting.too_long.is_none() {
                    compose::value(&mut s.out, key, hit, getting.with_cas);
                }
            }
            Fetch::Miss => s.peer.fetched_classic(key, false, getting.touch.is_some()),
            Fetch::Parked => {
                s.peer.take_parked();
                *p = Pending::Get(getting);
                return Step::Parked;
            }
            Fetch::Close => return Step::Close,
            Fetch::Fail(text) => {
                reply(s.out.tail(), text);
                s.input.consume(getting.end + 1);
                return Step::Done;
            }
        }
        getting.next = at + key.len();
    }
}

/// A storage command's line: allocates its item (the data then arrives into it).
fn allocate(peer: &Peer, out: &mut Vec<u8>, store: parse::Store) -> Next {
    match execute::allocate(peer, &store) {
        Ok(blank) => Next::Data(Box::new(Fill {
            landing: Landing::new(blank),
            op: store.op,
            cas: store.cas,
            quiet: store.quiet,
            meta: store.meta,
        })),
        Err(Unallocated::Parked) => Next::Parked,
        Err(Unallocated::Close) => Next::Answered(Flow::Close),
        Err(Unallocated::Refused(text)) => {
            if !store.quiet {
                reply(out, text);
            }
            Next::Swallow(store.bytes + 2)
        }
    }
}

/// Moves arriving data into the item; then checks the `\r\n` after it.
fn data(s: &mut Session, p: &mut Pending, mut fill: Box<Fill>) -> Step {
    fill.landing.take_from(&mut s.input);
    if !fill.landing.is_full() {
        *p = Pending::Data(fill);
        return Step::NeedInput;
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
        if !fill.quiet {
            reply(s.out.tail(), "CLIENT_ERROR bad data chunk");
        }
        return Step::Done;
    }
    store(s, p, fill)
}

/// Stores a filled item and answers.
fn store(s: &mut Session, p: &mut Pending, fill: Box<Fill>) -> Step {
    let Session {
        peer, out, packet, ..
    } = s;
    let stored = match fill.meta.as_deref() {
        None => {
            let (rc, _) = execute::store(peer, fill.landing.blank(), fill.op, fill.cas);
            (rc != ENGINE_EWOULDBLOCK).then(|| compose::stored(out.tail(), rc, fill.quiet))
        }
        Some(line) => meta_store(peer, out.tail(), packet, &fill, line),
    };
    match stored {
        None => {
            peer.take_parked();
            *p = Pending::Store(fill);
            Step::Parked
        }
        Some(Flow::Continue) => Step::Done,
        Some(Flow::Close) => Step::Close,
    }
}

/// Stores a filled `ms` item (its kept `line`) and answers; `None` when the engine parked the
/// store.
fn meta_store(
    peer: &Peer,
    out: &mut Vec<u8>,
    packet: &mut Packet,
    fill: &Fill,
    line: &[u8],
) -> Option<Flow> {
    let (tokens, n) = tokenize(line);
    let (r, set) = match parse::meta_store_again(&tokens[..n]) {
        Ok(parsed) => parsed,
        Err(text) => {
            reply(out, text);
            return Some(Flow::Continue);
        }
    };
    let blank = fill.landing.blank();
    let through_ext = if set.stale_if_older || r.base64 {
        let value: Vec<u8> = blank.value().flatten().copied().collect();
        match meta::store_ext(peer, packet, &r, &set, &value) {
            Ok(cas) => Some((ENGINE_SUCCESS, cas)),
            // An engine without the opcode keeps no base64 mark: v1's store does the rest.
            Err(ENGINE_ENOTSUP) if !set.stale_if_older => None,
            Err(rc) => Some((rc, 0)),
        }
    } else {
        None
    };
    let (rc, cas) = through_ext.unwrap_or_else(|| execute::store(peer, blank, fill.op, fill.cas));
    (rc != ENGINE_EWOULDBLOCK).then(|| meta::set_answer(out, &r, rc, cas))
}

/// `set <any key> <flags> <exptime> <bytes>` from a connection that must authenticate (`-Y`):
/// its data is read as credentials.
fn authenticate(s: &mut Session, p: &mut Pending, end: usize) -> Step {
    let line = trim_cr(&s.input.buffered()[..end]);
    let (tokens, n) = tokenize(line);
    let bytes = parse::store(&tokens[..n], OPERATION_SET).map(|store| store.bytes);
    s.input.consume(end + 1);
    match bytes {
        Ok(bytes) if bytes <= AUTH_MAX => {
            *p = Pending::Auth(Vec::with_capacity(bytes + 2), bytes + 2);
            Step::More
        }
        Ok(_) => {
            reply(s.out.tail(), "CLIENT_ERROR bad authentication token format");
            Step::Close
        }
        Err((text, quiet)) => {
            if !quiet {
                reply(s.out.tail(), text);
            }
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
