/*
 * ep_stub_engine.c: a stand-in for ep-engine's extra commands (libep_stub_engine.so), for the
 * bucket engine's topkeys tests. It answers SUCCESS (with the request's key echoed back) to the
 * ep-engine opcodes the bucket engine counts in topkeys (0x83 get_replica, 0x93 evict_key,
 * 0x94 get_locked, 0x95 unlock_key, 0xa0/0xa1 get_meta(q), 0xa2/0xa3 set_with_meta(q),
 * 0xa8/0xa9 del_with_meta(q)) unless the request's value is "fail" (then ENGINE_KEY_ENOENT, so
 * a failed command can be told from a counted one), and ENGINE_ENOTSUP to anything else. It
 * stores nothing: every item call fails with ENGINE_ENOTSUP. Config: empty, `name=...`, and
 * `slow=true`: initialize then waits until ep_stub_finish_slow_init() is called (a test dlopens
 * this library again to call it) or 30 seconds pass, to show a slow engine warming up; and
 * `probe_extensions=true`: initialize fails (ENGINE_FAILED) unless get_extension hands out a
 * logger and register_extension refuses a daemon extension, as a bucket engine must.
 */
#define _POSIX_C_SOURCE 200809L
#include "engine_abi.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EP_EXPORT __attribute__((visibility("default")))

typedef struct {
    ENGINE_HANDLE_V1 v1; /* first: the handle the host sees */
    SERVER_HANDLE_V1 *server;
    engine_info info;
    char stats[64];
} ep_engine;

static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cond = PTHREAD_COND_INITIALIZER;
static bool slow_done;
static int slow_waiting;
static int destroyed; /* instances destroyed so far (under slow_lock) */

/* Lets every slow initialize (now and later) finish. */
EP_EXPORT void ep_stub_finish_slow_init(void) {
    pthread_mutex_lock(&slow_lock);
    slow_done = true;
    pthread_cond_broadcast(&slow_cond);
    pthread_mutex_unlock(&slow_lock);
}

/* How many initialize calls are waiting now. */
EP_EXPORT int ep_stub_slow_waiting(void) {
    pthread_mutex_lock(&slow_lock);
    int n = slow_waiting;
    pthread_mutex_unlock(&slow_lock);
    return n;
}

/*
 * Blocks until at least `waiting` initialize calls wait and at least `destroyed` instances were
 * destroyed: a test's way to reach an interleaving by event, not by sleeping.
 */
EP_EXPORT void ep_stub_await(int waiting, int destroyed_at_least) {
    pthread_mutex_lock(&slow_lock);
    while (slow_waiting < waiting || destroyed < destroyed_at_least) {
        pthread_cond_wait(&slow_cond, &slow_lock);
    }
    pthread_mutex_unlock(&slow_lock);
}

static void slow_init_wait(void) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 30;
    pthread_mutex_lock(&slow_lock);
    slow_waiting++;
    pthread_cond_broadcast(&slow_cond); /* for ep_stub_await */
    while (!slow_done) {
        if (pthread_cond_timedwait(&slow_cond, &slow_lock, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    slow_waiting--;
    pthread_mutex_unlock(&slow_lock);
}

static const char *probe_daemon_name(void) {
    return "ep stub probe";
}

static EXTENSION_DAEMON_DESCRIPTOR probe_daemon = {.get_name = probe_daemon_name};

static ep_engine *ep(ENGINE_HANDLE *h) {
    return (ep_engine *)h;
}

static const engine_info *ep_get_info(ENGINE_HANDLE *h) {
    return &ep(h)->info;
}

static ENGINE_ERROR_CODE ep_initialize(ENGINE_HANDLE *h, const char *config) {
    char *name = NULL;
    bool slow = false;
    bool probe = false;
    if (config != NULL) {
        struct config_item items[] = {
            {.key = "name", .datatype = DT_STRING, .value.dt_string = &name},
            {.key = "slow", .datatype = DT_BOOL, .value.dt_bool = &slow},
            {.key = "probe_extensions", .datatype = DT_BOOL, .value.dt_bool = &probe},
            {.key = NULL},
        };
        if (ep(h)->server->core->parse_config(config, items, stderr) != 0) {
            free(name);
            return ENGINE_EINVAL;
        }
    }
    free(name);
    if (slow) {
        slow_init_wait();
    }
    if (probe) {
        SERVER_EXTENSION_API *ext = ep(h)->server->extension;
        EXTENSION_LOGGER_DESCRIPTOR *logger = ext->get_extension(EXTENSION_LOGGER);
        if (logger == NULL || logger->log == NULL) {
            return ENGINE_FAILED;
        }
        logger->log(EXTENSION_LOG_WARNING, NULL, "ep stub: probing extensions");
        if (ext->register_extension(EXTENSION_DAEMON, &probe_daemon)) {
            return ENGINE_FAILED;
        }
    }
    return ENGINE_SUCCESS;
}

static void ep_destroy(ENGINE_HANDLE *h, const bool force) {
    (void)force;
    free(ep(h));
    pthread_mutex_lock(&slow_lock);
    destroyed++;
    pthread_cond_broadcast(&slow_cond); /* for ep_stub_await */
    pthread_mutex_unlock(&slow_lock);
}

static ENGINE_ERROR_CODE ep_allocate(ENGINE_HANDLE *h, const void *cookie, item **it,
                                     const void *key, const size_t nkey, const size_t nbytes,
                                     const int flags, const rel_time_t exptime) {
    (void)h, (void)cookie, (void)it, (void)key, (void)nkey, (void)nbytes, (void)flags;
    (void)exptime;
    return ENGINE_ENOTSUP;
}

static ENGINE_ERROR_CODE ep_remove(ENGINE_HANDLE *h, const void *cookie, const void *key,
                                   const size_t nkey, mcb_remove_cas_t cas, uint16_t vbucket) {
    (void)h, (void)cookie, (void)key, (void)nkey, (void)cas, (void)vbucket;
    return ENGINE_ENOTSUP;
}

static void ep_release(ENGINE_HANDLE *h, const void *cookie, item *it) {
    (void)h, (void)cookie, (void)it;
}

static ENGINE_ERROR_CODE ep_get(ENGINE_HANDLE *h, const void *cookie, item **it,
                                const void *key, const int nkey, uint16_t vbucket) {
    (void)h, (void)cookie, (void)it, (void)key, (void)nkey, (void)vbucket;
    return ENGINE_ENOTSUP;
}

static ENGINE_ERROR_CODE ep_store(ENGINE_HANDLE *h, const void *cookie, item *it, uint64_t *cas,
                                  ENGINE_STORE_OPERATION op, uint16_t vbucket) {
    (void)h, (void)cookie, (void)it, (void)cas, (void)op, (void)vbucket;
    return ENGINE_ENOTSUP;
}

static ENGINE_ERROR_CODE ep_arithmetic(ENGINE_HANDLE *h, const void *cookie, const void *key,
                                       const int nkey, const bool increment, const bool create,
                                       const uint64_t delta, const uint64_t initial,
                                       const rel_time_t exptime, uint64_t *cas,
                                       uint64_t *result, uint16_t vbucket) {
    (void)h, (void)cookie, (void)key, (void)nkey, (void)increment, (void)create, (void)delta;
    (void)initial, (void)exptime, (void)cas, (void)result, (void)vbucket;
    return ENGINE_ENOTSUP;
}

static ENGINE_ERROR_CODE ep_flush(ENGINE_HANDLE *h, const void *cookie, time_t when) {
    (void)h, (void)cookie, (void)when;
    return ENGINE_ENOTSUP;
}

static ENGINE_ERROR_CODE ep_get_stats(ENGINE_HANDLE *h, const void *cookie, const char *stat_key,
                                      int nkey, ADD_STAT add_stat) {
    (void)h, (void)stat_key;
    if (nkey == 0 && add_stat != NULL) {
        add_stat("engine", 6, "ep_stub", 7, cookie);
        return ENGINE_SUCCESS;
    }
    return ENGINE_KEY_ENOENT;
}

static void ep_reset_stats(ENGINE_HANDLE *h, const void *cookie) {
    (void)h, (void)cookie;
}

static void *ep_get_stats_struct(ENGINE_HANDLE *h, const void *cookie) {
    (void)cookie;
    return ep(h)->stats;
}

static ENGINE_ERROR_CODE ep_aggregate_stats(ENGINE_HANDLE *h, const void *cookie,
                                            void (*callback)(void *, void *), void *stats) {
    (void)cookie;
    if (callback == NULL) {
        return ENGINE_EINVAL;
    }
    callback(ep(h)->stats, stats);
    return ENGINE_SUCCESS;
}

static bool is_ep_opcode(uint8_t opcode) {
    switch (opcode) {
    case 0x83: case 0x93: case 0x94: case 0x95: case 0xa0:
    case 0xa1: case 0xa2: case 0xa3: case 0xa8: case 0xa9:
        return true;
    default:
        return false;
    }
}

static ENGINE_ERROR_CODE ep_unknown_command(ENGINE_HANDLE *h, const void *cookie,
                                            protocol_binary_request_header *request,
                                            ADD_RESPONSE response) {
    (void)h;
    if (request == NULL || response == NULL || !is_ep_opcode(request->request.opcode)) {
        return ENGINE_ENOTSUP;
    }
    const unsigned char *b = request->bytes;
    uint16_t keylen = (uint16_t)((b[2] << 8) | b[3]);
    uint8_t extlen = b[4];
    uint32_t bodylen = ((uint32_t)b[8] << 24) | ((uint32_t)b[9] << 16) | ((uint32_t)b[10] << 8) |
                       b[11];
    if ((uint32_t)extlen + keylen > bodylen) {
        return ENGINE_EINVAL;
    }
    const char *key = (const char *)request + sizeof(*request) + extlen;
    const char *value = key + keylen;
    size_t nvalue = bodylen - extlen - keylen;
    if (nvalue == 4 && memcmp(value, "fail", 4) == 0) {
        return ENGINE_KEY_ENOENT;
    }
    return response(key, keylen, NULL, 0, NULL, 0, PROTOCOL_BINARY_RAW_BYTES,
                    PROTOCOL_BINARY_RESPONSE_SUCCESS, 0, cookie)
               ? ENGINE_SUCCESS
               : ENGINE_FAILED;
}

static ENGINE_ERROR_CODE ep_tap_notify(ENGINE_HANDLE *h, const void *cookie,
                                       void *engine_specific, uint16_t nengine, uint8_t ttl,
                                       uint16_t tap_flags, tap_event_t tap_event,
                                       uint32_t tap_seqno, const void *key, size_t nkey,
                                       uint32_t flags, uint32_t exptime, uint64_t cas,
                                       const void *data, size_t ndata, uint16_t vbucket) {
    (void)h, (void)cookie, (void)engine_specific, (void)nengine, (void)ttl, (void)tap_flags;
    (void)tap_event, (void)tap_seqno, (void)key, (void)nkey, (void)flags, (void)exptime;
    (void)cas, (void)data, (void)ndata, (void)vbucket;
    return ENGINE_ENOTSUP;
}

static TAP_ITERATOR ep_get_tap_iterator(ENGINE_HANDLE *h, const void *cookie, const void *client,
                                        size_t nclient, uint32_t flags, const void *userdata,
                                        size_t nuserdata) {
    (void)h, (void)cookie, (void)client, (void)nclient, (void)flags, (void)userdata;
    (void)nuserdata;
    return NULL;
}

static void ep_item_set_cas(ENGINE_HANDLE *h, const void *cookie, item *it, uint64_t cas) {
    (void)h, (void)cookie, (void)it, (void)cas;
}

static bool ep_get_item_info(ENGINE_HANDLE *h, const void *cookie, const item *it,
                             item_info *info) {
    (void)h, (void)cookie, (void)it, (void)info;
    return false;
}

static size_t ep_errinfo(ENGINE_HANDLE *h, const void *cookie, char *buffer, size_t buffsz) {
    (void)h, (void)cookie, (void)buffer, (void)buffsz;
    return 0;
}

EP_EXPORT ENGINE_ERROR_CODE create_instance(uint64_t interface, GET_SERVER_API get_server_api,
                                            ENGINE_HANDLE **handle) {
    if (interface != ENGINE_INTERFACE_VERSION) {
        return ENGINE_ENOTSUP;
    }
    if (get_server_api == NULL || handle == NULL || get_server_api() == NULL) {
        return ENGINE_EINVAL;
    }
    ep_engine *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return ENGINE_ENOMEM;
    }
    e->server = get_server_api();
    e->info.description = "ep-engine stub";
    e->info.num_features = 0;
    e->v1.interface.interface = ENGINE_INTERFACE_VERSION;
    e->v1.get_info = ep_get_info;
    e->v1.initialize = ep_initialize;
    e->v1.destroy = ep_destroy;
    e->v1.allocate = ep_allocate;
    e->v1.remove = ep_remove;
    e->v1.release = ep_release;
    e->v1.get = ep_get;
    e->v1.store = ep_store;
    e->v1.arithmetic = ep_arithmetic;
    e->v1.flush = ep_flush;
    e->v1.get_stats = ep_get_stats;
    e->v1.reset_stats = ep_reset_stats;
    e->v1.get_stats_struct = ep_get_stats_struct;
    e->v1.aggregate_stats = ep_aggregate_stats;
    e->v1.unknown_command = ep_unknown_command;
    e->v1.tap_notify = ep_tap_notify;
    e->v1.get_tap_iterator = ep_get_tap_iterator;
    e->v1.item_set_cas = ep_item_set_cas;
    e->v1.get_item_info = ep_get_item_info;
    e->v1.errinfo = ep_errinfo;
    /* No get_engine_vb_map (left NULL, as an engine without one). */
    *handle = &e->v1.interface;
    return ENGINE_SUCCESS;
}
