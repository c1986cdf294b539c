//! `protocol_binary.h` and `vbucket.h`: the binary protocol's 24-byte headers, magic bytes,
//! opcodes and response statuses; the bucket engine's admin opcodes and the ep-engine opcodes
//! it counts in topkeys; vbucket states.
//!
//! The C enums `protocol_binary_magic`, `protocol_binary_command`,
//! `protocol_binary_response_status` and `protocol_binary_datatypes` are int-sized, but their
//! values never cross the ABI as those enums: they travel in the header's `u8` fields and
//! `ADD_RESPONSE`'s `uint16_t status`. The constants here carry those wire types.
//!
//! Multi-byte header fields are in network byte order (big-endian) in memory. `bodylen` is
//! `extlen + keylen + value length`; the key starts after the extras.

/// The request header's fields (the anonymous `request` struct of the C union).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct protocol_binary_request_header_request {
    pub magic: u8,
    pub opcode: u8,
    /// Big-endian.
    pub keylen: u16,
    pub extlen: u8,
    pub datatype: u8,
    /// Big-endian.
    pub vbucket: u16,
    /// Big-endian: extras + key + value.
    pub bodylen: u32,
    pub opaque: u32,
    /// Big-endian.
    pub cas: u64,
}

/// A request header (`protocol_binary_request_header`): the fields, or the 24 raw bytes. The
/// body (extras, key, value) follows it in memory.
#[repr(C)]
#[derive(Clone, Copy)]
pub union protocol_binary_request_header {
    pub request: protocol_binary_request_header_request,
    pub bytes: [u8; 24],
}

/// The response header's fields (the anonymous `response` struct of the C union).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct protocol_binary_response_header_response {
    pub magic: u8,
    pub opcode: u8,
    /// Big-endian.
    pub keylen: u16,
    pub extlen: u8,
    pub datatype: u8,
    /// Big-endian.
    pub status: u16,
    /// Big-endian: extras + key + value.
    pub bodylen: u32,
    pub opaque: u32,
    /// Big-endian.
    pub cas: u64,
}

/// A response header (`protocol_binary_response_header`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union protocol_binary_response_header {
    pub response: protocol_binary_response_header_response,
    pub bytes: [u8; 24],
}

impl core::fmt::Debug for protocol_binary_request_header {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // SAFETY: both members cover the same 24 bytes and every bit pattern is a valid `[u8; 24]`.
        let bytes = unsafe { self.bytes };
        f.debug_tuple("protocol_binary_request_header")
            .field(&bytes)
            .finish()
    }
}

impl core::fmt::Debug for protocol_binary_response_header {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // SAFETY: both members cover the same 24 bytes and every bit pattern is a valid `[u8; 24]`.
        let bytes = unsafe { self.bytes };
        f.debug_tuple("protocol_binary_response_header")
            .field(&bytes)
            .finish()
    }
}

/// Size of either header on the wire.
pub const PROTOCOL_BINARY_HEADER_SIZE: usize = 24;

// Magic (`protocol_binary_magic`).
pub const PROTOCOL_BINARY_REQ: u8 = 0x80;
pub const PROTOCOL_BINARY_RES: u8 = 0x81;

// Datatypes (`protocol_binary_datatypes`).
pub const PROTOCOL_BINARY_RAW_BYTES: u8 = 0x00;

// Response statuses (`protocol_binary_response_status`).
pub const PROTOCOL_BINARY_RESPONSE_SUCCESS: u16 = 0x00;
pub const PROTOCOL_BINARY_RESPONSE_KEY_ENOENT: u16 = 0x01;
pub const PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS: u16 = 0x02;
pub const PROTOCOL_BINARY_RESPONSE_E2BIG: u16 = 0x03;
pub const PROTOCOL_BINARY_RESPONSE_EINVAL: u16 = 0x04;
pub const PROTOCOL_BINARY_RESPONSE_NOT_STORED: u16 = 0x05;
pub const PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL: u16 = 0x06;
pub const PROTOCOL_BINARY_RESPONSE_NOT_MY_VBUCKET: u16 = 0x07;
pub const PROTOCOL_BINARY_RESPONSE_AUTH_ERROR: u16 = 0x20;
pub const PROTOCOL_BINARY_RESPONSE_AUTH_CONTINUE: u16 = 0x21;
pub const PROTOCOL_BINARY_RESPONSE_ERANGE: u16 = 0x22;
pub const PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND: u16 = 0x81;
pub const PROTOCOL_BINARY_RESPONSE_ENOMEM: u16 = 0x82;
pub const PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED: u16 = 0x83;
pub const PROTOCOL_BINARY_RESPONSE_EINTERNAL: u16 = 0x84;
pub const PROTOCOL_BINARY_RESPONSE_EBUSY: u16 = 0x85;
pub const PROTOCOL_BINARY_RESPONSE_ETMPFAIL: u16 = 0x86;

// Opcodes (`protocol_binary_command`).
pub const PROTOCOL_BINARY_CMD_GET: u8 = 0x00;
pub const PROTOCOL_BINARY_CMD_SET: u8 = 0x01;
pub const PROTOCOL_BINARY_CMD_ADD: u8 = 0x02;
pub const PROTOCOL_BINARY_CMD_REPLACE: u8 = 0x03;
pub const PROTOCOL_BINARY_CMD_DELETE: u8 = 0x04;
pub const PROTOCOL_BINARY_CMD_INCREMENT: u8 = 0x05;
pub const PROTOCOL_BINARY_CMD_DECREMENT: u8 = 0x06;
pub const PROTOCOL_BINARY_CMD_QUIT: u8 = 0x07;
pub const PROTOCOL_BINARY_CMD_FLUSH: u8 = 0x08;
pub const PROTOCOL_BINARY_CMD_GETQ: u8 = 0x09;
pub const PROTOCOL_BINARY_CMD_NOOP: u8 = 0x0a;
pub const PROTOCOL_BINARY_CMD_VERSION: u8 = 0x0b;
pub const PROTOCOL_BINARY_CMD_GETK: u8 = 0x0c;
pub const PROTOCOL_BINARY_CMD_GETKQ: u8 = 0x0d;
pub const PROTOCOL_BINARY_CMD_APPEND: u8 = 0x0e;
pub const PROTOCOL_BINARY_CMD_PREPEND: u8 = 0x0f;
pub const PROTOCOL_BINARY_CMD_STAT: u8 = 0x10;
pub const PROTOCOL_BINARY_CMD_SETQ: u8 = 0x11;
pub const PROTOCOL_BINARY_CMD_ADDQ: u8 = 0x12;
pub const PROTOCOL_BINARY_CMD_REPLACEQ: u8 = 0x13;
pub const PROTOCOL_BINARY_CMD_DELETEQ: u8 = 0x14;
pub const PROTOCOL_BINARY_CMD_INCREMENTQ: u8 = 0x15;
pub const PROTOCOL_BINARY_CMD_DECREMENTQ: u8 = 0x16;
pub const PROTOCOL_BINARY_CMD_QUITQ: u8 = 0x17;
pub const PROTOCOL_BINARY_CMD_FLUSHQ: u8 = 0x18;
pub const PROTOCOL_BINARY_CMD_APPENDQ: u8 = 0x19;
pub const PROTOCOL_BINARY_CMD_PREPENDQ: u8 = 0x1a;
pub const PROTOCOL_BINARY_CMD_VERBOSITY: u8 = 0x1b;
pub const PROTOCOL_BINARY_CMD_TOUCH: u8 = 0x1c;
pub const PROTOCOL_BINARY_CMD_GAT: u8 = 0x1d;
pub const PROTOCOL_BINARY_CMD_GATQ: u8 = 0x1e;
pub const PROTOCOL_BINARY_CMD_SASL_LIST_MECHS: u8 = 0x20;
pub const PROTOCOL_BINARY_CMD_SASL_AUTH: u8 = 0x21;
pub const PROTOCOL_BINARY_CMD_SASL_STEP: u8 = 0x22;
pub const PROTOCOL_BINARY_CMD_RGET: u8 = 0x30;
pub const PROTOCOL_BINARY_CMD_RSET: u8 = 0x31;
pub const PROTOCOL_BINARY_CMD_RSETQ: u8 = 0x32;
pub const PROTOCOL_BINARY_CMD_RAPPEND: u8 = 0x33;
pub const PROTOCOL_BINARY_CMD_RAPPENDQ: u8 = 0x34;
pub const PROTOCOL_BINARY_CMD_RPREPEND: u8 = 0x35;
pub const PROTOCOL_BINARY_CMD_RPREPENDQ: u8 = 0x36;
pub const PROTOCOL_BINARY_CMD_RDELETE: u8 = 0x37;
pub const PROTOCOL_BINARY_CMD_RDELETEQ: u8 = 0x38;
pub const PROTOCOL_BINARY_CMD_RINCR: u8 = 0x39;
pub const PROTOCOL_BINARY_CMD_RINCRQ: u8 = 0x3a;
pub const PROTOCOL_BINARY_CMD_RDECR: u8 = 0x3b;
pub const PROTOCOL_BINARY_CMD_RDECRQ: u8 = 0x3c;
pub const PROTOCOL_BINARY_CMD_SET_VBUCKET: u8 = 0x3d;
pub const PROTOCOL_BINARY_CMD_GET_VBUCKET: u8 = 0x3e;
pub const PROTOCOL_BINARY_CMD_DEL_VBUCKET: u8 = 0x3f;
pub const PROTOCOL_BINARY_CMD_TAP_CONNECT: u8 = 0x40;
pub const PROTOCOL_BINARY_CMD_TAP_MUTATION: u8 = 0x41;
pub const PROTOCOL_BINARY_CMD_TAP_DELETE: u8 = 0x42;
pub const PROTOCOL_BINARY_CMD_TAP_FLUSH: u8 = 0x43;
pub const PROTOCOL_BINARY_CMD_TAP_OPAQUE: u8 = 0x44;
pub const PROTOCOL_BINARY_CMD_TAP_VBUCKET_SET: u8 = 0x45;
pub const PROTOCOL_BINARY_CMD_TAP_CHECKPOINT_START: u8 = 0x46;
pub const PROTOCOL_BINARY_CMD_TAP_CHECKPOINT_END: u8 = 0x47;
/// The last opcode of the range reserved for memcached (0x48..=0x8f are unassigned there,
/// which is where the bucket engine's admin opcodes live).
pub const PROTOCOL_BINARY_CMD_LAST_RESERVED: u8 = 0x8f;
pub const PROTOCOL_BINARY_CMD_SCRUB: u8 = 0xf0;
/// v2.5.1 only: refresh the ISASL data.
#[cfg(not(feature = "engine-pu"))]
pub const PROTOCOL_BINARY_CMD_ISASL_REFRESH: u8 = 0xf1;

// The bucket engine's admin opcodes (bucket_engine.h). 0x88 and 0x28 are not assigned.
pub const CREATE_BUCKET: u8 = 0x85;
pub const DELETE_BUCKET: u8 = 0x86;
pub const LIST_BUCKETS: u8 = 0x87;
pub const SELECT_BUCKET: u8 = 0x89;
/// Membase up to 1.7 used these from memcached's reserved range; still accepted.
pub const CREATE_BUCKET_DEPRECATED: u8 = 0x25;
pub const DELETE_BUCKET_DEPRECATED: u8 = 0x26;
pub const LIST_BUCKETS_DEPRECATED: u8 = 0x27;
pub const SELECT_BUCKET_DEPRECATED: u8 = 0x29;

// ep-engine opcodes the bucket engine counts in topkeys (ep-engine's command_ids.h).
pub const CMD_GET_REPLICA: u8 = 0x83;
pub const CMD_EVICT_KEY: u8 = 0x93;
pub const CMD_GET_LOCKED: u8 = 0x94;
pub const CMD_UNLOCK_KEY: u8 = 0x95;
pub const CMD_GET_META: u8 = 0xa0;
pub const CMD_GETQ_META: u8 = 0xa1;
pub const CMD_SET_WITH_META: u8 = 0xa2;
pub const CMD_SETQ_WITH_META: u8 = 0xa3;
pub const CMD_DEL_WITH_META: u8 = 0xa8;
pub const CMD_DELQ_WITH_META: u8 = 0xa9;

/// A vbucket's state (`vbucket_state_t`; the first value is 1).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct vbucket_state_t(pub u32);

pub const vbucket_state_active: vbucket_state_t = vbucket_state_t(1);
pub const vbucket_state_replica: vbucket_state_t = vbucket_state_t(2);
pub const vbucket_state_pending: vbucket_state_t = vbucket_state_t(3);
pub const vbucket_state_dead: vbucket_state_t = vbucket_state_t(4);
