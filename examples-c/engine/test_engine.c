/*
 * test_engine.c: a small storage engine (libtest_engine.so) for exercising hosts and the
 * bucket engine through the engine interface v1.
 *
 * Items carry key, value, flags, exptime and CAS, are reference counted (allocate/get hand out
 * a reference the caller gives back with release) and live in one hash table behind one lock.
 * It implements every ENGINE_STORE_OPERATION, remove (with the CAS check), arithmetic, flush
 * (now or at a time), stats, a TAP iterator over a snapshot of the items, tap_notify, and a few
 * extra opcodes through unknown_command:
 *
 *   0xe0 ECHO   answers SUCCESS with the request's extras, key and value, and CAS 0xabc
 *   0xe1 ASYNC  returns EWOULDBLOCK, reserves the cookie, and completes from another thread
 *               through notify_io_complete (a value of "wait" first waits for GATE); the
 *               retried call answers SUCCESS "async done"
 *   0xe2 GATE   releases every ASYNC "wait"
 *
 * A get, allocate, store, remove or arithmetic on a key that starts with "park:" is parked the
 * same way, once: EWOULDBLOCK, then a notification, and the retried call does the work.
 *
 * Anything else gets ENGINE_ENOTSUP (the host answers "unknown command"). Stat "async_pending"
 * counts the ASYNC calls answered EWOULDBLOCK and not yet retried, so a test can wait for a
 * connection to be parked. It registers for ON_DISCONNECT and counts disconnects (stat
 * "disconnects"), dropping that connection's TAP stream and pending ASYNC state. Configuration (parsed with the host's parse_config):
 * cache_size (size), name (string), verbose (bool: log the settings at initialize and each
 * destroy, with its force flag), config_file; unknown keys fail initialize with EINVAL. Values are raw bytes: unlike memcached, no trailing CRLF is expected.
 */
#define _POSIX_C_SOURCE 200809L
#include "engine_abi.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TE_EXPORT __attribute__((visibility("default")))
#define TE_BUCKETS 4096
#define TE_MAX_KEY 250

#define TE_OPCODE_ECHO 0xe0
#define TE_OPCODE_ASYNC 0xe1
#define TE_OPCODE_GATE 0xe2

typedef struct te_item {
    struct te_item *next; /* hash chain */
    uint64_t cas;
    rel_time_t exptime;
    rel_time_t time; /* when allocated */
    uint32_t flags;
    uint32_t nbytes;
    uint16_t nkey;
    int refcount; /* references held by callers and, while linked, the table */
    bool linked;
    char data[]; /* key, then value */
} te_item;

typedef struct te_stats {
    uint64_t cmd_get;
    uint64_t get_hits;
    uint64_t get_misses;
    uint64_t cmd_set;
    uint64_t total_items;
    uint64_t curr_items;
    uint64_t bytes;
    uint64_t disconnects;
    uint64_t tap_connections;
} te_stats;

typedef struct te_tap {
    const void *cookie;
    te_item **items;
    size_t n;
    size_t pos;
    struct te_tap *next;
} te_tap;

struct te_engine;

typedef struct te_async {
    pthread_t thread;
    const void *cookie;
    struct te_engine *engine;
    bool wait_for_gate;
    struct te_async *next;
} te_async;

typedef struct te_engine {
    ENGINE_HANDLE_V1 v1; /* first: the handle the host sees */
    SERVER_HANDLE_V1 *server;
    pthread_mutex_t lock;
    pthread_cond_t gate_cond;
    bool gate_open;
    te_item *table[TE_BUCKETS];
    uint64_t next_cas;
    rel_time_t oldest_live; /* flush at this time (0: none) */
    size_t cache_size;
    char *name;
    bool verbose;
    te_stats stats;
    te_tap *taps;
    te_async *asyncs;
    char errinfo[128];
    struct {
        engine_info info;
        feature_info more[1];
    } info;
} te_engine;

static te_engine *te(ENGINE_HANDLE *h) {
    return (te_engine *)h;
}

static ENGINE_ERROR_CODE te_park(te_engine *e, const void *cookie, bool wait);

/* A call on a key that starts with "park:" is parked once (te_park): its retry does the work. */
static ENGINE_ERROR_CODE te_park_key(te_engine *e, const void *cookie, const void *key,
                                     size_t nkey) {
    if (nkey < 5 || memcmp(key, "park:", 5) != 0) {
        return ENGINE_SUCCESS;
    }
    return te_park(e, cookie, false);
}

static EXTENSION_LOGGER_DESCRIPTOR *te_logger(te_engine *e) {
    return e->server->extension->get_extension(EXTENSION_LOGGER);
}

static uint32_t te_hash(const void *key, size_t nkey) {
    const unsigned char *p = key;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < nkey; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

static const char *item_key(const te_item *it) {
    return it->data;
}

static char *item_value(te_item *it) {
    return it->data + it->nkey;
}

static te_item *item_new(te_engine *e, const void *key, size_t nkey, size_t nbytes,
                         uint32_t flags, rel_time_t exptime) {
    te_item *it = malloc(sizeof(*it) + nkey + nbytes);
    if (it == NULL) {
        return NULL;
    }
    memset(it, 0, sizeof(*it));
    memcpy(it->data, key, nkey);
    it->nkey = (uint16_t)nkey;
    it->nbytes = (uint32_t)nbytes;
    it->flags = flags;
    it->exptime = exptime;
    it->time = e->server->core->get_current_time();
    it->refcount = 1;
    return it;
}

/* Lock held. Drops one reference; frees an unlinked item on its last. */
static void item_unref(te_item *it) {
    if (--it->refcount == 0 && !it->linked) {
        free(it);
    }
}

/* Lock held. */
static void item_unlink(te_engine *e, te_item *it) {
    te_item **pp = &e->table[te_hash(item_key(it), it->nkey) % TE_BUCKETS];
    while (*pp != NULL && *pp != it) {
        pp = &(*pp)->next;
    }
    if (*pp == it) {
        *pp = it->next;
        it->next = NULL;
        it->linked = false;
        e->stats.curr_items--;
        e->stats.bytes -= it->nkey + it->nbytes;
        item_unref(it);
    }
}

/* Lock held. Links `it` (taking a table reference) in place of `old` (may be NULL). */
static uint64_t item_link(te_engine *e, te_item *it, te_item *old) {
    if (old != NULL) {
        item_unlink(e, old);
    }
    te_item **head = &e->table[te_hash(item_key(it), it->nkey) % TE_BUCKETS];
    it->next = *head;
    *head = it;
    it->linked = true;
    it->refcount++;
    it->cas = ++e->next_cas;
    e->stats.curr_items++;
    e->stats.total_items++;
    e->stats.bytes += it->nkey + it->nbytes;
    return it->cas;
}

/* Lock held. The live item for key, or NULL (expired and flushed items are unlinked here). */
static te_item *item_find(te_engine *e, const void *key, size_t nkey) {
    rel_time_t now = e->server->core->get_current_time();
    te_item *it = e->table[te_hash(key, nkey) % TE_BUCKETS];
    while (it != NULL && (it->nkey != nkey || memcmp(item_key(it), key, nkey) != 0)) {
        it = it->next;
    }
    if (it == NULL) {
        return NULL;
    }
    bool expired = it->exptime != 0 && it->exptime <= now;
    bool flushed = e->oldest_live != 0 && e->oldest_live <= now && it->time <= e->oldest_live;
    if (expired || flushed) {
        item_unlink(e, it);
        return NULL;
    }
    return it;
}

/* ------------------------------------------------------------------------------------------
 * Lifecycle
 */
static const engine_info *te_get_info(ENGINE_HANDLE *h) {
    return &te(h)->info.info;
}

static void te_tap_free(te_engine *e, te_tap *t) {
    for (size_t i = t->pos; i < t->n; i++) {
        item_unref(t->items[i]);
    }
    free(t->items);
    free(t);
    e->stats.tap_connections--;
}

/* Lock held. Unhooks and frees the TAP stream of cookie, if any. */
static void te_tap_drop(te_engine *e, const void *cookie) {
    for (te_tap **pp = &e->taps; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->cookie == cookie) {
            te_tap *t = *pp;
            *pp = t->next;
            te_tap_free(e, t);
            return;
        }
    }
}

static void te_on_disconnect(const void *cookie, ENGINE_EVENT_TYPE type, const void *event_data,
                             const void *cb_data) {
    (void)event_data;
    te_engine *e = (te_engine *)cb_data;
    if (type != ON_DISCONNECT) {
        return;
    }
    pthread_mutex_lock(&e->lock);
    e->stats.disconnects++;
    te_tap_drop(e, cookie);
    pthread_mutex_unlock(&e->lock);
    /* A pending ASYNC stays on e->asyncs (destroy joins its thread); forget the cookie's
     * pointer to it, the connection is gone. */
    if (cookie != NULL && e->server->cookie->get_engine_specific(cookie) != NULL) {
        e->server->cookie->store_engine_specific(cookie, NULL);
    }
}

static ENGINE_ERROR_CODE te_initialize(ENGINE_HANDLE *h, const char *config) {
    te_engine *e = te(h);
    char *name = NULL;
    size_t cache_size = 64 * 1024 * 1024;
    bool verbose = false;
    if (config != NULL) {
        struct config_item items[] = {
            {.key = "cache_size", .datatype = DT_SIZE, .value.dt_size = &cache_size},
            {.key = "name", .datatype = DT_STRING, .value.dt_string = &name},
            {.key = "verbose", .datatype = DT_BOOL, .value.dt_bool = &verbose},
            {.key = "config_file", .datatype = DT_CONFIGFILE},
            {.key = NULL},
        };
        int rc = e->server->core->parse_config(config, items, stderr);
        if (rc != 0) {
            free(name);
            te_logger(e)->log(EXTENSION_LOG_WARNING, NULL,
                              "test engine: bad configuration \"%s\" (parse_config: %d)", config,
                              rc);
            snprintf(e->errinfo, sizeof(e->errinfo), "bad configuration");
            return ENGINE_EINVAL;
        }
    }
    e->name = name;
    e->cache_size = cache_size;
    e->verbose = verbose;
    e->server->callback->register_callback(h, ON_DISCONNECT, te_on_disconnect, e);
    if (verbose) {
        te_logger(e)->log(EXTENSION_LOG_INFO, NULL, "test engine %s: cache_size=%zu",
                          name != NULL ? name : "(unnamed)", cache_size);
    }
    return ENGINE_SUCCESS;
}

static void te_destroy(ENGINE_HANDLE *h, const bool force) {
    te_engine *e = te(h);
    if (e->verbose) {
        te_logger(e)->log(EXTENSION_LOG_INFO, NULL, "test engine %s: destroyed (force=%s)",
                          e->name != NULL ? e->name : "(unnamed)", force ? "true" : "false");
    }
    pthread_mutex_lock(&e->lock);
    e->gate_open = true; /* nothing may wait past destroy */
    pthread_cond_broadcast(&e->gate_cond);
    te_async *asyncs = e->asyncs;
    e->asyncs = NULL;
    pthread_mutex_unlock(&e->lock);
    while (asyncs != NULL) {
        te_async *next = asyncs->next;
        pthread_join(asyncs->thread, NULL);
        free(asyncs);
        asyncs = next;
    }
    pthread_mutex_lock(&e->lock);
    while (e->taps != NULL) {
        te_tap *t = e->taps;
        e->taps = t->next;
        te_tap_free(e, t);
    }
    for (size_t i = 0; i < TE_BUCKETS; i++) {
        while (e->table[i] != NULL) {
            item_unlink(e, e->table[i]);
        }
    }
    pthread_mutex_unlock(&e->lock);
    pthread_mutex_destroy(&e->lock);
    pthread_cond_destroy(&e->gate_cond);
    free(e->name);
    free(e);
}

/* ------------------------------------------------------------------------------------------
 * Items
 */
static ENGINE_ERROR_CODE te_allocate(ENGINE_HANDLE *h, const void *cookie, item **out,
                                     const void *key, const size_t nkey, const size_t nbytes,
                                     const int flags, const rel_time_t exptime) {
    te_engine *e = te(h);
    if (out == NULL || key == NULL || nkey == 0 || nkey > TE_MAX_KEY) {
        return ENGINE_EINVAL;
    }
    if (nbytes > UINT32_MAX || nkey + nbytes > e->cache_size) {
        return ENGINE_E2BIG;
    }
    ENGINE_ERROR_CODE parked = te_park_key(e, cookie, key, nkey);
    if (parked != ENGINE_SUCCESS) {
        return parked;
    }
    pthread_mutex_lock(&e->lock);
    te_item *it = item_new(e, key, nkey, nbytes, (uint32_t)flags, exptime);
    pthread_mutex_unlock(&e->lock);
    if (it == NULL) {
        return ENGINE_ENOMEM;
    }
    *out = it;
    return ENGINE_SUCCESS;
}

static void te_release(ENGINE_HANDLE *h, const void *cookie, item *item) {
    (void)cookie;
    te_engine *e = te(h);
    if (item == NULL) {
        return;
    }
    pthread_mutex_lock(&e->lock);
    item_unref(item);
    pthread_mutex_unlock(&e->lock);
}

static ENGINE_ERROR_CODE te_get(ENGINE_HANDLE *h, const void *cookie, item **out,
                                const void *key, const int nkey, uint16_t vbucket) {
    (void)vbucket;
    te_engine *e = te(h);
    if (out == NULL || key == NULL || nkey <= 0 || nkey > TE_MAX_KEY) {
        return ENGINE_EINVAL;
    }
    ENGINE_ERROR_CODE parked = te_park_key(e, cookie, key, (size_t)nkey);
    if (parked != ENGINE_SUCCESS) {
        return parked;
    }
    pthread_mutex_lock(&e->lock);
    e->stats.cmd_get++;
    te_item *it = item_find(e, key, (size_t)nkey);
    if (it != NULL) {
        it->refcount++;
        e->stats.get_hits++;
    } else {
        e->stats.get_misses++;
    }
    pthread_mutex_unlock(&e->lock);
    *out = it;
    return it != NULL ? ENGINE_SUCCESS : ENGINE_KEY_ENOENT;
}

/* Lock held. A new item holding old's value with `it`'s appended or prepended. */
static te_item *item_concat(te_engine *e, te_item *old, te_item *it, bool append) {
    te_item *n = item_new(e, item_key(old), old->nkey, (size_t)old->nbytes + it->nbytes,
                          old->flags, old->exptime);
    if (n == NULL) {
        return NULL;
    }
    te_item *first = append ? old : it;
    te_item *second = append ? it : old;
    memcpy(item_value(n), item_value(first), first->nbytes);
    memcpy(item_value(n) + first->nbytes, item_value(second), second->nbytes);
    return n;
}

static ENGINE_ERROR_CODE te_store(ENGINE_HANDLE *h, const void *cookie, item *item,
                                  uint64_t *cas, ENGINE_STORE_OPERATION operation,
                                  uint16_t vbucket) {
    (void)vbucket;
    te_engine *e = te(h);
    te_item *it = item;
    if (it == NULL || it->linked) {
        return ENGINE_EINVAL;
    }
    ENGINE_ERROR_CODE rv = te_park_key(e, cookie, item_key(it), it->nkey);
    if (rv != ENGINE_SUCCESS) {
        return rv;
    }
    pthread_mutex_lock(&e->lock);
    e->stats.cmd_set++;
    te_item *old = item_find(e, item_key(it), it->nkey);
    te_item *to_link = it;
    switch (operation) {
    case OPERATION_ADD:
        if (old != NULL) {
            rv = ENGINE_NOT_STORED;
        }
        break;
    case OPERATION_SET:
        break;
    case OPERATION_REPLACE:
        if (old == NULL) {
            rv = ENGINE_NOT_STORED;
        }
        break;
    case OPERATION_CAS:
        if (old == NULL) {
            rv = ENGINE_KEY_ENOENT;
        } else if (it->cas != old->cas) {
            rv = ENGINE_KEY_EEXISTS;
        }
        break;
    case OPERATION_APPEND:
    case OPERATION_PREPEND:
        if (old == NULL) {
            rv = ENGINE_NOT_STORED;
        } else if (it->cas != 0 && it->cas != old->cas) {
            rv = ENGINE_KEY_EEXISTS;
        } else {
            to_link = item_concat(e, old, it, operation == OPERATION_APPEND);
            if (to_link == NULL) {
                rv = ENGINE_ENOMEM;
            }
        }
        break;
    default:
        rv = ENGINE_EINVAL;
    }
    if (rv == ENGINE_SUCCESS && e->stats.bytes + to_link->nkey + to_link->nbytes -
                                        (old != NULL ? old->nkey + old->nbytes : 0) >
                                    e->cache_size) {
        rv = ENGINE_ENOMEM;
    }
    if (rv == ENGINE_SUCCESS) {
        uint64_t newcas = item_link(e, to_link, old);
        if (cas != NULL) {
            *cas = newcas;
        }
    }
    if (to_link != it) {
        item_unref(to_link); /* the table holds it now, or it is dropped */
    }
    pthread_mutex_unlock(&e->lock);
    return rv;
}

static ENGINE_ERROR_CODE te_remove_impl(te_engine *e, const void *key, size_t nkey,
                                        uint64_t expected_cas) {
    if (key == NULL || nkey == 0 || nkey > TE_MAX_KEY) {
        return ENGINE_EINVAL;
    }
    ENGINE_ERROR_CODE rv = ENGINE_SUCCESS;
    pthread_mutex_lock(&e->lock);
    te_item *it = item_find(e, key, nkey);
    if (it == NULL) {
        rv = ENGINE_KEY_ENOENT;
    } else if (expected_cas != 0 && expected_cas != it->cas) {
        rv = ENGINE_KEY_EEXISTS;
    } else {
        item_unlink(e, it);
    }
    pthread_mutex_unlock(&e->lock);
    return rv;
}

static ENGINE_ERROR_CODE te_remove(ENGINE_HANDLE *h, const void *cookie, const void *key,
                                   const size_t nkey, mcb_remove_cas_t cas, uint16_t vbucket) {
    (void)vbucket;
    ENGINE_ERROR_CODE parked = key != NULL ? te_park_key(te(h), cookie, key, nkey) : ENGINE_SUCCESS;
    if (parked != ENGINE_SUCCESS) {
        return parked;
    }
#ifdef MCB_ENGINE_PU
    return te_remove_impl(te(h), key, nkey, cas);
#else
    return te_remove_impl(te(h), key, nkey, cas != NULL ? *cas : 0);
#endif
}

/* Parses an unsigned decimal value (a trailing "\r\n" is allowed); false if not a number. */
static bool parse_u64(const char *p, size_t n, uint64_t *out) {
    if (n >= 2 && p[n - 2] == '\r' && p[n - 1] == '\n') {
        n -= 2;
    }
    if (n == 0 || n > 20) {
        return false;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') {
            return false;
        }
        uint64_t d = (uint64_t)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static ENGINE_ERROR_CODE te_arithmetic(ENGINE_HANDLE *h, const void *cookie, const void *key,
                                       const int nkey, const bool increment, const bool create,
                                       const uint64_t delta, const uint64_t initial,
                                       const rel_time_t exptime, uint64_t *cas,
                                       uint64_t *result, uint16_t vbucket) {
    (void)vbucket;
    te_engine *e = te(h);
    if (key == NULL || nkey <= 0 || nkey > TE_MAX_KEY || cas == NULL || result == NULL) {
        return ENGINE_EINVAL;
    }
    ENGINE_ERROR_CODE rv = te_park_key(e, cookie, key, (size_t)nkey);
    if (rv != ENGINE_SUCCESS) {
        return rv;
    }
    pthread_mutex_lock(&e->lock);
    te_item *old = item_find(e, key, (size_t)nkey);
    uint64_t value = 0;
    uint32_t flags = 0;
    /* The client's expiration time, as memcached passes it: the engine converts it. */
    rel_time_t exp = e->server->core->realtime((time_t)exptime);
    if (old == NULL) {
        if (!create) {
            rv = ENGINE_KEY_ENOENT;
        } else {
            value = initial;
        }
    } else if (!parse_u64(item_value(old), old->nbytes, &value)) {
        rv = ENGINE_EINVAL;
    } else {
        flags = old->flags;
        exp = old->exptime;
        if (increment) {
            value += delta; /* wraps at 2^64, like memcached */
        } else {
            value = delta > value ? 0 : value - delta;
        }
    }
    if (rv == ENGINE_SUCCESS) {
        char buf[24];
        int n = snprintf(buf, sizeof(buf), "%" PRIu64, value);
        te_item *it = item_new(e, key, (size_t)nkey, (size_t)n, flags, exp);
        if (it == NULL) {
            rv = ENGINE_ENOMEM;
        } else {
            memcpy(item_value(it), buf, (size_t)n);
            *cas = item_link(e, it, old);
            *result = value;
            item_unref(it);
        }
    }
    pthread_mutex_unlock(&e->lock);
    return rv;
}

static ENGINE_ERROR_CODE te_flush(ENGINE_HANDLE *h, const void *cookie, time_t when) {
    (void)cookie;
    te_engine *e = te(h);
    pthread_mutex_lock(&e->lock);
    if (when == 0) {
        for (size_t i = 0; i < TE_BUCKETS; i++) {
            while (e->table[i] != NULL) {
                item_unlink(e, e->table[i]);
            }
        }
        e->oldest_live = 0;
    } else {
        e->oldest_live = e->server->core->realtime(when) - 1;
    }
    pthread_mutex_unlock(&e->lock);
    return ENGINE_SUCCESS;
}

static void te_item_set_cas(ENGINE_HANDLE *h, const void *cookie, item *item, uint64_t cas) {
    (void)cookie;
    te_engine *e = te(h);
    if (item == NULL) {
        return;
    }
    pthread_mutex_lock(&e->lock);
    ((te_item *)item)->cas = cas;
    pthread_mutex_unlock(&e->lock);
}

static bool te_get_item_info(ENGINE_HANDLE *h, const void *cookie, const item *item,
                             item_info *info) {
    (void)cookie;
    te_engine *e = te(h);
    const te_item *it = item;
    if (it == NULL || info == NULL || info->nvalue < 1) {
        return false;
    }
    pthread_mutex_lock(&e->lock);
    info->cas = it->cas;
    pthread_mutex_unlock(&e->lock);
    info->exptime = it->exptime;
    info->nbytes = it->nbytes;
    info->flags = it->flags;
    info->clsid = 0;
    info->nkey = it->nkey;
    info->nvalue = 1;
    info->key = item_key(it);
    info->value[0].iov_base = (char *)it->data + it->nkey;
    info->value[0].iov_len = it->nbytes;
    return true;
}

/* ------------------------------------------------------------------------------------------
 * Stats
 */
static void emit(ADD_STAT add_stat, const void *cookie, const char *key, const char *fmt,
                 uint64_t v) {
    char buf[32];
    int n = snprintf(buf, sizeof(buf), fmt, v);
    add_stat(key, (uint16_t)strlen(key), buf, (uint32_t)n, cookie);
}

static ENGINE_ERROR_CODE te_get_stats(ENGINE_HANDLE *h, const void *cookie, const char *stat_key,
                                      int nkey, ADD_STAT add_stat) {
    te_engine *e = te(h);
    if (add_stat == NULL) {
        return ENGINE_EINVAL;
    }
    pthread_mutex_lock(&e->lock);
    te_stats s = e->stats;
    size_t cache_size = e->cache_size;
    uint64_t async_pending = 0;
    for (const te_async *a = e->asyncs; a != NULL; a = a->next) {
        async_pending++;
    }
    pthread_mutex_unlock(&e->lock);
    if (stat_key == NULL || nkey == 0) {
        const char *name = e->name != NULL ? e->name : "";
        add_stat("engine", 6, "test", 4, cookie);
        add_stat("engine_name", 11, name, (uint32_t)strlen(name), cookie);
        emit(add_stat, cookie, "curr_items", "%" PRIu64, s.curr_items);
        emit(add_stat, cookie, "total_items", "%" PRIu64, s.total_items);
        emit(add_stat, cookie, "bytes", "%" PRIu64, s.bytes);
        emit(add_stat, cookie, "cmd_get", "%" PRIu64, s.cmd_get);
        emit(add_stat, cookie, "get_hits", "%" PRIu64, s.get_hits);
        emit(add_stat, cookie, "get_misses", "%" PRIu64, s.get_misses);
        emit(add_stat, cookie, "cmd_set", "%" PRIu64, s.cmd_set);
        emit(add_stat, cookie, "disconnects", "%" PRIu64, s.disconnects);
        emit(add_stat, cookie, "async_pending", "%" PRIu64, async_pending);
        emit(add_stat, cookie, "cache_size", "%" PRIu64, cache_size);
        return ENGINE_SUCCESS;
    }
    if (nkey == 3 && memcmp(stat_key, "tap", 3) == 0) {
        emit(add_stat, cookie, "tap_connections", "%" PRIu64, s.tap_connections);
        return ENGINE_SUCCESS;
    }
    return ENGINE_KEY_ENOENT;
}

static void te_reset_stats(ENGINE_HANDLE *h, const void *cookie) {
    (void)cookie;
    te_engine *e = te(h);
    pthread_mutex_lock(&e->lock);
    e->stats.cmd_get = e->stats.get_hits = e->stats.get_misses = 0;
    e->stats.cmd_set = e->stats.total_items = 0;
    pthread_mutex_unlock(&e->lock);
}

static void *te_get_stats_struct(ENGINE_HANDLE *h, const void *cookie) {
    (void)cookie;
    return &te(h)->stats;
}

static ENGINE_ERROR_CODE te_aggregate_stats(ENGINE_HANDLE *h, const void *cookie,
                                            void (*callback)(void *src, void *dest),
                                            void *dest) {
    (void)cookie;
    te_engine *e = te(h);
    if (callback == NULL) {
        return ENGINE_EINVAL;
    }
    pthread_mutex_lock(&e->lock);
    te_stats s = e->stats;
    pthread_mutex_unlock(&e->lock);
    callback(&s, dest);
    return ENGINE_SUCCESS;
}

static size_t te_errinfo(ENGINE_HANDLE *h, const void *cookie, char *buffer, size_t buffsz) {
    (void)cookie;
    te_engine *e = te(h);
    if (buffer == NULL || buffsz == 0) {
        return 0;
    }
    pthread_mutex_lock(&e->lock);
    int n = snprintf(buffer, buffsz, "%s", e->errinfo);
    pthread_mutex_unlock(&e->lock);
    return n < 0 ? 0 : ((size_t)n < buffsz ? (size_t)n : buffsz - 1);
}

/* ------------------------------------------------------------------------------------------
 * unknown_command
 */
static void *te_async_main(void *arg) {
    te_async *a = arg;
    te_engine *e = a->engine;
    if (a->wait_for_gate) {
        pthread_mutex_lock(&e->lock);
        while (!e->gate_open) {
            pthread_cond_wait(&e->gate_cond, &e->lock);
        }
        pthread_mutex_unlock(&e->lock);
    } else {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    e->server->cookie->notify_io_complete(a->cookie, ENGINE_SUCCESS);
    e->server->cookie->release(a->cookie);
    return NULL;
}

/* Parks the call of `cookie`: EWOULDBLOCK, completed from another thread through
 * notify_io_complete (after GATE when `wait`). The call retried after that ends the parking and
 * gets SUCCESS: it goes on with its work. */
static ENGINE_ERROR_CODE te_park(te_engine *e, const void *cookie, bool wait) {
    SERVER_COOKIE_API *api = e->server->cookie;
    te_async *a = api->get_engine_specific(cookie);
    if (a != NULL) {
        /* The retried call: the wait is over. */
        pthread_mutex_lock(&e->lock);
        for (te_async **pp = &e->asyncs; *pp != NULL; pp = &(*pp)->next) {
            if (*pp == a) {
                *pp = a->next;
                break;
            }
        }
        pthread_mutex_unlock(&e->lock);
        pthread_join(a->thread, NULL);
        free(a);
        api->store_engine_specific(cookie, NULL);
        return ENGINE_SUCCESS;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return ENGINE_ENOMEM;
    }
    a->cookie = cookie;
    a->engine = e;
    a->wait_for_gate = wait;
    ENGINE_ERROR_CODE rv = api->reserve(cookie);
    if (rv != ENGINE_SUCCESS) {
        free(a);
        return rv;
    }
    api->store_engine_specific(cookie, a);
    pthread_mutex_lock(&e->lock);
    if (pthread_create(&a->thread, NULL, te_async_main, a) != 0) {
        pthread_mutex_unlock(&e->lock);
        api->store_engine_specific(cookie, NULL);
        api->release(cookie);
        free(a);
        return ENGINE_TMPFAIL;
    }
    a->next = e->asyncs;
    e->asyncs = a;
    pthread_mutex_unlock(&e->lock);
    return ENGINE_EWOULDBLOCK;
}

static ENGINE_ERROR_CODE te_do_async(te_engine *e, const void *cookie, const char *value,
                                  size_t nvalue, ADD_RESPONSE response) {
    ENGINE_ERROR_CODE rv = te_park(e, cookie, nvalue == 4 && memcmp(value, "wait", 4) == 0);
    if (rv != ENGINE_SUCCESS) {
        return rv;
    }
    const char *msg = "async done";
    return response(NULL, 0, NULL, 0, msg, (uint32_t)strlen(msg), PROTOCOL_BINARY_RAW_BYTES,
                    PROTOCOL_BINARY_RESPONSE_SUCCESS, 0, cookie)
               ? ENGINE_SUCCESS
               : ENGINE_FAILED;
}

static uint32_t be32(const void *p) {
    const unsigned char *b = p;
    return ((uint32_t)b[0] << 24) | ((uint32_t)b[1] << 16) | ((uint32_t)b[2] << 8) | b[3];
}

static uint16_t be16(const void *p) {
    const unsigned char *b = p;
    return (uint16_t)(((unsigned)b[0] << 8) | b[1]);
}

static ENGINE_ERROR_CODE te_unknown_command(ENGINE_HANDLE *h, const void *cookie,
                                            protocol_binary_request_header *request,
                                            ADD_RESPONSE response) {
    te_engine *e = te(h);
    if (request == NULL || response == NULL) {
        return ENGINE_EINVAL;
    }
    uint8_t extlen = request->request.extlen;
    uint16_t keylen = be16(&request->request.keylen);
    uint32_t bodylen = be32(&request->request.bodylen);
    if ((uint32_t)extlen + keylen > bodylen) {
        return response(NULL, 0, NULL, 0, NULL, 0, PROTOCOL_BINARY_RAW_BYTES,
                        PROTOCOL_BINARY_RESPONSE_EINVAL, 0, cookie)
                   ? ENGINE_SUCCESS
                   : ENGINE_FAILED;
    }
    const char *ext = (const char *)request + sizeof(*request);
    const char *key = ext + extlen;
    const char *value = key + keylen;
    size_t nvalue = bodylen - extlen - keylen;
    switch (request->request.opcode) {
    case TE_OPCODE_ECHO:
        return response(key, keylen, ext, extlen, value, (uint32_t)nvalue,
                        PROTOCOL_BINARY_RAW_BYTES, PROTOCOL_BINARY_RESPONSE_SUCCESS, 0xabc, cookie)
                   ? ENGINE_SUCCESS
                   : ENGINE_FAILED;
    case TE_OPCODE_ASYNC:
        return te_do_async(e, cookie, value, nvalue, response);
    case TE_OPCODE_GATE:
        pthread_mutex_lock(&e->lock);
        e->gate_open = true;
        pthread_cond_broadcast(&e->gate_cond);
        pthread_mutex_unlock(&e->lock);
        return response(NULL, 0, NULL, 0, NULL, 0, PROTOCOL_BINARY_RAW_BYTES,
                        PROTOCOL_BINARY_RESPONSE_SUCCESS, 0, cookie)
                   ? ENGINE_SUCCESS
                   : ENGINE_FAILED;
    default:
        return ENGINE_ENOTSUP;
    }
}

/* ------------------------------------------------------------------------------------------
 * TAP
 */
static tap_event_t te_tap_walk(ENGINE_HANDLE *h, const void *cookie, item **itm,
                               void **engine_specific, uint16_t *nengine_specific, uint8_t *ttl,
                               uint16_t *flags, uint32_t *seqno, uint16_t *vbucket) {
    te_engine *e = te(h);
    tap_event_t ev = TAP_DISCONNECT;
    pthread_mutex_lock(&e->lock);
    te_tap *t = e->taps;
    while (t != NULL && t->cookie != cookie) {
        t = t->next;
    }
    if (t != NULL && t->pos < t->n) {
        *itm = t->items[t->pos++]; /* the stream's reference passes to the caller */
        *engine_specific = NULL;
        *nengine_specific = 0;
        *ttl = (uint8_t)-1;
        *flags = 0;
        *seqno = (uint32_t)t->pos;
        *vbucket = 0;
        ev = TAP_MUTATION;
    } else if (t != NULL) {
        te_tap_drop(e, cookie);
    }
    pthread_mutex_unlock(&e->lock);
    return ev;
}

static TAP_ITERATOR te_get_tap_iterator(ENGINE_HANDLE *h, const void *cookie, const void *client,
                                        size_t nclient, uint32_t flags, const void *userdata,
                                        size_t nuserdata) {
    (void)client;
    (void)nclient;
    (void)flags;
    (void)userdata;
    (void)nuserdata;
    te_engine *e = te(h);
    te_tap *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return NULL;
    }
    t->cookie = cookie;
    pthread_mutex_lock(&e->lock);
    te_tap_drop(e, cookie); /* one stream per connection */
    t->items = calloc(e->stats.curr_items + 1, sizeof(*t->items));
    if (t->items == NULL) {
        pthread_mutex_unlock(&e->lock);
        free(t);
        return NULL;
    }
    for (size_t i = 0; i < TE_BUCKETS; i++) {
        for (te_item *it = e->table[i]; it != NULL; it = it->next) {
            it->refcount++;
            t->items[t->n++] = it;
        }
    }
    t->next = e->taps;
    e->taps = t;
    e->stats.tap_connections++;
    pthread_mutex_unlock(&e->lock);
    return te_tap_walk;
}

static ENGINE_ERROR_CODE te_tap_notify(ENGINE_HANDLE *h, const void *cookie,
                                       void *engine_specific, uint16_t nengine, uint8_t ttl,
                                       uint16_t tap_flags, tap_event_t tap_event,
                                       uint32_t tap_seqno, const void *key, size_t nkey,
                                       uint32_t flags, uint32_t exptime, uint64_t cas,
                                       const void *data, size_t ndata, uint16_t vbucket) {
    (void)engine_specific;
    (void)nengine;
    (void)ttl;
    (void)tap_flags;
    (void)tap_seqno;
    (void)cas;
    te_engine *e = te(h);
    switch (tap_event) {
    case TAP_MUTATION: {
        item *it = NULL;
        ENGINE_ERROR_CODE rv =
            te_allocate(h, cookie, &it, key, nkey, ndata, (int)flags, (rel_time_t)exptime);
        if (rv != ENGINE_SUCCESS) {
            return rv;
        }
        if (ndata > 0) {
            memcpy(item_value(it), data, ndata);
        }
        uint64_t newcas = 0;
        rv = te_store(h, cookie, it, &newcas, OPERATION_SET, vbucket);
        te_release(h, cookie, it);
        return rv;
    }
    case TAP_DELETION:
        return te_remove_impl(e, key, nkey, 0);
    case TAP_FLUSH:
        return te_flush(h, cookie, 0);
    default:
        return ENGINE_SUCCESS;
    }
}

#ifndef MCB_ENGINE_PU
static ENGINE_ERROR_CODE te_get_engine_vb_map(ENGINE_HANDLE *h, const void *cookie,
                                              engine_get_vb_map_cb callback) {
    (void)h;
    if (callback == NULL) {
        return ENGINE_EINVAL;
    }
    static const char map[] = "test-vbmap";
    return callback(cookie, map, sizeof(map) - 1);
}
#endif

/* ------------------------------------------------------------------------------------------
 * Entry point
 */
TE_EXPORT ENGINE_ERROR_CODE create_instance(uint64_t interface, GET_SERVER_API get_server_api,
                                            ENGINE_HANDLE **handle) {
    if (interface != ENGINE_INTERFACE_VERSION) {
        return ENGINE_ENOTSUP;
    }
    if (get_server_api == NULL || handle == NULL) {
        return ENGINE_EINVAL;
    }
    SERVER_HANDLE_V1 *server = get_server_api();
    if (server == NULL || server->interface != 1) {
        return ENGINE_ENOTSUP;
    }
    te_engine *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return ENGINE_ENOMEM;
    }
    e->server = server;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->gate_cond, NULL);
    e->cache_size = 64 * 1024 * 1024;
    e->info.info.description = "Test engine v0.1";
    e->info.info.num_features = 2;
    e->info.info.features[0].feature = ENGINE_FEATURE_CAS;
    e->info.info.features[0].description = NULL;
    e->info.more[0].feature = ENGINE_FEATURE_LRU;
    e->info.more[0].description = "no LRU, just a hash table";

    e->v1.interface.interface = ENGINE_INTERFACE_VERSION;
    e->v1.get_info = te_get_info;
    e->v1.initialize = te_initialize;
    e->v1.destroy = te_destroy;
    e->v1.allocate = te_allocate;
    e->v1.remove = te_remove;
    e->v1.release = te_release;
    e->v1.get = te_get;
    e->v1.store = te_store;
    e->v1.arithmetic = te_arithmetic;
    e->v1.flush = te_flush;
    e->v1.get_stats = te_get_stats;
    e->v1.reset_stats = te_reset_stats;
    e->v1.get_stats_struct = te_get_stats_struct;
    e->v1.aggregate_stats = te_aggregate_stats;
    e->v1.unknown_command = te_unknown_command;
    e->v1.tap_notify = te_tap_notify;
    e->v1.get_tap_iterator = te_get_tap_iterator;
    e->v1.item_set_cas = te_item_set_cas;
    e->v1.get_item_info = te_get_item_info;
    e->v1.errinfo = te_errinfo;
#ifndef MCB_ENGINE_PU
    e->v1.get_engine_vb_map = te_get_engine_vb_map;
#endif
    *handle = &e->v1.interface;
    return ENGINE_SUCCESS;
}
