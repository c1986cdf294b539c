//! Our engines' private extensions: a host's end of turn ([`END_TURN_SYMBOL`]), and for
//! memcached 1.6's meta commands four binary opcodes that
//! `mcb-memcached` sends through `unknown_command` to an engine that keeps stale items and a
//! recache token per item (the built-in storage engine). An engine without them answers
//! UNKNOWN_COMMAND, and the host then serves the meta commands through the v1 calls alone.
//! Every answer's extras start with [`ANSWER_MAGIC`]: an engine that gives these opcodes other
//! meanings (the C test engine echoes 0xe0) is not mistaken for one of ours. Numbers in
//! extras are big-endian, as in every binary packet.

/// The symbol our engine libraries export for a host that ends its turns: an
/// [`EndTurn`]. A host that finds it (`dlsym` on the engine library) calls it on each worker
/// thread before the thread waits for its next events; from the first call on, a get on that
/// thread hands out items pinned by the turn, which count no hold unless they are still out
/// when the turn ends (`mcb_core::store::end_turn`). A host that never calls it keeps plain
/// v1: counted holds. The bucket engine's covers its in-process (`builtin`) buckets and calls
/// the one of each library it loaded a bucket from.
pub const END_TURN_SYMBOL: &std::ffi::CStr = c"mcb_end_turn";

/// [`END_TURN_SYMBOL`]'s type. The caller promises what `mcb_core::store::end_turn` asks: each
/// item a turn hands out is released on the thread that got it, before the engine is
/// destroyed.
pub type EndTurn = unsafe extern "C" fn();

/// The first 4 bytes of every answer's extras.
pub const ANSWER_MAGIC: [u8; 4] = *b"mcbM";

/// Meta get. Extras (16 bytes): what to do (`GET_*` bits), 3 bytes zero, then the vivify
/// expiry, the recache threshold in seconds and the touch expiry (client expiration times, as
/// in a SET). Answer: SUCCESS with extras of the magic, the item's flags as stored (4 bytes), its expiry
/// in server time (4), its state (`STATE_*` bits, 1 byte), the seconds since its last access
/// before this fetch (4) and its expiry before this fetch's touch (4; an answer without it is
/// one from before the field: read the expiry), the value as body and the CAS; or KEY_ENOENT.
pub const CMD_META_GET: u8 = 0xe8;
/// Meta delete with invalidation: the item becomes a stale copy with a new CAS. Extras (16
/// bytes): the CAS to compare (0: any), the new expiry, `INVALIDATE_SET_EXPTIME` or 0, then 3
/// bytes zero. Answer: SUCCESS with the new CAS, KEY_ENOENT or KEY_EEXISTS.
pub const CMD_META_INVALIDATE: u8 = 0xe9;
/// Meta set, for what v1's `store` cannot say (`SET_*` bits). Extras (20 bytes): the CAS to
/// compare (0: none; with `SET_STALE_IF_OLDER` the CAS it compares), the client flags, the
/// expiry, the operation (v1's `ENGINE_STORE_OPERATION`, 1 byte), the `SET_*` bits (1 byte),
/// 2 bytes zero; the value is the body. Answer: SUCCESS with the new CAS, KEY_ENOENT,
/// KEY_EEXISTS, NOT_STORED, E2BIG or ENOMEM.
pub const CMD_META_SET: u8 = 0xea;

/// `CMD_META_SET`: store the value if the CAS is the item's, and marked stale if it is older
/// (`ms … I`; the operation is CAS).
pub const SET_STALE_IF_OLDER: u8 = 1;
/// `CMD_META_SET`: the key came in base64 (`ms … b`): the meta commands answer it in base64,
/// whatever their own `b` (memcached's `ITEM_KEY_BINARY`).
pub const SET_KEY_BINARY: u8 = 2;

/// Meta arithmetic with a CAS compare and a TTL update. Extras (40 bytes): `ARITH_*` bits, 3
/// bytes zero, the expiry of an item created on a miss, the expiry to set on success, 4 bytes
/// zero, the delta, the initial value, the CAS to compare (0: any). Answer: SUCCESS with
/// extras of the magic, the item's expiry in server time (4), whether this call created the
/// item (1 byte, 0 or 1) and the expiry it had before this call (4; 0 for one it created), the
/// new value as an 8-byte body and the CAS; or KEY_ENOENT, KEY_EEXISTS, DELTA_BADVAL (not a
/// number).
pub const CMD_META_ARITHMETIC: u8 = 0xeb;

/// Increment (else decrement).
pub const ARITH_INCR: u8 = 1;
/// Create the item on a miss.
pub const ARITH_CREATE: u8 = 2;
/// Set the expiry on success.
pub const ARITH_TOUCH: u8 = 4;

/// Create an empty item on a miss.
pub const GET_VIVIFY: u8 = 1;
/// Ask for the recache token below a remaining TTL.
pub const GET_RECACHE: u8 = 2;
/// Set the expiry first.
pub const GET_TOUCH: u8 = 4;
/// Leave the item's fetched mark and access time alone.
pub const GET_NO_BUMP: u8 = 8;
/// Only look: take and report no recache token, even on a stale item (`me`, and `md`'s read
/// of the CAS); with `GET_NO_BUMP` the fetch changes nothing.
pub const GET_LOOK: u8 = 16;

/// The item is stale.
pub const STATE_STALE: u8 = 1;
/// This fetch won the recache token.
pub const STATE_WON: u8 = 2;
/// Another fetch holds the recache token.
pub const STATE_LOST: u8 = 4;
/// The item had been fetched before this fetch.
pub const STATE_FETCHED: u8 = 8;
/// This fetch created the item (`GET_VIVIFY` on a miss).
pub const STATE_CREATED: u8 = 16;
/// The item's key came in base64 (see `SET_KEY_BINARY`).
pub const STATE_KEY_BINARY: u8 = 32;

/// `CMD_META_INVALIDATE`: the expiry in the extras applies.
pub const INVALIDATE_SET_EXPTIME: u8 = 1;
