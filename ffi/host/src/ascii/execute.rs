//! The classic ASCII commands run against the engine: each takes its parsed command and the
//! connection, makes its engine calls (with the connection's EWOULDBLOCK handling and the
//! host's counters) and returns what came of it, for [`super::compose`] to word: a
//! [`Reply`] for a one-line command, a [`Fetch`] for each key of a get, an item to fill for a
//! storage command, then its store's code.

#![deny(unsafe_code)]

use super::parse::{OneLine, Store};
use crate::api::log::set_log_level;
use crate::api::logger::level_of_verbosity;
use crate::api::server_core::{request_shutdown, to_rel_time};
use crate::counters::{Op, Stat};
use crate::engine::{Arith, Blank, StoreOp, Value};
use crate::ext::{self, Touch, Touched};
use crate::packet::Packet;
use crate::session::{ok, Peer};
use crate::stats::{self, End};
use crate::text::{error_line, UNSUPPORTED};
use mcb_abi::abi::*;

/// What a one-line command came to.
#[derive(Debug)]
pub enum Reply {
    /// A status line (`DELETED`, `OK`, an error line, ...).
    Line(&'static str),
    /// incr/decr's new value.
    Number(u64),
    Version,
    /// Nothing more to say: the answer is written already (stats), or there is none.
    Written,
    /// End the connection.
    Close,
}

/// Runs a one-line command; `out` takes what the engine streams (stats).
pub fn one_line(peer: &Peer, packet: &mut Packet, out: &mut Vec<u8>, command: OneLine) -> Reply {
    match command {
        OneLine::Delete { key, .. } => delete(peer, key),
        OneLine::Arithmetic {
            key, incr, delta, ..
        } => arithmetic(peer, key, incr, delta),
        OneLine::Touch { key, exptime, .. } => touch(peer, packet, key, exptime),
        OneLine::FlushAll { when, .. } => flush_all(peer, when),
        OneLine::Version => Reply::Version,
        OneLine::Stats { group, args } => stats(peer, group, args, out),
        OneLine::Verbosity { level, .. } => {
            set_log_level(level_of_verbosity(level));
            Reply::Line("OK")
        }
        OneLine::Quit | OneLine::Http => Reply::Close,
        OneLine::MetaNoop => Reply::Line("MN"),
        OneLine::Shutdown { mode_ok } => shutdown(peer, mode_ok),
        OneLine::CacheMemlimit { megabytes, .. } => cache_memlimit(peer, megabytes),
    }
}

/// An engine code as the line memcached answers it with (`Close` for DISCONNECT).
fn engine_error(rc: ENGINE_ERROR_CODE) -> Reply {
    match rc {
        ENGINE_DISCONNECT => Reply::Close,
        rc => Reply::Line(error_line(rc)),
    }
}

fn delete(peer: &Peer, key: &[u8]) -> Reply {
    peer.detail(key, Op::Delete);
    let engine = peer.engine();
    let mut cas = 0;
    match peer.retry(|| ok(engine.remove(&peer.cookie, key, &mut cas, 0))) {
        Ok(()) => Reply::Line("DELETED"),
        Err(ENGINE_KEY_ENOENT) => Reply::Line("NOT_FOUND"),
        Err(rc) => engine_error(rc),
    }
}

fn arithmetic(peer: &Peer, key: &[u8], incr: bool, delta: u64) -> Reply {
    let a = Arith {
        incr,
        create: false,
        delta,
        initial: 0,
        exptime: 0,
    };
    match peer.arithmetic(key, &a, 0) {
        Ok((_, result)) => Reply::Number(result),
        Err(ENGINE_KEY_ENOENT) => Reply::Line("NOT_FOUND"),
        Err(ENGINE_EINVAL) => {
            Reply::Line("CLIENT_ERROR cannot increment or decrement non-numeric value")
        }
        Err(rc) => engine_error(rc),
    }
}

/// `touch`, as a binary TOUCH to the engine.
fn touch(peer: &Peer, packet: &mut Packet, key: &[u8], exptime: u32) -> Reply {
    peer.count(Stat::CmdTouch);
    match ext::touch(peer, packet, key, exptime) {
        Ok(Touch::Touched) => Reply::Line("TOUCHED"),
        Ok(Touch::NotFound) => Reply::Line("NOT_FOUND"),
        Ok(Touch::Refused) => Reply::Line("SERVER_ERROR touch failed"),
        Err(rc) => engine_error(rc),
    }
}

/// `stats [group [args]]`, ended as memcached ends each group ([`stats::End`]).
fn stats(peer: &Peer, group: &[u8], args: &[&[u8]], out: &mut Vec<u8>) -> Reply {
    peer.open_sink(true, PROTOCOL_BINARY_CMD_STAT, 0);
    let end = stats::stats(peer, group, args);
    peer.take_sink(out);
    match end {
        End::List | End::Engine(ENGINE_SUCCESS) => Reply::Line("END"),
        End::Reset => Reply::Line("RESET"),
        End::Ok => Reply::Line("OK"),
        End::Bare | End::Engine(ENGINE_EWOULDBLOCK) => Reply::Written,
        End::Refused(line) => Reply::Line(line),
        End::Engine(ENGINE_KEY_ENOENT) => Reply::Line("ERROR"),
        End::Engine(rc) => engine_error(rc),
    }
}

fn flush_all(peer: &Peer, when: libc::time_t) -> Reply {
    if !peer.ctx.options.flush_enabled {
        return Reply::Line("CLIENT_ERROR flush_all not allowed");
    }
    let engine = peer.engine();
    match peer.retry(|| ok(engine.flush(&peer.cookie, when))) {
        Ok(()) => Reply::Line("OK"),
        Err(rc) => engine_error(rc),
    }
}

/// `shutdown [graceful]`, allowed by `-A`: the server stops as on SIGTERM (always gracefully:
/// requests in flight are answered) and this connection closes unanswered.
fn shutdown(peer: &Peer, mode_ok: bool) -> Reply {
    if !peer.ctx.options.allow_shutdown {
        return Reply::Line("ERROR: shutdown not enabled");
    }
    if !mode_ok {
        return Reply::Line("CLIENT_ERROR invalid shutdown mode");
    }
    request_shutdown("the shutdown command");
    Reply::Close
}

/// `cache_memlimit`: no engine here resizes its cache while it runs, so a limit other than the
/// engine's own gets memcached's answer for a limit it cannot set.
fn cache_memlimit(peer: &Peer, megabytes: u32) -> Reply {
    if stats::engine_maxbytes(peer) == Some(u64::from(megabytes) << 20) {
        Reply::Line("OK")
    } else {
        Reply::Line("MEMLIMIT_ADJUST_FAILED out of bounds or unable to adjust")
    }
}

/// A get's hit: the engine's item, or what a get-and-touch copied.
#[derive(Debug)]
pub enum Hit {
    Item(Value<'static>),
    Copied(Touched),
}

/// What one key of a get came to.
#[derive(Debug)]
pub enum Fetch {
    Hit(Hit),
    Miss,
    /// The engine answered EWOULDBLOCK: the key is fetched again once it notifies.
    Parked,
    Close,
    /// The get ends with this line.
    Fail(&'static str),
}

/// Fetches one key of a get (a get-and-touch to `touch`, a wire expiration time, for gat).
pub fn fetch(peer: &Peer, packet: &mut Packet, key: &[u8], touch: Option<u32>) -> Fetch {
    let engine = peer.engine();
    let found = match touch {
        None => peer
            .retry(|| engine.get(&peer.cookie, key, 0))
            .map(|item| Value::of(item).map(Hit::Item)),
        Some(exptime) => {
            peer.count(Stat::CmdTouch);
            match ext::get_and_touch(peer, packet, key, exptime) {
                Ok(Some(hit)) => Ok(Some(Hit::Copied(hit))),
                Ok(None) => Err(ENGINE_KEY_ENOENT),
                Err(ENGINE_ENOTSUP) => return Fetch::Fail(UNSUPPORTED),
                Err(rc) => Err(rc),
            }
        }
    };
    match found {
        Ok(Some(hit)) => Fetch::Hit(hit),
        Ok(None) => Fetch::Fail("SERVER_ERROR failed to get item details"),
        Err(ENGINE_EWOULDBLOCK) => Fetch::Parked,
        Err(ENGINE_KEY_ENOENT) => Fetch::Miss,
        Err(ENGINE_DISCONNECT) => Fetch::Close,
        Err(rc) => Fetch::Fail(error_line(rc)),
    }
}

/// Why a storage command has no item to fill.
#[derive(Debug)]
pub enum Unallocated {
    /// The engine answered EWOULDBLOCK: the line runs again once it notifies.
    Parked,
    Close,
    /// Answered with this line (unless `noreply`); its data is dropped.
    Refused(&'static str),
}

/// Allocates the item a storage command's data arrives into, counted as memcached counts
/// stores (a refused set unlinks the old value).
pub fn allocate(peer: &Peer, store: &Store) -> Result<Blank<'static>, Unallocated> {
    let engine = peer.engine();
    let exptime = to_rel_time(store.exptime);
    let key = &store.key;
    let flags = store.flags.to_be();
    let allocated = peer.retry(|| engine.allocate(&peer.cookie, key, store.bytes, flags, exptime));
    if matches!(allocated, Err(ENGINE_EWOULDBLOCK)) {
        peer.take_parked();
        return Err(Unallocated::Parked);
    }
    let is_meta = store.meta.is_some();
    peer.storing(key, &allocated, is_meta || store.op == OPERATION_SET);
    if !is_meta {
        peer.detail(key, Op::Set);
    }
    match allocated {
        Ok(item) => Blank::of(item, store.bytes).ok_or(Unallocated::Refused(
            "SERVER_ERROR failed to get item details",
        )),
        Err(ENGINE_E2BIG) => Err(Unallocated::Refused(
            "SERVER_ERROR object too large for cache",
        )),
        Err(ENGINE_ENOMEM) => Err(Unallocated::Refused(
            "SERVER_ERROR out of memory storing object",
        )),
        Err(ENGINE_DISCONNECT) => Err(Unallocated::Close),
        Err(rc) => Err(Unallocated::Refused(error_line(rc))),
    }
}

/// Stores a filled item with operation `op`, comparing `cas_in` (0: none): the store's code
/// and the stored item's CAS.
pub fn store(
    peer: &Peer,
    blank: &Blank<'static>,
    op: StoreOp,
    cas_in: u64,
) -> (ENGINE_ERROR_CODE, u64) {
    let engine = peer.engine();
    let mut cas = cas_in;
    engine.item_set_cas(blank.item(), cas_in);
    let rc = peer.retry(|| ok(engine.store(blank.item(), &mut cas, op, 0)));
    (rc.err().unwrap_or(ENGINE_SUCCESS), cas)
}
