//! memcached 1.6's meta commands (`mg`, `md`, `ma`, `me`, and `ms` once its data has arrived),
//! executed and answered: each request [`parse`](super::parse) checked, run against the engine,
//! its answer worded with the request's flags echoed in their order.
//!
//! A flag is served only by one engine call: v1's `get`, binary GAT (`T`), `store` with a CAS
//! and a mode (`ms`), `remove` with a CAS (`md`), `arithmetic` with create, initial value and
//! TTL (`ma`); or, for stale items, the recache token, access times and arithmetic with a CAS
//! or a TTL (`mg` `h l N R`, `md I`, `ms I`, `ma C T t`), our engines' private opcodes
//! ([`crate::ext`]). An engine that lacks what a flag needs gets [`UNSUPPORTED`], never a
//! guess. `P` and `L` (proxy hints) are ignored, as memcached ignores them; `u` (no LRU bump)
//! leaves the access marks alone and changes nothing else.

#![deny(unsafe_code)]

use super::parse::{self, Request, SetLine};
use crate::api::server_core::{current_time, to_rel_time};
use crate::codec::{push_decimal, push_signed};
use crate::counters::Stat;
use crate::engine::{Arith, Value};
use crate::ext::{self, MetaArith, MetaGet};
use crate::io::{Output, COPY_MAX};
use crate::packet::Packet;
use crate::session::{ok, Flow, Peer};
use crate::text::{error_line, push_base64, reply, wire_exptime, UNSUPPORTED};
use mcb_abi::abi::*;
use mcb_abi::meta_ext::{
    SET_KEY_BINARY, SET_STALE_IF_OLDER, STATE_CREATED, STATE_FETCHED, STATE_KEY_BINARY, STATE_LOST,
    STATE_STALE, STATE_WON,
};
use std::io::Write;

const NON_NUMERIC: &str = "CLIENT_ERROR cannot increment or decrement non-numeric value";

/// What an answer can report of its item.
#[derive(Debug, Default)]
struct Known {
    cas: Option<u64>,
    flags: Option<u32>,
    size: Option<usize>,
    ttl: Option<i64>,
    hit_before: Option<bool>,
    /// Seconds since the last access.
    idle: Option<u32>,
    /// Stale and recache-token answers (`mcb_abi::meta_ext`'s `STATE_*` bits).
    state: u8,
    /// Whether the item's key came in base64 (`ms … b`), when the engine says: memcached answers
    /// `k` by the item's mark on a hit, by the request's `b` otherwise.
    key_binary: Option<bool>,
}

/// Appends the answer's flags, in the request's order: `k` and `O` always, the others when
/// `known` has their value.
fn echo(out: &mut Vec<u8>, r: &Request, known: &Known) {
    for flag in r.flags {
        match flag[0] {
            b'k' => {
                out.extend_from_slice(b" k");
                key(out, &r.key, known.key_binary.unwrap_or(r.base64));
            }
            b'O' => {
                out.extend_from_slice(b" ");
                out.extend_from_slice(flag);
            }
            b'c' => number(out, b" c", known.cas),
            b'f' => number(out, b" f", known.flags.map(u64::from)),
            b's' => number(out, b" s", known.size.map(|v| v as u64)),
            b't' => {
                if let Some(ttl) = known.ttl {
                    out.extend_from_slice(b" t");
                    push_signed(out, ttl);
                }
            }
            b'h' => number(out, b" h", known.hit_before.map(u64::from)),
            b'l' => number(out, b" l", known.idle.map(u64::from)),
            _ => {}
        };
    }
    // memcached's order: Z, X, W.
    for (bit, text) in [(STATE_LOST, " Z"), (STATE_STALE, " X"), (STATE_WON, " W")] {
        if known.state & bit != 0 {
            out.extend_from_slice(text.as_bytes());
        }
    }
}

/// Appends `key` as memcached's meta answers word it: in base64, then ` b`, when `binary`.
fn key(out: &mut Vec<u8>, key: &[u8], binary: bool) {
    if binary {
        push_base64(out, key);
        out.extend_from_slice(b" b");
    } else {
        out.extend_from_slice(key);
    }
}

/// ` <flag><value>`, when there is a value.
fn number(out: &mut Vec<u8>, flag: &[u8], value: Option<u64>) {
    if let Some(v) = value {
        out.extend_from_slice(flag);
        push_decimal(out, v);
    }
}

/// A whole answer line: `code`, the echoed flags, `\r\n`.
fn answer(out: &mut Vec<u8>, r: &Request, code: &str, known: &Known) {
    out.extend_from_slice(code.as_bytes());
    echo(out, r, known);
    out.extend_from_slice(b"\r\n");
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

/// The remaining TTL of an item expiring at server time `exptime`, as `t` reports it.
fn ttl_of(exptime: rel_time_t) -> i64 {
    if exptime == 0 {
        -1
    } else {
        i64::from(exptime) - i64::from(current_time())
    }
}

/// A hit's value: held in the engine's item, or copied from an engine's answer.
enum Held {
    Item(Value<'static>),
    Copied(Vec<u8>),
}

/// A fetch's hit, or `None`; an engine's code or a complaint about the request's tokens.
type Fetched = Result<Option<(Known, Held)>, Result<ENGINE_ERROR_CODE, &'static str>>;

/// `mg` through our engines' private opcode: stale items and the recache token (none taken
/// when only `look`ing, for `me`). `ENGINE_ENOTSUP` from an engine without it.
fn fetch_ext(
    peer: &Peer,
    packet: &mut Packet,
    r: &Request,
    touch: Option<libc::time_t>,
    look: bool,
) -> Fetched {
    let get = MetaGet {
        vivify: vivify_ttl(r, touch).map(wire_exptime),
        // A negative recache time is never reached.
        recache: r.time(b'R').map(|t| u32::try_from(t).unwrap_or(0)),
        touch: touch.map(wire_exptime),
        no_bump: r.has(b'u'),
        look,
    };
    let Some(hit) = ext::meta_get(peer, packet, &r.key, &get).map_err(Ok)? else {
        return Ok(None);
    };
    let created = hit.state & STATE_CREATED != 0;
    let known = Known {
        hit_before: Some(hit.state & STATE_FETCHED != 0),
        idle: Some(hit.idle),
        cas: Some(hit.cas),
        flags: Some(hit.flags),
        size: Some(hit.value.len()),
        ttl: Some(ttl_of(reported_exptime(
            r,
            hit.exptime_before,
            hit.exptime,
            created,
        ))),
        state: hit.state,
        key_binary: Some(hit.state & STATE_KEY_BINARY != 0),
    };
    Ok(Some((known, Held::Copied(hit.value))))
}

/// The expiry an item `N` creates gets (`mg` and `ma` alike): memcached applies the line's
/// flags in order, so a `T` after the `N` sets the new item's expiry again.
fn vivify_ttl(r: &Request, touch: Option<libc::time_t>) -> Option<libc::time_t> {
    let vivify = r.time(b'N')?;
    let at = |flag| r.flags.iter().position(|f| f[0] == flag);
    match touch {
        Some(t) if at(b'T') > at(b'N') => Some(t),
        _ => Some(vivify),
    }
}

/// The expiry `t` reports, in server time, for an item whose expiry was `before` the request
/// and is `after` it (`created`: the request made it, with no expiry before): as memcached
/// walks the line's flags (`mg` and `ma` alike), `T` sets the expiry, `N` sets it on an item
/// the request created, and `t` reports it as it stands at its place (before a later `T`: the
/// expiry the item had).
fn reported_exptime(
    r: &Request,
    before: rel_time_t,
    after: rel_time_t,
    created: bool,
) -> rel_time_t {
    let mut exptime = before;
    for flag in r.flags {
        let set = |flag: u8| r.time(flag).map_or(exptime, to_rel_time);
        match flag[0] {
            b't' => return exptime,
            b'T' => exptime = set(b'T'),
            b'N' if created => exptime = set(b'N'),
            _ => {}
        }
    }
    after
}

/// `mg` through the v1 calls: `get`, or binary GAT for a touch.
fn fetch_v1(peer: &Peer, packet: &mut Packet, r: &Request, touch: Option<libc::time_t>) -> Fetched {
    if let Some(t) = touch {
        let hit = ext::get_and_touch(peer, packet, &r.key, wire_exptime(t)).map_err(Ok)?;
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

/// The CAS of `key`'s item, read as memcached's `md` reads it: not a fetch (no fetched mark,
/// access time or recache token), through our engines' meta get as a look, else through v1's
/// `get`.
fn cas_of(peer: &Peer, packet: &mut Packet, key: &[u8]) -> Result<u64, ENGINE_ERROR_CODE> {
    let look = MetaGet {
        no_bump: true,
        look: true,
        ..MetaGet::default()
    };
    match ext::meta_get(peer, packet, key, &look) {
        Ok(hit) => hit.map(|hit| hit.cas).ok_or(ENGINE_KEY_ENOENT),
        Err(ENGINE_ENOTSUP) => {
            let item = peer.retry(|| peer.engine().get(&peer.cookie, key, 0))?;
            Ok(Value::of(item).ok_or(ENGINE_FAILED)?.info().cas())
        }
        Err(rc) => Err(rc),
    }
}

/// `mg <key> <flag>*`: a get (a get-and-touch with `T`).
pub fn get(peer: &Peer, out: &mut Output, packet: &mut Packet, r: &Request) -> Flow {
    let touch = r.time(b'T');
    let found = match fetch_ext(peer, packet, r, touch, false) {
        // An engine without our opcode: what v1 does (no stale items, token, access times).
        Err(Ok(ENGINE_ENOTSUP)) if !b"NRhl".iter().any(|&f| r.has(f)) => {
            fetch_v1(peer, packet, r, touch)
        }
        found => found,
    };
    match found {
        Err(Err(text)) => say_error(out.tail(), text),
        Err(Ok(rc)) => engine_error(out.tail(), rc),
        Ok(Some((known, held))) => {
            // As memcached's: a hit with `T` counts as a touch, a miss as a get's.
            if touch.is_some() {
                peer.count(Stat::CmdTouch);
            } else {
                peer.fetched(true);
            }
            if r.has(b'v') {
                if let Some(copied) = value(out, r, &known, held) {
                    peer.keep_answer(Vec::new(), copied);
                }
            } else {
                answer(out.tail(), r, "HD", &known);
            }
            Flow::Continue
        }
        Ok(None) => {
            peer.fetched(false);
            if !r.quiet() {
                answer(out.tail(), r, "EN", &Known::default());
            }
            Flow::Continue
        }
    }
}

/// A hit's `VA` answer and its value; the buffer of a copied value, to give back.
fn value(out: &mut Output, r: &Request, known: &Known, held: Held) -> Option<Vec<u8>> {
    let tail = out.tail();
    tail.extend_from_slice(b"VA ");
    push_decimal(tail, known.size.unwrap_or(0) as u64);
    echo(tail, r, known);
    tail.extend_from_slice(b"\r\n");
    let copied = match held {
        Held::Copied(v) => {
            tail.extend_from_slice(&v);
            Some(v)
        }
        Held::Item(value) if value.len() <= COPY_MAX => {
            value
                .value()
                .for_each(|piece| tail.extend_from_slice(piece));
            None
        }
        Held::Item(value) => {
            out.push_value(value);
            None
        }
    };
    out.tail().extend_from_slice(b"\r\n");
    copied
}

/// A CAS no item carries (the store numbers from 1, and would take 2^64 writes to get here).
const NO_ITEMS_CAS: u64 = u64::MAX;

/// `md <key> <flag>*`: a delete, with a CAS to compare when `C` is given (`C0` too, as in
/// memcached: it matches only an item without a CAS, which v1's `remove`, where 0 is "any",
/// cannot ask, so the item's CAS is read first).
pub fn delete(peer: &Peer, out: &mut Vec<u8>, packet: &mut Packet, r: &Request) -> Flow {
    let (cas_given, ttl) = (r.u64(b'C'), r.time(b'T'));
    let mut cas = cas_given.unwrap_or(0);
    let engine = peer.engine();
    if cas_given == Some(0) {
        // An item with a CAS, or none: the engine refuses it (and counts the miss, as
        // memcached does) against a CAS no item carries.
        match cas_of(peer, packet, &r.key) {
            Ok(0) => {}
            Ok(_) | Err(ENGINE_KEY_ENOENT) => cas = NO_ITEMS_CAS,
            Err(rc) => return engine_error(out, rc),
        }
    }
    let removed = if r.has(b'I') {
        ext::invalidate(peer, packet, &r.key, cas, ttl.map(wire_exptime))
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
    answer(out, r, code, &Known::default());
    Flow::Continue
}

/// `ma <key> <flag>*`: incr or decr, creating the item on a miss with `N`.
pub fn arithmetic(peer: &Peer, out: &mut Vec<u8>, packet: &mut Packet, r: &Request) -> Flow {
    let incr = match r.token(b'M') {
        None | Some(b"I" | b"+") => true,
        Some(b"D" | b"-") => false,
        Some(_) => return say_error(out, "CLIENT_ERROR invalid mode for ma M token"),
    };
    let parsed = (r.time(b'N'), r.u64(b'J'), r.u64(b'D'));
    let (create, initial, delta) = (parsed.0, parsed.1.unwrap_or(0), parsed.2.unwrap_or(1));
    let (cas_in, touch) = (r.u64(b'C').unwrap_or(0), r.time(b'T'));
    // A CAS, a TTL to set or to report need our engines' private opcode; `N q` asks it too,
    // since memcached 1.6.18 answers a created item though `q` hides a hit (an engine without
    // the opcode then serves it through v1, which cannot tell, and the answer stays hidden).
    let needs_ext = cas_in != 0 || touch.is_some() || r.has(b't');
    let mut done = Err(ENGINE_ENOTSUP);
    if needs_ext || (create.is_some() && r.quiet()) {
        let a = MetaArith {
            incr,
            create: vivify_ttl(r, touch).map(wire_exptime),
            touch: touch.map(wire_exptime),
            delta,
            initial,
            cas: cas_in,
        };
        done = ext::arithmetic(peer, packet, &r.key, &a).map(|c| {
            let exptime = reported_exptime(r, c.exptime_before, c.exptime, c.created);
            (c.cas, c.value, Some(ttl_of(exptime)), c.created)
        });
    }
    if !needs_ext && done == Err(ENGINE_ENOTSUP) {
        let a = Arith {
            incr,
            create: create.is_some(),
            delta,
            initial,
            exptime: create.map_or(0, wire_exptime),
        };
        done = peer
            .arithmetic(&r.key, &a, 0)
            .map(|(cas, result)| (cas, result, None, false));
    }
    let code = match done {
        Ok((_, _, _, created)) if r.quiet() && !created => return Flow::Continue,
        Ok((cas, result, ttl, _)) => {
            let known = Known {
                cas: Some(cas),
                ttl,
                ..Known::default()
            };
            if r.has(b'v') {
                let number = result.to_string();
                let _ = write!(out, "VA {}", number.len());
                echo(out, r, &known);
                out.extend_from_slice(b"\r\n");
                reply(out, &number);
            } else {
                answer(out, r, "HD", &known);
            }
            return Flow::Continue;
        }
        Err(ENGINE_KEY_ENOENT) => "NF",
        Err(ENGINE_NOT_STORED) => "NS",
        Err(ENGINE_KEY_EEXISTS) => "EX",
        Err(ENGINE_EINVAL) => return say_error(out, NON_NUMERIC),
        Err(rc) => return engine_error(out, rc),
    };
    answer(out, r, code, &Known::default());
    Flow::Continue
}

/// `me <key>`: the item's key (in base64 if it came so, as memcached prints it), expiry and
/// CAS, and on our engines (through the meta get's private opcode, as a look with `u`, so
/// that looking changes nothing) also the seconds since its last access and whether it was
/// fetched, in memcached 1.6's order. memcached's slab class and item size (`cls`, `size`)
/// describe its slab allocator, which no engine here has: left out.
pub fn debug(peer: &Peer, out: &mut Vec<u8>, packet: &mut Packet, key: &[u8]) -> Flow {
    const UNBUMPED: &[&[u8]] = &[b"u"];
    let request = match parse::request(&parse::MG, key, UNBUMPED) {
        Ok(r) => r,
        Err(text) => return say_error(out, text),
    };
    let known = match fetch_ext(peer, packet, &request, None, true) {
        Ok(Some((known, _))) => Ok(known),
        Ok(None) => Err(ENGINE_KEY_ENOENT),
        Err(Ok(ENGINE_ENOTSUP)) => debug_v1(peer, key),
        Err(Ok(rc)) => Err(rc),
        Err(Err(text)) => return say_error(out, text),
    };
    match known {
        Ok(known) => {
            out.extend_from_slice(b"ME ");
            if known.key_binary == Some(true) {
                push_base64(out, key);
            } else {
                out.extend_from_slice(key);
            }
            // As memcached 1.6.18 prints it: the time since the expiry (negative while the
            // item lives), -1 for none.
            let exp = match known.ttl {
                None | Some(-1) => -1,
                Some(ttl) => -ttl,
            };
            let _ = write!(out, " exp={exp}");
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

/// `ms … I` or `ms … b` (`r`, `set`): stores `value` through our engines' private opcode,
/// which v1's `store` cannot ask for a stale store or a key marked as base64; the new CAS.
pub fn store_ext(
    peer: &Peer,
    packet: &mut Packet,
    r: &Request,
    set: &SetLine,
    value: &[u8],
) -> Result<u64, ENGINE_ERROR_CODE> {
    let bits =
        (u8::from(set.stale_if_older) * SET_STALE_IF_OLDER) | (u8::from(r.base64) * SET_KEY_BINARY);
    let fields = ext::MetaSet {
        cas: set.cas,
        flags: set.flags,
        exptime: wire_exptime(set.exptime),
        op: set.op,
        bits,
    };
    ext::meta_set(peer, packet, &r.key, fields, value)
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
    answer(out, r, code, &known);
    Flow::Continue
}
