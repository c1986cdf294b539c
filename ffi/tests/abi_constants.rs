//! Pins every enumerator and `#define` the ABI mirrors carry to the value in the real headers
//! (Couchbase memcached v2.5.1; engine-pu where it differs), measured by the same throwaway
//! probe as `abi_layout.rs`; the bucket engine's admin opcodes and the ep-engine opcodes it
//! counts are the values of bucket_engine.h and ep-engine's command_ids.h.

use bucket_engine::abi::*;

/// The integer a typed constant carries.
trait Raw {
    fn raw(self) -> i64;
}

macro_rules! raw_newtype {
    ($($t:ty),*) => {$(
        impl Raw for $t {
            fn raw(self) -> i64 {
                i64::from(self.0)
            }
        }
    )*};
}
raw_newtype!(
    ENGINE_ERROR_CODE,
    ENGINE_STORE_OPERATION,
    ENGINE_EVENT_TYPE,
    tap_event_t,
    engine_feature_t,
    EXTENSION_ERROR_CODE,
    extension_type_t,
    EXTENSION_LOG_LEVEL,
    config_datatype,
    vbucket_state_t
);

macro_rules! raw_int {
    ($($t:ty),*) => {$(
        impl Raw for $t {
            fn raw(self) -> i64 {
                i64::try_from(self).expect("fits")
            }
        }
    )*};
}
raw_int!(u8, u16, u32, u64, usize);

macro_rules! c {
    ($name:ident, $value:expr) => {
        assert_eq!($name.raw(), $value, stringify!($name));
    };
}

#[test]
#[allow(clippy::cognitive_complexity)]
fn header_constants() {
    c!(ENGINE_SUCCESS, 0);
    c!(ENGINE_KEY_ENOENT, 1);
    c!(ENGINE_KEY_EEXISTS, 2);
    c!(ENGINE_ENOMEM, 3);
    c!(ENGINE_NOT_STORED, 4);
    c!(ENGINE_EINVAL, 5);
    c!(ENGINE_ENOTSUP, 6);
    c!(ENGINE_EWOULDBLOCK, 7);
    c!(ENGINE_E2BIG, 8);
    c!(ENGINE_WANT_MORE, 9);
    c!(ENGINE_DISCONNECT, 10);
    c!(ENGINE_EACCESS, 11);
    c!(ENGINE_NOT_MY_VBUCKET, 12);
    c!(ENGINE_TMPFAIL, 13);
    c!(ENGINE_ERANGE, 14);
    c!(ENGINE_FAILED, 255);
    c!(OPERATION_ADD, 1);
    c!(OPERATION_SET, 2);
    c!(OPERATION_REPLACE, 3);
    c!(OPERATION_APPEND, 4);
    c!(OPERATION_PREPEND, 5);
    c!(OPERATION_CAS, 6);
    c!(ON_CONNECT, 0);
    c!(ON_DISCONNECT, 1);
    c!(ON_AUTH, 2);
    c!(ON_SWITCH_CONN, 3);
    c!(ON_LOG_LEVEL, 4);
    c!(MAX_ENGINE_EVENT_TYPE, 5);
    c!(TAP_MUTATION, 1);
    c!(TAP_DELETION, 2);
    c!(TAP_FLUSH, 3);
    c!(TAP_OPAQUE, 4);
    c!(TAP_VBUCKET_SET, 5);
    c!(TAP_ACK, 6);
    c!(TAP_DISCONNECT, 7);
    c!(TAP_NOOP, 8);
    c!(TAP_PAUSE, 9);
    c!(TAP_CHECKPOINT_START, 10);
    c!(TAP_CHECKPOINT_END, 11);
    c!(ENGINE_FEATURE_CAS, 0);
    c!(ENGINE_FEATURE_PERSISTENT_STORAGE, 1);
    c!(ENGINE_FEATURE_SECONDARY_ENGINE, 2);
    c!(ENGINE_FEATURE_ACCESS_CONTROL, 3);
    c!(ENGINE_FEATURE_MULTI_TENANCY, 4);
    c!(ENGINE_FEATURE_LRU, 5);
    c!(ENGINE_FEATURE_VBUCKET, 6);
    c!(LAST_REGISTERED_ENGINE_FEATURE, 6);
    c!(EXTENSION_SUCCESS, 0);
    c!(EXTENSION_FATAL, 254);
    c!(EXTENSION_FAILED, 255);
    c!(EXTENSION_DAEMON, 0);
    c!(EXTENSION_LOGGER, 1);
    c!(EXTENSION_ASCII_PROTOCOL, 2);
    c!(EXTENSION_BINARY_PROTOCOL, 3);
    c!(EXTENSION_LOG_DETAIL, 0);
    c!(EXTENSION_LOG_DEBUG, 1);
    c!(EXTENSION_LOG_INFO, 2);
    c!(EXTENSION_LOG_WARNING, 3);
    c!(DT_SIZE, 0);
    c!(ENGINE_INTERFACE_VERSION, 1);
    c!(vbucket_state_active, 1);
    c!(vbucket_state_replica, 2);
    c!(vbucket_state_pending, 3);
    c!(vbucket_state_dead, 4);
    c!(PROTOCOL_BINARY_CMD_ADD, 2);
    c!(PROTOCOL_BINARY_CMD_ADDQ, 18);
    c!(PROTOCOL_BINARY_CMD_APPEND, 14);
    c!(PROTOCOL_BINARY_CMD_APPENDQ, 25);
    c!(PROTOCOL_BINARY_CMD_DECREMENT, 6);
    c!(PROTOCOL_BINARY_CMD_DECREMENTQ, 22);
    c!(PROTOCOL_BINARY_CMD_DELETE, 4);
    c!(PROTOCOL_BINARY_CMD_DELETEQ, 20);
    c!(PROTOCOL_BINARY_CMD_DEL_VBUCKET, 63);
    c!(PROTOCOL_BINARY_CMD_FLUSH, 8);
    c!(PROTOCOL_BINARY_CMD_FLUSHQ, 24);
    c!(PROTOCOL_BINARY_CMD_GAT, 29);
    c!(PROTOCOL_BINARY_CMD_GATQ, 30);
    c!(PROTOCOL_BINARY_CMD_GET, 0);
    c!(PROTOCOL_BINARY_CMD_GETK, 12);
    c!(PROTOCOL_BINARY_CMD_GETKQ, 13);
    c!(PROTOCOL_BINARY_CMD_GETQ, 9);
    c!(PROTOCOL_BINARY_CMD_GET_VBUCKET, 62);
    c!(PROTOCOL_BINARY_CMD_INCREMENT, 5);
    c!(PROTOCOL_BINARY_CMD_INCREMENTQ, 21);
    c!(PROTOCOL_BINARY_CMD_LAST_RESERVED, 143);
    c!(PROTOCOL_BINARY_CMD_NOOP, 10);
    c!(PROTOCOL_BINARY_CMD_PREPEND, 15);
    c!(PROTOCOL_BINARY_CMD_PREPENDQ, 26);
    c!(PROTOCOL_BINARY_CMD_QUIT, 7);
    c!(PROTOCOL_BINARY_CMD_QUITQ, 23);
    c!(PROTOCOL_BINARY_CMD_RAPPEND, 51);
    c!(PROTOCOL_BINARY_CMD_RAPPENDQ, 52);
    c!(PROTOCOL_BINARY_CMD_RDECR, 59);
    c!(PROTOCOL_BINARY_CMD_RDECRQ, 60);
    c!(PROTOCOL_BINARY_CMD_RDELETE, 55);
    c!(PROTOCOL_BINARY_CMD_RDELETEQ, 56);
    c!(PROTOCOL_BINARY_CMD_REPLACE, 3);
    c!(PROTOCOL_BINARY_CMD_REPLACEQ, 19);
    c!(PROTOCOL_BINARY_CMD_RGET, 48);
    c!(PROTOCOL_BINARY_CMD_RINCR, 57);
    c!(PROTOCOL_BINARY_CMD_RINCRQ, 58);
    c!(PROTOCOL_BINARY_CMD_RPREPEND, 53);
    c!(PROTOCOL_BINARY_CMD_RPREPENDQ, 54);
    c!(PROTOCOL_BINARY_CMD_RSET, 49);
    c!(PROTOCOL_BINARY_CMD_RSETQ, 50);
    c!(PROTOCOL_BINARY_CMD_SASL_AUTH, 33);
    c!(PROTOCOL_BINARY_CMD_SASL_LIST_MECHS, 32);
    c!(PROTOCOL_BINARY_CMD_SASL_STEP, 34);
    c!(PROTOCOL_BINARY_CMD_SCRUB, 240);
    c!(PROTOCOL_BINARY_CMD_SET, 1);
    c!(PROTOCOL_BINARY_CMD_SETQ, 17);
    c!(PROTOCOL_BINARY_CMD_SET_VBUCKET, 61);
    c!(PROTOCOL_BINARY_CMD_STAT, 16);
    c!(PROTOCOL_BINARY_CMD_TAP_CHECKPOINT_END, 71);
    c!(PROTOCOL_BINARY_CMD_TAP_CHECKPOINT_START, 70);
    c!(PROTOCOL_BINARY_CMD_TAP_CONNECT, 64);
    c!(PROTOCOL_BINARY_CMD_TAP_DELETE, 66);
    c!(PROTOCOL_BINARY_CMD_TAP_FLUSH, 67);
    c!(PROTOCOL_BINARY_CMD_TAP_MUTATION, 65);
    c!(PROTOCOL_BINARY_CMD_TAP_OPAQUE, 68);
    c!(PROTOCOL_BINARY_CMD_TAP_VBUCKET_SET, 69);
    c!(PROTOCOL_BINARY_CMD_TOUCH, 28);
    c!(PROTOCOL_BINARY_CMD_VERBOSITY, 27);
    c!(PROTOCOL_BINARY_CMD_VERSION, 11);
    c!(PROTOCOL_BINARY_RAW_BYTES, 0);
    c!(PROTOCOL_BINARY_REQ, 128);
    c!(PROTOCOL_BINARY_RES, 129);
    c!(PROTOCOL_BINARY_RESPONSE_AUTH_CONTINUE, 33);
    c!(PROTOCOL_BINARY_RESPONSE_AUTH_ERROR, 32);
    c!(PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL, 6);
    c!(PROTOCOL_BINARY_RESPONSE_EBUSY, 133);
    c!(PROTOCOL_BINARY_RESPONSE_EINTERNAL, 132);
    c!(PROTOCOL_BINARY_RESPONSE_EINVAL, 4);
    c!(PROTOCOL_BINARY_RESPONSE_ENOMEM, 130);
    c!(PROTOCOL_BINARY_RESPONSE_ERANGE, 34);
    c!(PROTOCOL_BINARY_RESPONSE_ETMPFAIL, 134);
    c!(PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS, 2);
    c!(PROTOCOL_BINARY_RESPONSE_KEY_ENOENT, 1);
    c!(PROTOCOL_BINARY_RESPONSE_NOT_MY_VBUCKET, 7);
    c!(PROTOCOL_BINARY_RESPONSE_NOT_STORED, 5);
    c!(PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED, 131);
    c!(PROTOCOL_BINARY_RESPONSE_SUCCESS, 0);
    c!(PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND, 129);
    c!(TAP_CONNECT_CHECKPOINT, 64);
    c!(TAP_CONNECT_FLAG_BACKFILL, 1);
    c!(TAP_CONNECT_FLAG_DUMP, 2);
    c!(TAP_CONNECT_FLAG_LIST_VBUCKETS, 4);
    c!(TAP_CONNECT_FLAG_TAKEOVER_VBUCKETS, 8);
    c!(TAP_CONNECT_REGISTERED_CLIENT, 128);
    c!(TAP_CONNECT_REQUEST_KEYS_ONLY, 32);
    c!(TAP_CONNECT_SUPPORT_ACK, 16);
    c!(TAP_FLAG_ACK, 1);
    c!(TAP_FLAG_NO_VALUE, 2);
}

#[cfg(not(feature = "engine-pu"))]
#[test]
fn v2_5_1_only_constants() {
    c!(DT_SSIZE, 1);
    c!(PROTOCOL_BINARY_CMD_ISASL_REFRESH, 241);
    c!(TAP_CONNECT_TAP_FIX_FLAG_BYTEORDER, 256);
    c!(TAP_FLAG_NETWORK_BYTE_ORDER, 4);
    c!(DT_FLOAT, 2);
    c!(DT_BOOL, 3);
    c!(DT_STRING, 4);
    c!(DT_CONFIGFILE, 5);
}

/// engine-pu has no DT_SSIZE, so the later datatypes are one lower.
#[cfg(feature = "engine-pu")]
#[test]
fn engine_pu_constants() {
    c!(DT_FLOAT, 1);
    c!(DT_BOOL, 2);
    c!(DT_STRING, 3);
    c!(DT_CONFIGFILE, 4);
}

#[test]
fn bucket_engine_opcodes() {
    c!(CREATE_BUCKET, 133);
    c!(DELETE_BUCKET, 134);
    c!(LIST_BUCKETS, 135);
    c!(SELECT_BUCKET, 137);
    c!(CREATE_BUCKET_DEPRECATED, 37);
    c!(DELETE_BUCKET_DEPRECATED, 38);
    c!(LIST_BUCKETS_DEPRECATED, 39);
    c!(SELECT_BUCKET_DEPRECATED, 41);
    c!(CMD_GET_REPLICA, 131);
    c!(CMD_EVICT_KEY, 147);
    c!(CMD_GET_LOCKED, 148);
    c!(CMD_UNLOCK_KEY, 149);
    c!(CMD_GET_META, 160);
    c!(CMD_GETQ_META, 161);
    c!(CMD_SET_WITH_META, 162);
    c!(CMD_SETQ_WITH_META, 163);
    c!(CMD_DEL_WITH_META, 168);
    c!(CMD_DELQ_WITH_META, 169);
}
