/*
 * abi_layout.c: prints the layout of every struct in engine_abi.h, one fact per line:
 *
 *     S <type> <sizeof> <alignof>
 *     F <type> <field> <offsetof>
 *     C <constant> <value>
 *
 * ffi/tests/abi_c_harness.rs compares each line with the Rust mirror (bucket_engine::abi),
 * whose numbers ffi/tests/abi_layout.rs pins to the real headers; so our C header, the Rust
 * mirror and memcached's headers must all agree. The static assertions below repeat the pinned
 * sizes of the structs a mistake would hurt most, so a wrong header does not even build.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdalign.h>
#include <stdio.h>

#include "engine_abi.h"

#ifdef MCB_ENGINE_PU
_Static_assert(sizeof(ENGINE_HANDLE_V1) == 168, "engine-pu ENGINE_HANDLE_V1: 20 slots");
_Static_assert(sizeof(SERVER_HANDLE_V1) == 64, "engine-pu SERVER_HANDLE_V1: no alloc_hooks");
#else
_Static_assert(sizeof(ENGINE_HANDLE_V1) == 176, "v2.5.1 ENGINE_HANDLE_V1: 21 slots");
_Static_assert(sizeof(SERVER_HANDLE_V1) == 72, "v2.5.1 SERVER_HANDLE_V1: ends in alloc_hooks");
#endif
_Static_assert(sizeof(item_info) == 56, "item_info");
_Static_assert(offsetof(item_info, value) == 40, "item_info.value");
_Static_assert(sizeof(protocol_binary_request_header) == 24, "request header");
_Static_assert(sizeof(struct config_item) == 32, "config_item");

#define S(name, T) printf("S %s %zu %zu\n", name, sizeof(T), alignof(T))
#define C(x) printf("C %s %lld\n", #x, (long long)(x))
#define F(name, T, field) printf("F %s %s %zu\n", name, #field, offsetof(T, field))
/* A field of the anonymous struct `sub` inside union T (which sits at offset 0). */
#define FS(name, T, sub, field) printf("F %s %s %zu\n", name, #field, offsetof(T, sub.field))

int main(void) {
    S("item_info", item_info);
    F("item_info", item_info, cas);
    F("item_info", item_info, exptime);
    F("item_info", item_info, nbytes);
    F("item_info", item_info, flags);
    F("item_info", item_info, clsid);
    F("item_info", item_info, nkey);
    F("item_info", item_info, nvalue);
    F("item_info", item_info, key);
    F("item_info", item_info, value);

    S("iovec", struct iovec);
    F("iovec", struct iovec, iov_base);
    F("iovec", struct iovec, iov_len);

    S("auth_data_t", auth_data_t);
    F("auth_data_t", auth_data_t, username);
    F("auth_data_t", auth_data_t, config);

    S("ENGINE_HANDLE", ENGINE_HANDLE);
    F("ENGINE_HANDLE", ENGINE_HANDLE, interface);

    S("feature_info", feature_info);
    F("feature_info", feature_info, feature);
    F("feature_info", feature_info, description);

    S("engine_info", engine_info);
    F("engine_info", engine_info, description);
    F("engine_info", engine_info, num_features);
    F("engine_info", engine_info, features);

    S("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, interface);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, get_info);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, initialize);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, destroy);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, allocate);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, remove);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, release);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, get);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, store);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, arithmetic);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, flush);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, get_stats);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, reset_stats);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, get_stats_struct);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, aggregate_stats);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, unknown_command);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, tap_notify);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, get_tap_iterator);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, item_set_cas);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, get_item_info);
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, errinfo);
#ifndef MCB_ENGINE_PU
    F("ENGINE_HANDLE_V1", ENGINE_HANDLE_V1, get_engine_vb_map);
#endif

    S("SERVER_HANDLE_V1", SERVER_HANDLE_V1);
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, interface);
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, core);
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, stat);
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, extension);
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, callback);
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, engine);
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, log);
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, cookie);
#ifndef MCB_ENGINE_PU
    F("SERVER_HANDLE_V1", SERVER_HANDLE_V1, alloc_hooks);

    S("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API);
    F("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API, add_new_hook);
    F("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API, remove_new_hook);
    F("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API, add_delete_hook);
    F("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API, remove_delete_hook);
    F("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API, get_extra_stats_size);
    F("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API, get_allocator_stats);
    F("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API, get_allocation_size);
    F("ALLOCATOR_HOOKS_API", ALLOCATOR_HOOKS_API, get_detailed_stats);

    S("allocator_stats", allocator_stats);
    F("allocator_stats", allocator_stats, allocated_size);
    F("allocator_stats", allocator_stats, heap_size);
    F("allocator_stats", allocator_stats, free_size);
    F("allocator_stats", allocator_stats, fragmentation_size);
    F("allocator_stats", allocator_stats, ext_stats);
    F("allocator_stats", allocator_stats, ext_stats_size);

    S("allocator_ext_stat", allocator_ext_stat);
    F("allocator_ext_stat", allocator_ext_stat, key);
    F("allocator_ext_stat", allocator_ext_stat, value);
#endif

    S("SERVER_CORE_API", SERVER_CORE_API);
    F("SERVER_CORE_API", SERVER_CORE_API, get_current_time);
    F("SERVER_CORE_API", SERVER_CORE_API, realtime);
    F("SERVER_CORE_API", SERVER_CORE_API, abstime);
    F("SERVER_CORE_API", SERVER_CORE_API, server_version);
    F("SERVER_CORE_API", SERVER_CORE_API, hash);
    F("SERVER_CORE_API", SERVER_CORE_API, parse_config);
    F("SERVER_CORE_API", SERVER_CORE_API, shutdown);
    F("SERVER_CORE_API", SERVER_CORE_API, get_config);

    S("SERVER_STAT_API", SERVER_STAT_API);
    F("SERVER_STAT_API", SERVER_STAT_API, new_stats);
    F("SERVER_STAT_API", SERVER_STAT_API, release_stats);
    F("SERVER_STAT_API", SERVER_STAT_API, evicting);

    S("SERVER_COOKIE_API", SERVER_COOKIE_API);
    F("SERVER_COOKIE_API", SERVER_COOKIE_API, get_socket_fd);
    F("SERVER_COOKIE_API", SERVER_COOKIE_API, get_auth_data);
    F("SERVER_COOKIE_API", SERVER_COOKIE_API, store_engine_specific);
    F("SERVER_COOKIE_API", SERVER_COOKIE_API, get_engine_specific);
    F("SERVER_COOKIE_API", SERVER_COOKIE_API, notify_io_complete);
    F("SERVER_COOKIE_API", SERVER_COOKIE_API, reserve);
    F("SERVER_COOKIE_API", SERVER_COOKIE_API, release);

    S("SERVER_CALLBACK_API", SERVER_CALLBACK_API);
    F("SERVER_CALLBACK_API", SERVER_CALLBACK_API, register_callback);
    F("SERVER_CALLBACK_API", SERVER_CALLBACK_API, perform_callbacks);

    S("SERVER_EXTENSION_API", SERVER_EXTENSION_API);
    F("SERVER_EXTENSION_API", SERVER_EXTENSION_API, register_extension);
    F("SERVER_EXTENSION_API", SERVER_EXTENSION_API, unregister_extension);
    F("SERVER_EXTENSION_API", SERVER_EXTENSION_API, get_extension);

    S("SERVER_LOG_API", SERVER_LOG_API);
    F("SERVER_LOG_API", SERVER_LOG_API, get_logger);
    F("SERVER_LOG_API", SERVER_LOG_API, get_level);
    F("SERVER_LOG_API", SERVER_LOG_API, set_level);

    S("EXTENSION_LOGGER_DESCRIPTOR", EXTENSION_LOGGER_DESCRIPTOR);
    F("EXTENSION_LOGGER_DESCRIPTOR", EXTENSION_LOGGER_DESCRIPTOR, get_name);
    F("EXTENSION_LOGGER_DESCRIPTOR", EXTENSION_LOGGER_DESCRIPTOR, log);

    S("EXTENSION_DAEMON_DESCRIPTOR", EXTENSION_DAEMON_DESCRIPTOR);
    F("EXTENSION_DAEMON_DESCRIPTOR", EXTENSION_DAEMON_DESCRIPTOR, get_name);
    F("EXTENSION_DAEMON_DESCRIPTOR", EXTENSION_DAEMON_DESCRIPTOR, next);

    S("config_item", struct config_item);
    F("config_item", struct config_item, key);
    F("config_item", struct config_item, datatype);
    F("config_item", struct config_item, value);
    F("config_item", struct config_item, found);

    S("config_value", union config_value);
    S("config_datatype", enum config_datatype);

    S("protocol_binary_request_header", protocol_binary_request_header);
    F("protocol_binary_request_header", protocol_binary_request_header, request);
    F("protocol_binary_request_header", protocol_binary_request_header, bytes);
    S("protocol_binary_request_header_request", protocol_binary_request_header);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, magic);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, opcode);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, keylen);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, extlen);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, datatype);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, vbucket);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, bodylen);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, opaque);
    FS("protocol_binary_request_header_request", protocol_binary_request_header, request, cas);

    S("protocol_binary_response_header", protocol_binary_response_header);
    F("protocol_binary_response_header", protocol_binary_response_header, response);
    F("protocol_binary_response_header", protocol_binary_response_header, bytes);
    S("protocol_binary_response_header_response", protocol_binary_response_header);
    FS("protocol_binary_response_header_response", protocol_binary_response_header,
       response, magic);
    FS("protocol_binary_response_header_response", protocol_binary_response_header,
       response, opcode);
    FS("protocol_binary_response_header_response", protocol_binary_response_header,
       response, keylen);
    FS("protocol_binary_response_header_response", protocol_binary_response_header,
       response, extlen);
    FS("protocol_binary_response_header_response", protocol_binary_response_header,
       response, datatype);
    FS("protocol_binary_response_header_response", protocol_binary_response_header,
       response, status);
    FS("protocol_binary_response_header_response", protocol_binary_response_header,
       response, bodylen);
    FS("protocol_binary_response_header_response", protocol_binary_response_header,
       response, opaque);
    FS("protocol_binary_response_header_response", protocol_binary_response_header, response, cas);

    S("ENGINE_ERROR_CODE", ENGINE_ERROR_CODE);
    S("ENGINE_STORE_OPERATION", ENGINE_STORE_OPERATION);
    S("ENGINE_EVENT_TYPE", ENGINE_EVENT_TYPE);
    S("tap_event_t", tap_event_t);
    S("engine_feature_t", engine_feature_t);
    S("EXTENSION_LOG_LEVEL", EXTENSION_LOG_LEVEL);
    S("extension_type_t", extension_type_t);
    S("EXTENSION_ERROR_CODE", EXTENSION_ERROR_CODE);
    S("rel_time_t", rel_time_t);

    /* Every enumerator and value #define of engine_abi.h. */
    C(ENGINE_SUCCESS);
    C(ENGINE_KEY_ENOENT);
    C(ENGINE_KEY_EEXISTS);
    C(ENGINE_ENOMEM);
    C(ENGINE_NOT_STORED);
    C(ENGINE_EINVAL);
    C(ENGINE_ENOTSUP);
    C(ENGINE_EWOULDBLOCK);
    C(ENGINE_E2BIG);
    C(ENGINE_WANT_MORE);
    C(ENGINE_DISCONNECT);
    C(ENGINE_EACCESS);
    C(ENGINE_NOT_MY_VBUCKET);
    C(ENGINE_TMPFAIL);
    C(ENGINE_ERANGE);
    C(ENGINE_FAILED);
    C(OPERATION_ADD);
    C(OPERATION_SET);
    C(OPERATION_REPLACE);
    C(OPERATION_APPEND);
    C(OPERATION_PREPEND);
    C(OPERATION_CAS);
    C(PROTOCOL_BINARY_REQ);
    C(PROTOCOL_BINARY_RES);
    C(PROTOCOL_BINARY_RAW_BYTES);
    C(PROTOCOL_BINARY_RESPONSE_SUCCESS);
    C(PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    C(PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS);
    C(PROTOCOL_BINARY_RESPONSE_E2BIG);
    C(PROTOCOL_BINARY_RESPONSE_EINVAL);
    C(PROTOCOL_BINARY_RESPONSE_NOT_STORED);
    C(PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL);
    C(PROTOCOL_BINARY_RESPONSE_NOT_MY_VBUCKET);
    C(PROTOCOL_BINARY_RESPONSE_AUTH_ERROR);
    C(PROTOCOL_BINARY_RESPONSE_AUTH_CONTINUE);
    C(PROTOCOL_BINARY_RESPONSE_ERANGE);
    C(PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND);
    C(PROTOCOL_BINARY_RESPONSE_ENOMEM);
    C(PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED);
    C(PROTOCOL_BINARY_RESPONSE_EINTERNAL);
    C(PROTOCOL_BINARY_RESPONSE_EBUSY);
    C(PROTOCOL_BINARY_RESPONSE_ETMPFAIL);
    C(CREATE_BUCKET);
    C(DELETE_BUCKET);
    C(LIST_BUCKETS);
    C(SELECT_BUCKET);
    C(CREATE_BUCKET_DEPRECATED);
    C(DELETE_BUCKET_DEPRECATED);
    C(LIST_BUCKETS_DEPRECATED);
    C(SELECT_BUCKET_DEPRECATED);
    C(DT_SIZE);
#ifndef MCB_ENGINE_PU
    C(DT_SSIZE);
#endif
    C(DT_FLOAT);
    C(DT_BOOL);
    C(DT_STRING);
    C(DT_CONFIGFILE);
    C(ON_CONNECT);
    C(ON_DISCONNECT);
    C(ON_AUTH);
    C(ON_SWITCH_CONN);
    C(ON_LOG_LEVEL);
    C(MAX_ENGINE_EVENT_TYPE);
    C(EXTENSION_SUCCESS);
    C(EXTENSION_FATAL);
    C(EXTENSION_FAILED);
    C(EXTENSION_DAEMON);
    C(EXTENSION_LOGGER);
    C(EXTENSION_ASCII_PROTOCOL);
    C(EXTENSION_BINARY_PROTOCOL);
    C(EXTENSION_LOG_DETAIL);
    C(EXTENSION_LOG_DEBUG);
    C(EXTENSION_LOG_INFO);
    C(EXTENSION_LOG_WARNING);
    C(ENGINE_INTERFACE_VERSION);
    C(TAP_MUTATION);
    C(TAP_DELETION);
    C(TAP_FLUSH);
    C(TAP_OPAQUE);
    C(TAP_VBUCKET_SET);
    C(TAP_ACK);
    C(TAP_DISCONNECT);
    C(TAP_NOOP);
    C(TAP_PAUSE);
    C(TAP_CHECKPOINT_START);
    C(TAP_CHECKPOINT_END);
    C(ENGINE_FEATURE_CAS);
    C(ENGINE_FEATURE_PERSISTENT_STORAGE);
    C(ENGINE_FEATURE_SECONDARY_ENGINE);
    C(ENGINE_FEATURE_ACCESS_CONTROL);
    C(ENGINE_FEATURE_MULTI_TENANCY);
    C(ENGINE_FEATURE_LRU);
    C(ENGINE_FEATURE_VBUCKET);
    return 0;
}
