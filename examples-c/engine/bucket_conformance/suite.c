/*
 * suite.c: what the bucket engine's tests share: loading and tearing down the engine, item
 * calls as memcached makes them, admin commands and their replies, LIST, and a call held
 * inside a bucket (see suite.h for the list).
 */
#include "suite.h"

/* The libraries under test and the host's handles on the bucket engine (see suite.h). */
int io_timeout_ms;
const char *bucket_path;
const char *te_path;
char ep_path[1024];
char de_path[1024];
char nosym_path[1024];

mh_engine *eng;
ENGINE_HANDLE *H;
ENGINE_HANDLE_V1 *V;
SERVER_HANDLE_V1 *api;

/* check.h's failure count, one for the whole program. */
int check_failures;

/* ------------------------------------------------------------------------------------------
 * Loading
 */

/* Loads and initializes the bucket engine with the config (a printf format). */
__attribute__((format(printf, 1, 2))) bool boot(const char *fmt, ...) {
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
bool boot_base(void) {
    return boot("engine=%s;admin=admin;auto_create=false", te_path);
}

/* Destroys the bucket engine; every host stats block must have been released. */
void teardown(void) {
    if (eng != NULL) {
        mh_engine_unload(eng, false);
        eng = NULL;
    }
    CHECK_EQ_INT(mh_live_stats(), 0);
    mh_shutdown();
}

/* ------------------------------------------------------------------------------------------
 * Item calls, as memcached makes them for one command
 */
ENGINE_ERROR_CODE store(mh_conn *c, const char *key, const char *val,
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

ENGINE_ERROR_CODE get(mh_conn *c, const char *key, char *buf, size_t buflen,
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
bool has(mh_conn *c, const char *key, const char *val) {
    char buf[128];
    return get(c, key, buf, sizeof(buf), NULL) == ENGINE_SUCCESS && strcmp(buf, val) == 0;
}

ENGINE_ERROR_CODE del(mh_conn *c, const char *key, uint64_t cas) {
#ifdef MCB_ENGINE_PU
    return V->remove(H, c, key, strlen(key), cas, 0);
#else
    uint64_t inout = cas;
    return V->remove(H, c, key, strlen(key), &inout, 0);
#endif
}

ENGINE_ERROR_CODE arith(mh_conn *c, const char *key, bool incr, bool create,
                        uint64_t delta, uint64_t initial, uint64_t *result) {
    uint64_t cas = 0;
    return V->arithmetic(H, c, key, (int)strlen(key), incr, create, delta, initial, 0, &cas,
                         result, 0);
}

/* get_stats into the connection's stat list. */
ENGINE_ERROR_CODE stats(mh_conn *c, const char *group) {
    mh_conn_clear_stats(c);
    return V->get_stats(H, c, group, group != NULL ? (int)strlen(group) : 0, mh_add_stat);
}

/* One stat of a group, or NULL (the call must succeed). */
const char *stat_of(mh_conn *c, const char *group, const char *key) {
    CHECK_EQ_INT(stats(c, group), ENGINE_SUCCESS);
    return mh_conn_stat(c, key);
}

long long stat_num(mh_conn *c, const char *group, const char *key) {
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
ENGINE_ERROR_CODE cmd(mh_conn *c, uint8_t opcode, const void *ext, uint8_t extlen,
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
ENGINE_ERROR_CODE cmds(mh_conn *c, uint8_t opcode, const char *key, const char *value) {
    return cmd(c, opcode, NULL, 0, key, (uint16_t)(key != NULL ? strlen(key) : 0), value,
               (uint32_t)(value != NULL ? strlen(value) : 0));
}

/* Whether the last reply carries msg in its key or its body (a trailing newline ignored). */
bool resp_says(const mh_conn *c, const char *msg) {
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
bool resp_contains(const mh_conn *c, const char *needle) {
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

/* A refusal: a reply with a non-SUCCESS status, or EINVAL / DISCONNECT with no reply. */
bool refused(ENGINE_ERROR_CODE rc, const mh_conn *c) {
    if (rc == ENGINE_SUCCESS) {
        return c->responses == 1 && c->resp_status != PROTOCOL_BINARY_RESPONSE_SUCCESS;
    }
    return (rc == ENGINE_EINVAL || rc == ENGINE_DISCONNECT) && c->responses == 0;
}

/* An admin connection: memcached fires ON_AUTH after the SASL exchange. */
mh_conn *admin_conn(void) {
    mh_conn *c = mh_conn_open();
    CHECK(c != NULL);
    mh_conn_auth(c, "admin", NULL);
    return c;
}

/* A connection authenticated as user (attached to the bucket of that name, if any). */
mh_conn *user_conn(const char *user) {
    mh_conn *c = mh_conn_open();
    CHECK(c != NULL);
    mh_conn_auth(c, user, NULL);
    return c;
}

ENGINE_ERROR_CODE create_op(mh_conn *c, uint8_t opcode, const char *name,
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

ENGINE_ERROR_CODE create(mh_conn *c, const char *name, const char *path,
                         const char *config) {
    return create_op(c, CREATE_BUCKET, name, path, config);
}

/* Creates a test-engine bucket with this config; whether it succeeded. */
static bool create_test_bucket(mh_conn *admin, const char *name, const char *config) {
    ENGINE_ERROR_CODE rc = create(admin, name, te_path, config);
    bool ok = rc == ENGINE_SUCCESS && admin->responses == 1 &&
              admin->resp_status == PROTOCOL_BINARY_RESPONSE_SUCCESS;
    CHECK(ok);
    if (!ok) {
        fprintf(stderr, "create %s: rc %d status 0x%x\n", name, (int)rc, admin->resp_status);
    }
    return ok;
}

/* Creates a test-engine bucket whose engine knows its name (stat engine_name). */
bool create_ok(mh_conn *admin, const char *name) {
    char config[256];
    snprintf(config, sizeof(config), "name=%s", name);
    return create_test_bucket(admin, name, config);
}

bool create_logged(mh_conn *admin, const char *name, const char *engine_name) {
    char config[256];
    snprintf(config, sizeof(config), "name=%s;verbose=true", engine_name);
    return create_test_bucket(admin, name, config);
}

/*
 * The whole DELETE exchange: EWOULDBLOCK, notify_io_complete, the retried call. Returns the
 * final reply's status, or -1 when the exchange went wrong.
 */
int delete_op(mh_conn *c, uint8_t opcode, const char *name, const char *config) {
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

int delete_bucket(mh_conn *c, const char *name, const char *config) {
    return delete_op(c, DELETE_BUCKET, name, config);
}

/* LIST into buf (NUL-terminated); returns the reply status or -1. */
int list_op(mh_conn *c, uint8_t opcode, char *buf, size_t buflen) {
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
bool list_is(mh_conn *c, const char *want) {
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

static void *held_call_main(void *arg) {
    held_call *h = arg;
    h->rc = V->get_stats(H, h->conn, NULL, 0, holding_add_stat);
    return NULL;
}

/* Starts a get_stats on conn and returns once it is inside the bucket's engine. */
void hold_start(held_call *h, mh_conn *conn) {
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
void hold_finish(held_call *h) {
    pthread_mutex_lock(&hold_lock);
    hold_open = true;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
    CHECK(pthread_join(h->thread, NULL) == 0);
    CHECK_EQ_INT(h->rc, ENGINE_SUCCESS);
}

/* Whether the library `name` is mapped into this process. */
bool library_mapped(const char *name) {
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

/* ------------------------------------------------------------------------------------------
 * Held items and the engines they keep
 */
void fail_fast(void) {
    if (io_timeout_ms > HANG_TIMEOUT_S * 1000) {
        io_timeout_ms = HANG_TIMEOUT_S * 1000;
    }
    alarm((unsigned)(io_timeout_ms / 1000) + 10);
}

/* The line the test engine logs when `engine_name` is destroyed, up to its force flag. */
static void destroyed_line(const char *engine_name, char *out, size_t outlen) {
    snprintf(out, outlen, "test engine %s: destroyed", engine_name);
}

int engine_destroys(int since, const char *engine_name) {
    char line[128];
    destroyed_line(engine_name, line, sizeof(line));
    return mh_log_count(since, line);
}

bool await_engine_destroyed(int since, const char *engine_name) {
    char line[128];
    destroyed_line(engine_name, line, sizeof(line));
    bool destroyed = mh_log_wait(since, line, IO_TIMEOUT_MS);
    if (!destroyed) {
        fprintf(stderr, "never logged: \"%s\"\n", line);
    }
    return destroyed;
}

bool engine_destroyed_forced(int since, const char *engine_name) {
    char line[128];
    snprintf(line, sizeof(line), "test engine %s: destroyed (force=true)", engine_name);
    return mh_log_contains(since, line);
}

item *held_item(mh_conn *c, const char *key, const char *value) {
    item *it = NULL;
    size_t n = strlen(value);
    CHECK_EQ_INT(V->allocate(H, c, &it, key, strlen(key), n, 0, 0), ENGINE_SUCCESS);
    if (it == NULL) {
        return NULL;
    }
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, c, it, &info));
    CHECK_EQ_INT(info.value[0].iov_len, n);
    if (info.value[0].iov_len == n) {
        memcpy(info.value[0].iov_base, value, n);
    }
    return it;
}

bool item_reads(mh_conn *c, const item *it, const char *key, const char *value) {
    item_info info = {.nvalue = 1};
    if (!V->get_item_info(H, c, it, &info)) {
        fprintf(stderr, "get_item_info refused the item of key %s\n", key);
        return false;
    }
    size_t nkey = strlen(key), n = strlen(value);
    bool same = info.nkey == nkey && memcmp(info.key, key, nkey) == 0 &&
                info.value[0].iov_len == n && memcmp(info.value[0].iov_base, value, n) == 0;
    if (!same) {
        /* The first bytes say enough (values may be large). */
        int shown = info.value[0].iov_len < 64 ? (int)info.value[0].iov_len : 64;
        fprintf(stderr, "the item reads \"%.*s\" = \"%.*s\" (%zu bytes), want \"%s\" = "
                "\"%.64s\" (%zu bytes)\n", (int)info.nkey, (const char *)info.key, shown,
                (const char *)info.value[0].iov_base, info.value[0].iov_len, key, value, n);
    }
    return same;
}
