//! The meta commands' private opcodes ([`crate::meta_ext`]): the host's `mg` (with vivify,
//! recache and touch), `md … I`, `ma`, and `ms … I` or `ms … b`, answered from the store's
//! stale items, recache token and base64 mark (`mcb_core::store::Store::meta_get`).

use super::host::HostApi;
use super::instance::{store_op, value_of, Store};
use crate::abi::*;
use crate::meta_ext::*;
use crate::wire::Packet;
use mcb_core::store::{Delta, Fetch, Token, KEY_MAX};

/// How an answer goes back: extras, body, status, CAS.
pub(crate) type Send<'a> = &'a dyn Fn(&[u8], &[u8], u16, u64) -> ENGINE_ERROR_CODE;

/// Answers with the magic as extras.
fn answer(send: Send, status: u16, cas: u64) -> ENGINE_ERROR_CODE {
    send(&ANSWER_MAGIC, &[], status, cas)
}

/// Whether `opcode` is one of ours.
pub(crate) fn is_meta(opcode: u8) -> bool {
    matches!(
        opcode,
        CMD_META_GET | CMD_META_INVALIDATE | CMD_META_SET | CMD_META_ARITHMETIC
    )
}

fn word(extras: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([extras[at], extras[at + 1], extras[at + 2], extras[at + 3]])
}

/// Answers one of our opcodes.
pub(crate) fn command(
    store: &Store,
    host: &HostApi,
    request: &Packet,
    send: Send,
) -> ENGINE_ERROR_CODE {
    let key = request.key;
    let x = request.extras;
    let extlen = match request.opcode {
        CMD_META_ARITHMETIC => 40,
        CMD_META_SET => 20,
        _ => 16,
    };
    if x.len() != extlen || key.is_empty() || key.len() > KEY_MAX {
        return send(&[], &[], PROTOCOL_BINARY_RESPONSE_EINVAL, 0);
    }
    let exptime = |at| host.realtime(libc::time_t::from(word(x, at)));
    let cas = u64::from_be_bytes(x[..8].try_into().expect("16 bytes"));
    let stored = |r: Result<u64, mcb_core::store::Error>| match r {
        Ok(cas) => answer(send, PROTOCOL_BINARY_RESPONSE_SUCCESS, cas),
        Err(e) => answer(send, status(&e), 0),
    };
    match request.opcode {
        CMD_META_GET => {
            let fetch = Fetch {
                vivify: (x[0] & GET_VIVIFY != 0).then(|| exptime(4)),
                recache_below: (x[0] & GET_RECACHE != 0).then(|| word(x, 8)),
                touch: (x[0] & GET_TOUCH != 0).then(|| exptime(12)),
                no_bump: x[0] & GET_NO_BUMP != 0,
                look: x[0] & GET_LOOK != 0,
            };
            let Some(hit) = store.meta_get(key, &fetch) else {
                return answer(send, PROTOCOL_BINARY_RESPONSE_KEY_ENOENT, 0);
            };
            let state = (u8::from(hit.stale) * STATE_STALE)
                | (u8::from(hit.fetched_before) * STATE_FETCHED)
                | (u8::from(hit.created) * STATE_CREATED)
                | (u8::from(hit.item.key_binary()) * STATE_KEY_BINARY)
                | match hit.token {
                    Token::None => 0,
                    Token::Won => STATE_WON,
                    Token::Lost => STATE_LOST,
                };
            let item = &hit.item;
            let mut ext = [0; 21];
            ext[..4].copy_from_slice(&ANSWER_MAGIC);
            ext[4..8].copy_from_slice(&item.flags().to_ne_bytes());
            ext[8..12].copy_from_slice(&item.exptime().to_be_bytes());
            ext[12] = state;
            ext[13..17].copy_from_slice(&hit.idle.to_be_bytes());
            ext[17..].copy_from_slice(&hit.exptime_before.to_be_bytes());
            send(
                &ext,
                value_of(item),
                PROTOCOL_BINARY_RESPONSE_SUCCESS,
                item.cas(),
            )
        }
        CMD_META_ARITHMETIC => {
            let long = |at: usize| u64::from_be_bytes(x[at..at + 8].try_into().expect("in extras"));
            let d = Delta {
                incr: x[0] & ARITH_INCR != 0,
                delta: long(16),
                create: (x[0] & ARITH_CREATE != 0).then(|| (long(24), exptime(4))),
                cas: long(32),
                touch: (x[0] & ARITH_TOUCH != 0).then(|| exptime(8)),
            };
            match store.meta_arithmetic(key, &d) {
                Ok(done) => {
                    let mut ext = [0; 13];
                    ext[..4].copy_from_slice(&ANSWER_MAGIC);
                    ext[4..8].copy_from_slice(&done.exptime.to_be_bytes());
                    ext[8] = u8::from(done.created);
                    ext[9..].copy_from_slice(&done.exptime_before.to_be_bytes());
                    let value = done.value.to_be_bytes();
                    send(&ext, &value, PROTOCOL_BINARY_RESPONSE_SUCCESS, done.cas)
                }
                Err(e) => answer(send, status(&e), 0),
            }
        }
        CMD_META_INVALIDATE => {
            let exptime = (x[12] & INVALIDATE_SET_EXPTIME != 0).then(|| exptime(8));
            stored(store.invalidate(key, cas, exptime))
        }
        _ => {
            let Some(op) = store_op(ENGINE_STORE_OPERATION(u32::from(x[16]))) else {
                return send(&[], &[], PROTOCOL_BINARY_RESPONSE_EINVAL, 0);
            };
            let key_binary = x[17] & SET_KEY_BINARY != 0;
            // The flags as the host passes them to `allocate`: in network byte order.
            let flags = word(x, 8).to_be();
            let item = match store.item(key, request.value, flags, exptime(12)) {
                Ok(item) => item,
                Err(e) => return answer(send, status(&e), 0),
            };
            if x[17] & SET_STALE_IF_OLDER != 0 {
                return stored(store.store_invalid(&item, cas, key_binary));
            }
            item.set_cas(cas);
            stored(store.store_marked(&item, op, key_binary))
        }
    }
}

fn status(e: &mcb_core::store::Error) -> u16 {
    use mcb_core::store::Error;
    match e {
        Error::NotFound => PROTOCOL_BINARY_RESPONSE_KEY_ENOENT,
        Error::Exists => PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS,
        Error::NotStored => PROTOCOL_BINARY_RESPONSE_NOT_STORED,
        Error::TooBig => PROTOCOL_BINARY_RESPONSE_E2BIG,
        Error::NoMemory => PROTOCOL_BINARY_RESPONSE_ENOMEM,
        Error::NotNumeric => PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL,
        _ => PROTOCOL_BINARY_RESPONSE_EINVAL,
    }
}
