//! An ASCII command line as a [`Command`]: the verb, its checked arguments (numbers read as
//! memcached's C reads them, keys within 250 bytes, a meta command's flags checked against its
//! verb) and, for a line memcached refuses, the refusal as it words it. Nothing here calls the
//! engine or writes output: the line's bytes are borrowed, so a command costs no allocation
//! (but an `ms` line, which is kept to word its answer once its data has arrived, and a base64
//! key, which is decoded).
//!
//! The text of the refusals follows memcached 1.6.18's answers to the same input
//! (`tests/meta.rs` compares the two byte for byte).

#![deny(unsafe_code)]

use crate::codec::KEY_MAX;
use crate::text::{c_i32, c_u32, c_u64, decode_base64, wire_exptime, BAD_FORMAT, UNSUPPORTED};
use mcb_abi::abi::*;
use std::borrow::Cow;

/// A command, as its line asks it.
#[derive(Debug)]
pub enum Command<'a> {
    /// get, gets (`with_cas`), gat and gats (`touch`, a [`wire_exptime`]): the keys are the
    /// line's tokens from byte `keys` on (any number of them, past the tokenizer's bound).
    Get {
        keys: usize,
        with_cas: bool,
        touch: Option<u32>,
        /// Where the first key over [`KEY_MAX`] starts, if one does: the line is refused
        /// there, the keys before it fetched but not answered (memcached counts them).
        too_long: Option<usize>,
    },
    /// A storage command (classic or `ms`) whose data follows the line.
    Store(Store<'a>),
    /// `mg`, `md`, `ma`: the checked request.
    Meta(MetaVerb, Request<'a>),
    /// `me <key> [b]` (the key decoded from base64 with `b`).
    MetaDebug { key: Cow<'a, [u8]> },
    /// A command the executor answers in one line.
    OneLine(OneLine<'a>),
    /// Refused as read: answered `line` (unless `quiet`), then `swallow` bytes of data that
    /// follow the line are dropped.
    Refused {
        line: &'static str,
        quiet: bool,
        swallow: usize,
    },
}

/// The commands answered in one line, after one engine call at most.
#[derive(Debug)]
pub enum OneLine<'a> {
    /// `mn`.
    MetaNoop,
    Delete {
        key: &'a [u8],
        quiet: bool,
    },
    Arithmetic {
        key: &'a [u8],
        incr: bool,
        delta: u64,
        quiet: bool,
    },
    Touch {
        key: &'a [u8],
        exptime: u32,
        quiet: bool,
    },
    /// `flush_all`: flush at this server time (0: now).
    FlushAll {
        when: libc::time_t,
        quiet: bool,
    },
    Version,
    Stats {
        group: &'a [u8],
        args: &'a [&'a [u8]],
    },
    Verbosity {
        level: u32,
        quiet: bool,
    },
    Quit,
    /// `shutdown [graceful]` (`mode_ok`: no other argument).
    Shutdown {
        mode_ok: bool,
    },
    /// `cache_memlimit` of a size memcached would try to set.
    CacheMemlimit {
        megabytes: u32,
        quiet: bool,
    },
    /// A line that looks like HTTP: no memcached client, closed unanswered (as memcached 1.6).
    Http,
}

impl OneLine<'_> {
    /// Whether the client asked for no reply (`noreply`).
    pub fn quiet(&self) -> bool {
        match self {
            OneLine::Delete { quiet, .. }
            | OneLine::Arithmetic { quiet, .. }
            | OneLine::Touch { quiet, .. }
            | OneLine::FlushAll { quiet, .. }
            | OneLine::Verbosity { quiet, .. }
            | OneLine::CacheMemlimit { quiet, .. } => *quiet,
            _ => false,
        }
    }
}

impl Command<'_> {
    fn refused(line: &'static str) -> Self {
        Command::Refused {
            line,
            quiet: false,
            swallow: 0,
        }
    }

    /// A refusal that `noreply` (`quiet`) silences.
    fn say(line: &'static str, quiet: bool) -> Self {
        Command::Refused {
            line,
            quiet,
            swallow: 0,
        }
    }
}

/// The meta commands answered in one line (`ms` is a [`Command::Store`]).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum MetaVerb {
    Get,
    Delete,
    Arithmetic,
}

/// Reads one command line (`line`, without its `\r\n`, split into `tokens`).
pub fn command<'a>(line: &'a [u8], tokens: &'a [&'a [u8]]) -> Command<'a> {
    let Some(&verb) = tokens.first() else {
        return Command::refused("ERROR");
    };
    if let Some(op) = storage_op(verb) {
        return match store(tokens, op) {
            Ok(store) => Command::Store(store),
            Err((line, quiet)) => Command::say(line, quiet),
        };
    }
    if verb == b"ms" {
        return match meta_store(line, tokens) {
            Ok(store) => Command::Store(store),
            Err((line, swallow)) => Command::Refused {
                line,
                quiet: false,
                swallow,
            },
        };
    }
    if verb == b"me" {
        return meta_debug(tokens);
    }
    if let (b"mg" | b"md" | b"ma", [_, key, flags @ ..]) = (verb, tokens) {
        return meta(verb, key, flags, tokens.len());
    }
    if let Some(get) = get(verb, line, tokens) {
        return get;
    }
    let one = match verb {
        b"delete" => delete(tokens),
        b"incr" | b"decr" => arithmetic(tokens, verb == b"incr"),
        b"touch" => touch(tokens),
        b"flush_all" => flush_all(tokens),
        // memcached ignores what follows version and quit.
        b"version" => Ok(OneLine::Version),
        b"stats" => Ok(OneLine::Stats {
            group: tokens.get(1).copied().unwrap_or_default(),
            args: tokens.get(2..).unwrap_or_default(),
        }),
        b"verbosity" => verbosity(tokens),
        b"quit" => Ok(OneLine::Quit),
        b"mn" => Ok(OneLine::MetaNoop),
        b"shutdown" => Ok(OneLine::Shutdown {
            mode_ok: matches!(tokens, [_] | [_, b"graceful"]),
        }),
        b"cache_memlimit" => cache_memlimit(tokens),
        _ if tokens.last().is_some_and(|t| t.starts_with(b"HTTP/")) => Ok(OneLine::Http),
        _ => Err(Command::refused("ERROR")),
    };
    one.map_or_else(|refused| refused, Command::OneLine)
}

/// A one-line command, or its refusal.
type OneOrRefused<'a> = Result<OneLine<'a>, Command<'a>>;

/// The classic storage verbs' operations.
fn storage_op(verb: &[u8]) -> Option<ENGINE_STORE_OPERATION> {
    Some(match verb {
        b"set" => OPERATION_SET,
        b"add" => OPERATION_ADD,
        b"replace" => OPERATION_REPLACE,
        b"append" => OPERATION_APPEND,
        b"prepend" => OPERATION_PREPEND,
        b"cas" => OPERATION_CAS,
        _ => return None,
    })
}

/// Whether the last token asks for no reply.
fn noreply(tokens: &[&[u8]]) -> bool {
    tokens.last() == Some(&&b"noreply"[..])
}

/// get, bget, gets, gat, gats (`None` for another verb, or a gat without its expiration time).
fn get<'a>(verb: &[u8], line: &'a [u8], tokens: &[&[u8]]) -> Option<Command<'a>> {
    let touch = match (verb, tokens) {
        (b"gat" | b"gats", [_, exptime, ..]) => match c_i32(exptime) {
            Some(t) => Some(wire_exptime(t.into())),
            None => return Some(Command::refused("CLIENT_ERROR invalid exptime argument")),
        },
        _ => None,
    };
    let with_cas = match verb {
        b"get" | b"bget" => false,
        b"gets" => true,
        b"gat" if touch.is_some() => false,
        b"gats" if touch.is_some() => true,
        _ => return None,
    };
    // gat and gats: the keys follow the expiration time (and may be none).
    let skip = 1 + usize::from(touch.is_some());
    let keys = after_tokens(line, skip);
    if touch.is_none() && next_key(line, keys).is_none() {
        return Some(Command::refused("ERROR"));
    }
    let (mut next, mut too_long) = (keys, None);
    while let Some((at, key)) = next_key(line, next) {
        if key.len() > KEY_MAX {
            too_long = Some(at);
            break;
        }
        next = at + key.len();
    }
    Some(Command::Get {
        keys,
        with_cas,
        touch,
        too_long,
    })
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

/// The next key of a get's line from byte `next` on: where it starts and the key; `None` at
/// the end of the line.
pub fn next_key(line: &[u8], next: usize) -> Option<(usize, &[u8])> {
    let rest = &line[next..];
    let skip = rest.iter().position(|&b| b != b' ')?;
    let key = &rest[skip..];
    let key = &key[..key.iter().position(|&b| b == b' ').unwrap_or(key.len())];
    Some((next + skip, key))
}

/// A storage command's line, checked.
#[derive(Debug)]
pub struct Store<'a> {
    pub op: ENGINE_STORE_OPERATION,
    pub key: Cow<'a, [u8]>,
    /// The client's flags.
    pub flags: u32,
    /// The expiration time as the client sent it.
    pub exptime: libc::time_t,
    /// The data's length (its `\r\n` follows).
    pub bytes: usize,
    pub cas: u64,
    /// `noreply`.
    pub quiet: bool,
    /// An `ms` line (kept to word its answer once the data has arrived).
    pub meta: Option<Box<[u8]>>,
}

/// A classic storage command line, as memcached 1.6 reads it: 5 tokens (6 for `cas`) and an
/// optional last one (`noreply` silences every complaint after the count; another is
/// ignored). Numbers are C's (`text::c_*`): flags and the length in 32 bits, the length at most
/// 2^31 - 3. A complaint is its line and whether `noreply` silences it.
pub fn store<'a>(
    tokens: &[&'a [u8]],
    op: ENGINE_STORE_OPERATION,
) -> Result<Store<'a>, (&'static str, bool)> {
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
    Ok(Store {
        op,
        key: Cow::Borrowed(tokens[1]),
        flags,
        exptime: libc::time_t::from(exptime),
        bytes: data_length(bytes).ok_or(bad)?,
        cas,
        quiet,
        meta: None,
    })
}

/// A data length that, with its `\r\n`, fits in a C int.
fn data_length(bytes: i32) -> Option<usize> {
    usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= i32::MAX as usize - 2)
}

/// An `ms` line as a storage line; a complaint and how many data bytes to drop after it (none
/// when the length is unreadable).
fn meta_store<'a>(line: &[u8], tokens: &'a [&'a [u8]]) -> Result<Store<'a>, (&'static str, usize)> {
    let [_, key, len, flags @ ..] = tokens else {
        let text = if tokens.len() < 2 {
            "ERROR"
        } else {
            BAD_FORMAT
        };
        return Err((text, 0));
    };
    // memcached drops no data after these two: it is read as commands.
    if key.len() > KEY_MAX {
        return Err((BAD_FORMAT, 0));
    }
    if tokens.len() >= TOO_MANY_TOKENS {
        return Err(("CLIENT_ERROR options flags too long", 0));
    }
    let bytes = c_i32(len).and_then(data_length).ok_or((BAD_FORMAT, 0))?;
    let r = request(&MS, key, flags).map_err(|e| (e, bytes + 2))?;
    let set = set_line(&r).map_err(|e| (e, bytes + 2))?;
    Ok(Store {
        op: set.op,
        key: r.key,
        flags: set.flags,
        exptime: set.exptime,
        bytes,
        cas: set.cas,
        quiet: false,
        meta: Some(line.into()),
    })
}

/// An `ms` line kept by [`Store::meta`], read again once its data has arrived: its request
/// (whose flags word the answer) and what its flags ask.
pub fn meta_store_again<'a>(
    tokens: &'a [&'a [u8]],
) -> Result<(Request<'a>, SetLine), &'static str> {
    let r = request(&MS, tokens[1], &tokens[3..])?;
    let set = set_line(&r)?;
    Ok((r, set))
}

/// `me <key> [b]`, as memcached 1.6.18 reads it: a `b` right after the key (alone) decodes
/// it from base64; any other token after the key is ignored.
fn meta_debug<'a>(tokens: &[&'a [u8]]) -> Command<'a> {
    let (key, rest) = match tokens {
        [_, key, rest @ ..] if key.len() <= KEY_MAX => (*key, rest),
        _ => return Command::refused(BAD_FORMAT),
    };
    if rest.first() != Some(&&b"b"[..]) {
        return Command::MetaDebug { key: key.into() };
    }
    match decode_base64(key) {
        Some(decoded) if !decoded.is_empty() => Command::MetaDebug {
            key: decoded.into(),
        },
        _ => Command::refused(BAD_FORMAT),
    }
}

/// `mg`, `md`, `ma` with a key (`count` tokens in all).
fn meta<'a>(verb: &[u8], key: &'a [u8], flags: &'a [&'a [u8]], count: usize) -> Command<'a> {
    if count >= TOO_MANY_TOKENS {
        return Command::refused("CLIENT_ERROR options flags are too long");
    }
    let (kind, spec) = match verb {
        b"mg" => (MetaVerb::Get, &MG),
        b"md" => (MetaVerb::Delete, &MD),
        _ => (MetaVerb::Arithmetic, &MA),
    };
    match request(spec, key, flags) {
        Ok(r) => Command::Meta(kind, r),
        Err(line) => Command::refused(line),
    }
}

/// `delete <key> [0] [noreply]`, as memcached 1.6 reads it: the legacy time must be 0, and
/// with `noreply` nothing is said, not even a complaint.
fn delete<'a>(tokens: &[&'a [u8]]) -> OneOrRefused<'a> {
    if !(2..=4).contains(&tokens.len()) {
        return Err(Command::refused("ERROR"));
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
        return Err(Command::say(usage, quiet));
    }
    if tokens[1].len() > KEY_MAX {
        return Err(Command::say(BAD_FORMAT, quiet));
    }
    Ok(OneLine::Delete {
        key: tokens[1],
        quiet,
    })
}

/// `incr|decr <key> <delta> [noreply]` (another fourth token is ignored, as memcached does).
fn arithmetic<'a>(tokens: &[&'a [u8]], incr: bool) -> OneOrRefused<'a> {
    if !(3..=4).contains(&tokens.len()) {
        return Err(Command::refused("ERROR"));
    }
    let quiet = noreply(tokens);
    if tokens[1].len() > KEY_MAX {
        return Err(Command::say(BAD_FORMAT, quiet));
    }
    let Some(delta) = c_u64(tokens[2]) else {
        return Err(Command::say(
            "CLIENT_ERROR invalid numeric delta argument",
            quiet,
        ));
    };
    Ok(OneLine::Arithmetic {
        key: tokens[1],
        incr,
        delta,
        quiet,
    })
}

/// `touch <key> <exptime> [noreply]` (another fourth token is ignored).
fn touch<'a>(tokens: &[&'a [u8]]) -> OneOrRefused<'a> {
    if !(3..=4).contains(&tokens.len()) {
        return Err(Command::refused("ERROR"));
    }
    let quiet = noreply(tokens);
    if tokens[1].len() > KEY_MAX {
        return Err(Command::say(BAD_FORMAT, quiet));
    }
    let Some(exptime) = c_i32(tokens[2]) else {
        return Err(Command::say("CLIENT_ERROR invalid exptime argument", quiet));
    };
    Ok(OneLine::Touch {
        key: tokens[1],
        exptime: wire_exptime(exptime.into()),
        quiet,
    })
}

/// `flush_all [delay] [noreply]`: a delay that is not a number is refused, one of 0 or less
/// flushes now (as memcached 1.6 reads them).
fn flush_all<'a>(tokens: &[&'a [u8]]) -> OneOrRefused<'a> {
    if tokens.len() > 3 {
        return Err(Command::refused("ERROR"));
    }
    let quiet = noreply(tokens);
    let when = if tokens.len() == 1 + usize::from(quiet) {
        0
    } else {
        match c_i32(tokens[1]) {
            Some(delay) => libc::time_t::from(delay.max(0)),
            None => return Err(Command::say("CLIENT_ERROR invalid exptime argument", quiet)),
        }
    };
    Ok(OneLine::FlushAll { when, quiet })
}

/// `verbosity <level> [noreply]` (another third token is ignored, as memcached does).
fn verbosity<'a>(tokens: &[&'a [u8]]) -> OneOrRefused<'a> {
    if !(2..=3).contains(&tokens.len()) {
        return Err(Command::refused("ERROR"));
    }
    let quiet = noreply(tokens);
    match c_u32(tokens[1]) {
        Some(level) => Ok(OneLine::Verbosity { level, quiet }),
        None => Err(Command::say(BAD_FORMAT, quiet)),
    }
}

/// `cache_memlimit <megabytes> [noreply]`, checked as memcached 1.6 checks it.
fn cache_memlimit<'a>(tokens: &[&'a [u8]]) -> OneOrRefused<'a> {
    if !(2..=3).contains(&tokens.len()) {
        return Err(Command::refused("ERROR"));
    }
    let quiet = noreply(tokens);
    Err(Command::say(
        match c_u32(tokens[1]) {
            None => "ERROR",
            Some(mb) if mb < 8 => "MEMLIMIT_TOO_SMALL cannot set maxbytes to less than 8m",
            Some(mb) if mb > 1_000_000_000 => {
                "MEMLIMIT_ADJUST_FAILED input value is megabytes not bytes"
            }
            Some(megabytes) => return Ok(OneLine::CacheMemlimit { megabytes, quiet }),
        },
        quiet,
    ))
}

// The meta commands' flags. A meta line is `<verb> <key> [<datalen>] <flag>*`; each flag is
// one letter, some with a token (`T30`, `Oabc`).

const BAD_TOKEN: &str = "CLIENT_ERROR bad token in command line format";
/// A meta line of this many tokens or more is refused (memcached 1.6.18's bound).
const TOO_MANY_TOKENS: usize = 20;
/// Longest opaque (`O`) token.
const OPAQUE_MAX: usize = 32;

/// Every flag a meta command accepts: memcached 1.6.18 reads the same set on each of them (a
/// flag a command has no use for is read and ignored: `mg k C5`, `md k v`).
const KNOWN_FLAGS: &[u8] = b"bCcDFfhIJkLlMNOPqRsTtuv";

/// How memcached words one meta command's complaints, and the flags it refuses on a v1 engine.
#[derive(Debug)]
pub struct Verb {
    /// Flags the command takes that a v1 engine cannot honour.
    unsupported: &'static [u8],
    invalid: &'static str,
    duplicate: &'static str,
    /// What the command says instead of the complaint about a flag's token (`md` and `ma`
    /// say one thing whatever the complaint), if anything.
    bad_token: Option<&'static str>,
}

pub const MG: Verb = Verb {
    unsupported: b"",
    invalid: "CLIENT_ERROR invalid flag",
    duplicate: "CLIENT_ERROR duplicate flag",
    bad_token: None,
};

const MS: Verb = MG;

const MD: Verb = Verb {
    unsupported: b"",
    invalid: "CLIENT_ERROR invalid or duplicate flag",
    duplicate: "CLIENT_ERROR invalid or duplicate flag",
    bad_token: Some("CLIENT_ERROR invalid or duplicate flag"),
};

const MA: Verb = MD;

/// A checked meta request: its key (decoded from base64 with `b`) and its flags, whose tokens
/// read.
#[derive(Debug)]
pub struct Request<'a> {
    pub key: Cow<'a, [u8]>,
    pub base64: bool,
    /// The flags in the request's order (the answer echoes them so).
    pub flags: &'a [&'a [u8]],
}

/// What memcached says of `flag`'s token when it cannot read it (`F`: nothing of its own, so
/// the line's earlier complaint or the general one stands), or `None` when it reads.
fn token_complaint(flag: &[u8], earlier: Option<&'static str>) -> Option<&'static str> {
    let token = &flag[1..];
    let fails = |reads: bool, text| (!reads).then_some(text);
    match flag[0] {
        b'N' | b'R' | b'T' => fails(c_i32(token).is_some(), BAD_TOKEN),
        b'C' => fails(c_u64(token).is_some(), BAD_TOKEN),
        b'F' => fails(c_u32(token).is_some(), earlier.unwrap_or(BAD_FORMAT)),
        b'M' => fails(
            token.len() == 1,
            "CLIENT_ERROR incorrect length for M token",
        ),
        b'J' => fails(
            c_u64(token).is_some(),
            "CLIENT_ERROR invalid numeric initial value",
        ),
        b'D' => fails(
            c_u64(token).is_some(),
            "CLIENT_ERROR invalid numeric delta value",
        ),
        _ => None,
    }
}

/// Checks a meta request's key and flags as memcached 1.6.18 does: the key's length, then
/// every flag in order (an unknown or repeated one ends the check; of the complaints about
/// tokens and the key's base64, the last one stands), then the opaque's length.
pub fn request<'a>(
    verb: &Verb,
    key: &'a [u8],
    flags: &'a [&'a [u8]],
) -> Result<Request<'a>, &'static str> {
    if key.len() > KEY_MAX {
        return Err(BAD_FORMAT);
    }
    let mut seen = [false; 128];
    let mut complaint = None;
    let mut decoded = None;
    for flag in flags {
        let f = flag[0];
        if !KNOWN_FLAGS.contains(&f) {
            return Err(verb.invalid);
        }
        if std::mem::replace(&mut seen[usize::from(f)], true) {
            return Err(verb.duplicate);
        }
        if f == b'b' {
            decoded = decode_base64(key);
            if decoded.is_none() {
                complaint = Some("CLIENT_ERROR error decoding key");
            }
        }
        if let Some(text) = token_complaint(flag, complaint) {
            complaint = Some(text);
        }
    }
    if let Some(text) = complaint {
        return Err(verb.bad_token.unwrap_or(text));
    }
    if flags
        .iter()
        .any(|f| f[0] == b'O' && f.len() - 1 > OPAQUE_MAX)
    {
        return Err("CLIENT_ERROR opaque token too long");
    }
    // Checked after the syntax, so a bad line gets memcached's own complaint.
    if flags.iter().any(|f| verb.unsupported.contains(&f[0])) {
        return Err(UNSUPPORTED);
    }
    Ok(Request {
        key: decoded.map_or(Cow::Borrowed(key), Cow::Owned),
        base64: seen[usize::from(b'b')],
        flags,
    })
}

impl Request<'_> {
    pub fn has(&self, flag: u8) -> bool {
        self.flags.iter().any(|f| f[0] == flag)
    }

    /// The token after `flag`, when the request has it.
    pub fn token(&self, flag: u8) -> Option<&[u8]> {
        self.flags.iter().find(|f| f[0] == flag).map(|f| &f[1..])
    }

    /// `flag`'s numeric token, read by `read` (one of memcached's C readers, `text::c_*`;
    /// [`request`] checked that it reads), or `None` without the flag.
    pub fn number<T>(&self, flag: u8, read: fn(&[u8]) -> Option<T>) -> Option<T> {
        self.token(flag).and_then(read)
    }

    /// A time flag's token (`T`, `N`, `R`): 32 bits, as memcached reads it (2^31 is already
    /// past, 2^32 is 0).
    pub fn time(&self, flag: u8) -> Option<libc::time_t> {
        self.number(flag, c_i32).map(libc::time_t::from)
    }

    /// A 64-bit flag's token (`C`, `J`, `D`).
    pub fn u64(&self, flag: u8) -> Option<u64> {
        self.number(flag, c_u64)
    }

    pub fn quiet(&self) -> bool {
        self.has(b'q')
    }
}

/// What an `ms` line's flags ask.
#[derive(Debug)]
pub struct SetLine {
    pub flags: u32,
    pub exptime: libc::time_t,
    /// The CAS to compare (`C`), 0 for none.
    pub cas: u64,
    pub op: ENGINE_STORE_OPERATION,
    /// Store the value as a stale item if the CAS is older than the item's (`I` with a CAS
    /// compare).
    pub stale_if_older: bool,
}

/// Reads an `ms` request's flags. As in memcached 1.6.18, a `C` flag makes a set or a replace
/// a compare-and-swap (`C0` included: it matches no item while CAS is on), an add ignores it,
/// append and prepend compare it when nonzero; `I` matters to a compare-and-swap only.
fn set_line(r: &Request) -> Result<SetLine, &'static str> {
    let mut op = match r.token(b'M') {
        None | Some(b"S") => OPERATION_SET,
        Some(b"E") => OPERATION_ADD,
        Some(b"A") => OPERATION_APPEND,
        Some(b"P") => OPERATION_PREPEND,
        Some(b"R") => OPERATION_REPLACE,
        Some(_) => return Err("CLIENT_ERROR invalid mode for ms M token"),
    };
    let cas = r.u64(b'C');
    if cas.is_some() && (op == OPERATION_SET || op == OPERATION_REPLACE) {
        op = OPERATION_CAS;
    }
    let cas = cas.unwrap_or(0);
    Ok(SetLine {
        flags: r.number(b'F', c_u32).unwrap_or(0),
        exptime: r.time(b'T').unwrap_or(0),
        cas,
        op,
        stale_if_older: op == OPERATION_CAS && cas != 0 && r.has(b'I'),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::tokenize;

    /// Reads `line` as the connection would.
    fn read(line: &[u8], check: impl FnOnce(Command<'_>)) {
        let (tokens, n) = tokenize(line);
        check(command(line, &tokens[..n]));
    }

    #[test]
    fn a_get_borrows_its_keys_from_the_line() {
        let line = b"gets  a bb   c";
        read(line, |c| {
            let Command::Get {
                keys,
                with_cas: true,
                touch: None,
                too_long: None,
            } = c
            else {
                panic!("{c:?}");
            };
            let mut seen = Vec::new();
            let mut next = keys;
            while let Some((at, key)) = next_key(line, next) {
                seen.push(key);
                next = at + key.len();
            }
            assert_eq!(seen, [&b"a"[..], b"bb", b"c"]);
        });
        read(b"gat -1 k", |c| {
            assert!(matches!(c, Command::Get { touch: Some(t), .. } if t == wire_exptime(-1)));
        });
    }

    #[test]
    fn refusals_are_memcacheds_and_noreply_silences_some() {
        read(b"get", |c| {
            assert!(matches!(c, Command::Refused { line: "ERROR", .. }));
        });
        read(b"set k 0 0 x noreply", |c| {
            assert!(matches!(
                c,
                Command::Refused {
                    line: BAD_FORMAT,
                    quiet: true,
                    swallow: 0
                }
            ));
        });
        // A bad meta flag drops the data that follows the line.
        read(b"ms k 5 Zz", |c| {
            assert!(matches!(
                c,
                Command::Refused {
                    line: "CLIENT_ERROR invalid flag",
                    swallow: 7,
                    ..
                }
            ));
        });
        read(b"GET / HTTP/1.1", |c| {
            assert!(matches!(c, Command::OneLine(OneLine::Http)))
        });
    }

    #[test]
    fn a_meta_store_keeps_its_line_and_decodes_its_key() {
        read(b"ms Zm9v 3 b T5 F7", |c| {
            let Command::Store(store) = c else {
                panic!("{c:?}");
            };
            assert_eq!(&store.key[..], b"foo");
            assert_eq!((store.bytes, store.flags, store.exptime), (3, 7, 5));
            assert_eq!(store.meta.as_deref(), Some(&b"ms Zm9v 3 b T5 F7"[..]));
        });
    }
}
