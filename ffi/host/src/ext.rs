//! The engine calls that travel through `unknown_command` as binary packets: binary TOUCH and
//! GAT, which the ASCII `touch`, `gat`, `gats` and `mg … T` use on any engine that has them,
//! and our engines' private meta opcodes ([`mcb_abi::meta_ext`]: meta get with stale items
//! and the recache token, invalidation, set-if-older, arithmetic with a CAS and a TTL), plus
//! the binary protocol's pass-through of any opcode the host does not serve. Each call builds
//! its [`Packet`], runs it with the connection's EWOULDBLOCK handling ([`Peer::retry`]), and
//! hands back the engine's answer as typed fields; the protocols word them. Expiration times
//! are as binary packets carry them: 32 bits, a client's time or a Unix time
//! (`text::wire_exptime` makes them from an ASCII command's).
//!
//! An engine that does not know an opcode answers UNKNOWN_COMMAND (or NOT_SUPPORTED, or
//! nothing): that is `ENGINE_ENOTSUP` here. An answer to one of our private opcodes counts only
//! if its extras start with [`ANSWER_MAGIC`], so an engine that gives the opcodes another
//! meaning is not mistaken for ours.

#![deny(unsafe_code)]

use crate::codec::Answer;
use crate::packet::Packet;
use crate::session::{ok, Peer};
use mcb_abi::abi::*;
use mcb_abi::meta_ext::*;

/// Sends `opcode` with these parts and reads the engine's answer as it handed it
/// (`ENGINE_ENOTSUP` when the engine does not know the opcode).
fn call(
    peer: &Peer,
    packet: &mut Packet,
    opcode: u8,
    [extras, key, value]: [&[u8]; 3],
) -> Result<Answer, ENGINE_ERROR_CODE> {
    let Ok(packet) = packet.request(opcode, extras, key, value) else {
        return Err(ENGINE_EINVAL);
    };
    peer.open_answer(opcode);
    let engine = peer.engine();
    let rc = peer.retry(|| ok(engine.unknown_command(&peer.cookie, packet)));
    match (rc, peer.take_answer()) {
        (Err(rc @ (ENGINE_EWOULDBLOCK | ENGINE_DISCONNECT)), _) => Err(rc),
        (_, Some(a))
            if matches!(
                a.status,
                PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND | PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED
            ) =>
        {
            Err(ENGINE_ENOTSUP)
        }
        (Ok(()), None) => Err(ENGINE_ENOTSUP),
        (_, Some(a)) => Ok(a),
        (Err(ENGINE_KEY_ENOENT), None) => Ok(Answer {
            status: PROTOCOL_BINARY_RESPONSE_KEY_ENOENT,
            ..Answer::default()
        }),
        (Err(rc), None) => Err(rc),
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

/// A big-endian word of an answer's extras.
fn word(ext: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(ext.get(at..at + 4)?.try_into().ok()?))
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

/// What a binary TOUCH came to.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Touch {
    Touched,
    NotFound,
    /// The engine answered another status.
    Refused,
}

/// Binary TOUCH of `key` to `exptime`.
pub fn touch(
    peer: &Peer,
    packet: &mut Packet,
    key: &[u8],
    exptime: u32,
) -> Result<Touch, ENGINE_ERROR_CODE> {
    let opcode = PROTOCOL_BINARY_CMD_TOUCH;
    let Ok(packet) = packet.request(opcode, &exptime.to_be_bytes(), key, &[]) else {
        return Err(ENGINE_EINVAL);
    };
    // The ASCII sink: only the answer's status is recorded.
    peer.open_sink(true, opcode, 0);
    let engine = peer.engine();
    let rc = peer.retry(|| ok(engine.unknown_command(&peer.cookie, packet)));
    let status = peer.take_sink(&mut Vec::new());
    match (rc, status) {
        (Err(ENGINE_DISCONNECT), _) => Err(ENGINE_DISCONNECT),
        (_, Some(PROTOCOL_BINARY_RESPONSE_SUCCESS)) | (Ok(()), None) => Ok(Touch::Touched),
        (_, Some(PROTOCOL_BINARY_RESPONSE_KEY_ENOENT)) | (Err(ENGINE_KEY_ENOENT), None) => {
            Ok(Touch::NotFound)
        }
        (Err(rc), None) => Err(rc),
        (_, Some(_)) => Ok(Touch::Refused),
    }
}

/// An item that a get-and-touch returned (its value copied out of the engine's answer).
#[derive(Debug)]
pub struct Touched {
    /// The client's flags.
    pub flags: u32,
    pub cas: u64,
    pub value: Vec<u8>,
}

/// Get-and-touch as one engine call (binary GAT): `Ok(None)` on a miss, `ENGINE_ENOTSUP`
/// when the engine does not know GAT.
pub fn get_and_touch(
    peer: &Peer,
    packet: &mut Packet,
    key: &[u8],
    exptime: u32,
) -> Result<Option<Touched>, ENGINE_ERROR_CODE> {
    let a = touch_answer(peer, packet, PROTOCOL_BINARY_CMD_GAT, key, exptime)?;
    match a.status {
        PROTOCOL_BINARY_RESPONSE_SUCCESS => Ok(Some(Touched {
            // The flags are stored, and sent, in network order.
            flags: word(&a.ext, 0).unwrap_or(0),
            cas: a.cas,
            value: a.value,
        })),
        PROTOCOL_BINARY_RESPONSE_KEY_ENOENT => Ok(None),
        _ => Err(ENGINE_FAILED),
    }
}

/// Binary TOUCH or GAT (`opcode`) of `key` to `exptime`, the engine's answer as it gave it,
/// for the binary protocol to word as memcached does.
pub fn touch_answer(
    peer: &Peer,
    packet: &mut Packet,
    opcode: u8,
    key: &[u8],
    exptime: u32,
) -> Result<Answer, ENGINE_ERROR_CODE> {
    call(peer, packet, opcode, [&exptime.to_be_bytes(), key, &[]])
}

/// What a meta get asks of our engines besides the fetch.
#[derive(Debug, Default, Clone, Copy)]
pub struct MetaGet {
    /// Create an empty item with this expiry on a miss (`N`).
    pub vivify: Option<u32>,
    /// Win the recache token below this many seconds of TTL (`R`).
    pub recache: Option<u32>,
    /// Set the expiry first (`T`).
    pub touch: Option<u32>,
    /// Leave the fetched mark and the access time alone (`u`).
    pub no_bump: bool,
    /// Take no recache token (`me`, and `md`'s read of the CAS).
    pub look: bool,
}

/// A meta get's hit.
#[derive(Debug)]
pub struct MetaHit {
    /// The client's flags.
    pub flags: u32,
    /// When the item expires, in server time (0: never).
    pub exptime: rel_time_t,
    /// `STATE_*` bits.
    pub state: u8,
    /// Seconds since the last access before this one.
    pub idle: u32,
    /// When it expired before this fetch's touch, in server time (0: never).
    pub exptime_before: rel_time_t,
    pub cas: u64,
    pub value: Vec<u8>,
}

/// Meta get through our engines' private opcode: `Ok(None)` on a miss, `ENGINE_ENOTSUP` from
/// an engine without it.
pub fn meta_get(
    peer: &Peer,
    packet: &mut Packet,
    key: &[u8],
    get: &MetaGet,
) -> Result<Option<MetaHit>, ENGINE_ERROR_CODE> {
    let mut x = [0u8; 16];
    for (value, bit, at) in [
        (get.vivify, GET_VIVIFY, 4),
        (get.recache, GET_RECACHE, 8),
        (get.touch, GET_TOUCH, 12),
    ] {
        if let Some(value) = value {
            x[0] |= bit;
            x[at..at + 4].copy_from_slice(&value.to_be_bytes());
        }
    }
    for (on, bit) in [(get.no_bump, GET_NO_BUMP), (get.look, GET_LOOK)] {
        if on {
            x[0] |= bit;
        }
    }
    let a = ours(call(peer, packet, CMD_META_GET, [&x, key, &[]]))?;
    let hit = match (a.status, a.ext.get(4..).filter(|ext| ext.len() >= 13)) {
        (PROTOCOL_BINARY_RESPONSE_SUCCESS, Some(ext)) => Ok(Some(MetaHit {
            flags: word(ext, 0).unwrap_or(0),
            exptime: word(ext, 4).unwrap_or(0),
            state: ext[8],
            idle: word(ext, 9).unwrap_or(0),
            exptime_before: word(ext, 13).or(word(ext, 4)).unwrap_or(0),
            cas: a.cas,
            value: a.value,
        })),
        (PROTOCOL_BINARY_RESPONSE_KEY_ENOENT, _) => {
            peer.keep_answer(Vec::new(), a.value);
            Ok(None)
        }
        _ => Err(ENGINE_FAILED),
    };
    // The value goes on with the hit (the caller gives it back once answered).
    peer.keep_answer(a.ext, Vec::new());
    hit
}

/// `md … I`: the item becomes a stale copy (with expiry `ttl`, when given) if `cas` is 0 or the
/// item's, through our engines' private opcode.
pub fn invalidate(
    peer: &Peer,
    packet: &mut Packet,
    key: &[u8],
    cas: u64,
    ttl: Option<u32>,
) -> Result<(), ENGINE_ERROR_CODE> {
    let mut x = [0u8; 16];
    x[..8].copy_from_slice(&cas.to_be_bytes());
    if let Some(t) = ttl {
        x[8..12].copy_from_slice(&t.to_be_bytes());
        x[12] = INVALIDATE_SET_EXPTIME;
    }
    status_rc(ours(call(peer, packet, CMD_META_INVALIDATE, [&x, key, &[]]))?.status)
}

/// The fields of a meta set ([`meta_set`]): the CAS (to compare, or with
/// `SET_STALE_IF_OLDER` the one it compares), the client flags, the expiry, the operation and
/// the `SET_*` bits.
#[derive(Debug, Clone, Copy)]
pub struct MetaSet {
    pub cas: u64,
    pub flags: u32,
    pub exptime: u32,
    pub op: ENGINE_STORE_OPERATION,
    pub bits: u8,
}

/// `ms … I` or `ms … b`: stores `value` as `set` says through our engines' private opcode;
/// the new CAS.
pub fn meta_set(
    peer: &Peer,
    packet: &mut Packet,
    key: &[u8],
    set: MetaSet,
    value: &[u8],
) -> Result<u64, ENGINE_ERROR_CODE> {
    let mut x = [0u8; 20];
    x[..8].copy_from_slice(&set.cas.to_be_bytes());
    x[8..12].copy_from_slice(&set.flags.to_be_bytes());
    x[12..16].copy_from_slice(&set.exptime.to_be_bytes());
    // v1's operations are 1 to 6.
    x[16] = u8::try_from(set.op.0).unwrap_or(0);
    x[17] = set.bits;
    let a = ours(call(peer, packet, CMD_META_SET, [&x, key, value]))?;
    status_rc(a.status).map(|()| a.cas)
}

/// A meta arithmetic through our engines' private opcode.
#[derive(Debug, Clone, Copy)]
pub struct MetaArith {
    pub incr: bool,
    /// Create the item on a miss, with this expiry.
    pub create: Option<u32>,
    /// Set this expiry on success.
    pub touch: Option<u32>,
    pub delta: u64,
    pub initial: u64,
    /// The CAS to compare (0: any).
    pub cas: u64,
}

/// What a meta arithmetic did.
#[derive(Debug, Clone, Copy)]
pub struct Counted {
    pub cas: u64,
    pub value: u64,
    /// The item's expiry, in server time.
    pub exptime: rel_time_t,
    /// Its expiry before this call (a touch), 0 for an item it created.
    pub exptime_before: rel_time_t,
    /// This call created the item.
    pub created: bool,
}

/// `ma` with a CAS, a TTL or `N q` through our engines' private opcode (`ENGINE_ENOTSUP`
/// from an engine without it).
pub fn arithmetic(
    peer: &Peer,
    packet: &mut Packet,
    key: &[u8],
    a: &MetaArith,
) -> Result<Counted, ENGINE_ERROR_CODE> {
    let mut x = [0u8; 40];
    x[0] = if a.incr { ARITH_INCR } else { 0 };
    if let Some(n) = a.create {
        x[0] |= ARITH_CREATE;
        x[4..8].copy_from_slice(&n.to_be_bytes());
    }
    if let Some(t) = a.touch {
        x[0] |= ARITH_TOUCH;
        x[8..12].copy_from_slice(&t.to_be_bytes());
    }
    x[16..24].copy_from_slice(&a.delta.to_be_bytes());
    x[24..32].copy_from_slice(&a.initial.to_be_bytes());
    x[32..].copy_from_slice(&a.cas.to_be_bytes());
    let answer = ours(call(peer, packet, CMD_META_ARITHMETIC, [&x, key, &[]]))?;
    status_rc(answer.status)?;
    match (
        answer.ext.get(4..13),
        <[u8; 8]>::try_from(&answer.value[..]),
    ) {
        (Some(ext), Ok(number)) => Ok(Counted {
            cas: answer.cas,
            value: u64::from_be_bytes(number),
            exptime: word(ext, 0).unwrap_or(0),
            exptime_before: word(ext, 5).unwrap_or(0),
            created: ext[4] != 0,
        }),
        _ => Err(ENGINE_FAILED),
    }
}

/// Hands a binary client's request (`wire`, whole and checked by the caller) to the engine;
/// its answers, binary-encoded for `opaque`, go to `out`. The call's code, and the status of
/// the engine's last answer (`None`: it answered nothing).
pub fn forward(
    peer: &Peer,
    packet: &mut Packet,
    wire: &[u8],
    opaque: u32,
    out: &mut Vec<u8>,
) -> (Result<(), ENGINE_ERROR_CODE>, Option<u16>) {
    let Ok(packet) = packet.copy_of(wire) else {
        return (Err(ENGINE_EINVAL), None);
    };
    peer.open_sink(false, packet.opcode(), opaque);
    let engine = peer.engine();
    let rc = peer.retry(|| ok(engine.unknown_command(&peer.cookie, packet)));
    (rc, peer.take_sink(out))
}
