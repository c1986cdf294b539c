//! `unknown_command`: the bucket admin commands (CREATE 0x85, DELETE 0x86, LIST 0x87, SELECT
//! 0x89, and their deprecated opcodes 0x25-0x29), allowed only to the configured admin user;
//! every other opcode goes to the connection's bucket.
//!
//! Packets are checked before anything is read from them (the seed trusted them): the key and
//! the extras must fit in the body, and the key starts after the extras. An admin body of 64 KiB
//! or more disconnects the client, as in the seed; any other malformed admin packet gets EINVAL.

use super::calls::{proxied, topkey};
use super::config::parse_force;
use super::conn::{self, take_delete_pending};
use super::instance::{instance, Running};
use super::loader::{Cookie, DlEngine};
use crate::abi::*;
use crate::boundary::guard;
use crate::wire::{self, parse, Malformed, Packet};
use mcb_core::bucket::topkeys::TopKeyOp;
use mcb_core::bucket::{name, CreateError};
use std::ffi::c_void;
use std::sync::atomic::Ordering;

/// Largest admin body accepted (the seed's "64k ought to be enough").
const MAX_ADMIN_BODY: usize = 1 << 16;

fn is_admin_opcode(opcode: u8) -> bool {
    matches!(
        opcode,
        CREATE_BUCKET
            | CREATE_BUCKET_DEPRECATED
            | DELETE_BUCKET
            | DELETE_BUCKET_DEPRECATED
            | LIST_BUCKETS
            | LIST_BUCKETS_DEPRECATED
            | SELECT_BUCKET
            | SELECT_BUCKET_DEPRECATED
    )
}

/// Sends one response with `status` and `body` (no key, no extras).
fn respond(
    response: ADD_RESPONSE,
    cookie: *const c_void,
    status: u16,
    body: &[u8],
) -> ENGINE_ERROR_CODE {
    wire::respond(response, cookie, status, &[], body, 0)
}

fn invalid(response: ADD_RESPONSE, cookie: *const c_void) -> ENGINE_ERROR_CODE {
    respond(
        response,
        cookie,
        PROTOCOL_BINARY_RESPONSE_EINVAL,
        b"Invalid request.",
    )
}

pub(crate) unsafe extern "C" fn unknown_command(
    _handle: *mut ENGINE_HANDLE,
    cookie: *const c_void,
    request: *mut protocol_binary_request_header,
    response: ADD_RESPONSE,
) -> ENGINE_ERROR_CODE {
    guard(ENGINE_FAILED, || {
        let Some(running) = instance() else {
            return ENGINE_FAILED;
        };
        if request.is_null() {
            return ENGINE_EINVAL;
        }
        // SAFETY: memcached hands us at least the header.
        let opcode = unsafe { (*request).request.opcode };
        if !is_admin_opcode(opcode) {
            // SAFETY: memcached hands us the whole packet.
            let key = unsafe { parse(request, usize::MAX) }.ok().map(|p| p.key);
            // SAFETY: the host's cookie and packet for this call.
            return unsafe { proxy(cookie, request, response, key) };
        }
        if !running.is_admin(cookie) {
            return ENGINE_ENOTSUP; // the seed's answer to everyone else
        }
        // SAFETY: memcached hands us the whole packet.
        let packet = match unsafe { parse(request, MAX_ADMIN_BODY) } {
            Ok(p) => p,
            Err(Malformed::TooLarge) => return ENGINE_DISCONNECT,
            Err(Malformed::Lengths) => return invalid(response, cookie),
        };
        match packet.opcode {
            CREATE_BUCKET | CREATE_BUCKET_DEPRECATED => create(running, cookie, &packet, response),
            // SAFETY: the host's cookie for this call.
            DELETE_BUCKET | DELETE_BUCKET_DEPRECATED => unsafe {
                delete(running, cookie, &packet, response)
            },
            LIST_BUCKETS | LIST_BUCKETS_DEPRECATED => list(running, cookie, response),
            // SAFETY: as above.
            _ => unsafe { select(running, cookie, &packet, response) },
        }
    })
}

/// Any other opcode: the connection's bucket answers it; the ep-engine commands the seed knows
/// are counted in topkeys when they succeed.
///
/// # Safety
/// `cookie` and `request` are the host's for the current call.
unsafe fn proxy(
    cookie: *const c_void,
    request: *mut protocol_binary_request_header,
    response: ADD_RESPONSE,
    key: Option<&[u8]>,
) -> ENGINE_ERROR_CODE {
    let call = |e: &DlEngine| {
        let f = e.v1.unknown_command.expect("checked at load");
        // SAFETY: the host's packet and callback, passed through unchanged.
        let rc = unsafe { f(e.raw_handle(), cookie, request, response) };
        // SAFETY: as above.
        let opcode = unsafe { (*request).request.opcode };
        let op = match opcode {
            CMD_GET_REPLICA => Some(TopKeyOp::GetReplica),
            CMD_EVICT_KEY => Some(TopKeyOp::Evict),
            CMD_GET_LOCKED => Some(TopKeyOp::Getl),
            CMD_UNLOCK_KEY => Some(TopKeyOp::Unlock),
            CMD_GET_META | CMD_GETQ_META => Some(TopKeyOp::GetMeta),
            CMD_SET_WITH_META | CMD_SETQ_WITH_META => Some(TopKeyOp::SetMeta),
            CMD_DEL_WITH_META | CMD_DELQ_WITH_META => Some(TopKeyOp::DelMeta),
            _ => None,
        };
        if let (ENGINE_SUCCESS, Some(op), Some(key)) = (rc, op, key) {
            topkey(e, key, op);
        }
        rc
    };
    // SAFETY: the host's cookie for this call.
    unsafe { proxied(cookie, false, ENGINE_DISCONNECT, call) }
}

/// The name DELETE and SELECT look up: a key that is no valid name (bytes that are not UTF-8
/// among them) names no bucket, so it is answered as an unknown name, as the seed answers it.
fn lookup_name(key: &[u8]) -> Option<&str> {
    name::validate(key).ok()
}

/// CREATE: key = name, value = engine path, NUL, config.
fn create(
    running: &Running,
    cookie: *const c_void,
    packet: &Packet<'_>,
    response: ADD_RESPONSE,
) -> ENGINE_ERROR_CODE {
    let name = match name::validate(packet.key) {
        Ok(name) => name,
        // The seed's answer to every failure but "exists"; the message says why.
        Err(why) => {
            let message = format!("Invalid bucket name: {why}");
            return respond(
                response,
                cookie,
                PROTOCOL_BINARY_RESPONSE_NOT_STORED,
                message.as_bytes(),
            );
        }
    };
    let mut spec = packet.value.splitn(2, |&b| b == 0);
    let path = spec.next().unwrap_or_default();
    let config = spec.next().unwrap_or_default();
    let (Ok(path), Ok(config)) = (std::str::from_utf8(path), std::str::from_utf8(config)) else {
        return invalid(response, cookie);
    };
    if path.is_empty() {
        return invalid(response, cookie);
    }
    let (status, message) = match running.registry.create(name, path, config) {
        Ok(bucket) => {
            drop(bucket);
            (PROTOCOL_BINARY_RESPONSE_SUCCESS, String::new())
        }
        Err(why @ CreateError::Exists(_)) => {
            (PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS, why.to_string())
        }
        Err(why) => {
            running.host.log(
                EXTENSION_LOG_WARNING,
                &format!("Create bucket \"{name}\": {why}"),
            );
            (PROTOCOL_BINARY_RESPONSE_NOT_STORED, why.to_string())
        }
    };
    respond(response, cookie, status, message.as_bytes())
}

/// DELETE: key = name, value = optional `force=true|false`. Answers EWOULDBLOCK; the shutdown
/// worker's notify_io_complete makes the host retry, and the retry answers SUCCESS. It
/// completes once no call is inside the bucket, as the seed's does, whatever items of it
/// connections still hold: its engine is destroyed after the last of them came back (see
/// `items`), with the `force` given here.
///
/// # Safety
/// `cookie` is the host's for the current call.
unsafe fn delete(
    running: &Running,
    cookie: *const c_void,
    packet: &Packet<'_>,
    response: ADD_RESPONSE,
) -> ENGINE_ERROR_CODE {
    // SAFETY: the host's cookie for this call, on a live connection; `state` is used only
    // during it.
    let Some(state) = (unsafe { conn::state_or_connect(running, cookie) }) else {
        return invalid(response, cookie);
    };
    if take_delete_pending(state) {
        return respond(response, cookie, PROTOCOL_BINARY_RESPONSE_SUCCESS, b"");
    }
    let Ok(force) = parse_force(running.host, packet.value) else {
        return respond(
            response,
            cookie,
            PROTOCOL_BINARY_RESPONSE_EINVAL,
            b"Invalid config parameters",
        );
    };
    let not_found = || {
        respond(
            response,
            cookie,
            PROTOCOL_BINARY_RESPONSE_KEY_ENOENT,
            b"Not found.",
        )
    };
    let Some(name) = lookup_name(packet.key) else {
        return not_found();
    };
    let target = running.registry.find(name);
    // Set before the delete starts: its completion may be notified before we return.
    // Release: read back by this connection's own retried call (same thread, or after the
    // host's own synchronisation when it moves the connection).
    state.delete_pending.store(true, Ordering::Release);
    if running
        .registry
        .delete(name, Cookie(cookie), force)
        .is_err()
    {
        state.delete_pending.store(false, Ordering::Release);
        return not_found();
    }
    if let Some(target) = target {
        // A connection deleting its own bucket is detached from it first.
        // SAFETY: unknown_command runs on the connection's own thread.
        match unsafe { state.exclusive() } {
            Some(conn) => {
                let _ = conn.detach_from(&target);
            }
            None => running.host.log(
                EXTENSION_LOG_WARNING,
                "DELETE from a reserved connection: it stays attached",
            ),
        }
    }
    ENGINE_EWOULDBLOCK
}

/// LIST: the names of the RUNNING buckets, separated by spaces (empty body when none).
fn list(running: &Running, cookie: *const c_void, response: ADD_RESPONSE) -> ENGINE_ERROR_CODE {
    let names: Vec<String> = running
        .registry
        .list()
        .iter()
        .map(|bucket| bucket.name().to_owned())
        .collect();
    respond(
        response,
        cookie,
        PROTOCOL_BINARY_RESPONSE_SUCCESS,
        names.join(" ").as_bytes(),
    )
}

/// SELECT: attach this connection to the named bucket.
///
/// # Safety
/// `cookie` is the host's for the current call.
unsafe fn select(
    running: &Running,
    cookie: *const c_void,
    packet: &Packet<'_>,
    response: ADD_RESPONSE,
) -> ENGINE_ERROR_CODE {
    // SAFETY: the host's cookie for this call, on a live connection; `state` is used only
    // during it.
    let Some(state) = (unsafe { conn::state_or_connect(running, cookie) }) else {
        return invalid(response, cookie);
    };
    // SAFETY: unknown_command runs on the connection's own thread.
    let Some(conn) = (unsafe { state.exclusive() }) else {
        return respond(
            response,
            cookie,
            PROTOCOL_BINARY_RESPONSE_EBUSY,
            b"Connection is reserved",
        );
    };
    // A key that is no valid name finds nothing: the connection is left with no bucket, as
    // after any failed SELECT.
    let selected = match lookup_name(packet.key) {
        Some(name) => conn.select(&running.registry, name),
        None => conn.attach(None).map(|()| false),
    };
    match selected {
        Ok(true) => respond(response, cookie, PROTOCOL_BINARY_RESPONSE_SUCCESS, b""),
        Ok(false) => respond(
            response,
            cookie,
            PROTOCOL_BINARY_RESPONSE_KEY_ENOENT,
            b"Engine not found",
        ),
        Err(_) => respond(
            response,
            cookie,
            PROTOCOL_BINARY_RESPONSE_EBUSY,
            b"Connection is reserved",
        ),
    }
}
