/*
 * mock_host.h: a small stand-in for memcached's side of the engine interface, for tests.
 *
 * It implements SERVER_HANDLE_V1 (core, stat, extension, callback, log, cookie and, for
 * v2.5.1, allocator-hook tables), loads engines the way memcached does (dlopen with
 * RTLD_NOW | RTLD_LOCAL, create_instance(1, ...), initialize(config)), and plays the
 * connections: a cookie is a pointer to an mh_conn.
 *
 * The host is process-global, like memcached (get_server_api takes no argument). All
 * functions are thread-safe unless noted; one mh_conn is driven by one thread at a time, as
 * memcached drives a connection from one worker thread.
 */
#ifndef MCB_MOCK_HOST_H
#define MCB_MOCK_HOST_H

#include "engine_abi.h"

#include <pthread.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sets the host up (clock, logger, tables); 0 on success. Call once, before anything else. */
int mh_init(void);
/* Frees what the host still holds (event registrations, extensions). Connections and engines
 * must be gone first. */
void mh_shutdown(void);

/* memcached's get_server_api: the table every engine is created with. */
SERVER_HANDLE_V1 *mh_get_server_api(void);

/* The fake clock: seconds since the host started (rel_time_t), advanced only by tests. */
void mh_advance_time(rel_time_t seconds);
/* The Unix time the host pretends it started at. */
time_t mh_process_started(void);

/* ------------------------------------------------------------------------------------------
 * Engines
 */
typedef struct mh_engine {
    void *dl;                  /* dlopen handle, closed by mh_engine_unload */
    ENGINE_HANDLE *handle;     /* from create_instance */
    ENGINE_HANDLE_V1 *v1;      /* the same pointer, as the v1 table */
    char path[256];
} mh_engine;

/*
 * Loads the engine at `path` and initializes it with `config` (may be NULL). On failure
 * returns NULL, logs the reason through the logger extension, and copies it into err (when
 * errlen > 0); the library is closed on every error path.
 */
mh_engine *mh_engine_load(const char *path, const char *config, char *err, size_t errlen);
/* mh_events_forget(engine), destroy(force), then dlclose and free. */
void mh_engine_unload(mh_engine *engine, bool force);
/*
 * Stops dispatching events to the handlers `engine` registered. memcached never unloads an
 * engine, so it never needs this; a host that destroys an engine and closes its library must
 * do it first. Not concurrent with dispatch.
 */
void mh_events_forget(ENGINE_HANDLE *engine);

/* ------------------------------------------------------------------------------------------
 * Connections (cookies)
 */
#define MH_MAX_STATS 64

typedef struct mh_stat {
    char key[64];
    char value[512]; /* room for a topkeys value (about 300 bytes) */
} mh_stat;

typedef struct mh_conn {
    /* Identity */
    int fd;
    char *username;            /* NULL until mh_conn_auth */
    char *auth_config;
    /* Engine-private pointer (store/get_engine_specific) */
    void *engine_specific;
    /* Lifetime: one reference while open, one per reserve; freed at zero. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int refcount;
    bool closed;
    /* notify_io_complete: set by the engine, consumed by mh_conn_wait_io */
    bool io_notified;
    ENGINE_ERROR_CODE io_status;
    /* The last ADD_RESPONSE on this connection */
    int responses;
    uint16_t resp_status;
    uint64_t resp_cas;
    uint8_t resp_datatype;
    char resp_key[256];
    size_t resp_keylen;
    char resp_ext[32];
    size_t resp_extlen;
    char resp_body[4096];
    size_t resp_bodylen;
    /* ADD_STAT output since the last mh_conn_clear_stats */
    mh_stat stats[MH_MAX_STATS];
    int nstats;
} mh_conn;

/* Opens a connection and fires ON_CONNECT for it (before any engine call on it). */
mh_conn *mh_conn_open(void);
/* Records the SASL identity (strings are copied) and fires ON_AUTH with its auth_data_t. */
void mh_conn_auth(mh_conn *conn, const char *username, const char *config);
/* Fires ON_DISCONNECT and drops the open reference; the struct lives on while reserved. */
void mh_conn_close(mh_conn *conn);
/*
 * Waits up to timeout_ms for the engine's notify_io_complete on this connection and returns
 * the status it passed (ENGINE_TMPFAIL on timeout). Consumes the notification.
 */
ENGINE_ERROR_CODE mh_conn_wait_io(mh_conn *conn, int timeout_ms);

/* The ADD_RESPONSE and ADD_STAT callbacks to hand engines; the cookie must be an mh_conn. */
bool mh_add_response(const void *key, uint16_t keylen, const void *ext, uint8_t extlen,
                     const void *body, uint32_t bodylen, uint8_t datatype, uint16_t status,
                     uint64_t cas, const void *cookie);
void mh_add_stat(const char *key, const uint16_t klen, const char *val, const uint32_t vlen,
                 const void *cookie);
void mh_conn_clear_stats(mh_conn *conn);
/* The value of stat `key` from the last stats call, or NULL. */
const char *mh_conn_stat(const mh_conn *conn, const char *key);

/*
 * Builds a binary request in buf (header, extras, key, value; lengths big-endian) and returns
 * its total length, or 0 when it does not fit in buflen.
 */
size_t mh_build_request(void *buf, size_t buflen, uint8_t opcode, const void *ext,
                        uint8_t extlen, const void *key, uint16_t keylen, const void *value,
                        uint32_t valuelen, uint64_t cas);

/* ------------------------------------------------------------------------------------------
 * Host counters, for tests
 */
int mh_live_connections(void);   /* connections not yet freed */
int mh_live_stats(void);         /* new_stats minus release_stats */
int mh_evictions(void);          /* calls to evicting */
int mh_log_lines(void);          /* lines the stderr logger wrote */
/* Copies the last logged line into buf. */
void mh_last_log(char *buf, size_t buflen);
/*
 * Whether a line logged at or after line number `since` (a value of mh_log_lines() taken
 * earlier) contains `needle`. The host remembers the last MH_LOG_HISTORY lines.
 */
#define MH_LOG_HISTORY 256
bool mh_log_contains(int since, const char *needle);
/* How many lines logged at or after `since` do not contain `needle`. */
int mh_log_count_without(int since, const char *needle);
/* How many lines logged at or after `since` contain `needle`. */
int mh_log_count(int since, const char *needle);
/*
 * Waits until a line logged at or after `since` contains `needle` (woken by each new line),
 * at most timeout_ms; returns whether one does.
 */
bool mh_log_wait(int since, const char *needle, int timeout_ms);
bool mh_shutdown_requested(void);
/* Sets the string get_config parses (the host's own "command line" settings). */
void mh_set_settings(const char *settings);

#ifdef __cplusplus
}
#endif

#endif /* MCB_MOCK_HOST_H */
