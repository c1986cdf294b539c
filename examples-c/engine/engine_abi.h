/*
 * engine_abi.h: the memcached storage-engine interface, version 1, as the host sees it.
 *
 * Our own declaration, written from the layout facts of Couchbase memcached v2.5.1
 * (include/memcached/) and pinned, field by field, by ffi/tests/abi_layout.rs; abi_layout.c
 * prints this header's layout so a Rust test can compare it with the Rust mirror
 * (bucket_engine::abi). Type, field and constant names follow memcached's so that engine code
 * reads the same against either header.
 *
 * Define MCB_ENGINE_PU for upstream memcached's engine-pu branch: remove() takes the CAS by
 * value, ENGINE_HANDLE_V1 has no get_engine_vb_map, SERVER_HANDLE_V1 has no alloc_hooks and
 * config_datatype has no DT_SSIZE (the later datatypes are one lower).
 *
 * Needs _POSIX_C_SOURCE >= 200809L (or _GNU_SOURCE) for ssize_t and struct iovec under -std=c11.
 */
#ifndef MCB_ENGINE_ABI_H
#define MCB_ENGINE_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------
 * Basic types and result codes
 */

/* Seconds since the server started. */
typedef uint32_t rel_time_t;

/* Every enum below is an unsigned int on the platforms we support (no negative values). */
typedef enum {
    ENGINE_SUCCESS = 0x00,
    ENGINE_KEY_ENOENT = 0x01,
    ENGINE_KEY_EEXISTS = 0x02,
    ENGINE_ENOMEM = 0x03,
    ENGINE_NOT_STORED = 0x04,
    ENGINE_EINVAL = 0x05,
    ENGINE_ENOTSUP = 0x06,
    ENGINE_EWOULDBLOCK = 0x07, /* finish later: the engine calls notify_io_complete */
    ENGINE_E2BIG = 0x08,
    ENGINE_WANT_MORE = 0x09,
    ENGINE_DISCONNECT = 0x0a,
    ENGINE_EACCESS = 0x0b,
    ENGINE_NOT_MY_VBUCKET = 0x0c,
    ENGINE_TMPFAIL = 0x0d,
    ENGINE_ERANGE = 0x0e,
    ENGINE_FAILED = 0xff
} ENGINE_ERROR_CODE;

/* Starts at 1. */
typedef enum {
    OPERATION_ADD = 1,
    OPERATION_SET = 2,
    OPERATION_REPLACE = 3,
    OPERATION_APPEND = 4,
    OPERATION_PREPEND = 5,
    OPERATION_CAS = 6
} ENGINE_STORE_OPERATION;

/* An engine's item is opaque to the host. */
typedef void item;

/*
 * What get_item_info reports. nvalue is IN (entries available in value[]) and OUT (entries
 * used); callers may allocate room for more than the one declared entry.
 */
typedef struct {
    uint64_t cas;
    rel_time_t exptime;
    uint32_t nbytes;
    uint32_t flags;
    uint8_t clsid;
    uint16_t nkey;
    uint16_t nvalue;
    const void *key;
    struct iovec value[1];
} item_info;

/* A connection's SASL identity: get_auth_data, and the data of ON_AUTH. */
typedef struct {
    const char *username;
    const char *config;
} auth_data_t;

/* Every engine handle starts with its interface version. */
typedef struct engine_interface {
    uint64_t interface;
} ENGINE_HANDLE;

typedef void (*ADD_STAT)(const char *key, const uint16_t klen, const char *val,
                         const uint32_t vlen, const void *cookie);

typedef bool (*ADD_RESPONSE)(const void *key, uint16_t keylen, const void *ext, uint8_t extlen,
                             const void *body, uint32_t bodylen, uint8_t datatype,
                             uint16_t status, uint64_t cas, const void *cookie);

/* ------------------------------------------------------------------------------------------
 * Binary protocol (only what engines and the host here need)
 */

#define PROTOCOL_BINARY_REQ 0x80
#define PROTOCOL_BINARY_RES 0x81
#define PROTOCOL_BINARY_RAW_BYTES 0x00

#define PROTOCOL_BINARY_RESPONSE_SUCCESS 0x00
#define PROTOCOL_BINARY_RESPONSE_KEY_ENOENT 0x01
#define PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS 0x02
#define PROTOCOL_BINARY_RESPONSE_E2BIG 0x03
#define PROTOCOL_BINARY_RESPONSE_EINVAL 0x04
#define PROTOCOL_BINARY_RESPONSE_NOT_STORED 0x05
#define PROTOCOL_BINARY_RESPONSE_DELTA_BADVAL 0x06
#define PROTOCOL_BINARY_RESPONSE_NOT_MY_VBUCKET 0x07
#define PROTOCOL_BINARY_RESPONSE_AUTH_ERROR 0x20
#define PROTOCOL_BINARY_RESPONSE_AUTH_CONTINUE 0x21
#define PROTOCOL_BINARY_RESPONSE_ERANGE 0x22
#define PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND 0x81
#define PROTOCOL_BINARY_RESPONSE_ENOMEM 0x82
#define PROTOCOL_BINARY_RESPONSE_NOT_SUPPORTED 0x83
#define PROTOCOL_BINARY_RESPONSE_EINTERNAL 0x84
#define PROTOCOL_BINARY_RESPONSE_EBUSY 0x85
#define PROTOCOL_BINARY_RESPONSE_ETMPFAIL 0x86

/* Bucket engine administration; the 0x2x forms are the deprecated Membase 1.7 ones. */
#define CREATE_BUCKET 0x85
#define DELETE_BUCKET 0x86
#define LIST_BUCKETS 0x87
#define SELECT_BUCKET 0x89
#define CREATE_BUCKET_DEPRECATED 0x25
#define DELETE_BUCKET_DEPRECATED 0x26
#define LIST_BUCKETS_DEPRECATED 0x27
#define SELECT_BUCKET_DEPRECATED 0x29

/*
 * The 24-byte request header; extras, key and value follow it in memory. keylen, vbucket,
 * bodylen (= extlen + keylen + value length) and cas are big-endian.
 */
typedef union {
    struct {
        uint8_t magic;
        uint8_t opcode;
        uint16_t keylen;
        uint8_t extlen;
        uint8_t datatype;
        uint16_t vbucket;
        uint32_t bodylen;
        uint32_t opaque;
        uint64_t cas;
    } request;
    uint8_t bytes[24];
} protocol_binary_request_header;

typedef union {
    struct {
        uint8_t magic;
        uint8_t opcode;
        uint16_t keylen;
        uint8_t extlen;
        uint8_t datatype;
        uint16_t status;
        uint32_t bodylen;
        uint32_t opaque;
        uint64_t cas;
    } response;
    uint8_t bytes[24];
} protocol_binary_response_header;

/* ------------------------------------------------------------------------------------------
 * Configuration strings (the host's parse_config)
 */

enum config_datatype {
    DT_SIZE,
#ifndef MCB_ENGINE_PU
    DT_SSIZE,
#endif
    DT_FLOAT,
    DT_BOOL,
    DT_STRING,
    DT_CONFIGFILE
};

union config_value {
    size_t *dt_size;
#ifndef MCB_ENGINE_PU
    ssize_t *dt_ssize;
#endif
    float *dt_float;
    bool *dt_bool;
    char **dt_string;
};

/* A parse_config table ends with an entry whose key is NULL. */
struct config_item {
    const char *key;
    enum config_datatype datatype;
    union config_value value;
    bool found;
};

/* ------------------------------------------------------------------------------------------
 * Events
 */

typedef enum {
    ON_CONNECT = 0,
    ON_DISCONNECT = 1,
    ON_AUTH = 2, /* event data: const auth_data_t * */
    ON_SWITCH_CONN = 3,
    ON_LOG_LEVEL = 4
} ENGINE_EVENT_TYPE;

#define MAX_ENGINE_EVENT_TYPE 5

typedef void (*EVENT_CALLBACK)(const void *cookie, ENGINE_EVENT_TYPE type,
                               const void *event_data, const void *cb_data);

/* ------------------------------------------------------------------------------------------
 * Extensions
 */

typedef enum {
    EXTENSION_SUCCESS = 0x00,
    EXTENSION_FATAL = 0xfe,
    EXTENSION_FAILED = 0xff
} EXTENSION_ERROR_CODE;

typedef enum {
    EXTENSION_DAEMON = 0,
    EXTENSION_LOGGER = 1,
    EXTENSION_ASCII_PROTOCOL = 2,
    EXTENSION_BINARY_PROTOCOL = 3
} extension_type_t;

typedef enum {
    EXTENSION_LOG_DETAIL = 0,
    EXTENSION_LOG_DEBUG = 1,
    EXTENSION_LOG_INFO = 2,
    EXTENSION_LOG_WARNING = 3
} EXTENSION_LOG_LEVEL;

typedef struct extension_daemon_descriptor {
    const char *(*get_name)(void);
    struct extension_daemon_descriptor *next;
} EXTENSION_DAEMON_DESCRIPTOR;

typedef struct {
    const char *(*get_name)(void);
    void (*log)(EXTENSION_LOG_LEVEL severity, const void *client_cookie, const char *fmt, ...);
} EXTENSION_LOGGER_DESCRIPTOR;

/* ------------------------------------------------------------------------------------------
 * The server's API tables
 */

typedef struct {
    rel_time_t (*get_current_time)(void);
    rel_time_t (*realtime)(const time_t exptime);
    time_t (*abstime)(const rel_time_t exptime);
    const char *(*server_version)(void);
    uint32_t (*hash)(const void *data, size_t size, uint32_t seed);
    /* 0: ok; -1: bad value (reported to error); 1: an unknown key was seen. */
    int (*parse_config)(const char *str, struct config_item items[], FILE *error);
    void (*shutdown)(void);
    bool (*get_config)(struct config_item items[]);
} SERVER_CORE_API;

typedef struct {
    void *(*new_stats)(void);
    void (*release_stats)(void *stats);
    void (*evicting)(const void *cookie, const void *key, int nkey);
} SERVER_STAT_API;

typedef struct {
    bool (*register_extension)(extension_type_t type, void *extension);
    void (*unregister_extension)(extension_type_t type, void *extension);
    void *(*get_extension)(extension_type_t type);
} SERVER_EXTENSION_API;

typedef struct {
    void (*register_callback)(ENGINE_HANDLE *engine, ENGINE_EVENT_TYPE type, EVENT_CALLBACK cb,
                              const void *cb_data);
    void (*perform_callbacks)(ENGINE_EVENT_TYPE type, const void *data, const void *cookie);
} SERVER_CALLBACK_API;

typedef struct {
    EXTENSION_LOGGER_DESCRIPTOR *(*get_logger)(void);
    EXTENSION_LOG_LEVEL (*get_level)(void);
    void (*set_level)(EXTENSION_LOG_LEVEL severity);
} SERVER_LOG_API;

typedef struct {
    int (*get_socket_fd)(const void *cookie);
    void (*get_auth_data)(const void *cookie, auth_data_t *data);
    void (*store_engine_specific)(const void *cookie, void *engine_data);
    void *(*get_engine_specific)(const void *cookie);
    void (*notify_io_complete)(const void *cookie, ENGINE_ERROR_CODE status);
    ENGINE_ERROR_CODE (*reserve)(const void *cookie);
    ENGINE_ERROR_CODE (*release)(const void *cookie);
} SERVER_COOKIE_API;

#ifndef MCB_ENGINE_PU
typedef struct allocator_ext_stat {
    char key[48];
    size_t value;
} allocator_ext_stat;

typedef struct allocator_stats {
    size_t allocated_size;
    size_t heap_size;
    size_t free_size;
    size_t fragmentation_size;
    allocator_ext_stat *ext_stats;
    size_t ext_stats_size;
} allocator_stats;

typedef struct engine_allocator_hooks_v1 {
    bool (*add_new_hook)(void (*hook)(const void *ptr, size_t size));
    bool (*remove_new_hook)(void (*hook)(const void *ptr, size_t size));
    bool (*add_delete_hook)(void (*hook)(const void *ptr));
    bool (*remove_delete_hook)(void (*hook)(const void *ptr));
    int (*get_extra_stats_size)(void);
    void (*get_allocator_stats)(allocator_stats *stats);
    size_t (*get_allocation_size)(void *ptr);
    void (*get_detailed_stats)(char *buffer, int size);
} ALLOCATOR_HOOKS_API;
#endif

typedef struct server_handle_v1_t {
    uint64_t interface; /* 1 */
    SERVER_CORE_API *core;
    SERVER_STAT_API *stat;
    SERVER_EXTENSION_API *extension;
    SERVER_CALLBACK_API *callback;
    ENGINE_HANDLE *engine;
    SERVER_LOG_API *log;
    SERVER_COOKIE_API *cookie;
#ifndef MCB_ENGINE_PU
    ALLOCATOR_HOOKS_API *alloc_hooks;
#endif
} SERVER_HANDLE_V1;

typedef SERVER_HANDLE_V1 *(*GET_SERVER_API)(void);

/* ------------------------------------------------------------------------------------------
 * The engine
 */

#define ENGINE_INTERFACE_VERSION 1

typedef enum {
    TAP_MUTATION = 1,
    TAP_DELETION,
    TAP_FLUSH,
    TAP_OPAQUE,
    TAP_VBUCKET_SET,
    TAP_ACK,
    TAP_DISCONNECT,
    TAP_NOOP,
    TAP_PAUSE,
    TAP_CHECKPOINT_START,
    TAP_CHECKPOINT_END
} tap_event_t;

/* One step of a TAP stream; when *item is set the caller releases it. */
typedef tap_event_t (*TAP_ITERATOR)(ENGINE_HANDLE *handle, const void *cookie, item **item,
                                    void **engine_specific, uint16_t *nengine_specific,
                                    uint8_t *ttl, uint16_t *flags, uint32_t *seqno,
                                    uint16_t *vbucket);

#ifndef MCB_ENGINE_PU
typedef ENGINE_ERROR_CODE (*engine_get_vb_map_cb)(const void *cookie, const void *map,
                                                  size_t mapsize);
#endif

typedef ENGINE_ERROR_CODE (*CREATE_INSTANCE)(uint64_t interface, GET_SERVER_API get_server_api,
                                             ENGINE_HANDLE **handle);

typedef enum {
    ENGINE_FEATURE_CAS = 0,
    ENGINE_FEATURE_PERSISTENT_STORAGE = 1,
    ENGINE_FEATURE_SECONDARY_ENGINE = 2,
    ENGINE_FEATURE_ACCESS_CONTROL = 3,
    ENGINE_FEATURE_MULTI_TENANCY = 4,
    ENGINE_FEATURE_LRU = 5,
    ENGINE_FEATURE_VBUCKET = 6
} engine_feature_t;

typedef struct {
    uint32_t feature; /* an engine_feature_t */
    const char *description;
} feature_info;

/* Engines over-allocate features[] to hold num_features entries. */
typedef struct {
    const char *description;
    uint32_t num_features;
    feature_info features[1];
} engine_info;

/* The CAS argument of remove(): a pointer in v2.5.1, a value on engine-pu. */
#ifdef MCB_ENGINE_PU
typedef uint64_t mcb_remove_cas_t;
#else
typedef uint64_t *mcb_remove_cas_t;
#endif

typedef struct engine_interface_v1 {
    ENGINE_HANDLE interface;
    const engine_info *(*get_info)(ENGINE_HANDLE *handle);
    ENGINE_ERROR_CODE (*initialize)(ENGINE_HANDLE *handle, const char *config_str);
    void (*destroy)(ENGINE_HANDLE *handle, const bool force);
    ENGINE_ERROR_CODE (*allocate)(ENGINE_HANDLE *handle, const void *cookie, item **item,
                                  const void *key, const size_t nkey, const size_t nbytes,
                                  const int flags, const rel_time_t exptime);
    ENGINE_ERROR_CODE (*remove)(ENGINE_HANDLE *handle, const void *cookie, const void *key,
                                const size_t nkey, mcb_remove_cas_t cas, uint16_t vbucket);
    void (*release)(ENGINE_HANDLE *handle, const void *cookie, item *item);
    ENGINE_ERROR_CODE (*get)(ENGINE_HANDLE *handle, const void *cookie, item **item,
                             const void *key, const int nkey, uint16_t vbucket);
    ENGINE_ERROR_CODE (*store)(ENGINE_HANDLE *handle, const void *cookie, item *item,
                               uint64_t *cas, ENGINE_STORE_OPERATION operation,
                               uint16_t vbucket);
    ENGINE_ERROR_CODE (*arithmetic)(ENGINE_HANDLE *handle, const void *cookie, const void *key,
                                    const int nkey, const bool increment, const bool create,
                                    const uint64_t delta, const uint64_t initial,
                                    const rel_time_t exptime, uint64_t *cas, uint64_t *result,
                                    uint16_t vbucket);
    ENGINE_ERROR_CODE (*flush)(ENGINE_HANDLE *handle, const void *cookie, time_t when);
    ENGINE_ERROR_CODE (*get_stats)(ENGINE_HANDLE *handle, const void *cookie,
                                   const char *stat_key, int nkey, ADD_STAT add_stat);
    void (*reset_stats)(ENGINE_HANDLE *handle, const void *cookie);
    void *(*get_stats_struct)(ENGINE_HANDLE *handle, const void *cookie);
    ENGINE_ERROR_CODE (*aggregate_stats)(ENGINE_HANDLE *handle, const void *cookie,
                                         void (*callback)(void *src, void *dest), void *dest);
    ENGINE_ERROR_CODE (*unknown_command)(ENGINE_HANDLE *handle, const void *cookie,
                                         protocol_binary_request_header *request,
                                         ADD_RESPONSE response);
    ENGINE_ERROR_CODE (*tap_notify)(ENGINE_HANDLE *handle, const void *cookie,
                                    void *engine_specific, uint16_t nengine, uint8_t ttl,
                                    uint16_t tap_flags, tap_event_t tap_event,
                                    uint32_t tap_seqno, const void *key, size_t nkey,
                                    uint32_t flags, uint32_t exptime, uint64_t cas,
                                    const void *data, size_t ndata, uint16_t vbucket);
    TAP_ITERATOR (*get_tap_iterator)(ENGINE_HANDLE *handle, const void *cookie,
                                     const void *client, size_t nclient, uint32_t flags,
                                     const void *userdata, size_t nuserdata);
    void (*item_set_cas)(ENGINE_HANDLE *handle, const void *cookie, item *item, uint64_t cas);
    bool (*get_item_info)(ENGINE_HANDLE *handle, const void *cookie, const item *item,
                          item_info *item_info);
    size_t (*errinfo)(ENGINE_HANDLE *handle, const void *cookie, char *buffer, size_t buffsz);
#ifndef MCB_ENGINE_PU
    ENGINE_ERROR_CODE (*get_engine_vb_map)(ENGINE_HANDLE *handle, const void *cookie,
                                           engine_get_vb_map_cb callback);
#endif
} ENGINE_HANDLE_V1;

#ifdef __cplusplus
}
#endif

#endif /* MCB_ENGINE_ABI_H */
