//! TAP (`engine.h`'s `tap_event_t` and `TAP_ITERATOR`, `protocol_binary.h`'s TAP flags): the
//! replication stream an engine produces through an iterator and consumes through
//! `tap_notify`.

use core::ffi::c_void;

use super::types::{item, ENGINE_HANDLE};

/// What one TAP step carries (`tap_event_t`; the first value is 1).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct tap_event_t(pub u32);

pub const TAP_MUTATION: tap_event_t = tap_event_t(1);
pub const TAP_DELETION: tap_event_t = tap_event_t(2);
pub const TAP_FLUSH: tap_event_t = tap_event_t(3);
pub const TAP_OPAQUE: tap_event_t = tap_event_t(4);
pub const TAP_VBUCKET_SET: tap_event_t = tap_event_t(5);
pub const TAP_ACK: tap_event_t = tap_event_t(6);
pub const TAP_DISCONNECT: tap_event_t = tap_event_t(7);
/// Nothing to send now.
pub const TAP_NOOP: tap_event_t = tap_event_t(8);
/// Nothing to send now; call again after `notify_io_complete`.
pub const TAP_PAUSE: tap_event_t = tap_event_t(9);
pub const TAP_CHECKPOINT_START: tap_event_t = tap_event_t(10);
pub const TAP_CHECKPOINT_END: tap_event_t = tap_event_t(11);

/// One step of a TAP stream (`TAP_ITERATOR`), as returned by `get_tap_iterator`. The outputs
/// are written by the engine; `item` must be released by the caller when set.
pub type TAP_ITERATOR = Option<
    unsafe extern "C" fn(
        handle: *mut ENGINE_HANDLE,
        cookie: *const c_void,
        item: *mut *mut item,
        engine_specific: *mut *mut c_void,
        nengine_specific: *mut u16,
        ttl: *mut u8,
        flags: *mut u16,
        seqno: *mut u32,
        vbucket: *mut u16,
    ) -> tap_event_t,
>;

// Flags of a TAP_CONNECT request (`flags` extra, network byte order on the wire).
pub const TAP_CONNECT_FLAG_BACKFILL: u32 = 0x01;
pub const TAP_CONNECT_FLAG_DUMP: u32 = 0x02;
pub const TAP_CONNECT_FLAG_LIST_VBUCKETS: u32 = 0x04;
pub const TAP_CONNECT_FLAG_TAKEOVER_VBUCKETS: u32 = 0x08;
pub const TAP_CONNECT_SUPPORT_ACK: u32 = 0x10;
pub const TAP_CONNECT_REQUEST_KEYS_ONLY: u32 = 0x20;
pub const TAP_CONNECT_CHECKPOINT: u32 = 0x40;
pub const TAP_CONNECT_REGISTERED_CLIENT: u32 = 0x80;
/// v2.5.1 only.
#[cfg(not(feature = "engine-pu"))]
pub const TAP_CONNECT_TAP_FIX_FLAG_BYTEORDER: u32 = 0x100;

// Flags of a TAP message (`tap_flags`).
pub const TAP_FLAG_ACK: u16 = 0x01;
pub const TAP_FLAG_NO_VALUE: u16 = 0x02;
/// v2.5.1 only: the item flags are in network byte order.
#[cfg(not(feature = "engine-pu"))]
pub const TAP_FLAG_NETWORK_BYTE_ORDER: u16 = 0x04;
