//! The classic ASCII commands' answers: what [`super::execute`] found, worded as memcached 1.6
//! words it (a status line, a number, `VALUE` lines with their data), unless the client asked
//! for no reply.

#![deny(unsafe_code)]

use super::execute::{Hit, Reply};
use crate::api::server_core::MEMCACHED_VERSION;
use crate::codec::push_decimal;
use crate::io::{Output, COPY_MAX};
use crate::session::Flow;
use crate::text::{error_line, reply as line};
use mcb_abi::abi::*;
use std::io::Write;

/// Words a one-line command's `reply` (nothing when `quiet`, but a close is a close).
pub fn reply(out: &mut Vec<u8>, reply: Reply, quiet: bool) -> Flow {
    match reply {
        Reply::Close => return Flow::Close,
        Reply::Written => {}
        _ if quiet => {}
        Reply::Line(text) => line(out, text),
        Reply::Number(n) => {
            let _ = write!(out, "{n}\r\n");
        }
        Reply::Version => {
            let _ = write!(out, "VERSION {MEMCACHED_VERSION}\r\n");
        }
    }
    Flow::Continue
}

/// A get's hit: its `VALUE` line and its data. A large value is held in the output, written
/// from the item, not copied.
pub fn value(out: &mut Output, key: &[u8], hit: Hit, with_cas: bool) {
    let (flags, nbytes, cas) = match &hit {
        Hit::Item(value) => {
            let info = value.info();
            (u32::from_be(info.flags()), info.nbytes(), info.cas())
        }
        Hit::Copied(hit) => (hit.flags, hit.value.len(), hit.cas),
    };
    let tail = out.tail();
    tail.extend_from_slice(b"VALUE ");
    tail.extend_from_slice(key);
    tail.push(b' ');
    push_decimal(tail, u64::from(flags));
    tail.push(b' ');
    push_decimal(tail, nbytes as u64);
    if with_cas {
        tail.push(b' ');
        push_decimal(tail, cas);
    }
    tail.extend_from_slice(b"\r\n");
    match hit {
        Hit::Item(value) if value.len() <= COPY_MAX => value
            .value()
            .for_each(|piece| tail.extend_from_slice(piece)),
        Hit::Item(value) => out.push_value(value),
        Hit::Copied(hit) => tail.extend_from_slice(&hit.value),
    }
    out.tail().extend_from_slice(b"\r\n");
}

/// A classic storage command's answer to its store's code (`quiet`: `noreply`).
pub fn stored(out: &mut Vec<u8>, rc: ENGINE_ERROR_CODE, quiet: bool) -> Flow {
    let text = match rc {
        ENGINE_SUCCESS => "STORED",
        ENGINE_KEY_EEXISTS => "EXISTS",
        ENGINE_KEY_ENOENT => "NOT_FOUND",
        ENGINE_NOT_STORED => "NOT_STORED",
        ENGINE_ENOMEM => "SERVER_ERROR out of memory storing object",
        ENGINE_DISCONNECT => return Flow::Close,
        rc => error_line(rc),
    };
    reply(out, Reply::Line(text), quiet)
}
