/*
 * mock_host.c: the mock memcached host (see mock_host.h).
 *
 * Behaviour follows memcached's engine-capable server where an engine can observe it:
 * - parse_config: `key=value` pairs separated by `;`; whitespace around keys and values is
 *   trimmed; a backslash makes the next character literal (so `\;`, `\=`, `\\`, and a kept
 *   trailing `\ `); keys up to 79 bytes, values up to 1023. Types: size (k/m/g/t suffixes,
 *   powers of 1024), ssize (v2.5.1 only), float, bool (true/on/false/off, any case), string
 *   (strdup'ed; the caller frees), configfile (reads more pairs from a file, one set per line,
 *   lines starting with '#' skipped). Returns 0, -1 on a bad value (stops at once), or 1 when
 *   an unknown key was seen (the rest is still parsed).
 * - realtime/abstime: an expiry of 0 is "never"; up to 30 days is relative to now; beyond is an
 *   absolute Unix time, and one at or before the server's start becomes 1 (already expired,
 *   but not 0, which would mean never).
 * - events: handlers run newest first for their event type (as memcached); ON_CONNECT fires when a
 *   connection opens, ON_AUTH after authentication with an auth_data_t, ON_DISCONNECT when it
 *   closes, ON_LOG_LEVEL when the log level changes.
 * - cookies: a closed connection stays alive while an engine holds a reservation on it.
 */
#define _POSIX_C_SOURCE 200809L
#include "mock_host.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define REALTIME_MAXDELTA (60 * 60 * 24 * 30)
#define MAX_KEY_LEN 80
#define MAX_VALUE_LEN 1024
#define MAX_CONFIG_FILE_DEPTH 8

/* ------------------------------------------------------------------------------------------
 * Global state
 */
static time_t process_started;
static atomic_uint clock_advanced;
static atomic_int live_connections;
static atomic_int live_stats;
static atomic_int evictions;
static atomic_int next_fd = 100;
static atomic_bool shutdown_requested;

static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER;
static char *settings_str;

/* ------------------------------------------------------------------------------------------
 * Logger extension (the default one writes to stderr)
 */
static atomic_uint log_level = EXTENSION_LOG_INFO;
static atomic_int log_lines;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast under log_lock after each line (mh_log_wait). */
static pthread_cond_t log_cond = PTHREAD_COND_INITIALIZER;
static char last_log[1024];
/* The last MH_LOG_HISTORY lines; line number n lives at n % MH_LOG_HISTORY. */
static char log_history[MH_LOG_HISTORY][1024];

static const char *stderr_logger_name(void) {
    return "mock-host stderr logger";
}

__attribute__((format(printf, 3, 4))) static void stderr_logger_log(EXTENSION_LOG_LEVEL severity,
                                                                     const void *client_cookie,
                                                                     const char *fmt, ...) {
    if ((unsigned)severity < atomic_load(&log_level)) {
        return;
    }
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) {
        line[--n] = '\0';
    }
    pthread_mutex_lock(&log_lock);
    fprintf(stderr, "[mock-host %d %p] %s\n", (int)severity, client_cookie, line);
    memcpy(last_log, line, n + 1);
    int number = atomic_load(&log_lines);
    memcpy(log_history[number % MH_LOG_HISTORY], line, n + 1);
    /* Counted under the lock, so a line's number and its slot agree. */
    atomic_fetch_add(&log_lines, 1);
    pthread_cond_broadcast(&log_cond);
    pthread_mutex_unlock(&log_lock);
}

static EXTENSION_LOGGER_DESCRIPTOR stderr_logger = {
    .get_name = stderr_logger_name,
    .log = stderr_logger_log,
};

/* Generic registry for the other extension kinds: a list per type, newest first. */
typedef struct ext_node {
    void *extension;
    struct ext_node *next;
} ext_node;

static pthread_mutex_t ext_lock = PTHREAD_MUTEX_INITIALIZER;
static EXTENSION_LOGGER_DESCRIPTOR *current_logger = &stderr_logger;
static ext_node *ext_lists[4];

static bool ext_register(extension_type_t type, void *extension) {
    if (extension == NULL || (unsigned)type > EXTENSION_BINARY_PROTOCOL) {
        return false;
    }
    pthread_mutex_lock(&ext_lock);
    if (type == EXTENSION_LOGGER) {
        current_logger = extension;
        pthread_mutex_unlock(&ext_lock);
        return true;
    }
    ext_node *node = malloc(sizeof(*node));
    if (node == NULL) {
        pthread_mutex_unlock(&ext_lock);
        return false;
    }
    node->extension = extension;
    node->next = ext_lists[type];
    ext_lists[type] = node;
    pthread_mutex_unlock(&ext_lock);
    return true;
}

static void ext_unregister(extension_type_t type, void *extension) {
    if ((unsigned)type > EXTENSION_BINARY_PROTOCOL) {
        return;
    }
    pthread_mutex_lock(&ext_lock);
    if (type == EXTENSION_LOGGER) {
        if (current_logger == extension) {
            current_logger = &stderr_logger;
        }
    } else {
        for (ext_node **pp = &ext_lists[type]; *pp != NULL; pp = &(*pp)->next) {
            if ((*pp)->extension == extension) {
                ext_node *dead = *pp;
                *pp = dead->next;
                free(dead);
                break;
            }
        }
    }
    pthread_mutex_unlock(&ext_lock);
}

static void *ext_get(extension_type_t type) {
    void *rv = NULL;
    if ((unsigned)type > EXTENSION_BINARY_PROTOCOL) {
        return NULL;
    }
    pthread_mutex_lock(&ext_lock);
    if (type == EXTENSION_LOGGER) {
        rv = current_logger;
    } else if (ext_lists[type] != NULL) {
        rv = ext_lists[type]->extension;
    }
    pthread_mutex_unlock(&ext_lock);
    return rv;
}

static EXTENSION_LOGGER_DESCRIPTOR *log_get_logger(void) {
    return ext_get(EXTENSION_LOGGER);
}

static EXTENSION_LOG_LEVEL log_get_level(void) {
    return (EXTENSION_LOG_LEVEL)atomic_load(&log_level);
}

static void events_perform(ENGINE_EVENT_TYPE type, const void *data, const void *cookie);

static void log_set_level(EXTENSION_LOG_LEVEL severity) {
    atomic_store(&log_level, (unsigned)severity);
    events_perform(ON_LOG_LEVEL, NULL, NULL);
}

/* ------------------------------------------------------------------------------------------
 * Events
 */
typedef struct event_handler {
    ENGINE_HANDLE *engine;
    atomic_bool forgotten; /* its engine was unloaded: skip it */
    EVENT_CALLBACK cb;
    const void *cb_data;
    _Atomic(struct event_handler *) next;
} event_handler;

/* Per event type, a list that only grows at its head (memcached's order: the newest handler
 * runs first). The lock orders writers; readers take the head with an acquire load and walk
 * nodes that never change once published, so a callback may register another handler while a
 * dispatch is in progress. */
static pthread_mutex_t events_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(event_handler *) event_handlers[MAX_ENGINE_EVENT_TYPE];

static void events_register(ENGINE_HANDLE *engine, ENGINE_EVENT_TYPE type, EVENT_CALLBACK cb,
                            const void *cb_data) {
    if ((unsigned)type >= MAX_ENGINE_EVENT_TYPE || cb == NULL) {
        stderr_logger_log(EXTENSION_LOG_WARNING, NULL,
                          "register_callback: ignoring event type %u (cb %s)", (unsigned)type,
                          cb == NULL ? "NULL" : "set");
        return;
    }
    event_handler *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        abort(); /* a test host: out of memory is fatal */
    }
    h->engine = engine;
    atomic_init(&h->forgotten, false);
    h->cb = cb;
    h->cb_data = cb_data;
    pthread_mutex_lock(&events_lock);
    atomic_init(&h->next, atomic_load_explicit(&event_handlers[type], memory_order_relaxed));
    /* Release: pairs with the acquire load in events_perform; publishes the handler. */
    atomic_store_explicit(&event_handlers[type], h, memory_order_release);
    pthread_mutex_unlock(&events_lock);
}

static void events_perform(ENGINE_EVENT_TYPE type, const void *data, const void *cookie) {
    if ((unsigned)type >= MAX_ENGINE_EVENT_TYPE) {
        return;
    }
    for (event_handler *h = atomic_load_explicit(&event_handlers[type], memory_order_acquire);
         h != NULL; h = atomic_load_explicit(&h->next, memory_order_acquire)) {
        if (!atomic_load(&h->forgotten)) {
            h->cb(cookie, type, data, h->cb_data);
        }
    }
}

/* ------------------------------------------------------------------------------------------
 * Core API
 */
static rel_time_t core_get_current_time(void) {
    return (rel_time_t)(time(NULL) - process_started) + atomic_load(&clock_advanced);
}

static rel_time_t core_realtime(const time_t exptime) {
    if (exptime == 0) {
        return 0;
    }
    if (exptime < 0) {
        /* Negative relative times: already expired. */
        return 1;
    }
    if (exptime > REALTIME_MAXDELTA) {
        if (exptime <= process_started) {
            return 1;
        }
        return (rel_time_t)(exptime - process_started);
    }
    return (rel_time_t)(exptime + core_get_current_time());
}

static time_t core_abstime(const rel_time_t exptime) {
    return process_started + (time_t)exptime;
}

static const char *core_server_version(void) {
    return "2.5.1-mcb-mock-host";
}

/* FNV-1a, seeded. Any decent hash will do: engines only need it to be stable. */
static uint32_t core_hash(const void *data, size_t size, uint32_t seed) {
    const unsigned char *p = data;
    uint32_t h = 2166136261u ^ seed;
    for (size_t i = 0; i < size; i++) {
        h ^= p[i];
        h *= 16777619u;
    }
    return h;
}

/*
 * Copies one token from *pp into out: leading whitespace skipped, a backslash makes the next
 * character literal, stops at an unescaped `stop` or the end, trailing unescaped whitespace
 * dropped. Leaves *pp at the stop character (or the NUL). -1 when out is too small.
 */
static int read_token(const char **pp, char stop, char *out, size_t outlen) {
    const char *p = *pp;
    size_t n = 0, keep = 0;
    while (isspace((unsigned char)*p)) {
        ++p;
    }
    while (*p != '\0' && *p != stop) {
        char c = *p;
        bool escaped = false;
        if (c == '\\' && p[1] != '\0') {
            c = *++p;
            escaped = true;
        }
        if (n + 1 >= outlen) {
            return -1;
        }
        out[n++] = c;
        if (escaped || !isspace((unsigned char)c)) {
            keep = n;
        }
        ++p;
    }
    out[keep] = '\0';
    *pp = p;
    return 0;
}

static bool parse_size(const char *value, bool is_signed, long long *out) {
    char buf[MAX_VALUE_LEN];
    size_t len = strlen(value);
    if (len == 0 || len >= sizeof(buf)) {
        return false;
    }
    memcpy(buf, value, len + 1);
    unsigned long long multiplier = 1;
    const char *suffixes = "kmgt";
    const char *s = strchr(suffixes, tolower((unsigned char)buf[len - 1]));
    if (s != NULL) {
        for (const char *q = suffixes; q <= s; q++) {
            multiplier *= 1024;
        }
        buf[--len] = '\0';
    }
    if (len == 0 || isspace((unsigned char)buf[0])) {
        return false;
    }
    char *end = NULL;
    errno = 0;
    if (is_signed) {
        long long v = strtoll(buf, &end, 10);
        long long m = (long long)multiplier;
        if (errno != 0 || *end != '\0' || v > LLONG_MAX / m || v < LLONG_MIN / m) {
            return false;
        }
        *out = v * m;
    } else {
        if (buf[0] == '-') {
            return false;
        }
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno != 0 || *end != '\0' || v > (unsigned long long)SIZE_MAX / multiplier ||
            v * multiplier > (unsigned long long)LLONG_MAX) {
            return false;
        }
        *out = (long long)(v * multiplier);
    }
    return true;
}

static int parse_config_depth(const char *str, struct config_item items[], FILE *error,
                              int depth);

static int read_config_file(const char *fname, struct config_item items[], FILE *error,
                            int depth) {
    if (depth >= MAX_CONFIG_FILE_DEPTH) {
        if (error != NULL) {
            fprintf(error, "ERROR: config_file nested too deeply at: %s\n", fname);
        }
        return -1;
    }
    FILE *fp = fopen(fname, "r");
    if (fp == NULL) {
        if (error != NULL) {
            fprintf(error, "ERROR: Failed to open file: %s\n", fname);
        }
        return -1;
    }
    int ret = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, fp) != -1) {
        if (line[0] == '#') {
            continue;
        }
        int r = parse_config_depth(line, items, error, depth + 1);
        if (r == -1) {
            ret = -1;
            break;
        }
        if (r != 0) {
            ret = r;
        }
    }
    free(line);
    fclose(fp);
    return ret;
}

static int parse_config_depth(const char *str, struct config_item items[], FILE *error,
                              int depth) {
    if (str == NULL || items == NULL) {
        return -1;
    }
    int ret = 0;
    const char *p = str;
    for (;;) {
        while (isspace((unsigned char)*p)) {
            ++p;
        }
        if (*p == '\0') {
            break;
        }
        char key[MAX_KEY_LEN];
        char value[MAX_VALUE_LEN];
        const char *start = p;
        if (read_token(&p, '=', key, sizeof(key)) == -1) {
            if (error != NULL) {
                fprintf(error, "ERROR: Invalid key, starting at: <%s>\n", start);
            }
            return -1;
        }
        if (*p != '=') {
            if (error != NULL) {
                fprintf(error, "ERROR: Missing '=' after key: <%s>\n", key);
            }
            return -1;
        }
        ++p;
        start = p;
        if (read_token(&p, ';', value, sizeof(value)) == -1) {
            if (error != NULL) {
                fprintf(error, "ERROR: Invalid value, starting at: <%s>\n", start);
            }
            return -1;
        }
        if (*p == ';') {
            ++p;
        }

        struct config_item *it = items;
        while (it->key != NULL && strcmp(key, it->key) != 0) {
            ++it;
        }
        if (it->key == NULL) {
            if (error != NULL) {
                fprintf(error, "Unsupported key: <%s>\n", key);
            }
            ret = 1;
            continue;
        }
        if (it->found && error != NULL) {
            fprintf(error, "WARNING: Found duplicate entry for \"%s\"\n", it->key);
        }
        bool ok = true;
        switch (it->datatype) {
        case DT_SIZE: {
            long long v;
            ok = parse_size(value, false, &v);
            if (ok) {
                *it->value.dt_size = (size_t)v;
            }
            break;
        }
#ifndef MCB_ENGINE_PU
        case DT_SSIZE: {
            long long v;
            ok = parse_size(value, true, &v);
            if (ok) {
                *it->value.dt_ssize = (ssize_t)v;
            }
            break;
        }
#endif
        case DT_FLOAT: {
            char *end = NULL;
            errno = 0;
            float f = strtof(value, &end);
            ok = value[0] != '\0' && errno == 0 && *end == '\0';
            if (ok) {
                *it->value.dt_float = f;
            }
            break;
        }
        case DT_BOOL:
            if (strcasecmp(value, "true") == 0 || strcasecmp(value, "on") == 0) {
                *it->value.dt_bool = true;
            } else if (strcasecmp(value, "false") == 0 || strcasecmp(value, "off") == 0) {
                *it->value.dt_bool = false;
            } else {
                ok = false;
            }
            break;
        case DT_STRING: {
            char *copy = strdup(value);
            ok = copy != NULL;
            if (ok) {
                *it->value.dt_string = copy;
            }
            break;
        }
        case DT_CONFIGFILE: {
            int r = read_config_file(value, items, error, depth);
            if (r == -1) {
                return -1;
            }
            if (r != 0) {
                ret = r;
            }
            break;
        }
        default:
            if (error != NULL) {
                fprintf(error, "ERROR: Unknown datatype %u for key <%s>\n",
                        (unsigned)it->datatype, key);
            }
            return -1;
        }
        if (!ok) {
            if (error != NULL) {
                fprintf(error, "Invalid entry, Key: <%s> Value: <%s>\n", key, value);
            }
            return -1;
        }
        it->found = true;
    }
    return ret;
}

static int core_parse_config(const char *str, struct config_item items[], FILE *error) {
    return parse_config_depth(str, items, error, 0);
}

static void core_shutdown(void) {
    atomic_store(&shutdown_requested, true);
}

static bool core_get_config(struct config_item items[]) {
    pthread_mutex_lock(&settings_lock);
    int rc = core_parse_config(settings_str != NULL ? settings_str : "", items, NULL);
    pthread_mutex_unlock(&settings_lock);
    return rc == 0;
}

/* ------------------------------------------------------------------------------------------
 * Stat API
 */
static void *stat_new(void) {
    void *s = calloc(1, 256);
    if (s != NULL) {
        atomic_fetch_add(&live_stats, 1);
    }
    return s;
}

static void stat_release(void *stats) {
    if (stats != NULL) {
        atomic_fetch_sub(&live_stats, 1);
        free(stats);
    }
}

static void stat_evicting(const void *cookie, const void *key, int nkey) {
    (void)cookie;
    (void)key;
    (void)nkey;
    atomic_fetch_add(&evictions, 1);
}

/* ------------------------------------------------------------------------------------------
 * Cookie API
 */
static void conn_free(mh_conn *c) {
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c->username);
    free(c->auth_config);
    free(c);
    atomic_fetch_sub(&live_connections, 1);
}

/* Drops one reference; frees on the last. */
static ENGINE_ERROR_CODE conn_unref(mh_conn *c) {
    pthread_mutex_lock(&c->lock);
    if (c->refcount <= 0) {
        pthread_mutex_unlock(&c->lock);
        stderr_logger_log(EXTENSION_LOG_WARNING, c, "release of an unreserved cookie");
        return ENGINE_EINVAL;
    }
    bool last = --c->refcount == 0;
    pthread_mutex_unlock(&c->lock);
    if (last) {
        conn_free(c);
    }
    return ENGINE_SUCCESS;
}

static int cookie_get_socket_fd(const void *cookie) {
    return cookie == NULL ? -1 : ((const mh_conn *)cookie)->fd;
}

static void cookie_get_auth_data(const void *cookie, auth_data_t *data) {
    if (data == NULL) {
        return;
    }
    data->username = NULL;
    data->config = NULL;
    if (cookie != NULL) {
        const mh_conn *c = cookie;
        data->username = c->username;
        data->config = c->auth_config;
    }
}

static void cookie_store_engine_specific(const void *cookie, void *engine_data) {
    if (cookie != NULL) {
        ((mh_conn *)cookie)->engine_specific = engine_data;
    }
}

static void *cookie_get_engine_specific(const void *cookie) {
    return cookie == NULL ? NULL : ((const mh_conn *)cookie)->engine_specific;
}

static void cookie_notify_io_complete(const void *cookie, ENGINE_ERROR_CODE status) {
    if (cookie == NULL) {
        stderr_logger_log(EXTENSION_LOG_WARNING, NULL, "notify_io_complete with a NULL cookie");
        return;
    }
    mh_conn *c = (mh_conn *)cookie;
    pthread_mutex_lock(&c->lock);
    c->io_notified = true;
    c->io_status = status;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static ENGINE_ERROR_CODE cookie_reserve(const void *cookie) {
    if (cookie == NULL) {
        return ENGINE_EINVAL;
    }
    mh_conn *c = (mh_conn *)cookie;
    pthread_mutex_lock(&c->lock);
    ENGINE_ERROR_CODE rv = ENGINE_EINVAL;
    if (c->refcount > 0) {
        c->refcount++;
        rv = ENGINE_SUCCESS;
    }
    pthread_mutex_unlock(&c->lock);
    return rv;
}

static ENGINE_ERROR_CODE cookie_release(const void *cookie) {
    if (cookie == NULL) {
        return ENGINE_EINVAL;
    }
    return conn_unref((mh_conn *)cookie);
}

/* ------------------------------------------------------------------------------------------
 * Allocator hooks (v2.5.1): a host without an instrumented allocator.
 */
#ifndef MCB_ENGINE_PU
static bool hooks_new(void (*hook)(const void *ptr, size_t size)) {
    (void)hook;
    return false;
}
static bool hooks_delete(void (*hook)(const void *ptr)) {
    (void)hook;
    return false;
}
static int hooks_extra_stats_size(void) {
    return 0;
}
static void hooks_allocator_stats(allocator_stats *stats) {
    if (stats != NULL) {
        stats->allocated_size = stats->heap_size = stats->free_size = 0;
        stats->fragmentation_size = 0;
        stats->ext_stats_size = 0;
    }
}
static size_t hooks_allocation_size(void *ptr) {
    (void)ptr;
    return 0;
}
static void hooks_detailed_stats(char *buffer, int size) {
    if (buffer != NULL && size > 0) {
        buffer[0] = '\0';
    }
}
static ALLOCATOR_HOOKS_API hooks_api = {
    .add_new_hook = hooks_new,
    .remove_new_hook = hooks_new,
    .add_delete_hook = hooks_delete,
    .remove_delete_hook = hooks_delete,
    .get_extra_stats_size = hooks_extra_stats_size,
    .get_allocator_stats = hooks_allocator_stats,
    .get_allocation_size = hooks_allocation_size,
    .get_detailed_stats = hooks_detailed_stats,
};
#endif

/* ------------------------------------------------------------------------------------------
 * The server handle
 */
static SERVER_CORE_API core_api = {
    .get_current_time = core_get_current_time,
    .realtime = core_realtime,
    .abstime = core_abstime,
    .server_version = core_server_version,
    .hash = core_hash,
    .parse_config = core_parse_config,
    .shutdown = core_shutdown,
    .get_config = core_get_config,
};
static SERVER_STAT_API stat_api = {
    .new_stats = stat_new,
    .release_stats = stat_release,
    .evicting = stat_evicting,
};
static SERVER_EXTENSION_API extension_api = {
    .register_extension = ext_register,
    .unregister_extension = ext_unregister,
    .get_extension = ext_get,
};
static SERVER_CALLBACK_API callback_api = {
    .register_callback = events_register,
    .perform_callbacks = events_perform,
};
static SERVER_LOG_API log_api = {
    .get_logger = log_get_logger,
    .get_level = log_get_level,
    .set_level = log_set_level,
};
static SERVER_COOKIE_API cookie_api = {
    .get_socket_fd = cookie_get_socket_fd,
    .get_auth_data = cookie_get_auth_data,
    .store_engine_specific = cookie_store_engine_specific,
    .get_engine_specific = cookie_get_engine_specific,
    .notify_io_complete = cookie_notify_io_complete,
    .reserve = cookie_reserve,
    .release = cookie_release,
};
static SERVER_HANDLE_V1 server_handle = {
    .interface = 1,
    .core = &core_api,
    .stat = &stat_api,
    .extension = &extension_api,
    .callback = &callback_api,
    .engine = NULL,
    .log = &log_api,
    .cookie = &cookie_api,
#ifndef MCB_ENGINE_PU
    .alloc_hooks = &hooks_api,
#endif
};

SERVER_HANDLE_V1 *mh_get_server_api(void) {
    return &server_handle;
}

int mh_init(void) {
    /* Like memcached, start the clock a little in the past so that a rel_time_t of 0 never
     * means "now". */
    process_started = time(NULL) - 2;
    atomic_store(&clock_advanced, 0);
    return process_started > 0 ? 0 : -1;
}

void mh_shutdown(void) {
    pthread_mutex_lock(&events_lock);
    for (int i = 0; i < MAX_ENGINE_EVENT_TYPE; i++) {
        event_handler *h = atomic_exchange(&event_handlers[i], NULL);
        while (h != NULL) {
            event_handler *next = atomic_load(&h->next);
            free(h);
            h = next;
        }
    }
    pthread_mutex_unlock(&events_lock);
    pthread_mutex_lock(&ext_lock);
    for (int i = 0; i < 4; i++) {
        while (ext_lists[i] != NULL) {
            ext_node *next = ext_lists[i]->next;
            free(ext_lists[i]);
            ext_lists[i] = next;
        }
    }
    current_logger = &stderr_logger;
    pthread_mutex_unlock(&ext_lock);
    pthread_mutex_lock(&settings_lock);
    free(settings_str);
    settings_str = NULL;
    pthread_mutex_unlock(&settings_lock);
}

void mh_advance_time(rel_time_t seconds) {
    atomic_fetch_add(&clock_advanced, seconds);
}

time_t mh_process_started(void) {
    return process_started;
}

/* ------------------------------------------------------------------------------------------
 * Engines
 */
__attribute__((format(printf, 3, 4))) static void load_failed(char *err, size_t errlen,
                                                              const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    EXTENSION_LOGGER_DESCRIPTOR *logger = ext_get(EXTENSION_LOGGER);
    logger->log(EXTENSION_LOG_WARNING, NULL, "%s", msg);
    if (err != NULL && errlen > 0) {
        snprintf(err, errlen, "%s", msg);
    }
}

mh_engine *mh_engine_load(const char *path, const char *config, char *err, size_t errlen) {
    if (path == NULL) {
        load_failed(err, errlen, "No engine path given");
        return NULL;
    }
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL) {
        const char *why = dlerror();
        load_failed(err, errlen, "Failed to open library \"%s\": %s", path,
                    why != NULL ? why : "unknown error");
        return NULL;
    }
    void *sym = dlsym(dl, "create_instance");
    if (sym == NULL) {
        const char *why = dlerror();
        load_failed(err, errlen, "Could not find symbol \"create_instance\" in %s: %s", path,
                    why != NULL ? why : "unknown error");
        dlclose(dl);
        return NULL;
    }
    /* POSIX guarantees a function pointer survives the round trip through void *. */
    CREATE_INSTANCE create;
    memcpy(&create, &sym, sizeof(create));

    ENGINE_HANDLE *handle = NULL;
    ENGINE_ERROR_CODE rc = create(ENGINE_INTERFACE_VERSION, mh_get_server_api, &handle);
    if (rc != ENGINE_SUCCESS || handle == NULL) {
        load_failed(err, errlen, "Failed to create instance of %s. Error code: %d", path,
                    (int)rc);
        dlclose(dl);
        return NULL;
    }
    if (handle->interface != ENGINE_INTERFACE_VERSION) {
        load_failed(err, errlen, "Engine %s has interface version %llu, not 1", path,
                    (unsigned long long)handle->interface);
        dlclose(dl);
        return NULL;
    }
    ENGINE_HANDLE_V1 *v1 = (ENGINE_HANDLE_V1 *)handle;
    rc = v1->initialize(handle, config);
    if (rc != ENGINE_SUCCESS) {
        load_failed(err, errlen, "Failed to initialize instance of %s. Error code: %d", path,
                    (int)rc);
        mh_events_forget(handle);
        v1->destroy(handle, false);
        dlclose(dl);
        return NULL;
    }
    mh_engine *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        load_failed(err, errlen, "Out of memory loading %s", path);
        v1->destroy(handle, true);
        dlclose(dl);
        return NULL;
    }
    /* Like memcached, the handle's `engine` names the first engine loaded (once it exists). */
    pthread_mutex_lock(&ext_lock);
    if (server_handle.engine == NULL) {
        server_handle.engine = handle;
    }
    pthread_mutex_unlock(&ext_lock);
    e->dl = dl;
    e->handle = handle;
    e->v1 = v1;
    snprintf(e->path, sizeof(e->path), "%s", path);
    return e;
}

/* memcached never unloads an engine, so its handlers live forever; this host does unload,
 * so it stops calling the handlers of an engine before its code goes away. Callers make sure
 * no dispatch runs concurrently with an unload. */
void mh_events_forget(ENGINE_HANDLE *engine) {
    pthread_mutex_lock(&events_lock);
    for (int i = 0; i < MAX_ENGINE_EVENT_TYPE; i++) {
        for (event_handler *h = atomic_load(&event_handlers[i]); h != NULL;
             h = atomic_load(&h->next)) {
            if (h->engine == engine) {
                atomic_store(&h->forgotten, true);
            }
        }
    }
    pthread_mutex_unlock(&events_lock);
}

void mh_engine_unload(mh_engine *engine, bool force) {
    if (engine == NULL) {
        return;
    }
    mh_events_forget(engine->handle);
    pthread_mutex_lock(&ext_lock);
    if (server_handle.engine == engine->handle) {
        server_handle.engine = NULL;
    }
    pthread_mutex_unlock(&ext_lock);
    engine->v1->destroy(engine->handle, force);
    dlclose(engine->dl);
    free(engine);
}

/* ------------------------------------------------------------------------------------------
 * Connections
 */
mh_conn *mh_conn_open(void) {
    mh_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->fd = atomic_fetch_add(&next_fd, 1);
    c->refcount = 1;
    atomic_fetch_add(&live_connections, 1);
    events_perform(ON_CONNECT, NULL, c);
    return c;
}

void mh_conn_auth(mh_conn *conn, const char *username, const char *config) {
    free(conn->username);
    free(conn->auth_config);
    conn->username = username != NULL ? strdup(username) : NULL;
    conn->auth_config = config != NULL ? strdup(config) : NULL;
    auth_data_t data = {.username = conn->username, .config = conn->auth_config};
    events_perform(ON_AUTH, &data, conn);
}

void mh_conn_close(mh_conn *conn) {
    if (conn == NULL) {
        return;
    }
    events_perform(ON_DISCONNECT, NULL, conn);
    pthread_mutex_lock(&conn->lock);
    conn->closed = true;
    pthread_mutex_unlock(&conn->lock);
    conn_unref(conn);
}

/* The CLOCK_REALTIME time timeout_ms from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(int timeout_ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    return deadline;
}

ENGINE_ERROR_CODE mh_conn_wait_io(mh_conn *conn, int timeout_ms) {
    struct timespec deadline = deadline_in(timeout_ms);
    pthread_mutex_lock(&conn->lock);
    while (!conn->io_notified) {
        if (pthread_cond_timedwait(&conn->cond, &conn->lock, &deadline) == ETIMEDOUT) {
            break;
        }
    }
    ENGINE_ERROR_CODE rv = conn->io_notified ? conn->io_status : ENGINE_TMPFAIL;
    conn->io_notified = false;
    pthread_mutex_unlock(&conn->lock);
    return rv;
}

bool mh_add_response(const void *key, uint16_t keylen, const void *ext, uint8_t extlen,
                     const void *body, uint32_t bodylen, uint8_t datatype, uint16_t status,
                     uint64_t cas, const void *cookie) {
    mh_conn *c = (mh_conn *)cookie;
    if (c == NULL || keylen > sizeof(c->resp_key) || extlen > sizeof(c->resp_ext) ||
        bodylen > sizeof(c->resp_body) || (keylen > 0 && key == NULL) ||
        (extlen > 0 && ext == NULL) || (bodylen > 0 && body == NULL)) {
        return false;
    }
    if (keylen > 0) {
        memcpy(c->resp_key, key, keylen);
    }
    if (extlen > 0) {
        memcpy(c->resp_ext, ext, extlen);
    }
    if (bodylen > 0) {
        memcpy(c->resp_body, body, bodylen);
    }
    c->resp_keylen = keylen;
    c->resp_extlen = extlen;
    c->resp_bodylen = bodylen;
    c->resp_datatype = datatype;
    c->resp_status = status;
    c->resp_cas = cas;
    c->responses++;
    return true;
}

void mh_add_stat(const char *key, const uint16_t klen, const char *val, const uint32_t vlen,
                 const void *cookie) {
    mh_conn *c = (mh_conn *)cookie;
    if (c == NULL || c->nstats >= MH_MAX_STATS) {
        return;
    }
    mh_stat *s = &c->stats[c->nstats++];
    size_t kn = klen < sizeof(s->key) - 1 ? klen : sizeof(s->key) - 1;
    size_t vn = vlen < sizeof(s->value) - 1 ? vlen : sizeof(s->value) - 1;
    if (kn > 0) {
        memcpy(s->key, key, kn);
    }
    if (vn > 0) {
        memcpy(s->value, val, vn);
    }
    s->key[kn] = '\0';
    s->value[vn] = '\0';
}

void mh_conn_clear_stats(mh_conn *conn) {
    conn->nstats = 0;
}

const char *mh_conn_stat(const mh_conn *conn, const char *key) {
    for (int i = 0; i < conn->nstats; i++) {
        if (strcmp(conn->stats[i].key, key) == 0) {
            return conn->stats[i].value;
        }
    }
    return NULL;
}

static void put_be(unsigned char *p, uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; i--) {
        p[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

size_t mh_build_request(void *buf, size_t buflen, uint8_t opcode, const void *ext,
                        uint8_t extlen, const void *key, uint16_t keylen, const void *value,
                        uint32_t valuelen, uint64_t cas) {
    size_t bodylen = (size_t)extlen + keylen + valuelen;
    size_t total = sizeof(protocol_binary_request_header) + bodylen;
    if (buf == NULL || total > buflen || bodylen > UINT32_MAX) {
        return 0;
    }
    unsigned char *p = buf;
    memset(p, 0, sizeof(protocol_binary_request_header));
    p[0] = PROTOCOL_BINARY_REQ;
    p[1] = opcode;
    put_be(p + 2, keylen, 2);
    p[4] = extlen;
    p[5] = PROTOCOL_BINARY_RAW_BYTES;
    put_be(p + 6, 0, 2);
    put_be(p + 8, bodylen, 4);
    put_be(p + 12, 0xcafef00d, 4);
    put_be(p + 16, cas, 8);
    unsigned char *q = p + sizeof(protocol_binary_request_header);
    if (extlen > 0) {
        memcpy(q, ext, extlen);
        q += extlen;
    }
    if (keylen > 0) {
        memcpy(q, key, keylen);
        q += keylen;
    }
    if (valuelen > 0) {
        memcpy(q, value, valuelen);
    }
    return total;
}

/* ------------------------------------------------------------------------------------------
 * Counters
 */
int mh_live_connections(void) {
    return atomic_load(&live_connections);
}
int mh_live_stats(void) {
    return atomic_load(&live_stats);
}
int mh_evictions(void) {
    return atomic_load(&evictions);
}
int mh_log_lines(void) {
    return atomic_load(&log_lines);
}
void mh_last_log(char *buf, size_t buflen) {
    if (buf == NULL || buflen == 0) {
        return;
    }
    pthread_mutex_lock(&log_lock);
    snprintf(buf, buflen, "%s", last_log);
    pthread_mutex_unlock(&log_lock);
}
/* Calls visit(line) for every remembered line numbered `since` or later (log lock held);
 * stops when visit returns true. */
static void log_history_walk_locked(int since, bool (*visit)(const char *line, void *arg),
                                    void *arg) {
    int end = atomic_load(&log_lines);
    int start = since;
    if (start < end - MH_LOG_HISTORY) {
        start = end - MH_LOG_HISTORY;
    }
    if (start < 0) {
        start = 0;
    }
    for (int i = start; i < end; i++) {
        if (visit(log_history[i % MH_LOG_HISTORY], arg)) {
            break;
        }
    }
}

/* log_history_walk_locked under the log lock. */
static void log_history_walk(int since, bool (*visit)(const char *line, void *arg), void *arg) {
    pthread_mutex_lock(&log_lock);
    log_history_walk_locked(since, visit, arg);
    pthread_mutex_unlock(&log_lock);
}

typedef struct {
    const char *needle;
    int hits;
    int misses;
} log_search;

static bool log_search_visit(const char *line, void *arg) {
    log_search *s = arg;
    if (strstr(line, s->needle) != NULL) {
        s->hits++;
    } else {
        s->misses++;
    }
    return false;
}

bool mh_log_contains(int since, const char *needle) {
    log_search s = {.needle = needle != NULL ? needle : ""};
    log_history_walk(since, log_search_visit, &s);
    return s.hits > 0;
}

int mh_log_count_without(int since, const char *needle) {
    log_search s = {.needle = needle != NULL ? needle : ""};
    log_history_walk(since, log_search_visit, &s);
    return s.misses;
}

int mh_log_count(int since, const char *needle) {
    log_search s = {.needle = needle != NULL ? needle : ""};
    log_history_walk(since, log_search_visit, &s);
    return s.hits;
}

bool mh_log_wait(int since, const char *needle, int timeout_ms) {
    struct timespec deadline = deadline_in(timeout_ms);
    log_search s = {.needle = needle != NULL ? needle : ""};
    pthread_mutex_lock(&log_lock);
    /* Checked under the lock each line is added under: no line slips between check and wait. */
    log_history_walk_locked(since, log_search_visit, &s);
    while (s.hits == 0) {
        if (pthread_cond_timedwait(&log_cond, &log_lock, &deadline) == ETIMEDOUT) {
            break;
        }
        s.hits = s.misses = 0;
        log_history_walk_locked(since, log_search_visit, &s);
    }
    pthread_mutex_unlock(&log_lock);
    return s.hits > 0;
}

bool mh_shutdown_requested(void) {
    return atomic_load(&shutdown_requested);
}
void mh_set_settings(const char *settings) {
    char *copy = settings != NULL ? strdup(settings) : NULL;
    pthread_mutex_lock(&settings_lock);
    free(settings_str);
    settings_str = copy;
    pthread_mutex_unlock(&settings_lock);
}
