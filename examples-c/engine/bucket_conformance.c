/*
 * bucket_conformance.c: the conformance suite of the bucket engine (issue 3). It loads
 * libbucket_engine.so into the mock memcached host the way memcached does (dlopen,
 * create_instance(1, ...), initialize(config)) and drives it with connections, events, item
 * calls and the admin commands, with the C test engine (libtest_engine.so) behind its buckets.
 * One function per behaviour of the issue; every return code is checked.
 *
 * Usage: bucket_conformance [BUCKET_ENGINE_SO TEST_ENGINE_SO] [TEST...]
 *   (or the environment variables BUCKET_ENGINE_LIB and TEST_ENGINE_LIB). The directory of the
 *   test engine must also hold libep_stub_engine.so, default_engine.so (a copy of the test
 *   engine under a name containing "default_engine") and libmock_host.so, as the Makefile
 *   builds them. With TEST names, only those run. BUCKET_CONFORMANCE_TIMEOUT (seconds, default
 *   120) bounds each test.
 *
 * The bucket engine is one process-global instance, like memcached's, so every test runs in a
 * child process of its own (fork) with a fresh host and a fresh load: a crash, hang or failed
 * check fails that test only. Output: one line per test on stdout, then "N passed, N failed";
 * the exit status is 0 only when all passed. Under valgrind each child is checked on its own
 * (valgrind follows fork), so leaks are attributed to the test that made them.
 *
 * What the suite assumes where the issue leaves a detail open (the seed's behaviour unless
 * said otherwise); the library must match these:
 *  - Admin replies go through ADD_RESPONSE with ENGINE_SUCCESS returned. The seed puts some
 *    messages in the response's key ("Invalid request.", "Invalid config parameters") and some
 *    in its body ("Not found.", "Engine not found", the CREATE messages); the suite accepts a
 *    message in either.
 *  - CREATE: key = name; body = engine path, then optionally NUL and the config. Success:
 *    status SUCCESS. Empty path: EINVAL "Invalid request.". Existing name: KEY_EEXISTS
 *    "Bucket exists: <state>" (state "running" or "stopping"). Load failure (dlopen, no
 *    create_instance, create_instance failing): NOT_STORED, a message starting "Failed to load
 *    engine" (the seed's whole message was "Failed to load engine."; the reason may follow);
 *    the library is closed again. Initialize failure: NOT_STORED, a message containing
 *    "Failed to initialize instance" and "code" followed by the engine's real code (the test
 *    engine returns ENGINE_EINVAL, 5; the seed printed 0). Each failure also logs a line
 *    naming the path. An invalid name (ASCII letters, digits and . % _ - only; 1 byte to
 *    any length a key carries) is refused: either a reply with status EINVAL or NOT_STORED
 *    (the seed's, which issue 12 requires), or ENGINE_EINVAL / ENGINE_DISCONNECT with no reply.
 *  - DELETE: body "" or a config with `force` (bool). EWOULDBLOCK, then notify_io_complete
 *    with ENGINE_SUCCESS on the deleting connection once the engine is destroyed (even while
 *    other connections still hold the bucket), then SUCCESS on the retried identical call.
 *    Unknown name (or one already being deleted): KEY_ENOENT "Not found.". A bad or unknown
 *    config key: EINVAL "Invalid config parameters", bucket untouched.
 *  - LIST: status SUCCESS, names of RUNNING buckets separated by one space, in any order; an
 *    empty body when none. The unnamed default bucket is not listed.
 *  - SELECT: SUCCESS, or KEY_ENOENT "Engine not found"; as in the seed a failed SELECT leaves
 *    the connection with no bucket.
 *  - A user other than the configured admin (or anyone when no `admin` is configured) gets
 *    ENGINE_ENOTSUP and no reply for the eight admin opcodes; the environment variable
 *    BUCKET_ENGINE_DIABLE_AUTH_PHASE changes nothing.
 *  - With no bucket, or a bucket that is not RUNNING: allocate, remove, get, store,
 *    arithmetic, flush, get_stats, unknown_command (non-admin opcodes) and tap_notify return
 *    ENGINE_DISCONNECT; the try-form calls do what the seed's did: get_engine_vb_map returns
 *    ENGINE_SUCCESS without calling back, get_tap_iterator and get_stats_struct return NULL,
 *    get_item_info false, errinfo 0; release, item_set_cas and reset_stats do nothing. A connection still attached to a
 *    deleted bucket stays on it (gets DISCONNECT) even after a new bucket of that name exists.
 *  - Stats: "bucket" for a non-admin returns ENGINE_FAILED with no stats; for the admin, one
 *    stat per named bucket, name -> "running" / "stopping". "topkeys" with MEMCACHED_TOP_KEYS
 *    set: one stat per key, value "get_hits=N,...,del_meta=N,ctime=N,atime=N" (memcached's
 *    field order; ctime and atime are seconds since the key was first and last seen), at
 *    most MEMCACHED_TOP_KEYS keys per bucket in total (the core's TopKeys; the seed kept that
 *    many per shard). "topkeys" without MEMCACHED_TOP_KEYS must not crash (the seed
 *    dereferenced NULL): SUCCESS, KEY_ENOENT or ENOTSUP, with no stats. The empty key: the
 *    engine's stats plus bucket_conns (connections attached to the bucket, the seed's
 *    refcount - 1) and bucket_active_conns (calls inside the bucket now, this one included).
 *  - aggregate_stats calls back once per RUNNING named bucket with that bucket's host stats
 *    block, the same pointer get_stats_struct returns to a connection on it.
 *  - Topkeys count what the seed counts: get hit/miss, store (cmd_set; CAS: cas_hits,
 *    cas_badval, cas_misses), arithmetic hit/miss, remove hit/miss and KEY_EEXISTS as
 *    cas_badval; ep-engine opcodes only when the engine returns ENGINE_SUCCESS and the key is
 *    not empty, the key read after the extras.
 *  - Tap: get_tap_iterator returns a shim (called with the bucket engine's handle) that
 *    returns TAP_DISCONNECT once the bucket is not RUNNING; NULL for a bucket whose engine
 *    path contains "default_engine".
 *  - Malformed admin packets (extlen + keylen > bodylen, non-ASCII or NUL bytes in a name,
 *    bodies of 64 KiB or more, empty names) get a reply with a non-SUCCESS status or
 *    ENGINE_EINVAL / ENGINE_DISCONNECT, and leave other buckets as they were. A CREATE with
 *    extras reads the name after them and the body after the name (or is refused).
 *  - Global destroy returns while a deleted bucket still waits for a connection's reference,
 *    and by the time it returns has released every host stats block it took
 *    (mh_live_stats() == 0), except the one of a bucket a connection still holds.
 *  - ON_CONNECT, ON_AUTH (auto_create defaults to true; a missing bucket without auto_create
 *    leaves the connection with no bucket) and ON_DISCONNECT as the seed; a disconnect while
 *    an engine holds a reservation frees the connection's state at the last release and drops
 *    its reference to the bucket (the seed leaked both). When two connections need the same
 *    auto-created bucket at once, both end up attached to it, even while its engine is still
 *    initializing (the seed created under its engines lock, so the second found the first's).
 *  - A slow engine initialize (CREATE) blocks no other connection: attaching, item calls,
 *    SELECT, LIST, stats and creating another bucket all proceed meanwhile.
 *  - Engines see the host's logger through get_extension; register_extension refuses; an
 *    engine's store_engine_specific does not touch the host's slot; a deleted bucket's library
 *    stays loaded.
 *  - destroy after create_instance alone, or after a failed initialize, frees what
 *    create_instance took (the host dlcloses the library then; under valgrind a leak shows).
 */
#define _GNU_SOURCE
#include "mock_host.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define OP_ECHO 0xe0
#define OP_ASYNC 0xe1
#define OP_GATE 0xe2

/*
 * How long a delete or an asynchronous command may take to complete: the test's whole time
 * budget (BUCKET_CONFORMANCE_TIMEOUT; the alarm that ends a hung test rings a little later), so
 * a timeout is a completion that never came, not a slow or busy machine.
 */
static int io_timeout_ms;
#define IO_TIMEOUT_MS io_timeout_ms

static const char *bucket_path;    /* libbucket_engine.so */
static const char *te_path;        /* libtest_engine.so */
static char ep_path[1024];         /* libep_stub_engine.so */
static char de_path[1024];         /* default_engine.so (a copy of the test engine) */
static char nosym_path[1024];      /* libmock_host.so: a library without create_instance */

static mh_engine *eng;
static ENGINE_HANDLE *H;
static ENGINE_HANDLE_V1 *V;
static SERVER_HANDLE_V1 *api;

/* ------------------------------------------------------------------------------------------
 * Loading
 */

/* Loads and initializes the bucket engine with the config (a printf format). */
__attribute__((format(printf, 1, 2))) static bool boot(const char *fmt, ...) {
    char config[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(config, sizeof(config), fmt, ap);
    va_end(ap);
    char err[512] = "";
    eng = mh_engine_load(bucket_path, config, err, sizeof(err));
    CHECK(eng != NULL);
    if (eng == NULL) {
        fprintf(stderr, "cannot load the bucket engine with \"%s\": %s\n", config, err);
        return false;
    }
    H = eng->handle;
    V = eng->v1;
    return true;
}

/* The usual configuration: the test engine, an admin, no default bucket, no auto-create. */
static bool boot_base(void) {
    return boot("engine=%s;admin=admin;auto_create=false", te_path);
}

/* Destroys the bucket engine; every host stats block must have been released. */
static void teardown(void) {
    if (eng != NULL) {
        mh_engine_unload(eng, false);
        eng = NULL;
    }
    CHECK_EQ_INT(mh_live_stats(), 0);
    mh_shutdown();
}

/* Expects initialize to fail with the config, with a reason logged besides the host's line. */
__attribute__((format(printf, 1, 2))) static void expect_init_failure(const char *fmt, ...) {
    char config[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(config, sizeof(config), fmt, ap);
    va_end(ap);
    char err[512] = "";
    int since = mh_log_lines();
    mh_engine *e = mh_engine_load(bucket_path, config, err, sizeof(err));
    CHECK(e == NULL);
    if (e != NULL) {
        fprintf(stderr, "initialize accepted \"%s\"\n", config);
        mh_engine_unload(e, false);
        return;
    }
    CHECK(strstr(err, "initialize") != NULL);
    /* The host logs "Failed to initialize instance of ..."; the engine must log why. */
    CHECK(mh_log_count_without(since, "Failed to initialize instance of") >= 1);
    CHECK_EQ_INT(mh_live_stats(), 0);
    mh_shutdown();
}

/* ------------------------------------------------------------------------------------------
 * Item calls, as memcached makes them for one command
 */
static ENGINE_ERROR_CODE store(mh_conn *c, const char *key, const char *val,
                               ENGINE_STORE_OPERATION op, uint64_t in_cas, uint64_t *out_cas) {
    item *it = NULL;
    size_t n = strlen(val);
    ENGINE_ERROR_CODE rc = V->allocate(H, c, &it, key, strlen(key), n, 0, 0);
    if (rc != ENGINE_SUCCESS) {
        return rc;
    }
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, c, it, &info));
    CHECK_EQ_INT(info.value[0].iov_len, n);
    memcpy(info.value[0].iov_base, val, n);
    V->item_set_cas(H, c, it, in_cas);
    uint64_t cas = 0;
    rc = V->store(H, c, it, &cas, op, 0);
    V->release(H, c, it);
    if (out_cas != NULL) {
        *out_cas = cas;
    }
    return rc;
}

static ENGINE_ERROR_CODE get(mh_conn *c, const char *key, char *buf, size_t buflen,
                             uint64_t *cas) {
    item *it = NULL;
    ENGINE_ERROR_CODE rc = V->get(H, c, &it, key, (int)strlen(key), 0);
    if (rc != ENGINE_SUCCESS) {
        return rc;
    }
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, c, it, &info));
    CHECK(info.nkey == strlen(key) && memcmp(info.key, key, info.nkey) == 0);
    size_t n = info.value[0].iov_len < buflen - 1 ? info.value[0].iov_len : buflen - 1;
    memcpy(buf, info.value[0].iov_base, n);
    buf[n] = '\0';
    if (cas != NULL) {
        *cas = info.cas;
    }
    V->release(H, c, it);
    return rc;
}

/* A get expected to find key with value val. */
static bool has(mh_conn *c, const char *key, const char *val) {
    char buf[128];
    return get(c, key, buf, sizeof(buf), NULL) == ENGINE_SUCCESS && strcmp(buf, val) == 0;
}

static ENGINE_ERROR_CODE del(mh_conn *c, const char *key, uint64_t cas) {
#ifdef MCB_ENGINE_PU
    return V->remove(H, c, key, strlen(key), cas, 0);
#else
    uint64_t inout = cas;
    return V->remove(H, c, key, strlen(key), &inout, 0);
#endif
}

static ENGINE_ERROR_CODE arith(mh_conn *c, const char *key, bool incr, bool create,
                               uint64_t delta, uint64_t initial, uint64_t *result) {
    uint64_t cas = 0;
    return V->arithmetic(H, c, key, (int)strlen(key), incr, create, delta, initial, 0, &cas,
                         result, 0);
}

/* get_stats into the connection's stat list. */
static ENGINE_ERROR_CODE stats(mh_conn *c, const char *group) {
    mh_conn_clear_stats(c);
    return V->get_stats(H, c, group, group != NULL ? (int)strlen(group) : 0, mh_add_stat);
}

/* One stat of a group, or NULL (the call must succeed). */
static const char *stat_of(mh_conn *c, const char *group, const char *key) {
    CHECK_EQ_INT(stats(c, group), ENGINE_SUCCESS);
    return mh_conn_stat(c, key);
}

static long long stat_num(mh_conn *c, const char *group, const char *key) {
    const char *v = stat_of(c, group, key);
    CHECK(v != NULL);
    if (v == NULL) {
        fprintf(stderr, "stat \"%s\" missing\n", key);
    }
    return v != NULL ? atoll(v) : -1;
}

/* ------------------------------------------------------------------------------------------
 * Binary commands
 */

/* Sends a request built from its parts through unknown_command. */
static ENGINE_ERROR_CODE cmd(mh_conn *c, uint8_t opcode, const void *ext, uint8_t extlen,
                             const void *key, uint16_t keylen, const void *value,
                             uint32_t valuelen) {
    size_t size = sizeof(protocol_binary_request_header) + extlen + keylen + valuelen;
    void *buf = malloc(size);
    CHECK(buf != NULL);
    if (buf == NULL) {
        return ENGINE_ENOMEM;
    }
    CHECK(mh_build_request(buf, size, opcode, ext, extlen, key, keylen, value, valuelen, 0) ==
          size);
    c->responses = 0;
    ENGINE_ERROR_CODE rc = V->unknown_command(H, c, buf, mh_add_response);
    free(buf);
    return rc;
}

/* The same with NUL-terminated key and value (NULL for none). */
static ENGINE_ERROR_CODE cmds(mh_conn *c, uint8_t opcode, const char *key, const char *value) {
    return cmd(c, opcode, NULL, 0, key, (uint16_t)(key != NULL ? strlen(key) : 0), value,
               (uint32_t)(value != NULL ? strlen(value) : 0));
}

/* Whether the last reply carries msg in its key or its body (a trailing newline ignored). */
static bool resp_says(const mh_conn *c, const char *msg) {
    size_t n = strlen(msg);
    const char *parts[2] = {c->resp_key, c->resp_body};
    size_t lens[2] = {c->resp_keylen, c->resp_bodylen};
    for (int i = 0; i < 2; i++) {
        size_t len = lens[i];
        while (len > 0 && (parts[i][len - 1] == '\n' || parts[i][len - 1] == '\0')) {
            len--;
        }
        if (len == n && memcmp(parts[i], msg, n) == 0) {
            return true;
        }
    }
    fprintf(stderr, "reply: key \"%.*s\" body \"%.*s\", want \"%s\"\n", (int)c->resp_keylen,
            c->resp_key, (int)c->resp_bodylen, c->resp_body, msg);
    return false;
}

/* Whether the last reply's key or body contains needle. */
static bool resp_contains(const mh_conn *c, const char *needle) {
    char key[sizeof(c->resp_key) + 1], body[sizeof(c->resp_body) + 1];
    memcpy(key, c->resp_key, c->resp_keylen);
    key[c->resp_keylen] = '\0';
    memcpy(body, c->resp_body, c->resp_bodylen);
    body[c->resp_bodylen] = '\0';
    if (strstr(key, needle) != NULL || strstr(body, needle) != NULL) {
        return true;
    }
    fprintf(stderr, "reply: key \"%s\" body \"%s\", want \"%s\" in it\n", key, body, needle);
    return false;
}

/* Whether the last reply's key or body starts with prefix. */
static bool resp_starts(const mh_conn *c, const char *prefix) {
    size_t n = strlen(prefix);
    if ((c->resp_keylen >= n && memcmp(c->resp_key, prefix, n) == 0) ||
        (c->resp_bodylen >= n && memcmp(c->resp_body, prefix, n) == 0)) {
        return true;
    }
    fprintf(stderr, "reply: key \"%.*s\" body \"%.*s\", want it to start \"%s\"\n",
            (int)c->resp_keylen, c->resp_key, (int)c->resp_bodylen, c->resp_body, prefix);
    return false;
}

/* Whether the last reply's body says "code" then (after spaces or a colon) the number want. */
static bool resp_code_is(const mh_conn *c, long want) {
    char body[sizeof(c->resp_body) + 1];
    memcpy(body, c->resp_body, c->resp_bodylen);
    body[c->resp_bodylen] = '\0';
    for (char *p = body; (p = strstr(p, "code")) != NULL; p += 4) {
        char *q = p + 4;
        q += strspn(q, ": ");
        char *end = NULL;
        long v = strtol(q, &end, 10);
        if (end != q && v == want) {
            return true;
        }
    }
    fprintf(stderr, "reply body \"%s\" does not give code %ld\n", body, want);
    return false;
}

/* A reply with exactly this status (and ENGINE_SUCCESS returned). */
#define CHECK_REPLY(rc, conn, status)                                                          \
    do {                                                                                       \
        CHECK_EQ_INT((rc), ENGINE_SUCCESS);                                                    \
        CHECK_EQ_INT((conn)->responses, 1);                                                    \
        CHECK_EQ_INT((conn)->resp_status, (status));                                           \
    } while (0)

/* A refusal: a reply with a non-SUCCESS status, or EINVAL / DISCONNECT with no reply. */
static bool refused(ENGINE_ERROR_CODE rc, const mh_conn *c) {
    if (rc == ENGINE_SUCCESS) {
        return c->responses == 1 && c->resp_status != PROTOCOL_BINARY_RESPONSE_SUCCESS;
    }
    return (rc == ENGINE_EINVAL || rc == ENGINE_DISCONNECT) && c->responses == 0;
}

/* An admin connection: memcached fires ON_AUTH after the SASL exchange. */
static mh_conn *admin_conn(void) {
    mh_conn *c = mh_conn_open();
    CHECK(c != NULL);
    mh_conn_auth(c, "admin", NULL);
    return c;
}

/* A connection authenticated as user (attached to the bucket of that name, if any). */
static mh_conn *user_conn(const char *user) {
    mh_conn *c = mh_conn_open();
    CHECK(c != NULL);
    mh_conn_auth(c, user, NULL);
    return c;
}

static ENGINE_ERROR_CODE create_op(mh_conn *c, uint8_t opcode, const char *name,
                                   const char *path, const char *config) {
    char body[2048];
    size_t n = strlen(path);
    memcpy(body, path, n);
    if (config != NULL) {
        body[n++] = '\0';
        size_t m = strlen(config);
        memcpy(body + n, config, m);
        n += m;
    }
    return cmd(c, opcode, NULL, 0, name, (uint16_t)strlen(name), body, (uint32_t)n);
}

static ENGINE_ERROR_CODE create(mh_conn *c, const char *name, const char *path,
                                const char *config) {
    return create_op(c, CREATE_BUCKET, name, path, config);
}

/* Creates a test-engine bucket whose engine knows its name (stat engine_name). */
static bool create_ok(mh_conn *admin, const char *name) {
    char config[256];
    snprintf(config, sizeof(config), "name=%s", name);
    ENGINE_ERROR_CODE rc = create(admin, name, te_path, config);
    bool ok = rc == ENGINE_SUCCESS && admin->responses == 1 &&
              admin->resp_status == PROTOCOL_BINARY_RESPONSE_SUCCESS;
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "create %s: rc %d status 0x%x\n", name, (int)rc, admin->resp_status);
    }
    return ok;
}

/*
 * The whole DELETE exchange: EWOULDBLOCK, notify_io_complete, the retried call. Returns the
 * final reply's status, or -1 when the exchange went wrong.
 */
static int delete_op(mh_conn *c, uint8_t opcode, const char *name, const char *config) {
    ENGINE_ERROR_CODE rc =
        cmd(c, opcode, NULL, 0, name, (uint16_t)strlen(name), config,
            (uint32_t)(config != NULL ? strlen(config) : 0));
    if (rc == ENGINE_SUCCESS) {
        CHECK_EQ_INT(c->responses, 1);
        return c->responses == 1 ? c->resp_status : -1;
    }
    CHECK_EQ_INT(rc, ENGINE_EWOULDBLOCK);
    if (rc != ENGINE_EWOULDBLOCK) {
        return -1;
    }
    CHECK_EQ_INT(c->responses, 0);
    ENGINE_ERROR_CODE io = mh_conn_wait_io(c, IO_TIMEOUT_MS);
    CHECK_EQ_INT(io, ENGINE_SUCCESS);
    if (io != ENGINE_SUCCESS) {
        return -1;
    }
    rc = cmd(c, opcode, NULL, 0, name, (uint16_t)strlen(name), config,
             (uint32_t)(config != NULL ? strlen(config) : 0));
    CHECK_EQ_INT(rc, ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    return rc == ENGINE_SUCCESS && c->responses == 1 ? c->resp_status : -1;
}

static int delete_bucket(mh_conn *c, const char *name, const char *config) {
    return delete_op(c, DELETE_BUCKET, name, config);
}

/* LIST into buf (NUL-terminated); returns the reply status or -1. */
static int list_op(mh_conn *c, uint8_t opcode, char *buf, size_t buflen) {
    ENGINE_ERROR_CODE rc = cmds(c, opcode, NULL, NULL);
    CHECK_EQ_INT(rc, ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    if (rc != ENGINE_SUCCESS || c->responses != 1) {
        return -1;
    }
    size_t n = c->resp_bodylen < buflen - 1 ? c->resp_bodylen : buflen - 1;
    memcpy(buf, c->resp_body, n);
    buf[n] = '\0';
    return c->resp_status;
}

/* How many times `word` occurs as a space-separated word of `list`. */
static int word_count(const char *list, const char *word, size_t wlen) {
    int n = 0;
    for (const char *p = list; *p != '\0';) {
        while (*p == ' ') {
            p++;
        }
        size_t len = strcspn(p, " ");
        if (len > 0 && len == wlen && memcmp(p, word, len) == 0) {
            n++;
        }
        p += len;
    }
    return n;
}

/* Whether every word of `a` occurs exactly once in `b`. */
static bool words_once_in(const char *a, const char *b) {
    for (const char *p = a; *p != '\0';) {
        while (*p == ' ') {
            p++;
        }
        size_t len = strcspn(p, " ");
        if (len > 0 && word_count(b, p, len) != 1) {
            return false;
        }
        p += len;
    }
    return true;
}

/*
 * Whether LIST names exactly the space-separated names in `want` (any order), with single
 * spaces and no leading or trailing space.
 */
static bool list_is(mh_conn *c, const char *want) {
    char got[4096];
    if (list_op(c, LIST_BUCKETS, got, sizeof(got)) != PROTOCOL_BINARY_RESPONSE_SUCCESS) {
        return false;
    }
    size_t len = strlen(got);
    bool ok = !(len > 0 && (got[0] == ' ' || got[len - 1] == ' ' || strstr(got, "  ") != NULL));
    ok = ok && words_once_in(got, want) && words_once_in(want, got);
    if (!ok) {
        fprintf(stderr, "LIST is \"%s\", want \"%s\"\n", got, want);
    }
    return ok;
}

static void wait_for_live(int want) {
    for (int i = 0; i < 30000 && mh_live_connections() != want; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_INT(mh_live_connections(), want);
}

/* ------------------------------------------------------------------------------------------
 * A call held inside a bucket: get_stats whose ADD_STAT blocks until the gate opens.
 */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static int hold_entered;
static bool hold_open;

static void holding_add_stat(const char *key, const uint16_t klen, const char *val,
                             const uint32_t vlen, const void *cookie) {
    (void)key, (void)klen, (void)val, (void)vlen, (void)cookie;
    pthread_mutex_lock(&hold_lock);
    hold_entered++;
    pthread_cond_broadcast(&hold_cond);
    while (!hold_open) {
        pthread_cond_wait(&hold_cond, &hold_lock);
    }
    pthread_mutex_unlock(&hold_lock);
}

typedef struct {
    pthread_t thread;
    mh_conn *conn;
    ENGINE_ERROR_CODE rc;
} held_call;

static void *held_call_main(void *arg) {
    held_call *h = arg;
    h->rc = V->get_stats(H, h->conn, NULL, 0, holding_add_stat);
    return NULL;
}

/* Starts a get_stats on conn and returns once it is inside the bucket's engine. */
static void hold_start(held_call *h, mh_conn *conn) {
    pthread_mutex_lock(&hold_lock);
    hold_entered = 0;
    hold_open = false;
    pthread_mutex_unlock(&hold_lock);
    h->conn = conn;
    h->rc = ENGINE_FAILED;
    CHECK(pthread_create(&h->thread, NULL, held_call_main, h) == 0);
    pthread_mutex_lock(&hold_lock);
    while (hold_entered == 0) {
        pthread_cond_wait(&hold_cond, &hold_lock);
    }
    pthread_mutex_unlock(&hold_lock);
}

/* Lets the held call finish and joins it. */
static void hold_finish(held_call *h) {
    pthread_mutex_lock(&hold_lock);
    hold_open = true;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
    CHECK(pthread_join(h->thread, NULL) == 0);
    CHECK_EQ_INT(h->rc, ENGINE_SUCCESS);
}

/* ------------------------------------------------------------------------------------------
 * Interface and configuration
 */
static void test_create_instance_interface(void) {
    void *dl = dlopen(bucket_path, RTLD_NOW | RTLD_LOCAL);
    CHECK(dl != NULL);
    if (dl == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", bucket_path, dlerror());
        return;
    }
    void *sym = dlsym(dl, "create_instance");
    CHECK(sym != NULL);
    if (sym != NULL) {
        CREATE_INSTANCE create_fn;
        memcpy(&create_fn, &sym, sizeof(create_fn));
        ENGINE_HANDLE *h = NULL;
        CHECK_EQ_INT(create_fn(2, mh_get_server_api, &h), ENGINE_ENOTSUP);
        CHECK(h == NULL);
        CHECK_EQ_INT(create_fn(0, mh_get_server_api, &h), ENGINE_ENOTSUP);
        CHECK(h == NULL);
        CHECK_EQ_INT(create_fn(1, mh_get_server_api, &h), ENGINE_SUCCESS);
        CHECK(h != NULL && h->interface == 1);
        if (h != NULL) {
            /* destroy before initialize is harmless */
            ((ENGINE_HANDLE_V1 *)h)->destroy(h, false);
        }
    }
    dlclose(dl);
    mh_shutdown();
}

static void test_get_info(void) {
    if (!boot_base()) {
        return;
    }
    const engine_info *info = V->get_info(H);
    CHECK(info != NULL);
    if (info != NULL) {
        CHECK_EQ_STR(info->description, "Bucket engine v0.2");
        CHECK_EQ_INT(info->num_features, 1);
        CHECK_EQ_INT(info->features[0].feature, ENGINE_FEATURE_MULTI_TENANCY);
        CHECK_EQ_STR(info->features[0].description, "Multi tenancy");
    }
    teardown();
}

static void test_init_null_config(void) {
    char err[512] = "";
    eng = mh_engine_load(bucket_path, NULL, err, sizeof(err));
    CHECK(eng != NULL);
    if (eng == NULL) {
        fprintf(stderr, "initialize(NULL): %s\n", err);
        return;
    }
    H = eng->handle;
    V = eng->v1;
    /* No engine, no default bucket: a connection has no bucket. */
    mh_conn *c = mh_conn_open();
    char buf[16];
    CHECK_EQ_INT(get(c, "k", buf, sizeof(buf), NULL), ENGINE_DISCONNECT);
    mh_conn_close(c);
    teardown();
}

static void test_init_unknown_key_fails(void) {
    expect_init_failure("engine=%s;admin=admin;no_such_key=1", te_path);
}

static void test_init_bad_default_value_fails(void) {
    expect_init_failure("engine=%s;default=maybe", te_path);
}

static void test_init_bad_auto_create_value_fails(void) {
    expect_init_failure("engine=%s;auto_create=perhaps", te_path);
}

static void test_init_missing_config_file_fails(void) {
    expect_init_failure("engine=%s;config_file=/nonexistent/bucket.conf", te_path);
}

static void test_init_default_bucket_load_failure_fails(void) {
    expect_init_failure("engine=/nonexistent/libnope.so;default=true");
}

static void test_init_default_bucket_config_rejected_fails(void) {
    /* The test engine refuses an unknown key, so the default bucket cannot initialize. */
    expect_init_failure("engine=%s;default=true;default_bucket_config=bogus\\=1", te_path);
}

static void test_config_default_bucket(void) {
    if (!boot("engine=%s;default=true;default_bucket_config=name\\=dflt;admin=admin", te_path)) {
        return;
    }
    mh_conn *c = mh_conn_open();
    mh_conn *d = mh_conn_open();
    CHECK_EQ_INT(store(c, "dk", "dv", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK(has(d, "dk", "dv")); /* one unnamed bucket shared by connections without one */
    CHECK_EQ_STR(stat_of(c, NULL, "engine_name"), "dflt");
    mh_conn *a = admin_conn(); /* auto_create: the admin gets a bucket named "admin" */
    CHECK(list_is(a, "admin"));  /* the default bucket is not listed */
    mh_conn_close(a);
    mh_conn_close(d);
    mh_conn_close(c);
    teardown();
}

static void test_config_default_bucket_name_auto_create(void) {
    if (!boot("engine=%s;admin=admin;default_bucket_name=dbn;default_bucket_config=name\\=dbn",
              te_path)) {
        return;
    }
    mh_conn *c = mh_conn_open(); /* creates dbn */
    CHECK_EQ_STR(stat_of(c, NULL, "engine_name"), "dbn");
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    mh_conn *d = mh_conn_open(); /* attaches to the same dbn */
    CHECK(has(d, "k", "v"));
    mh_conn *a = admin_conn();
    CHECK(list_is(a, "dbn admin"));
    mh_conn_close(a);
    mh_conn_close(d);
    mh_conn_close(c);
    teardown();
}

static void test_config_default_bucket_name_no_auto_create(void) {
    if (!boot("engine=%s;admin=admin;default_bucket_name=dbn;auto_create=false", te_path)) {
        return;
    }
    mh_conn *c = mh_conn_open(); /* dbn does not exist: no bucket */
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_DISCONNECT);
    mh_conn *a = admin_conn();
    CHECK(list_is(a, ""));
    if (create_ok(a, "dbn")) {
        mh_conn *d = mh_conn_open(); /* now attached to dbn */
        CHECK_EQ_STR(stat_of(d, NULL, "engine_name"), "dbn");
        mh_conn_close(d);
    }
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_DISCONNECT);
    mh_conn_close(a);
    mh_conn_close(c);
    teardown();
}

static void test_config_file(void) {
    char path[] = "/tmp/bucket_conformance_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    FILE *f = fdopen(fd, "w");
    CHECK(f != NULL);
    if (f == NULL) {
        close(fd);
        unlink(path);
        return;
    }
    fprintf(f, "# bucket engine settings\nengine=%s\nadmin=admin\nauto_create=false\n", te_path);
    fclose(f);
    bool ok = boot("config_file=%s", path);
    unlink(path);
    if (!ok) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "fromfile")); /* engine and admin came from the file */
    CHECK(list_is(a, "fromfile"));   /* and auto_create=false: no "admin" bucket */
    mh_conn_close(a);
    teardown();
}

/* ------------------------------------------------------------------------------------------
 * Connections
 */
static void test_on_auth_attaches_user_bucket(void) {
    if (!boot("engine=%s;admin=admin", te_path)) { /* auto_create defaults to true */
        return;
    }
    mh_conn *c = mh_conn_open();
    mh_conn_auth(c, "alice", "name=alice-cfg"); /* creates alice with the auth config */
    CHECK_EQ_STR(stat_of(c, NULL, "engine_name"), "alice-cfg");
    CHECK_EQ_INT(store(c, "k", "alice", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    mh_conn *c2 = user_conn("alice");
    CHECK(has(c2, "k", "alice"));
    mh_conn *b = user_conn("bob");
    char buf[16];
    CHECK_EQ_INT(get(b, "k", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    /* Authenticating again moves the connection to the other user's bucket. */
    mh_conn_auth(c2, "bob", NULL);
    CHECK_EQ_INT(get(c2, "k", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    mh_conn *a = admin_conn();
    CHECK(list_is(a, "alice bob admin"));
    mh_conn_close(a);
    mh_conn_close(b);
    mh_conn_close(c2);
    mh_conn_close(c);
    teardown();
}

static void test_on_auth_without_auto_create(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "carol"));
    mh_conn *c = user_conn("carol");
    CHECK_EQ_STR(stat_of(c, NULL, "engine_name"), "carol");
    mh_conn *d = user_conn("dave"); /* no bucket dave, no auto-create */
    char buf[16];
    CHECK_EQ_INT(get(d, "k", buf, sizeof(buf), NULL), ENGINE_DISCONNECT);
    /* Authenticating as a user without a bucket detaches the connection (as the seed). */
    mh_conn_auth(c, "dave", NULL);
    CHECK_EQ_INT(get(c, "k", buf, sizeof(buf), NULL), ENGINE_DISCONNECT);
    CHECK(list_is(a, "carol"));
    mh_conn_close(d);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static void test_on_disconnect_forwarded_to_its_bucket(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "da"));
    CHECK(create_ok(a, "db"));
    CHECK_EQ_INT(create(a, "dep", ep_path, NULL), ENGINE_SUCCESS); /* never registers */
    mh_conn *pa = user_conn("da");
    mh_conn *pb = user_conn("db");
    long long before_a = stat_num(pa, NULL, "disconnects");
    long long before_b = stat_num(pb, NULL, "disconnects");
    for (int i = 0; i < 3; i++) {
        mh_conn_close(user_conn("da"));
    }
    for (int i = 0; i < 2; i++) {
        mh_conn_close(user_conn("db"));
    }
    mh_conn_close(user_conn("dep"));    /* its engine did not ask: nothing forwarded */
    mh_conn_close(mh_conn_open());      /* no bucket */
    mh_conn_close(user_conn("nobody")); /* no such bucket */
    CHECK_EQ_INT(stat_num(pa, NULL, "disconnects"), before_a + 3);
    CHECK_EQ_INT(stat_num(pb, NULL, "disconnects"), before_b + 2);
    mh_conn_close(pb);
    mh_conn_close(pa);
    mh_conn_close(a);
    teardown();
}

static void test_disconnect_while_reserved(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "res"));
    mh_conn *probe = user_conn("res");
    CHECK_EQ_INT(stat_num(probe, NULL, "bucket_conns"), 1);
    int live = mh_live_connections();
    mh_conn *c = user_conn("res");
    /* The engine reserves the cookie (through the bucket engine) and completes later. */
    CHECK_EQ_INT(cmds(c, OP_ASYNC, "x", "wait"), ENGINE_EWOULDBLOCK);
    mh_conn_close(c);
    CHECK_EQ_INT(mh_live_connections(), live + 1); /* closed but still reserved */
    /* The bucket keeps working for everyone else. */
    CHECK_EQ_INT(store(probe, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(cmds(probe, OP_GATE, NULL, NULL), ENGINE_SUCCESS);
    wait_for_live(live); /* the engine's release was the last: the connection is gone */
    /* ... and it no longer holds the bucket (the seed kept its reference forever). */
    CHECK_EQ_INT(stat_num(probe, NULL, "bucket_conns"), 1);
    mh_conn_close(probe);
    CHECK_EQ_INT(delete_bucket(a, "res", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(list_is(a, ""));
    mh_conn_close(a);
    teardown();
}

/* ------------------------------------------------------------------------------------------
 * Proxied calls
 */
#ifndef MCB_ENGINE_PU
static int vbmap_calls;
static ENGINE_ERROR_CODE vbmap_cb(const void *cookie, const void *map, size_t mapsize) {
    (void)cookie;
    vbmap_calls++;
    CHECK(mapsize == 10 && memcmp(map, "test-vbmap", 10) == 0);
    return ENGINE_SUCCESS;
}
#endif

/* Every engine call on a connection whose bucket is missing or not RUNNING. */
static void expect_all_disconnected(mh_conn *c) {
    char dummy_item[64] = {0}; /* never handed to an engine */
    item *it = NULL;
    CHECK_EQ_INT(V->allocate(H, c, &it, "k", 1, 1, 0, 0), ENGINE_DISCONNECT);
    CHECK_EQ_INT(del(c, "k", 0), ENGINE_DISCONNECT);
    CHECK_EQ_INT(V->get(H, c, &it, "k", 1, 0), ENGINE_DISCONNECT);
    uint64_t cas = 0, result = 0;
    CHECK_EQ_INT(V->store(H, c, dummy_item, &cas, OPERATION_SET, 0), ENGINE_DISCONNECT);
    CHECK_EQ_INT(arith(c, "k", true, true, 1, 1, &result), ENGINE_DISCONNECT);
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_DISCONNECT);
    CHECK_EQ_INT(stats(c, NULL), ENGINE_DISCONNECT);
    CHECK_EQ_INT(c->nstats, 0);
    CHECK_EQ_INT(stats(c, "tap"), ENGINE_DISCONNECT);
    CHECK_EQ_INT(cmds(c, OP_ECHO, "k", "v"), ENGINE_DISCONNECT);
    CHECK_EQ_INT(c->responses, 0);
    CHECK_EQ_INT(V->tap_notify(H, c, NULL, 0, 0, 0, TAP_MUTATION, 1, "k", 1, 0, 0, 0, "v", 1, 0),
                 ENGINE_DISCONNECT);
    CHECK(V->get_tap_iterator(H, c, "client", 6, 0, NULL, 0) == NULL);
    V->release(H, c, dummy_item);
    item_info info = {.nvalue = 1};
    CHECK(!V->get_item_info(H, c, dummy_item, &info));
    V->item_set_cas(H, c, dummy_item, 42);
    V->reset_stats(H, c);
    char buf[64] = "";
    CHECK_EQ_INT(V->errinfo(H, c, buf, sizeof(buf)), 0);
    CHECK(V->get_stats_struct(H, c) == NULL);
#ifndef MCB_ENGINE_PU
    vbmap_calls = 0;
    CHECK_EQ_INT(V->get_engine_vb_map(H, c, vbmap_cb), ENGINE_SUCCESS); /* the seed's try form */
    CHECK_EQ_INT(vbmap_calls, 0);
#endif
    for (size_t i = 0; i < sizeof(dummy_item); i++) {
        CHECK(dummy_item[i] == 0);
    }
    (void)cas;
}

static void test_proxied_calls_without_bucket(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *c = mh_conn_open();
    expect_all_disconnected(c);
    mh_conn *u = user_conn("ghost"); /* authenticated, but no such bucket */
    expect_all_disconnected(u);
    mh_conn_close(u);
    mh_conn_close(c);
    teardown();
}

static void test_proxied_calls_reach_the_bucket(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "px"));
    mh_conn *c = user_conn("px");
    uint64_t cas = 0, got_cas = 0, result = 0;
    char buf[64];
    CHECK_EQ_INT(store(c, "k", "1", OPERATION_ADD, 0, &cas), ENGINE_SUCCESS);
    CHECK(cas != 0);
    CHECK_EQ_INT(store(c, "k", "1", OPERATION_ADD, 0, NULL), ENGINE_NOT_STORED);
    CHECK_EQ_INT(get(c, "k", buf, sizeof(buf), &got_cas), ENGINE_SUCCESS);
    CHECK_EQ_STR(buf, "1");
    CHECK(got_cas == cas);
    CHECK_EQ_INT(store(c, "k", "2", OPERATION_CAS, cas + 99, NULL), ENGINE_KEY_EEXISTS);
    CHECK_EQ_INT(arith(c, "k", true, false, 5, 0, &result), ENGINE_SUCCESS);
    CHECK_EQ_INT(result, 6);
    CHECK_EQ_INT(arith(c, "none", false, false, 1, 0, &result), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(del(c, "k", 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(del(c, "k", 0), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(V->tap_notify(H, c, NULL, 0, 0, 0, TAP_MUTATION, 1, "t", 1, 0, 0, 0, "tv", 2, 0),
                 ENGINE_SUCCESS);
    CHECK(has(c, "t", "tv"));
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "t", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    CHECK(stat_num(c, NULL, "cmd_get") > 0);
    V->reset_stats(H, c);
    CHECK_EQ_INT(stat_num(c, NULL, "cmd_get"), 0);
    CHECK_EQ_STR(stat_of(c, "tap", "tap_connections"), "0");
    CHECK(mh_conn_stat(c, "bucket_conns") == NULL); /* only for the empty key */
    CHECK_EQ_INT(stats(c, "bogus"), ENGINE_KEY_ENOENT); /* the engine's own answer */
    CHECK(V->get_stats_struct(H, c) != NULL);
    CHECK_EQ_INT(V->errinfo(H, c, buf, sizeof(buf)), 0);
#ifndef MCB_ENGINE_PU
    vbmap_calls = 0;
    CHECK_EQ_INT(V->get_engine_vb_map(H, c, vbmap_cb), ENGINE_SUCCESS);
    CHECK_EQ_INT(vbmap_calls, 1);
#endif
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static void test_proxied_calls_on_deleted_bucket(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "gone"));
    mh_conn *c = user_conn("gone");
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    /* The delete completes although c is still attached. */
    CHECK_EQ_INT(delete_bucket(a, "gone", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    expect_all_disconnected(c);
    /* A new bucket of the same name is not the one c was attached to. */
    CHECK(create_ok(a, "gone"));
    expect_all_disconnected(c);
    mh_conn *d = user_conn("gone");
    char buf[16];
    CHECK_EQ_INT(get(d, "k", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    mh_conn_close(d);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static void test_other_opcodes_proxied(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "ox"));
    CHECK_EQ_INT(create(a, "oep", ep_path, NULL), ENGINE_SUCCESS);
    mh_conn *c = user_conn("ox");
    const char ext[4] = {9, 8, 7, 6};
    CHECK_EQ_INT(cmd(c, OP_ECHO, ext, 4, "ek", 2, "ev", 2), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(c->resp_keylen == 2 && memcmp(c->resp_key, "ek", 2) == 0);
    CHECK(c->resp_extlen == 4 && memcmp(c->resp_ext, ext, 4) == 0);
    CHECK(c->resp_bodylen == 2 && memcmp(c->resp_body, "ev", 2) == 0);
    CHECK(c->resp_cas == 0xabc);
    CHECK_EQ_INT(cmds(c, 0x99, "k", NULL), ENGINE_ENOTSUP);
    CHECK_EQ_INT(c->responses, 0);
    /* EWOULDBLOCK from the engine, completed through notify_io_complete. */
    CHECK_EQ_INT(cmds(c, OP_ASYNC, "k", NULL), ENGINE_EWOULDBLOCK);
    CHECK_EQ_INT(mh_conn_wait_io(c, IO_TIMEOUT_MS), ENGINE_SUCCESS);
    CHECK_EQ_INT(cmds(c, OP_ASYNC, "k", NULL), ENGINE_SUCCESS);
    CHECK(c->resp_bodylen == 10 && memcmp(c->resp_body, "async done", 10) == 0);
    /* The same opcode on a connection of another bucket reaches that bucket's engine. */
    mh_conn *e = user_conn("oep");
    CHECK_EQ_INT(cmds(e, OP_ECHO, "k", "v"), ENGINE_ENOTSUP);
    CHECK_EQ_INT(e->responses, 0);
    mh_conn_close(e);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

/* ------------------------------------------------------------------------------------------
 * Admin commands
 */
static void test_admin_create(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    ENGINE_ERROR_CODE rc = create(a, "b1", te_path, "name=b1");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    rc = create(a, "b2", te_path, NULL); /* path only: empty config */
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    rc = create(a, "b3", ep_path, ""); /* another engine */
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(list_is(a, "b1 b2 b3"));
    mh_conn *c1 = user_conn("b1"), *c2 = user_conn("b2"), *c3 = user_conn("b3");
    CHECK_EQ_STR(stat_of(c1, NULL, "engine_name"), "b1");
    CHECK_EQ_STR(stat_of(c2, NULL, "engine_name"), "");
    CHECK_EQ_STR(stat_of(c3, NULL, "engine"), "ep_stub");
    CHECK_EQ_INT(store(c1, "k", "one", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    char buf[16];
    CHECK_EQ_INT(get(c2, "k", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT); /* isolated */
    mh_conn_close(c3);
    mh_conn_close(c2);
    mh_conn_close(c1);
    mh_conn_close(a);
    teardown();
}

static void test_admin_create_empty_spec(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    ENGINE_ERROR_CODE rc = cmds(a, CREATE_BUCKET, "e1", NULL); /* no body at all */
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_EINVAL);
    CHECK(resp_says(a, "Invalid request."));
    rc = cmd(a, CREATE_BUCKET, NULL, 0, "e2", 2, "\0name=e2", 8); /* NUL first: empty path */
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_EINVAL);
    CHECK(resp_says(a, "Invalid request."));
    CHECK(list_is(a, ""));
    mh_conn_close(a);
    teardown();
}

static void test_admin_create_exists(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "twice"));
    mh_conn *c = user_conn("twice");
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    ENGINE_ERROR_CODE rc = create(a, "twice", te_path, "name=other");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS);
    CHECK(resp_says(a, "Bucket exists: running"));
    CHECK(has(c, "k", "v")); /* the first bucket is untouched */
    CHECK_EQ_STR(stat_of(c, NULL, "engine_name"), "twice");
    CHECK(list_is(a, "twice"));
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static bool library_mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    if (f == NULL) {
        return false;
    }
    char line[1024];
    bool found = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, name) != NULL) {
            found = true;
        }
    }
    fclose(f);
    return found;
}

static void test_admin_create_load_failure(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    int since = mh_log_lines();
    ENGINE_ERROR_CODE rc = create(a, "nolib", "/nonexistent/libnope.so", "");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_NOT_STORED);
    CHECK(resp_starts(a, "Failed to load engine"));
    CHECK(mh_log_contains(since, "/nonexistent/libnope.so"));

    /* A library without create_instance: refused, and closed again (the seed leaked it). */
    CHECK(!library_mapped("libmock_host.so"));
    since = mh_log_lines();
    rc = create(a, "nosym", nosym_path, "");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_NOT_STORED);
    CHECK(resp_starts(a, "Failed to load engine"));
    CHECK(mh_log_contains(since, "create_instance"));
    CHECK(mh_log_contains(since, nosym_path));
    CHECK(!library_mapped("libmock_host.so"));

    CHECK(list_is(a, ""));
    CHECK(create_ok(a, "nolib")); /* the names are free */
    CHECK(list_is(a, "nolib"));
    mh_conn_close(a);
    teardown();
}

static void test_admin_create_init_failure(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    int since = mh_log_lines();
    ENGINE_ERROR_CODE rc = create(a, "badcfg", te_path, "bogus=1");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_NOT_STORED);
    CHECK(resp_contains(a, "Failed to initialize instance"));
    /* The engine's own code (ENGINE_EINVAL); the seed printed its variable, 0. */
    CHECK(resp_code_is(a, 5));
    CHECK(mh_log_contains(since, te_path));
    CHECK(list_is(a, ""));
    CHECK(create_ok(a, "badcfg"));
    mh_conn_close(a);
    teardown();
}

static void test_admin_create_invalid_names(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    const char *bad[] = {"bad/name", "a b", "semi;colon", "star*", "dollar$", "quote\""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ENGINE_ERROR_CODE rc = create(a, bad[i], te_path, "");
        CHECK(refused(rc, a));
    }
    CHECK(list_is(a, ""));
    char longest[102];
    memset(longest, 'n', 101);
    longest[101] = '\0';
    CHECK(create_ok(a, longest)); /* any length a key carries (issue 12) */
    CHECK_EQ_INT(delete_bucket(a, longest, NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(create_ok(a, "a.b%c_d-9Z")); /* every allowed character */
    CHECK(list_is(a, "a.b%c_d-9Z"));
    mh_conn_close(a);
    teardown();
}

typedef struct {
    mh_conn *admin;
    ENGINE_ERROR_CODE rc;
} slow_create;

static void *slow_create_main(void *arg) {
    slow_create *s = arg;
    s->rc = create(s->admin, "slow", ep_path, "slow=true");
    return NULL;
}

typedef struct {
    void (*finish)(void);
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    bool fired;
} watchdog;

static void *watchdog_main(void *arg) {
    watchdog *w = arg;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 20;
    pthread_mutex_lock(&w->lock);
    while (!w->done) {
        if (pthread_cond_timedwait(&w->cond, &w->lock, &deadline) == ETIMEDOUT) {
            w->fired = true;
            w->finish(); /* the lookups were stuck behind the slow engine */
            break;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void test_admin_create_slow_engine_blocks_nobody(void) {
    if (!boot_base()) {
        return;
    }
    /* The stub's own knob: the same library, so the same instance of its globals. */
    void *dl = dlopen(ep_path, RTLD_NOW | RTLD_LOCAL);
    CHECK(dl != NULL);
    if (dl == NULL) {
        teardown();
        return;
    }
    void *f = dlsym(dl, "ep_stub_finish_slow_init");
    void *w = dlsym(dl, "ep_stub_slow_waiting");
    void *aw = dlsym(dl, "ep_stub_await");
    CHECK(f != NULL && w != NULL && aw != NULL);
    if (f == NULL || w == NULL || aw == NULL) {
        dlclose(dl);
        teardown();
        return;
    }
    void (*finish)(void);
    int (*waiting)(void);
    void (*await)(int, int);
    memcpy(&finish, &f, sizeof(finish));
    memcpy(&waiting, &w, sizeof(waiting));
    memcpy(&await, &aw, sizeof(await));

    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "fast"));
    mh_conn *u = user_conn("fast");
    CHECK_EQ_INT(store(u, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    slow_create sc = {.admin = admin_conn(), .rc = ENGINE_FAILED};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, slow_create_main, &sc) == 0);
    await(1, 0); /* the create is inside the slow initialize */
    CHECK_EQ_INT(waiting(), 1);

    watchdog wd = {.finish = finish, .lock = PTHREAD_MUTEX_INITIALIZER,
                   .cond = PTHREAD_COND_INITIALIZER};
    pthread_t wt;
    CHECK(pthread_create(&wt, NULL, watchdog_main, &wd) == 0);
    /* While "slow" warms up, everything else goes on: lookups, attaches, calls, admin. */
    mh_conn *u2 = user_conn("fast");
    CHECK(has(u2, "k", "v"));
    CHECK_EQ_INT(cmds(a, SELECT_BUCKET, "fast", NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(a->resp_status, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(list_op(a, LIST_BUCKETS, (char[256]){0}, 256), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(create_ok(a, "other"));
    CHECK_EQ_STR(stat_of(a, "bucket", "fast"), "running");
    mh_conn_close(u2);
    pthread_mutex_lock(&wd.lock);
    wd.done = true;
    pthread_cond_broadcast(&wd.cond);
    pthread_mutex_unlock(&wd.lock);
    CHECK(pthread_join(wt, NULL) == 0);
    CHECK(!wd.fired);
    if (wd.fired) {
        fprintf(stderr, "lookups waited for a slow engine's initialize\n");
    }
    finish();
    CHECK(pthread_join(t, NULL) == 0);
    CHECK_REPLY(sc.rc, sc.admin, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(list_is(a, "fast other slow"));
    mh_conn_close(sc.admin);
    mh_conn_close(u);
    mh_conn_close(a);
    teardown();
    dlclose(dl);
}

static void test_engine_server_api(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    int since = mh_log_lines();
    /* The stub's initialize checks that get_extension passes the host's logger through and that
     * register_extension refuses, and fails otherwise. */
    ENGINE_ERROR_CODE rc = create(a, "probe", ep_path, "probe_extensions=true");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(mh_log_contains(since, "ep stub: probing extensions"));
    /* Each engine keeps its own engine-specific pointer: the test engine parks its pending
     * ASYNC there while the bucket engine keeps its own connection state in the host's slot. */
    CHECK(create_ok(a, "es"));
    mh_conn *c = user_conn("es");
    void *host_slot = c->engine_specific; /* the bucket engine's own, if it uses the slot */
    CHECK_EQ_INT(cmds(c, OP_ASYNC, "k", NULL), ENGINE_EWOULDBLOCK);
    CHECK(c->engine_specific == host_slot);
    CHECK_EQ_INT(mh_conn_wait_io(c, IO_TIMEOUT_MS), ENGINE_SUCCESS);
    CHECK_EQ_INT(cmds(c, OP_ASYNC, "k", NULL), ENGINE_SUCCESS);
    CHECK(c->resp_bodylen == 10 && memcmp(c->resp_body, "async done", 10) == 0);
    CHECK(c->engine_specific == host_slot);
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS); /* still attached */
    mh_conn_close(c);
    /* A deleted engine's library stays loaded (an engine may still run code of it). */
    CHECK(library_mapped("libep_stub_engine.so"));
    CHECK_EQ_INT(delete_bucket(a, "probe", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(library_mapped("libep_stub_engine.so"));
    mh_conn_close(a);
    teardown();
}

static void test_topkeys_bad_env_disables(void) {
    setenv("MEMCACHED_TOP_KEYS", "-5", 1); /* the seed: atoi, negative means 0 */
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "neg"));
    mh_conn *c = user_conn("neg");
    char buf[16];
    CHECK_EQ_INT(get(c, "k", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    ENGINE_ERROR_CODE rc = stats(c, "topkeys");
    CHECK(rc == ENGINE_SUCCESS || rc == ENGINE_KEY_ENOENT || rc == ENGINE_ENOTSUP);
    CHECK_EQ_INT(c->nstats, 0);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static void test_admin_delete(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "del"));
    CHECK(create_ok(a, "stay"));
    mh_conn *s = user_conn("stay");
    CHECK_EQ_INT(store(s, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(delete_bucket(a, "del", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(list_is(a, "stay"));
    CHECK(has(s, "k", "v"));
    CHECK(create_ok(a, "del")); /* the name is free again */
    CHECK_EQ_INT(delete_bucket(a, "del", "force=true"), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(create_ok(a, "del"));
    CHECK_EQ_INT(delete_bucket(a, "del", "force=false"), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(list_is(a, "stay"));
    mh_conn_close(s);
    mh_conn_close(a);
    teardown();
}

static void test_admin_delete_missing(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    ENGINE_ERROR_CODE rc = cmds(a, DELETE_BUCKET, "nope", NULL);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    CHECK(resp_says(a, "Not found."));
    mh_conn_close(a);
    teardown();
}

static void test_admin_delete_bad_config(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "keep"));
    ENGINE_ERROR_CODE rc = cmds(a, DELETE_BUCKET, "keep", "force=maybe");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_EINVAL);
    CHECK(resp_says(a, "Invalid config parameters"));
    rc = cmds(a, DELETE_BUCKET, "keep", "bogus=1");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_EINVAL);
    CHECK(resp_says(a, "Invalid config parameters"));
    rc = cmds(a, DELETE_BUCKET, "keep", "force");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_EINVAL);
    CHECK(list_is(a, "keep")); /* untouched */
    mh_conn *c = user_conn("keep");
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    mh_conn_close(c);
    CHECK_EQ_INT(delete_bucket(a, "keep", "force=true"), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    mh_conn_close(a);
    teardown();
}

static void test_admin_delete_own_bucket(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "own"));
    CHECK_EQ_INT(cmds(a, SELECT_BUCKET, "own", NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(a->resp_status, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(store(a, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(delete_bucket(a, "own", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    char buf[16];
    CHECK_EQ_INT(get(a, "k", buf, sizeof(buf), NULL), ENGINE_DISCONNECT); /* detached */
    CHECK(list_is(a, ""));
    CHECK(create_ok(a, "own"));
    mh_conn_close(a);
    teardown();
}

static void test_admin_delete_waits_for_calls_in_flight(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "busy"));
    mh_conn *a2 = admin_conn(); /* memcached sends nothing more on a blocked connection */
    mh_conn *c = user_conn("busy");
    mh_conn *d = user_conn("busy");
    held_call h;
    hold_start(&h, c); /* a call is inside the bucket */
    ENGINE_ERROR_CODE rc = cmds(a, DELETE_BUCKET, "busy", NULL);
    CHECK_EQ_INT(rc, ENGINE_EWOULDBLOCK);
    CHECK_EQ_INT(a->responses, 0);
    /* Not done while the call is inside. */
    CHECK_EQ_INT(mh_conn_wait_io(a, 300), ENGINE_TMPFAIL);
    /* STOPPING: new calls are turned away, the bucket is not listed, its name is taken. */
    char buf[16];
    CHECK_EQ_INT(get(d, "k", buf, sizeof(buf), NULL), ENGINE_DISCONNECT);
    CHECK(list_is(a2, ""));
    CHECK_EQ_STR(stat_of(a2, "bucket", "busy"), "stopping");
    rc = create(a2, "busy", te_path, "");
    CHECK_REPLY(rc, a2, PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS);
    CHECK(resp_says(a2, "Bucket exists: stopping"));
    rc = cmds(a2, DELETE_BUCKET, "busy", NULL); /* a second delete of it */
    CHECK_REPLY(rc, a2, PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    CHECK(resp_says(a2, "Not found."));
    hold_finish(&h);
    /* The retried first delete: the call left, so the delete completes. */
    CHECK_EQ_INT(mh_conn_wait_io(a, IO_TIMEOUT_MS), ENGINE_SUCCESS);
    rc = cmds(a, DELETE_BUCKET, "busy", NULL);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(stats(a, "bucket"), ENGINE_SUCCESS);
    CHECK(mh_conn_stat(a, "busy") == NULL);
    CHECK(create_ok(a, "busy"));
    mh_conn_close(d);
    mh_conn_close(c);
    mh_conn_close(a2);
    mh_conn_close(a);
    teardown();
}

static void test_admin_list(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    ENGINE_ERROR_CODE rc = cmds(a, LIST_BUCKETS, NULL, NULL);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(a->resp_bodylen, 0);
    CHECK(create_ok(a, "l1"));
    CHECK(list_is(a, "l1"));
    CHECK_EQ_INT(a->resp_bodylen, 2);
    CHECK(create_ok(a, "l2"));
    CHECK(create_ok(a, "l3"));
    CHECK(list_is(a, "l1 l2 l3"));
    CHECK_EQ_INT(a->resp_bodylen, 8);
    CHECK_EQ_INT(delete_bucket(a, "l2", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(list_is(a, "l1 l3"));
    mh_conn_close(a);
    teardown();
}

static void test_admin_select(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "s1"));
    CHECK(create_ok(a, "s2"));
    ENGINE_ERROR_CODE rc = cmds(a, SELECT_BUCKET, "s1", NULL);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_STR(stat_of(a, NULL, "engine_name"), "s1");
    rc = cmds(a, SELECT_BUCKET, "s2", NULL);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_STR(stat_of(a, NULL, "engine_name"), "s2");
    rc = cmds(a, SELECT_BUCKET, "nothere", NULL);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    CHECK(resp_says(a, "Engine not found"));
    char buf[16];
    CHECK_EQ_INT(get(a, "k", buf, sizeof(buf), NULL), ENGINE_DISCONNECT); /* as the seed */
    mh_conn_close(a);
    teardown();
}

static void test_admin_deprecated_opcodes(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    ENGINE_ERROR_CODE rc = create_op(a, CREATE_BUCKET_DEPRECATED, "old", te_path, "name=old");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    char buf[256];
    CHECK_EQ_INT(list_op(a, LIST_BUCKETS_DEPRECATED, buf, sizeof(buf)),
                 PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_STR(buf, "old");
    rc = cmds(a, SELECT_BUCKET_DEPRECATED, "old", NULL);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_STR(stat_of(a, NULL, "engine_name"), "old");
    rc = cmds(a, SELECT_BUCKET_DEPRECATED, "nothere", NULL);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    CHECK_EQ_INT(delete_op(a, DELETE_BUCKET_DEPRECATED, "old", NULL),
                 PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(list_op(a, LIST_BUCKETS_DEPRECATED, buf, sizeof(buf)),
                 PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_STR(buf, "");
    mh_conn_close(a);
    teardown();
}

static const uint8_t admin_opcodes[] = {CREATE_BUCKET,           DELETE_BUCKET,
                                        LIST_BUCKETS,            SELECT_BUCKET,
                                        CREATE_BUCKET_DEPRECATED, DELETE_BUCKET_DEPRECATED,
                                        LIST_BUCKETS_DEPRECATED, SELECT_BUCKET_DEPRECATED};

/* Every admin opcode from c: ENGINE_ENOTSUP and no reply. */
static void expect_not_admin(mh_conn *c) {
    char body[1024];
    int n = snprintf(body, sizeof(body), "%s", te_path);
    for (size_t i = 0; i < sizeof(admin_opcodes); i++) {
        ENGINE_ERROR_CODE rc = cmd(c, admin_opcodes[i], NULL, 0, "intruder", 8, body,
                                   (uint32_t)n);
        CHECK_EQ_INT(rc, ENGINE_ENOTSUP);
        CHECK_EQ_INT(c->responses, 0);
    }
    CHECK_EQ_INT(stats(c, "bucket"), ENGINE_FAILED);
    CHECK_EQ_INT(c->nstats, 0);
}

static void test_admin_requires_admin_user(void) {
    /* The seed's test-only bypass must not exist. */
    setenv("BUCKET_ENGINE_DIABLE_AUTH_PHASE", "1", 1);
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "victim"));
    mh_conn *anon = mh_conn_open();
    expect_not_admin(anon);
    mh_conn *m = user_conn("mallory");
    expect_not_admin(m);
    mh_conn *v = user_conn("victim"); /* a bucket's own user is not the admin either */
    expect_not_admin(v);
    CHECK(list_is(a, "victim"));
    mh_conn_close(v);
    mh_conn_close(m);
    mh_conn_close(anon);
    mh_conn_close(a);
    teardown();
}

static void test_admin_unset_means_no_admin(void) {
    if (!boot("engine=%s;auto_create=false", te_path)) {
        return;
    }
    mh_conn *a = admin_conn();
    expect_not_admin(a);
    mh_conn_close(a);
    teardown();
}

/* ------------------------------------------------------------------------------------------
 * Stats, topkeys, tap
 */
static void test_stats_bucket_admin_only(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK_EQ_INT(stats(a, "bucket"), ENGINE_SUCCESS);
    CHECK_EQ_INT(a->nstats, 0);
    CHECK(create_ok(a, "p"));
    CHECK(create_ok(a, "q"));
    CHECK_EQ_INT(stats(a, "bucket"), ENGINE_SUCCESS);
    CHECK_EQ_INT(a->nstats, 2);
    CHECK_EQ_STR(mh_conn_stat(a, "p"), "running");
    CHECK_EQ_STR(mh_conn_stat(a, "q"), "running");
    mh_conn *u = user_conn("p");
    CHECK_EQ_INT(stats(u, "bucket"), ENGINE_FAILED);
    CHECK_EQ_INT(u->nstats, 0);
    mh_conn_close(u);
    mh_conn_close(a);
    teardown();
}

static void test_stats_bucket_conns(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "sc"));
    mh_conn *c1 = user_conn("sc"), *c2 = user_conn("sc"), *c3 = user_conn("sc");
    CHECK_EQ_INT(stats(c1, NULL), ENGINE_SUCCESS);
    CHECK_EQ_STR(mh_conn_stat(c1, "engine"), "test"); /* the engine's own stats */
    CHECK_EQ_STR(mh_conn_stat(c1, "bucket_conns"), "3");
    CHECK_EQ_STR(mh_conn_stat(c1, "bucket_active_conns"), "1"); /* this call */
    mh_conn_close(c3);
    CHECK_EQ_INT(stat_num(c1, NULL, "bucket_conns"), 2);
    held_call h;
    hold_start(&h, c2);
    CHECK_EQ_INT(stat_num(c1, NULL, "bucket_active_conns"), 2);
    hold_finish(&h);
    CHECK_EQ_INT(stat_num(c1, NULL, "bucket_active_conns"), 1);
    CHECK_EQ_INT(stats(c1, "tap"), ENGINE_SUCCESS);
    CHECK(mh_conn_stat(c1, "bucket_conns") == NULL);
    CHECK(mh_conn_stat(c1, "bucket_active_conns") == NULL);
    mh_conn_close(c2);
    mh_conn_close(c1);
    mh_conn_close(a);
    teardown();
}

typedef struct {
    int calls;
    void *seen[8];
} aggregate_seen;

static void aggregate_cb(void *src, void *dest) {
    aggregate_seen *s = dest;
    if (s->calls < 8) {
        s->seen[s->calls] = src;
    }
    s->calls++;
}

static bool aggregate_saw(const aggregate_seen *s, void *p) {
    for (int i = 0; i < s->calls && i < 8; i++) {
        if (s->seen[i] == p) {
            return true;
        }
    }
    return false;
}

static void test_aggregate_stats(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    aggregate_seen s = {0};
    CHECK_EQ_INT(V->aggregate_stats(H, a, aggregate_cb, &s), ENGINE_SUCCESS);
    CHECK_EQ_INT(s.calls, 0);
    CHECK(create_ok(a, "ag1"));
    CHECK(create_ok(a, "ag2"));
    mh_conn *c1 = user_conn("ag1"), *c2 = user_conn("ag2");
    void *p1 = V->get_stats_struct(H, c1);
    void *p2 = V->get_stats_struct(H, c2);
    CHECK(p1 != NULL && p2 != NULL && p1 != p2);
    memset(&s, 0, sizeof(s));
    CHECK_EQ_INT(V->aggregate_stats(H, a, aggregate_cb, &s), ENGINE_SUCCESS);
    CHECK_EQ_INT(s.calls, 2);
    CHECK(aggregate_saw(&s, p1) && aggregate_saw(&s, p2));
    CHECK_EQ_INT(delete_bucket(a, "ag2", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    memset(&s, 0, sizeof(s));
    CHECK_EQ_INT(V->aggregate_stats(H, c2, aggregate_cb, &s), ENGINE_SUCCESS);
    CHECK_EQ_INT(s.calls, 1);
    CHECK(aggregate_saw(&s, p1));
    mh_conn_close(c2);
    mh_conn_close(c1);
    mh_conn_close(a);
    teardown();
}

/* The topkeys value of key, or NULL. */
static const char *topkey(mh_conn *c, const char *key) {
    CHECK_EQ_INT(stats(c, "topkeys"), ENGINE_SUCCESS);
    return mh_conn_stat(c, key);
}

/* Field `name` of a topkeys value, or -1. */
static long long tk_field(const char *value, const char *name) {
    if (value == NULL) {
        return -1;
    }
    size_t n = strlen(name);
    for (const char *p = value; p != NULL && *p != '\0';) {
        if (strncmp(p, name, n) == 0 && p[n] == '=') {
            return atoll(p + n + 1);
        }
        p = strchr(p, ',');
        if (p != NULL) {
            p++;
        }
    }
    return -1;
}

/* The counters part of a topkeys value (everything before ",ctime="). */
static bool tk_counters_are(const char *value, const char *want) {
    if (value == NULL) {
        fprintf(stderr, "topkeys entry missing, want %s\n", want);
        return false;
    }
    const char *end = strstr(value, ",ctime=");
    size_t n = strlen(want);
    bool ok = end != NULL && (size_t)(end - value) == n && memcmp(value, want, n) == 0 &&
              strstr(end, ",atime=") != NULL;
    if (!ok) {
        fprintf(stderr, "topkeys value \"%s\",\n          want \"%s,ctime=N,atime=N\"\n", value,
                want);
    }
    return ok;
}

static void test_topkeys_item_calls(void) {
    setenv("MEMCACHED_TOP_KEYS", "100", 1);
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "tk"));
    mh_conn *c = user_conn("tk");
    uint64_t cas = 0, result = 0;
    char buf[32];
    CHECK_EQ_INT(store(c, "tk:a", "1", OPERATION_SET, 0, &cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "tk:a", buf, sizeof(buf), NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "tk:a", buf, sizeof(buf), NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "tk:m", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(del(c, "tk:a", cas + 7), ENGINE_KEY_EEXISTS);
    CHECK_EQ_INT(del(c, "tk:a", 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(del(c, "tk:a", 0), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(arith(c, "tk:n", true, true, 1, 5, &result), ENGINE_SUCCESS);
    CHECK_EQ_INT(arith(c, "tk:n", false, false, 1, 0, &result), ENGINE_SUCCESS);
    CHECK_EQ_INT(arith(c, "tk:x", true, false, 1, 0, &result), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(arith(c, "tk:x", false, false, 1, 0, &result), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(store(c, "tk:c", "v", OPERATION_SET, 0, &cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "tk:c", "w", OPERATION_CAS, cas + 3, NULL), ENGINE_KEY_EEXISTS);
    CHECK_EQ_INT(store(c, "tk:c", "w", OPERATION_CAS, cas, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "tk:z", "w", OPERATION_CAS, 1, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(store(c, "tk:c", "x", OPERATION_ADD, 0, NULL), ENGINE_NOT_STORED);
    mh_advance_time(5);

    CHECK(tk_counters_are(topkey(c, "tk:a"),
                          "get_hits=2,get_misses=0,cmd_set=1,incr_hits=0,incr_misses=0,"
                          "decr_hits=0,decr_misses=0,delete_hits=1,delete_misses=1,evictions=0,"
                          "cas_hits=0,cas_badval=1,cas_misses=0,get_replica=0,evict=0,getl=0,"
                          "unlock=0,get_meta=0,set_meta=0,del_meta=0"));
    const char *m = topkey(c, "tk:m");
    CHECK_EQ_INT(tk_field(m, "get_misses"), 1);
    CHECK_EQ_INT(tk_field(m, "get_hits"), 0);
    const char *n = topkey(c, "tk:n");
    CHECK_EQ_INT(tk_field(n, "incr_hits"), 1);
    CHECK_EQ_INT(tk_field(n, "decr_hits"), 1);
    const char *x = topkey(c, "tk:x");
    CHECK_EQ_INT(tk_field(x, "incr_misses"), 1);
    CHECK_EQ_INT(tk_field(x, "decr_misses"), 1);
    const char *cv = topkey(c, "tk:c");
    CHECK_EQ_INT(tk_field(cv, "cmd_set"), 2); /* the SET and the failed ADD */
    CHECK_EQ_INT(tk_field(cv, "cas_hits"), 1);
    CHECK_EQ_INT(tk_field(cv, "cas_badval"), 1);
    const char *z = topkey(c, "tk:z");
    CHECK_EQ_INT(tk_field(z, "cas_misses"), 1);
    CHECK_EQ_INT(tk_field(z, "cmd_set"), 0);
    /* ctime and atime are ages in seconds (the clock moved 5; real time adds a little, more under valgrind). */
    long long ctime = tk_field(z, "ctime"), atime = tk_field(z, "atime");
    CHECK(ctime >= 5 && ctime <= 30);
    CHECK(atime >= 0 && atime <= ctime);

    /* A bounded set: at most MEMCACHED_TOP_KEYS keys per bucket. */
    for (int i = 0; i < 300; i++) {
        char key[32];
        snprintf(key, sizeof(key), "many:%d", i);
        CHECK_EQ_INT(get(c, key, buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    }
    CHECK_EQ_INT(stats(c, "topkeys"), ENGINE_SUCCESS);
    CHECK(c->nstats >= 1);
    /* Other buckets keep their own keys. */
    CHECK(create_ok(a, "tk2"));
    mh_conn *d = user_conn("tk2");
    CHECK_EQ_INT(stats(d, "topkeys"), ENGINE_SUCCESS);
    CHECK_EQ_INT(d->nstats, 0);
    mh_conn_close(d);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static int topkeys_counted;
static void count_stat(const char *key, const uint16_t klen, const char *val,
                       const uint32_t vlen, const void *cookie) {
    (void)key, (void)klen, (void)val, (void)vlen, (void)cookie;
    topkeys_counted++;
}

static void test_topkeys_bounded(void) {
    setenv("MEMCACHED_TOP_KEYS", "10", 1);
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "tb"));
    mh_conn *c = user_conn("tb");
    char buf[16];
    for (int i = 0; i < 500; i++) {
        char key[32];
        snprintf(key, sizeof(key), "key:%d", i);
        CHECK_EQ_INT(get(c, key, buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    }
    topkeys_counted = 0;
    CHECK_EQ_INT(V->get_stats(H, c, "topkeys", 7, count_stat), ENGINE_SUCCESS);
    CHECK(topkeys_counted >= 1 && topkeys_counted <= 10);
    /* The most recent key is tracked. */
    CHECK_EQ_INT(get(c, "key:last", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(tk_field(topkey(c, "key:last"), "get_misses"), 1);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static void test_topkeys_ep_engine_opcodes(void) {
    setenv("MEMCACHED_TOP_KEYS", "100", 1);
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    ENGINE_ERROR_CODE rc = create(a, "ep", ep_path, "");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    mh_conn *c = user_conn("ep");
    static const struct {
        uint8_t opcode;
        const char *field;
    } ops[] = {{0x83, "get_replica"}, {0x93, "evict"},    {0x94, "getl"},
               {0x95, "unlock"},      {0xa0, "get_meta"}, {0xa1, "get_meta"},
               {0xa2, "set_meta"},    {0xa3, "set_meta"}, {0xa8, "del_meta"},
               {0xa9, "del_meta"}};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char key[16];
        snprintf(key, sizeof(key), "ep:%02x", ops[i].opcode);
        rc = cmds(c, ops[i].opcode, key, NULL);
        CHECK_REPLY(rc, c, PROTOCOL_BINARY_RESPONSE_SUCCESS);
        /* A failed command is not counted. */
        rc = cmds(c, ops[i].opcode, "ep:fail", "fail");
        CHECK_EQ_INT(rc, ENGINE_KEY_ENOENT);
    }
    /* The key follows the extras. */
    const char ext[4] = {'E', 'X', 'T', '!'};
    rc = cmd(c, 0xa0, ext, 4, "ep:ext", 6, NULL, 0);
    CHECK_REPLY(rc, c, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    /* Opcodes the seed does not know are not counted, nor are empty keys. */
    CHECK_EQ_INT(cmds(c, 0x99, "ep:other", NULL), ENGINE_ENOTSUP);
    rc = cmds(c, 0x83, NULL, NULL);
    CHECK_REPLY(rc, c, PROTOCOL_BINARY_RESPONSE_SUCCESS);

    CHECK_EQ_INT(stats(c, "topkeys"), ENGINE_SUCCESS);
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        char key[16];
        snprintf(key, sizeof(key), "ep:%02x", ops[i].opcode);
        const char *v = mh_conn_stat(c, key);
        CHECK(v != NULL);
        CHECK_EQ_INT(tk_field(v, ops[i].field), 1);
        CHECK_EQ_INT(tk_field(v, "get_hits"), 0);
    }
    CHECK(mh_conn_stat(c, "ep:fail") == NULL);
    CHECK(mh_conn_stat(c, "ep:other") == NULL);
    CHECK_EQ_INT(tk_field(mh_conn_stat(c, "ep:ext"), "get_meta"), 1);
    CHECK(mh_conn_stat(c, "EXT!ep:e") == NULL);
    CHECK_EQ_INT(c->nstats, 11);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static void test_topkeys_disabled(void) {
    unsetenv("MEMCACHED_TOP_KEYS");
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "notk"));
    mh_conn *c = user_conn("notk");
    char buf[16];
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "k", buf, sizeof(buf), NULL), ENGINE_SUCCESS);
    ENGINE_ERROR_CODE rc = stats(c, "topkeys"); /* the seed dereferenced NULL here */
    CHECK(rc == ENGINE_SUCCESS || rc == ENGINE_KEY_ENOENT || rc == ENGINE_ENOTSUP);
    CHECK_EQ_INT(c->nstats, 0);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static void test_tap_iterator_shim(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "tap"));
    mh_conn *c = user_conn("tap");
    CHECK_EQ_INT(store(c, "t1", "a", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "t2", "b", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "t3", "c", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    TAP_ITERATOR iter = V->get_tap_iterator(H, c, "client", 6, 0, NULL, 0);
    CHECK(iter != NULL);
    if (iter != NULL) {
        CHECK_EQ_STR(stat_of(c, "tap", "tap_connections"), "1");
        /* Called with the bucket engine's handle, as memcached does. */
        item *it = NULL;
        void *es = NULL;
        uint16_t nes = 0, flags = 0, vb = 0;
        uint8_t ttl = 0;
        uint32_t seqno = 0;
        tap_event_t ev = iter(H, c, &it, &es, &nes, &ttl, &flags, &seqno, &vb);
        CHECK_EQ_INT(ev, TAP_MUTATION);
        if (ev == TAP_MUTATION) {
            item_info info = {.nvalue = 1};
            CHECK(V->get_item_info(H, c, it, &info));
            CHECK(info.nkey == 2 && ((const char *)info.key)[0] == 't');
            V->release(H, c, it);
        }
        /* Deleting the bucket: the next step disconnects the stream. */
        CHECK_EQ_INT(delete_bucket(a, "tap", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
        ev = iter(H, c, &it, &es, &nes, &ttl, &flags, &seqno, &vb);
        CHECK_EQ_INT(ev, TAP_DISCONNECT);
        CHECK(V->get_tap_iterator(H, c, "client", 6, 0, NULL, 0) == NULL);
    }
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

static void test_tap_disabled_for_default_engine(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    ENGINE_ERROR_CODE rc = create(a, "de", de_path, "name=de");
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(create_ok(a, "other"));
    mh_conn *c = user_conn("de");
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK(V->get_tap_iterator(H, c, "client", 6, 0, NULL, 0) == NULL);
    CHECK_EQ_STR(stat_of(c, "tap", "tap_connections"), "0"); /* never asked */
    /* tap_notify still reaches it. */
    CHECK_EQ_INT(V->tap_notify(H, c, NULL, 0, 0, 0, TAP_MUTATION, 1, "tn", 2, 0, 0, 0, "x", 1, 0),
                 ENGINE_SUCCESS);
    CHECK(has(c, "tn", "x"));
    /* Another engine's bucket still gets a stream. */
    mh_conn *o = user_conn("other");
    TAP_ITERATOR iter = V->get_tap_iterator(H, o, "client", 6, 0, NULL, 0);
    CHECK(iter != NULL);
    mh_conn_close(o); /* drops the stream */
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
}

/* ------------------------------------------------------------------------------------------
 * Malformed admin packets
 */

/* A raw admin packet: header fields as given, `avail` bytes after the header (all present). */
static ENGINE_ERROR_CODE raw_admin(mh_conn *c, uint8_t opcode, uint16_t keylen, uint8_t extlen,
                                   uint32_t bodylen, const void *payload, size_t avail) {
    unsigned char *buf = calloc(1, sizeof(protocol_binary_request_header) + avail + 1);
    CHECK(buf != NULL);
    if (buf == NULL) {
        return ENGINE_ENOMEM;
    }
    buf[0] = PROTOCOL_BINARY_REQ;
    buf[1] = opcode;
    buf[2] = (unsigned char)(keylen >> 8);
    buf[3] = (unsigned char)keylen;
    buf[4] = extlen;
    buf[8] = (unsigned char)(bodylen >> 24);
    buf[9] = (unsigned char)(bodylen >> 16);
    buf[10] = (unsigned char)(bodylen >> 8);
    buf[11] = (unsigned char)bodylen;
    if (avail > 0) {
        memcpy(buf + sizeof(protocol_binary_request_header), payload, avail);
    }
    c->responses = 0;
    ENGINE_ERROR_CODE rc = V->unknown_command(H, c, (protocol_binary_request_header *)buf,
                                              mh_add_response);
    free(buf);
    return rc;
}

/* A bucket "keep" with an item, and what must still hold after each malformed packet. */
static mh_conn *malformed_setup(mh_conn **admin) {
    if (!boot_base()) {
        return NULL;
    }
    *admin = admin_conn();
    CHECK(create_ok(*admin, "keep"));
    mh_conn *k = user_conn("keep");
    CHECK_EQ_INT(store(k, "k", "kept", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    return k;
}

static void malformed_check(mh_conn *admin, mh_conn *keep, const char *list) {
    CHECK(has(keep, "k", "kept"));
    CHECK(list_is(admin, list));
}

static void malformed_teardown(mh_conn *admin, mh_conn *keep) {
    mh_conn_close(keep);
    mh_conn_close(admin);
    teardown();
}

static void test_malformed_keylen_over_bodylen(void) {
    mh_conn *a = NULL;
    mh_conn *k = malformed_setup(&a);
    if (k == NULL) {
        return;
    }
    /* keylen 10, bodylen 3: the seed computed bodylen - keylen and underflowed. */
    char payload[64];
    memset(payload, 'x', sizeof(payload));
    const uint8_t ops[] = {CREATE_BUCKET, DELETE_BUCKET, SELECT_BUCKET,
                           CREATE_BUCKET_DEPRECATED, DELETE_BUCKET_DEPRECATED};
    for (size_t i = 0; i < sizeof(ops); i++) {
        CHECK(refused(raw_admin(a, ops[i], 10, 0, 3, payload, 10), a));
        malformed_check(a, k, "keep");
        /* The name "keep" itself with a bodylen short of it. */
        CHECK(refused(raw_admin(a, ops[i], 4, 0, 2, "keep", 4), a));
        malformed_check(a, k, "keep");
    }
    malformed_teardown(a, k);
}

static void test_malformed_extlen(void) {
    mh_conn *a = NULL;
    mh_conn *k = malformed_setup(&a);
    if (k == NULL) {
        return;
    }
    char payload[300];
    memset(payload, 'y', sizeof(payload));
    /* extlen + keylen > bodylen */
    CHECK(refused(raw_admin(a, CREATE_BUCKET, 4, 200, 10, payload, 204), a));
    malformed_check(a, k, "keep");
    CHECK(refused(raw_admin(a, DELETE_BUCKET, 4, 8, 8, payload, 12), a));
    malformed_check(a, k, "keep");
    CHECK(refused(raw_admin(a, SELECT_BUCKET, 4, 1, 4, payload, 5), a));
    malformed_check(a, k, "keep");

    /* Well-formed extras: the name follows them and the body follows the name (the seed took
     * the body from right after the key length, ignoring the extras). */
    char pkt[1200];
    size_t n = 0;
    memcpy(pkt + n, "EXTR", 4);
    n += 4;
    memcpy(pkt + n, "extb", 4);
    n += 4;
    size_t plen = strlen(te_path);
    memcpy(pkt + n, te_path, plen);
    n += plen;
    pkt[n++] = '\0';
    memcpy(pkt + n, "name=extb", 9);
    n += 9;
    ENGINE_ERROR_CODE rc = raw_admin(a, CREATE_BUCKET, 4, 4, (uint32_t)n, pkt, n);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    malformed_check(a, k, "keep extb");
    mh_conn *e = user_conn("extb");
    CHECK_EQ_STR(stat_of(e, NULL, "engine_name"), "extb");
    mh_conn_close(e);
    /* DELETE and SELECT with extras name the bucket after them. */
    rc = raw_admin(a, SELECT_BUCKET, 4, 4, 8, pkt, 8);
    CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_STR(stat_of(a, NULL, "engine_name"), "extb");
    memcpy(pkt + 8, "force=true", 10);
    rc = raw_admin(a, DELETE_BUCKET, 4, 4, 18, pkt, 18);
    CHECK_EQ_INT(rc, ENGINE_EWOULDBLOCK);
    if (rc == ENGINE_EWOULDBLOCK) {
        CHECK_EQ_INT(mh_conn_wait_io(a, IO_TIMEOUT_MS), ENGINE_SUCCESS);
        rc = raw_admin(a, DELETE_BUCKET, 4, 4, 18, pkt, 18);
        CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    }
    malformed_check(a, k, "keep");
    malformed_teardown(a, k);
}

static void test_malformed_names(void) {
    mh_conn *a = NULL;
    mh_conn *k = malformed_setup(&a);
    if (k == NULL) {
        return;
    }
    const struct {
        const char *name;
        uint16_t len;
    } names[] = {
        {"caf\xc3\xa9", 5},      /* UTF-8 */
        {"\xe9t\xe9", 3},        /* Latin-1: negative chars where char is signed */
        {"\x80", 1},
        {"\xff\xfe", 2},
        {"ab\0cd", 5},           /* the seed read "ab" */
        {"tab\there", 8},
        {"new\nline", 8},
        {"keep\0", 5},           /* an existing name plus a NUL */
    };
    char body[1100];
    size_t plen = strlen(te_path);
    memcpy(body, te_path, plen);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        ENGINE_ERROR_CODE rc =
            cmd(a, CREATE_BUCKET, NULL, 0, names[i].name, names[i].len, body, (uint32_t)plen);
        CHECK(refused(rc, a));
        malformed_check(a, k, "keep");
        rc = cmd(a, SELECT_BUCKET, NULL, 0, names[i].name, names[i].len, NULL, 0);
        CHECK(refused(rc, a));
        rc = cmd(a, DELETE_BUCKET, NULL, 0, names[i].name, names[i].len, NULL, 0);
        CHECK(refused(rc, a));
        malformed_check(a, k, "keep");
    }
    malformed_teardown(a, k);
}

static void test_malformed_body_over_64k(void) {
    mh_conn *a = NULL;
    mh_conn *k = malformed_setup(&a);
    if (k == NULL) {
        return;
    }
    size_t big = 70000;
    char *body = malloc(big);
    CHECK(body != NULL);
    if (body != NULL) {
        size_t plen = strlen(te_path);
        memset(body, 'a', big);
        memcpy(body, te_path, plen);
        body[plen] = '\0';
        memcpy(body + plen + 1, "name=", 5);
        ENGINE_ERROR_CODE rc =
            cmd(a, CREATE_BUCKET, NULL, 0, "huge", 4, body, (uint32_t)big);
        CHECK(refused(rc, a));
        malformed_check(a, k, "keep");
        /* Exactly 64 KiB is already too much (the seed's limit). */
        rc = cmd(a, CREATE_BUCKET, NULL, 0, "huge", 4, body, 1u << 16);
        CHECK(refused(rc, a));
        malformed_check(a, k, "keep");
        memset(body, ' ', big);
        rc = cmd(a, DELETE_BUCKET, NULL, 0, "keep", 4, body, (uint32_t)big);
        CHECK(refused(rc, a));
        malformed_check(a, k, "keep");
        free(body);
    }
    malformed_teardown(a, k);
}

static void test_malformed_empty_packets(void) {
    mh_conn *a = NULL;
    mh_conn *k = malformed_setup(&a);
    if (k == NULL) {
        return;
    }
    for (size_t i = 0; i < sizeof(admin_opcodes); i++) {
        uint8_t op = admin_opcodes[i];
        ENGINE_ERROR_CODE rc = raw_admin(a, op, 0, 0, 0, NULL, 0);
        if (op == LIST_BUCKETS || op == LIST_BUCKETS_DEPRECATED) {
            CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
        } else {
            CHECK(refused(rc, a)); /* empty name */
        }
        malformed_check(a, k, "keep");
    }
    /* A CREATE with a name but only a NUL for a body. */
    CHECK(refused(raw_admin(a, CREATE_BUCKET, 1, 0, 2, "z\0", 2), a));
    malformed_check(a, k, "keep");
    malformed_teardown(a, k);
}

/* ------------------------------------------------------------------------------------------
 * Concurrency
 */
#define CC_THREADS 8
#define CC_ITERATIONS 60

typedef struct {
    int id;
    int failures;
    int closes;
} cc_worker;

static void worker_failed(cc_worker *w, int i, const char *what, int rc) {
    w->failures++;
    fprintf(stderr, "worker %d iteration %d: %s returned %d\n", w->id, i, what, rc);
}

static void *connect_worker(void *arg) {
    cc_worker *w = arg;
    char key[32], val[32], user[16];
    for (int i = 0; i < CC_ITERATIONS; i++) {
        mh_conn *c = mh_conn_open(); /* attached to (auto-created) dflt */
        if (c == NULL) {
            worker_failed(w, i, "mh_conn_open", -1);
            continue;
        }
        snprintf(key, sizeof(key), "k%d", w->id);
        snprintf(val, sizeof(val), "%d-%d", w->id, i);
        if (i % 2 == 1) {
            snprintf(user, sizeof(user), "u%d", i % 4); /* auto-created, racing */
            mh_conn_auth(c, user, NULL);
        }
        item *it = NULL;
        ENGINE_ERROR_CODE rc = V->allocate(H, c, &it, key, strlen(key), strlen(val), 0, 0);
        if (rc == ENGINE_SUCCESS) {
            item_info info = {.nvalue = 1};
            if (V->get_item_info(H, c, it, &info)) {
                memcpy(info.value[0].iov_base, val, strlen(val));
                uint64_t cas = 0;
                rc = V->store(H, c, it, &cas, OPERATION_SET, 0);
                if (rc != ENGINE_SUCCESS) {
                    worker_failed(w, i, "store", rc);
                }
            } else {
                worker_failed(w, i, "get_item_info", 0);
            }
            V->release(H, c, it);
            char buf[32];
            rc = get(c, key, buf, sizeof(buf), NULL);
            if (rc != ENGINE_SUCCESS || strcmp(buf, val) != 0) {
                worker_failed(w, i, "get", rc);
            }
        } else {
            worker_failed(w, i, i % 2 == 1 ? "allocate after auth" : "allocate", rc);
        }
        mh_conn_close(c);
        w->closes++;
    }
    return NULL;
}

/* The stub's slow-initialize knobs, through a second dlopen of the same library. */
typedef struct {
    void *dl;
    void (*finish)(void);
    int (*waiting)(void);
    void (*await)(int waiting, int destroyed); /* blocks until the stub's counts reach these */
} slow_knobs;

static bool slow_knobs_open(slow_knobs *k) {
    k->dl = dlopen(ep_path, RTLD_NOW | RTLD_LOCAL);
    CHECK(k->dl != NULL);
    if (k->dl == NULL) {
        return false;
    }
    void *f = dlsym(k->dl, "ep_stub_finish_slow_init");
    void *w = dlsym(k->dl, "ep_stub_slow_waiting");
    void *aw = dlsym(k->dl, "ep_stub_await");
    CHECK(f != NULL && w != NULL && aw != NULL);
    if (f == NULL || w == NULL || aw == NULL) {
        dlclose(k->dl);
        return false;
    }
    memcpy(&k->finish, &f, sizeof(k->finish));
    memcpy(&k->waiting, &w, sizeof(k->waiting));
    memcpy(&k->await, &aw, sizeof(k->await));
    return true;
}

typedef struct {
    pthread_t thread;
    const char *user; /* NULL: just connect (ON_CONNECT); else authenticate (ON_AUTH) */
    mh_conn *conn;
} racer;

static void *racer_main(void *arg) {
    racer *r = arg;
    r->conn = mh_conn_open();
    if (r->user != NULL && r->conn != NULL) {
        mh_conn_auth(r->conn, r->user, "slow=true");
    }
    return NULL;
}

/*
 * Two connections need the same auto-created bucket while its engine is still initializing:
 * both end up attached to it (the seed serialised creation under its engines lock, so the
 * second found the bucket the first made).
 */
static void auto_create_race(const char *user) {
    slow_knobs k;
    if (!slow_knobs_open(&k)) {
        teardown();
        return;
    }
    racer first = {.user = user}, second = {.user = user};
    CHECK(pthread_create(&first.thread, NULL, racer_main, &first) == 0);
    k.await(1, 0); /* the first creates the bucket and waits in initialize */
    CHECK_EQ_INT(k.waiting(), 1);
    CHECK(pthread_create(&second.thread, NULL, racer_main, &second) == 0);
    /* The second loads an engine of its own, finds the name taken by the bucket being created
     * and destroys its engine (then waits for the first, as the seed's lock made it wait). */
    k.await(1, 1);
    k.finish();
    CHECK(pthread_join(first.thread, NULL) == 0);
    CHECK(pthread_join(second.thread, NULL) == 0);
    racer *both[2] = {&first, &second};
    for (int i = 0; i < 2; i++) {
        CHECK(both[i]->conn != NULL);
        if (both[i]->conn != NULL) {
            CHECK_EQ_STR(stat_of(both[i]->conn, NULL, "engine"), "ep_stub");
            CHECK_EQ_STR(mh_conn_stat(both[i]->conn, "bucket_conns"), "2");
        }
    }
    mh_conn *a = admin_conn(); /* auto_create: the admin gets a bucket "admin" too */
    CHECK(list_is(a, user != NULL ? "racer admin" : "dflt admin"));
    mh_conn_close(a);
    mh_conn_close(second.conn);
    mh_conn_close(first.conn);
    teardown();
    dlclose(k.dl);
}

static void test_auto_create_race_on_connect(void) {
    if (boot("engine=%s;admin=admin;default_bucket_name=dflt;auto_create=true;"
             "default_bucket_config=slow\\=true",
             ep_path)) {
        auto_create_race(NULL);
    }
}

static void test_auto_create_race_on_auth(void) {
    if (boot("engine=%s;admin=admin", ep_path)) { /* auto_create defaults to true */
        auto_create_race("racer");
    }
}

static void test_concurrent_connect_disconnect(void) {
    if (!boot("engine=%s;admin=admin;default_bucket_name=dflt", te_path)) {
        return;
    }
    int live = mh_live_connections();
    pthread_t threads[CC_THREADS];
    cc_worker workers[CC_THREADS];
    for (int i = 0; i < CC_THREADS; i++) {
        workers[i] = (cc_worker){.id = i};
        CHECK(pthread_create(&threads[i], NULL, connect_worker, &workers[i]) == 0);
    }
    for (int i = 0; i < CC_THREADS; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK_EQ_INT(workers[i].failures, 0);
        CHECK_EQ_INT(workers[i].closes, CC_ITERATIONS);
    }
    CHECK_EQ_INT(mh_live_connections(), live);
    mh_conn *a = admin_conn();
    CHECK(list_is(a, "dflt u1 u3 admin"));
    mh_conn *d = mh_conn_open();
    CHECK_EQ_INT(stat_num(d, NULL, "bucket_conns"), 1); /* every other connection let go */
    mh_conn_close(d);
    mh_conn_close(a);
    teardown();
}

/*
 * The rounds of test_concurrent_delete_while_calls_in_flight, reached by events, not sleeps:
 * the admin deletes "hot" once every hot worker made CHURN_OPS calls on it, and creates it again
 * once every hot worker saw it go. A worker that saw it go waits for the next round, so spinning
 * workers never crowd out the shutdown (under valgrind only one thread runs at a time).
 */
enum { HOT = 6, ROUNDS = 8, CHURN_OPS = 20 };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int round;   /* bumped by the admin once "hot" exists again */
    int ready;   /* hot workers that made CHURN_OPS calls in this round */
    int noticed; /* hot workers that saw this round's "hot" go (ENGINE_DISCONNECT) */
    bool stop;
} churn = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* Adds one to *count (a field of `churn`) and wakes the admin. */
static void churn_report(int *count) {
    pthread_mutex_lock(&churn.lock);
    (*count)++;
    pthread_cond_broadcast(&churn.cond);
    pthread_mutex_unlock(&churn.lock);
}

/* The admin's wait until *count (a field of `churn`) reaches want. */
static void churn_await(const int *count, int want) {
    pthread_mutex_lock(&churn.lock);
    while (*count < want) {
        pthread_cond_wait(&churn.cond, &churn.lock);
    }
    pthread_mutex_unlock(&churn.lock);
}

typedef struct {
    const char *bucket;
    bool hot; /* takes part in the rounds; the calm worker just calls until stopped */
    int unexpected;
    int disconnects;
    int ops;
} churn_worker;

/*
 * Before each call: a hot worker that saw the bucket go waits here for the next round (the
 * calm worker never does). Updates *round; returns false once stopped.
 */
static bool churn_next(int *round, bool *noticed) {
    pthread_mutex_lock(&churn.lock);
    while (*noticed && churn.round == *round && !churn.stop) {
        pthread_cond_wait(&churn.cond, &churn.lock);
    }
    bool go_on = !churn.stop;
    bool new_round = churn.round != *round;
    *round = churn.round;
    pthread_mutex_unlock(&churn.lock);
    if (new_round) {
        *noticed = false;
    }
    return go_on;
}

/* Calls that hand out no item (an item held across a delete would leak in its engine). */
static void *churn_main(void *arg) {
    churn_worker *w = arg;
    mh_conn *c = user_conn(w->bucket);
    int round = 0, in_round = 0, since_reconnect = 0;
    bool noticed = false;
    while (true) {
        int was = round;
        if (!churn_next(&round, &noticed)) {
            break;
        }
        if (round != was) { /* "hot" exists again: attach to the new one */
            mh_conn_close(c);
            c = user_conn(w->bucket);
            in_round = since_reconnect = 0;
        }
        uint64_t result = 0;
        ENGINE_ERROR_CODE rc;
        switch (w->ops % 4) {
        case 0:
            rc = arith(c, "ctr", true, true, 1, 0, &result);
            break;
        case 1:
            rc = del(c, "nothing", 0);
            if (rc == ENGINE_KEY_ENOENT) {
                rc = ENGINE_SUCCESS;
            }
            break;
        case 2:
            rc = cmds(c, OP_ECHO, "e", "v");
            break;
        default:
            rc = stats(c, NULL);
            break;
        }
        w->ops++;
        if (rc == ENGINE_DISCONNECT) {
            w->disconnects++;
            if (w->hot && !noticed) {
                noticed = true;
                churn_report(&churn.noticed);
            }
        } else if (rc != ENGINE_SUCCESS) {
            w->unexpected++;
            fprintf(stderr, "churn on %s: op %d returned %d\n", w->bucket, w->ops % 4, (int)rc);
        } else if (w->hot && ++in_round == CHURN_OPS) {
            churn_report(&churn.ready);
        }
        /* A hot worker that saw "hot" go reconnects once it exists again (above). */
        if ((rc == ENGINE_DISCONNECT && !noticed) || ++since_reconnect == 25) {
            mh_conn_close(c);
            c = user_conn(w->bucket);
            since_reconnect = 0;
        }
    }
    mh_conn_close(c);
    return NULL;
}

static void test_concurrent_delete_while_calls_in_flight(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "hot"));
    CHECK(create_ok(a, "calm"));
    pthread_t threads[HOT + 1];
    churn_worker workers[HOT + 1];
    for (int i = 0; i <= HOT; i++) {
        workers[i] = (churn_worker){.bucket = i < HOT ? "hot" : "calm", .hot = i < HOT};
        CHECK(pthread_create(&threads[i], NULL, churn_main, &workers[i]) == 0);
    }
    for (int round = 0; round < ROUNDS; round++) {
        churn_await(&churn.ready, HOT); /* every hot worker calls into this "hot" */
        CHECK_EQ_INT(delete_bucket(a, "hot", round % 2 ? "force=true" : NULL),
                     PROTOCOL_BINARY_RESPONSE_SUCCESS);
        churn_await(&churn.noticed, HOT); /* and every one saw it go */
        CHECK(create_ok(a, "hot"));
        pthread_mutex_lock(&churn.lock);
        churn.round++;
        churn.ready = churn.noticed = 0;
        pthread_cond_broadcast(&churn.cond);
        pthread_mutex_unlock(&churn.lock);
    }
    churn_await(&churn.ready, HOT); /* the last "hot" serves them all */
    pthread_mutex_lock(&churn.lock);
    churn.stop = true;
    pthread_cond_broadcast(&churn.cond);
    pthread_mutex_unlock(&churn.lock);
    for (int i = 0; i <= HOT; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK_EQ_INT(workers[i].unexpected, 0);
    }
    CHECK_EQ_INT(workers[HOT].disconnects, 0); /* the other bucket never noticed */
    CHECK(workers[HOT].ops > 0);
    CHECK(list_is(a, "hot calm"));
    mh_conn_close(a);
    teardown();
}

typedef struct {
    int id;
    int unexpected;
} admin_worker;

static void *admin_main(void *arg) {
    admin_worker *w = arg;
    mh_conn *a = admin_conn();
    char name[8], buf[256];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "c%d", (w->id + i) % 3);
        ENGINE_ERROR_CODE rc;
        int st;
        switch ((w->id + i) % 4) {
        case 0:
            rc = create(a, name, te_path, "");
            if (rc != ENGINE_SUCCESS || a->responses != 1 ||
                (a->resp_status != PROTOCOL_BINARY_RESPONSE_SUCCESS &&
                 a->resp_status != PROTOCOL_BINARY_RESPONSE_KEY_EEXISTS)) {
                w->unexpected++;
            }
            break;
        case 1:
            st = delete_bucket(a, name, NULL);
            if (st != PROTOCOL_BINARY_RESPONSE_SUCCESS &&
                st != PROTOCOL_BINARY_RESPONSE_KEY_ENOENT) {
                w->unexpected++;
            }
            break;
        case 2:
            if (list_op(a, LIST_BUCKETS, buf, sizeof(buf)) != PROTOCOL_BINARY_RESPONSE_SUCCESS) {
                w->unexpected++;
            }
            break;
        default:
            rc = cmds(a, SELECT_BUCKET, name, NULL);
            if (rc != ENGINE_SUCCESS || a->responses != 1 ||
                (a->resp_status != PROTOCOL_BINARY_RESPONSE_SUCCESS &&
                 a->resp_status != PROTOCOL_BINARY_RESPONSE_KEY_ENOENT)) {
                w->unexpected++;
            }
            break;
        }
    }
    mh_conn_close(a);
    return NULL;
}

static void test_concurrent_admin_commands(void) {
    if (!boot_base()) {
        return;
    }
    enum { N = 4 };
    pthread_t threads[N];
    admin_worker workers[N];
    for (int i = 0; i < N; i++) {
        workers[i] = (admin_worker){.id = i};
        CHECK(pthread_create(&threads[i], NULL, admin_main, &workers[i]) == 0);
    }
    for (int i = 0; i < N; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
        CHECK_EQ_INT(workers[i].unexpected, 0);
    }
    /* Whatever is left can be deleted; then nothing is. */
    mh_conn *a = admin_conn();
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof(name), "c%d", i);
        int st = delete_bucket(a, name, NULL);
        CHECK(st == PROTOCOL_BINARY_RESPONSE_SUCCESS || st == PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    }
    CHECK(list_is(a, ""));
    mh_conn_close(a);
    teardown();
}

/* ------------------------------------------------------------------------------------------
 * Destroy
 */
static void test_destroy_with_buckets(void) {
    if (!boot("engine=%s;admin=admin;auto_create=false;default=true", te_path)) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "x1"));
    CHECK(create_ok(a, "x2"));
    CHECK_EQ_INT(create(a, "x3", ep_path, NULL), ENGINE_SUCCESS);
    mh_conn *c = user_conn("x1");
    CHECK_EQ_INT(store(c, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    mh_conn_close(c);
    mh_conn_close(a);
    CHECK(mh_live_stats() >= 3);
    teardown(); /* every bucket (and the default one) destroyed, every stats block released */
}

/* Kept reachable on purpose: memcached never closes connections after destroy. */
static mh_conn *volatile destroy_survivor;

static void test_destroy_while_bucket_deleting(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "dying"));
    destroy_survivor = user_conn("dying"); /* holds the bucket */
    CHECK_EQ_INT(store(destroy_survivor, "k", "v", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    /* The delete is answered while the bucket still waits for the survivor's reference. */
    CHECK_EQ_INT(cmds(a, DELETE_BUCKET, "dying", NULL), ENGINE_EWOULDBLOCK);
    CHECK_EQ_INT(mh_conn_wait_io(a, IO_TIMEOUT_MS), ENGINE_SUCCESS);
    mh_conn_close(a);
    /* Global shutdown must not wait for the survivor (the alarm fails a hang). */
    mh_engine_unload(eng, false);
    eng = NULL;
    CHECK(mh_live_stats() <= 1); /* the survivor may keep its bucket's memory alive */
    mh_shutdown();
}

/* ------------------------------------------------------------------------------------------
 * Runner
 */
typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

#define T(f) {#f, test_##f}
/* Tests defined after the list (issue 12). */
static void test_admin_create_bad_name_not_stored(void);
static void test_null_cookie_means_default_bucket(void);
static void test_sasl_user_without_bucket_uses_default(void);
static void test_items_follow_their_engine_across_select(void);
static void test_delete_while_set_value_arriving(void);
static void test_tap_item_held_across_delete(void);

static const test_case tests[] = {
    T(create_instance_interface),
    T(get_info),
    T(init_null_config),
    T(init_unknown_key_fails),
    T(init_bad_default_value_fails),
    T(init_bad_auto_create_value_fails),
    T(init_missing_config_file_fails),
    T(init_default_bucket_load_failure_fails),
    T(init_default_bucket_config_rejected_fails),
    T(config_default_bucket),
    T(config_default_bucket_name_auto_create),
    T(config_default_bucket_name_no_auto_create),
    T(config_file),
    T(on_auth_attaches_user_bucket),
    T(on_auth_without_auto_create),
    T(on_disconnect_forwarded_to_its_bucket),
    T(disconnect_while_reserved),
    T(proxied_calls_without_bucket),
    T(proxied_calls_reach_the_bucket),
    T(proxied_calls_on_deleted_bucket),
    T(other_opcodes_proxied),
    T(admin_create),
    T(admin_create_empty_spec),
    T(admin_create_exists),
    T(admin_create_load_failure),
    T(admin_create_init_failure),
    T(admin_create_invalid_names),
    T(admin_create_slow_engine_blocks_nobody),
    T(engine_server_api),
    T(admin_delete),
    T(admin_delete_missing),
    T(admin_delete_bad_config),
    T(admin_delete_own_bucket),
    T(admin_delete_waits_for_calls_in_flight),
    T(admin_list),
    T(admin_select),
    T(admin_deprecated_opcodes),
    T(admin_requires_admin_user),
    T(admin_unset_means_no_admin),
    T(stats_bucket_admin_only),
    T(stats_bucket_conns),
    T(aggregate_stats),
    T(topkeys_item_calls),
    T(topkeys_bounded),
    T(topkeys_ep_engine_opcodes),
    T(topkeys_disabled),
    T(topkeys_bad_env_disables),
    T(tap_iterator_shim),
    T(tap_disabled_for_default_engine),
    T(malformed_keylen_over_bodylen),
    T(malformed_extlen),
    T(malformed_names),
    T(malformed_body_over_64k),
    T(malformed_empty_packets),
    T(auto_create_race_on_connect),
    T(auto_create_race_on_auth),
    T(concurrent_connect_disconnect),
    T(concurrent_delete_while_calls_in_flight),
    T(concurrent_admin_commands),
    T(destroy_with_buckets),
    T(destroy_while_bucket_deleting),
    T(admin_create_bad_name_not_stored),
    T(null_cookie_means_default_bucket),
    T(sasl_user_without_bucket_uses_default),
    T(items_follow_their_engine_across_select),
    T(delete_while_set_value_arriving),
    T(tap_item_held_across_delete),
};
#undef T

/* Runs one test in a child process; returns whether it passed. */
static bool run_one(const test_case *t, unsigned timeout) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "fork: %s\n", strerror(errno));
        return false;
    }
    if (pid == 0) {
        io_timeout_ms = (int)timeout * 1000;
        alarm(timeout + 10);
        /* Each test chooses its own environment. */
        unsetenv("MEMCACHED_TOP_KEYS");
        unsetenv("BUCKET_ENGINE_DIABLE_AUTH_PHASE");
        if (mh_init() != 0) {
            fprintf(stderr, "mh_init failed\n");
            exit(3);
        }
        api = mh_get_server_api();
        t->fn();
        exit(check_failures > 0 ? 1 : 0);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "waitpid: %s\n", strerror(errno));
            return false;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        printf("ok   %s\n", t->name);
        return true;
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        printf("FAIL %s (%s%s)\n", t->name, strsignal(sig),
               sig == SIGALRM ? ": timed out" : "");
    } else {
        printf("FAIL %s (exit %d)\n", t->name, WEXITSTATUS(status));
    }
    return false;
}

/* The sibling file `name` of path's directory, into out. */
static void sibling(const char *path, const char *name, char *out, size_t outlen) {
    const char *slash = strrchr(path, '/');
    int dirlen = slash != NULL ? (int)(slash - path) : 1;
    snprintf(out, outlen, "%.*s/%s", dirlen, slash != NULL ? path : ".", name);
}

static bool plain_path(const char *p) {
    return strpbrk(p, ";=\\ \t\n") == NULL;
}

int main(int argc, char **argv) {
    int first_test = 1;
    bucket_path = getenv("BUCKET_ENGINE_LIB");
    te_path = getenv("TEST_ENGINE_LIB");
    if (argc >= 3 && strstr(argv[1], ".so") != NULL && strstr(argv[2], ".so") != NULL) {
        bucket_path = argv[1];
        te_path = argv[2];
        first_test = 3;
    }
    if (bucket_path == NULL || te_path == NULL) {
        fprintf(stderr,
                "usage: %s [BUCKET_ENGINE_SO TEST_ENGINE_SO] [TEST...]\n"
                "  (or BUCKET_ENGINE_LIB and TEST_ENGINE_LIB in the environment)\n",
                argv[0]);
        return 2;
    }
    if (!plain_path(bucket_path) || !plain_path(te_path)) {
        fprintf(stderr, "library paths must not contain ; = \\ or spaces (they go in configs)\n");
        return 2;
    }
    sibling(te_path, "libep_stub_engine.so", ep_path, sizeof(ep_path));
    sibling(te_path, "default_engine.so", de_path, sizeof(de_path));
    sibling(te_path, "libmock_host.so", nosym_path, sizeof(nosym_path));
    const char *paths[] = {bucket_path, te_path, ep_path, de_path, nosym_path};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        if (access(paths[i], R_OK) != 0) {
            fprintf(stderr, "cannot read %s: %s\n", paths[i], strerror(errno));
            return 2;
        }
    }
    unsigned timeout = 120;
    const char *t = getenv("BUCKET_CONFORMANCE_TIMEOUT");
    if (t != NULL && atoi(t) > 0) {
        timeout = (unsigned)atoi(t);
    }

    int passed = 0, failed = 0;
    size_t ntests = sizeof(tests) / sizeof(tests[0]);
    for (int i = first_test; i < argc; i++) {
        bool known = false;
        for (size_t j = 0; j < ntests; j++) {
            known |= strcmp(argv[i], tests[j].name) == 0;
        }
        if (!known) {
            fprintf(stderr, "no test named %s\n", argv[i]);
            return 2;
        }
    }
    for (size_t j = 0; j < ntests; j++) {
        bool selected = first_test >= argc;
        for (int i = first_test; i < argc; i++) {
            selected |= strcmp(argv[i], tests[j].name) == 0;
        }
        if (!selected) {
            continue;
        }
        if (run_one(&tests[j], timeout)) {
            passed++;
        } else {
            failed++;
        }
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 && passed > 0 ? 0 : 1;
}

/* ------------------------------------------------------------------------------------------
 * Issue 12: the answers real memcached 2.5.1 and its engine tests saw from the seed
 */

/* CREATE with a name the seed refuses answers NOT_STORED (the seed's status for every failure
 * but "exists") with the reason; names longer than a text key (250 bytes) are created, as the
 * seed created any name CREATE's key could carry. DELETE and SELECT of such a name: unknown. */
static void test_admin_create_bad_name_not_stored(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    const char *bad[] = {"bucket one", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ENGINE_ERROR_CODE rc = create(a, bad[i], te_path, "");
        CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_NOT_STORED);
        CHECK(resp_contains(a, "Invalid bucket name"));
        rc = cmds(a, DELETE_BUCKET, bad[i], NULL);
        CHECK_REPLY(rc, a, PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    }
    CHECK(list_is(a, ""));
    static char longer[1001];
    memset(longer, 'L', 1000);
    CHECK(create_ok(a, longer));
    longer[251] = '\0';
    CHECK(create_ok(a, longer));
    CHECK_EQ_INT(delete_bucket(a, longer, NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    mh_conn_close(a);
    teardown();
}

/* Calls without a connection (a NULL cookie, as memcached's extensions and engine test
 * harness make them) use the default bucket, the item calls included. */
static void test_null_cookie_means_default_bucket(void) {
    if (!boot("engine=%s;default=true;default_bucket_config=name=dflt", te_path)) {
        return;
    }
    mh_conn *c = mh_conn_open();
    item *it = NULL;
    CHECK_EQ_INT(V->allocate(H, NULL, &it, "nk", 2, 3, 0, 0), ENGINE_SUCCESS);
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, NULL, it, &info));
    if (info.value[0].iov_len == 3) {
        memcpy(info.value[0].iov_base, "abc", 3);
    }
    V->item_set_cas(H, NULL, it, 0);
    uint64_t cas = 0;
    CHECK_EQ_INT(V->store(H, NULL, it, &cas, OPERATION_SET, 0), ENGINE_SUCCESS);
    V->release(H, NULL, it);
    /* The default bucket's connection sees it; an item it got reads through a NULL cookie. */
    CHECK(has(c, "nk", "abc"));
    it = NULL;
    CHECK_EQ_INT(V->get(H, c, &it, "nk", 2, 0), ENGINE_SUCCESS);
    item_info again = {.nvalue = 1};
    CHECK(V->get_item_info(H, NULL, it, &again));
    CHECK_EQ_INT(again.nkey, 2);
    V->release(H, c, it);
    CHECK_EQ_INT(V->get(H, NULL, &it, "nk", 2, 0), ENGINE_SUCCESS);
    V->release(H, NULL, it);
    CHECK_EQ_STR(stat_of(c, NULL, "engine_name"), "dflt");
    mh_conn_close(c);
    teardown();
}

/* A SASL user with no bucket of its own, on the default bucket (no auto-create): SET and GET
 * work, and every item goes back to the default bucket's engine (the seed's try-form calls
 * found no bucket: "Internal error" and a leaked item per command). */
static void test_sasl_user_without_bucket_uses_default(void) {
    if (!boot("engine=%s;admin=admin;default=true;auto_create=false", te_path)) {
        return;
    }
    mh_conn *c = user_conn("nobucket");
    int since = mh_log_lines();
    for (int i = 0; i < 20; i++) {
        CHECK_EQ_INT(store(c, "k", "value", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
        CHECK(has(c, "k", "value"));
    }
    CHECK(!mh_log_contains(since, "Potential memory leak"));
    mh_conn_close(c);
    teardown();
}

/* Items go back to the engine that made them, whichever bucket the connection moved to (here
 * an ep-engine stand-in whose item calls all fail). */
static void test_items_follow_their_engine_across_select(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_ok(a, "first"));
    /* Another engine, which fails every item call: an item sent there shows. */
    CHECK_REPLY(create(a, "second", ep_path, ""), a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_REPLY(cmds(a, SELECT_BUCKET, "first", NULL), a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(store(a, "k", "one", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    item *got = NULL;
    CHECK_EQ_INT(V->get(H, a, &got, "k", 1, 0), ENGINE_SUCCESS);
    item *fresh = NULL;
    CHECK_EQ_INT(V->allocate(H, a, &fresh, "n", 1, 3, 0, 0), ENGINE_SUCCESS);
    CHECK_REPLY(cmds(a, SELECT_BUCKET, "second", NULL), a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    int since = mh_log_lines();
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, a, got, &info));
    CHECK(info.value[0].iov_len == 3 && memcmp(info.value[0].iov_base, "one", 3) == 0);
    V->item_set_cas(H, a, fresh, 7);
    item_info fresh_info = {.nvalue = 1};
    CHECK(V->get_item_info(H, a, fresh, &fresh_info));
    CHECK_EQ_INT(fresh_info.cas, 7);
    V->release(H, a, got);
    V->release(H, a, fresh);
    CHECK(!mh_log_contains(since, "Potential memory leak"));
    CHECK(!mh_log_contains(since, "no longer there"));
    mh_conn_close(a);
    teardown();
}

/* A bucket deleted while a SET's value is still arriving: the item (allocated, not yet
 * stored) still reads and goes back to its engine, and the engine is destroyed only after
 * that, when the delete completes. */
static void test_delete_while_set_value_arriving(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    mh_conn *a2 = admin_conn();
    CHECK(create_ok(a, "gone"));
    mh_conn *c = user_conn("gone");
    item *it = NULL;
    CHECK_EQ_INT(V->allocate(H, c, &it, "k", 1, 5, 0, 0), ENGINE_SUCCESS);
    int since = mh_log_lines();
    CHECK_EQ_INT(cmds(a, DELETE_BUCKET, "gone", NULL), ENGINE_EWOULDBLOCK);
    /* The item holds the engine: the bucket stays STOPPING, its engine alive. */
    CHECK_EQ_STR(stat_of(a2, "bucket", "gone"), "stopping");
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, c, it, &info));
    if (info.value[0].iov_len == 5) {
        memcpy(info.value[0].iov_base, "value", 5);
    }
    uint64_t cas = 0;
    CHECK_EQ_INT(V->store(H, c, it, &cas, OPERATION_SET, 0), ENGINE_DISCONNECT);
    V->release(H, c, it);
    CHECK(!mh_log_contains(since, "Potential memory leak"));
    /* Now the delete completes. */
    CHECK_EQ_INT(mh_conn_wait_io(a, IO_TIMEOUT_MS), ENGINE_SUCCESS);
    CHECK_REPLY(cmds(a, DELETE_BUCKET, "gone", NULL), a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    mh_conn_close(c);
    mh_conn_close(a2);
    mh_conn_close(a);
    teardown();
}

/* An item a TAP step handed out is held like any other: a delete of its bucket completes only
 * after memcached sent and released it. */
static void test_tap_item_held_across_delete(void) {
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    mh_conn *a2 = admin_conn();
    CHECK(create_ok(a, "tapd"));
    mh_conn *c = user_conn("tapd");
    CHECK_EQ_INT(store(c, "t1", "a", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    TAP_ITERATOR iter = V->get_tap_iterator(H, c, "client", 6, 0, NULL, 0);
    CHECK(iter != NULL);
    if (iter != NULL) {
        item *it = NULL;
        void *es = NULL;
        uint16_t nes = 0, flags = 0, vb = 0;
        uint8_t ttl = 0;
        uint32_t seqno = 0;
        CHECK_EQ_INT(iter(H, c, &it, &es, &nes, &ttl, &flags, &seqno, &vb), TAP_MUTATION);
        int since = mh_log_lines();
        CHECK_EQ_INT(cmds(a, DELETE_BUCKET, "tapd", NULL), ENGINE_EWOULDBLOCK);
        CHECK_EQ_STR(stat_of(a2, "bucket", "tapd"), "stopping");
        item_info info = {.nvalue = 1};
        CHECK(V->get_item_info(H, c, it, &info));
        V->release(H, c, it);
        CHECK(!mh_log_contains(since, "Potential memory leak"));
        CHECK_EQ_INT(mh_conn_wait_io(a, IO_TIMEOUT_MS), ENGINE_SUCCESS);
        CHECK_REPLY(cmds(a, DELETE_BUCKET, "tapd", NULL), a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    }
    mh_conn_close(c);
    mh_conn_close(a2);
    mh_conn_close(a);
    teardown();
}
