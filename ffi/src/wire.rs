//! What both engines need of the binary protocol and of the host's per-request callbacks: a
//! request read only after its lengths are checked, and `ADD_RESPONSE` / `ADD_STAT` called with
//! lengths that match their buffers.

use crate::abi::*;
use std::ffi::c_void;
use std::ptr;

/// A request whose lengths add up: opcode, extras, key, and the value after them.
pub(crate) struct Packet<'a> {
    pub(crate) opcode: u8,
    pub(crate) extras: &'a [u8],
    pub(crate) key: &'a [u8],
    pub(crate) value: &'a [u8],
}

/// Why a request was refused.
pub(crate) enum Malformed {
    /// Key and extras longer than the body.
    Lengths,
    /// A body of the caller's limit or more.
    TooLarge,
}

/// Reads the request at `request`, refusing bodies of `limit` bytes or more before looking at
/// them; the key starts after the extras.
///
/// # Safety
/// `request` points at a request header followed by at least `bodylen` readable bytes
/// (memcached hands engines the whole packet).
pub(crate) unsafe fn parse<'a>(
    request: *const protocol_binary_request_header,
    limit: usize,
) -> Result<Packet<'a>, Malformed> {
    // SAFETY: the caller's contract covers the header; every bit pattern of it is valid.
    let header = unsafe { (*request).request };
    let keylen = usize::from(u16::from_be(header.keylen));
    let extlen = usize::from(header.extlen);
    let bodylen = u32::from_be(header.bodylen) as usize;
    if bodylen >= limit {
        return Err(Malformed::TooLarge);
    }
    if keylen + extlen > bodylen {
        return Err(Malformed::Lengths);
    }
    // SAFETY: the body follows the 24-byte header, `bodylen` bytes long (the caller's contract).
    let body = unsafe {
        std::slice::from_raw_parts(
            request.cast::<u8>().add(PROTOCOL_BINARY_HEADER_SIZE),
            bodylen,
        )
    };
    let (extras, rest) = body.split_at(extlen);
    let (key, value) = rest.split_at(keylen);
    Ok(Packet {
        opcode: header.opcode,
        extras,
        key,
        value,
    })
}

/// Sends one response (no key) through the host's callback: SUCCESS if the host took it.
pub(crate) fn respond(
    response: ADD_RESPONSE,
    cookie: *const c_void,
    status: u16,
    extras: &[u8],
    body: &[u8],
    cas: u64,
) -> ENGINE_ERROR_CODE {
    let (Some(response), Ok(extlen), Ok(bodylen)) = (
        response,
        u8::try_from(extras.len()),
        u32::try_from(body.len()),
    ) else {
        return ENGINE_FAILED;
    };
    // SAFETY: the host's callback with its own cookie; pointers and lengths match and the
    // buffers live across the call.
    let sent = unsafe {
        response(
            ptr::null(),
            0,
            extras.as_ptr().cast(),
            extlen,
            body.as_ptr().cast(),
            bodylen,
            PROTOCOL_BINARY_RAW_BYTES,
            status,
            cas,
            cookie,
        )
    };
    if sent {
        ENGINE_SUCCESS
    } else {
        ENGINE_FAILED
    }
}

/// Hands one statistic to the host's callback (nothing if it has none or a length overflows).
pub(crate) fn add_stat(add_stat: ADD_STAT, cookie: *const c_void, key: &[u8], value: &[u8]) {
    let (Some(add_stat), Ok(klen), Ok(vlen)) = (
        add_stat,
        u16::try_from(key.len()),
        u32::try_from(value.len()),
    ) else {
        return;
    };
    // SAFETY: the host's callback with its cookie; both buffers live across the call.
    unsafe {
        add_stat(
            key.as_ptr().cast(),
            klen,
            value.as_ptr().cast(),
            vlen,
            cookie,
        )
    }
}
