/*
 * conformance.c: drives the test engine (libtest_engine.so) through the mock host the way
 * memcached would, and checks every return code: loading (and its failures), every store
 * operation, get/remove with CAS, arithmetic, expiry, flush, stats, unknown_command (answered
 * through the response callback, including an EWOULDBLOCK completed by notify_io_complete),
 * a reserved cookie outliving its connection, ON_DISCONNECT, TAP in both directions, and
 * several threads on their own connections at once.
 *
 * Usage: conformance PATH/TO/libtest_engine.so
 */
#define _POSIX_C_SOURCE 200809L
#include "mock_host.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define OP_ECHO 0xe0
#define OP_ASYNC 0xe1
#define OP_GATE 0xe2

static const char *engine_path;
static mh_engine *eng;
static ENGINE_HANDLE *H;
static ENGINE_HANDLE_V1 *V;
static SERVER_HANDLE_V1 *api;

#include "commands.h"

/* ------------------------------------------------------------------------------------------
 * More helpers: the calls memcached makes for one command (store, get and del: commands.h)
 */
static ENGINE_ERROR_CODE arith(mh_conn *c, const char *key, bool incr, bool create,
                               uint64_t delta, uint64_t initial, uint64_t *result) {
    uint64_t cas = 0;
    ENGINE_ERROR_CODE rc =
        V->arithmetic(H, c, key, (int)strlen(key), incr, create, delta, initial,
                      0, &cas, result, 0);
    if (rc == ENGINE_SUCCESS) {
        CHECK(cas != 0);
    }
    return rc;
}

static const char *stat_of(mh_conn *c, const char *group, const char *key) {
    mh_conn_clear_stats(c);
    int n = group != NULL ? (int)strlen(group) : 0;
    ENGINE_ERROR_CODE rc = V->get_stats(H, c, group, n, mh_add_stat);
    CHECK_EQ_INT(rc, ENGINE_SUCCESS);
    return mh_conn_stat(c, key);
}

static long long stat_num(mh_conn *c, const char *key) {
    const char *v = stat_of(c, NULL, key);
    CHECK(v != NULL);
    return v != NULL ? atoll(v) : -1;
}

static ENGINE_ERROR_CODE command(mh_conn *c, uint8_t opcode, const void *ext, uint8_t extlen,
                                 const char *key, const char *value) {
    union {
        protocol_binary_request_header header;
        char bytes[1024];
    } req;
    size_t n = mh_build_request(&req, sizeof(req), opcode, ext, extlen, key,
                                (uint16_t)(key ? strlen(key) : 0), value,
                                (uint32_t)(value ? strlen(value) : 0), 0);
    CHECK(n > 0);
    c->responses = 0;
    return V->unknown_command(H, c, &req.header, mh_add_response);
}

/* ------------------------------------------------------------------------------------------
 * Tests
 */
static void test_load_failures(void) {
    char err[512] = "";
    int lines = mh_log_lines();
    CHECK(mh_engine_load("/nonexistent/libnope.so", NULL, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "/nonexistent/libnope.so") != NULL);
    CHECK(mh_log_lines() > lines);

    /* A library without create_instance. */
    CHECK(mh_engine_load("libm.so.6", NULL, err, sizeof(err)) == NULL);
    CHECK(strstr(err, "create_instance") != NULL);

    /* initialize fails on an unknown key and on a bad value. */
    CHECK(mh_engine_load(engine_path, "no_such_key=1", err, sizeof(err)) == NULL);
    CHECK(strstr(err, "initialize") != NULL);
    CHECK(mh_engine_load(engine_path, "cache_size=lots", err, sizeof(err)) == NULL);

    check_only_interface_1(engine_path);
}

static void test_info(void) {
    const engine_info *info = V->get_info(H);
    CHECK(info != NULL);
    if (info == NULL) {
        return;
    }
    CHECK_EQ_STR(info->description, "Test engine v0.1");
    CHECK_EQ_INT(info->num_features, 2);
    CHECK_EQ_INT(info->features[0].feature, ENGINE_FEATURE_CAS);
    /* features[] is over-allocated by the engine: read the second entry through the array. */
    const feature_info *features = info->features;
    CHECK_EQ_INT(features[1].feature, ENGINE_FEATURE_LRU);
}

static void test_store_operations(void) {
    mh_conn *c = mh_conn_open();
    char buf[64];
    uint64_t cas1 = 0, cas2 = 0, got_cas = 0;
    uint32_t flags = 0;

    CHECK_EQ_INT(store(c, "so:a", "1", 0xdeadbeef, 0, OPERATION_SET, 0, &cas1), ENGINE_SUCCESS);
    CHECK(cas1 != 0);
    CHECK_EQ_INT(get(c, "so:a", buf, sizeof(buf), &got_cas, &flags), ENGINE_SUCCESS);
    CHECK_EQ_STR(buf, "1");
    CHECK(got_cas == cas1);
    CHECK(flags == 0xdeadbeef);

    CHECK_EQ_INT(store(c, "so:a", "2", 0, 0, OPERATION_ADD, 0, NULL), ENGINE_NOT_STORED);
    CHECK_EQ_INT(store(c, "so:b", "b", 0, 0, OPERATION_ADD, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "so:none", "x", 0, 0, OPERATION_REPLACE, 0, NULL), ENGINE_NOT_STORED);
    CHECK_EQ_INT(store(c, "so:a", "2", 0, 0, OPERATION_REPLACE, 0, &cas2), ENGINE_SUCCESS);
    CHECK(cas2 != cas1);

    CHECK_EQ_INT(store(c, "so:a", "-tail", 0, 0, OPERATION_APPEND, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "so:a", "head-", 0, 0, OPERATION_PREPEND, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "so:a", buf, sizeof(buf), &got_cas, NULL), ENGINE_SUCCESS);
    CHECK_EQ_STR(buf, "head-2-tail");
    CHECK_EQ_INT(store(c, "so:none", "x", 0, 0, OPERATION_APPEND, 0, NULL), ENGINE_NOT_STORED);
    CHECK_EQ_INT(store(c, "so:none", "x", 0, 0, OPERATION_PREPEND, 0, NULL), ENGINE_NOT_STORED);
    CHECK_EQ_INT(store(c, "so:a", "x", 0, 0, OPERATION_APPEND, got_cas + 1000, NULL),
                 ENGINE_KEY_EEXISTS);

    CHECK_EQ_INT(store(c, "so:a", "cas", 0, 0, OPERATION_CAS, got_cas + 1000, NULL),
                 ENGINE_KEY_EEXISTS);
    CHECK_EQ_INT(store(c, "so:a", "cas", 0, 0, OPERATION_CAS, got_cas, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "so:a", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    CHECK_EQ_STR(buf, "cas");
    CHECK_EQ_INT(store(c, "so:none", "x", 0, 0, OPERATION_CAS, 1, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(store(c, "so:a", "x", 0, 0, (ENGINE_STORE_OPERATION)99, 0, NULL), ENGINE_EINVAL);

    /* Argument checks. */
    item *it = NULL;
    CHECK_EQ_INT(V->allocate(H, c, &it, "", 0, 1, 0, 0), ENGINE_EINVAL);
    CHECK_EQ_INT(V->get(H, c, &it, "so:none", 7, 0), ENGINE_KEY_ENOENT);
    /* get_item_info needs room for at least one iovec. */
    CHECK_EQ_INT(V->get(H, c, &it, "so:a", 4, 0), ENGINE_SUCCESS);
    item_info none = {.nvalue = 0};
    CHECK(!V->get_item_info(H, c, it, &none));
    V->release(H, c, it);
    mh_conn_close(c);
}

static void test_remove(void) {
    mh_conn *c = mh_conn_open();
    uint64_t cas = 0;
    char buf[16];
    CHECK_EQ_INT(del(c, "rm:none", 0), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(store(c, "rm:a", "v", 0, 0, OPERATION_SET, 0, &cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(del(c, "rm:a", cas + 1), ENGINE_KEY_EEXISTS);
    CHECK_EQ_INT(del(c, "rm:a", cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "rm:a", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(store(c, "rm:b", "v", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(del(c, "rm:b", 0), ENGINE_SUCCESS);
    mh_conn_close(c);
}

static void test_arithmetic(void) {
    mh_conn *c = mh_conn_open();
    uint64_t r = 0;
    CHECK_EQ_INT(arith(c, "ar:n", true, false, 1, 0, &r), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(arith(c, "ar:n", true, true, 1, 10, &r), ENGINE_SUCCESS);
    CHECK_EQ_INT(r, 10);
    CHECK_EQ_INT(arith(c, "ar:n", true, true, 5, 10, &r), ENGINE_SUCCESS);
    CHECK_EQ_INT(r, 15);
    CHECK_EQ_INT(arith(c, "ar:n", false, false, 100, 0, &r), ENGINE_SUCCESS);
    CHECK_EQ_INT(r, 0);
    char buf[32];
    CHECK_EQ_INT(get(c, "ar:n", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    CHECK_EQ_STR(buf, "0");
    CHECK_EQ_INT(store(c, "ar:max", "18446744073709551615", 0, 0, OPERATION_SET, 0, NULL),
                 ENGINE_SUCCESS);
    CHECK_EQ_INT(arith(c, "ar:max", true, false, 1, 0, &r), ENGINE_SUCCESS);
    CHECK(r == 0); /* wraps */
    CHECK_EQ_INT(store(c, "ar:text", "abc", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(arith(c, "ar:text", true, false, 1, 0, &r), ENGINE_EINVAL);
    mh_conn_close(c);
}

static void test_expiry_and_flush(void) {
    mh_conn *c = mh_conn_open();
    char buf[16];
    rel_time_t exp = api->core->realtime(10);
    CHECK_EQ_INT(store(c, "ex:a", "v", 0, exp, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "ex:b", "v", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "ex:a", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    mh_advance_time(11);
    CHECK_EQ_INT(get(c, "ex:a", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(get(c, "ex:b", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);

    /* A delayed flush takes effect when its time comes. */
    CHECK_EQ_INT(V->flush(H, c, 5), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "ex:b", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    mh_advance_time(6);
    CHECK_EQ_INT(get(c, "ex:b", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);

    CHECK_EQ_INT(store(c, "ex:c", "v", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "ex:c", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(stat_num(c, "curr_items"), 0);
    mh_conn_close(c);
}

static void sum_aggregate(void *src, void *dest) {
    (void)src;
    ++*(int *)dest;
}

static void test_stats(void) {
    mh_conn *c = mh_conn_open();
    char buf[16];
    V->reset_stats(H, c);
    CHECK_EQ_INT(stat_num(c, "cmd_get"), 0);
    CHECK_EQ_INT(store(c, "st:a", "v", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "st:a", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "st:none", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(stat_num(c, "cmd_get"), 2);
    CHECK_EQ_INT(stat_num(c, "get_hits"), 1);
    CHECK_EQ_INT(stat_num(c, "get_misses"), 1);
    CHECK_EQ_INT(stat_num(c, "cmd_set"), 1);
    CHECK_EQ_INT(stat_num(c, "curr_items"), 1);
    CHECK_EQ_STR(stat_of(c, NULL, "engine_name"), "conformance");
    CHECK_EQ_INT(stat_num(c, "cache_size"), 2 * 1024 * 1024);
    CHECK_EQ_STR(stat_of(c, "tap", "tap_connections"), "0");
    mh_conn_clear_stats(c);
    CHECK_EQ_INT(V->get_stats(H, c, "bogus", 5, mh_add_stat), ENGINE_KEY_ENOENT);
    V->reset_stats(H, c);
    CHECK_EQ_INT(stat_num(c, "cmd_get"), 0);
    CHECK_EQ_INT(stat_num(c, "curr_items"), 1); /* not a counter */

    int calls = 0;
    CHECK_EQ_INT(V->aggregate_stats(H, c, sum_aggregate, &calls), ENGINE_SUCCESS);
    CHECK_EQ_INT(calls, 1);
    CHECK(V->get_stats_struct(H, c) != NULL);
    char info[64];
    CHECK_EQ_INT(V->errinfo(H, c, info, sizeof(info)), 0);
    CHECK_EQ_INT(del(c, "st:a", 0), ENGINE_SUCCESS);
    mh_conn_close(c);
}

static void test_unknown_command(void) {
    mh_conn *c = mh_conn_open();
    const char ext[4] = {1, 2, 3, 4};
    CHECK_EQ_INT(command(c, OP_ECHO, ext, 4, "echo-key", "hello"), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(c->resp_keylen == 8 && memcmp(c->resp_key, "echo-key", 8) == 0);
    CHECK(c->resp_extlen == 4 && memcmp(c->resp_ext, ext, 4) == 0);
    CHECK(c->resp_bodylen == 5 && memcmp(c->resp_body, "hello", 5) == 0);
    CHECK(c->resp_cas == 0xabc);

    CHECK_EQ_INT(command(c, 0x99, NULL, 0, "k", NULL), ENGINE_ENOTSUP);
    CHECK_EQ_INT(c->responses, 0);

    /* A body shorter than extras plus key: answered EINVAL, nothing read past the packet. */
    union {
        protocol_binary_request_header header;
        char bytes[64];
    } bad;
    CHECK(mh_build_request(&bad, sizeof(bad), OP_ECHO, NULL, 0, "kk", 2, NULL, 0, 0) > 0);
    bad.header.request.bodylen = 0; /* keylen 2 > bodylen 0 */
    c->responses = 0;
    CHECK_EQ_INT(V->unknown_command(H, c, &bad.header, mh_add_response), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_EINVAL);

    /* EWOULDBLOCK, completed through notify_io_complete, then the retried call answers. */
    CHECK_EQ_INT(command(c, OP_ASYNC, NULL, 0, "a", NULL), ENGINE_EWOULDBLOCK);
    CHECK_EQ_INT(c->responses, 0);
    CHECK_EQ_INT(mh_conn_wait_io(c, 10000), ENGINE_SUCCESS);
    CHECK_EQ_INT(command(c, OP_ASYNC, NULL, 0, "a", NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    CHECK(c->resp_bodylen == 10 && memcmp(c->resp_body, "async done", 10) == 0);
    CHECK(api->cookie->get_engine_specific(c) == NULL);
    mh_conn_close(c);
}

static void wait_for_live(int want) {
    for (int i = 0; i < 10000 && mh_live_connections() != want; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_INT(mh_live_connections(), want);
}

static void test_reserved_cookie_outlives_close(void) {
    int live = mh_live_connections();
    mh_conn *c = mh_conn_open();
    /* The engine reserves the cookie and completes only once the gate opens. */
    CHECK_EQ_INT(command(c, OP_ASYNC, NULL, 0, "a", "wait"), ENGINE_EWOULDBLOCK);
    mh_conn_close(c);
    CHECK_EQ_INT(mh_live_connections(), live + 1); /* closed, but still reserved */
    mh_conn *d = mh_conn_open();
    CHECK_EQ_INT(command(d, OP_GATE, NULL, 0, NULL, NULL), ENGINE_SUCCESS);
    mh_conn_close(d);
    wait_for_live(live); /* the engine's release freed it */
}

static void test_disconnect_events(void) {
    mh_conn *probe = mh_conn_open();
    long long before = stat_num(probe, "disconnects");
    for (int i = 0; i < 3; i++) {
        mh_conn_close(mh_conn_open());
    }
    CHECK_EQ_INT(stat_num(probe, "disconnects"), before + 3);
    mh_conn_close(probe);
}

static void test_tap(void) {
    mh_conn *c = mh_conn_open();
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "tap:1", "a", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "tap:2", "b", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "tap:3", "c", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);

    TAP_ITERATOR iter = V->get_tap_iterator(H, c, "client", 6, 0, NULL, 0);
    CHECK(iter != NULL);
    CHECK_EQ_STR(stat_of(c, "tap", "tap_connections"), "1");
    int mutations = 0;
    for (int guard = 0; iter != NULL && guard < 100; guard++) {
        item *it = NULL;
        void *es = NULL;
        uint16_t nes = 0, flags = 0, vb = 0;
        uint8_t ttl = 0;
        uint32_t seqno = 0;
        tap_event_t ev = iter(H, c, &it, &es, &nes, &ttl, &flags, &seqno, &vb);
        if (ev == TAP_DISCONNECT) {
            break;
        }
        CHECK_EQ_INT(ev, TAP_MUTATION);
        item_info info = {.nvalue = 1};
        CHECK(V->get_item_info(H, c, it, &info));
        CHECK(info.nkey == 5 && memcmp(info.key, "tap:", 4) == 0);
        V->release(H, c, it);
        mutations++;
    }
    CHECK_EQ_INT(mutations, 3);
    CHECK_EQ_STR(stat_of(c, "tap", "tap_connections"), "0");

    /* A stream abandoned by a disconnect is dropped with its item references. */
    mh_conn *d = mh_conn_open();
    iter = V->get_tap_iterator(H, d, "client", 6, 0, NULL, 0);
    CHECK(iter != NULL);
    CHECK_EQ_STR(stat_of(c, "tap", "tap_connections"), "1");
    mh_conn_close(d);
    CHECK_EQ_STR(stat_of(c, "tap", "tap_connections"), "0");

    /* tap_notify applies a mutation stream. */
    char buf[16];
    CHECK_EQ_INT(V->tap_notify(H, c, NULL, 0, 0, 0, TAP_MUTATION, 1, "tapin", 5, 7, 0, 0, "val",
                               3, 0),
                 ENGINE_SUCCESS);
    uint32_t flags = 0;
    CHECK_EQ_INT(get(c, "tapin", buf, sizeof(buf), NULL, &flags), ENGINE_SUCCESS);
    CHECK_EQ_STR(buf, "val");
    CHECK_EQ_INT(flags, 7);
    CHECK_EQ_INT(V->tap_notify(H, c, NULL, 0, 0, 0, TAP_DELETION, 2, "tapin", 5, 0, 0, 0, NULL,
                               0, 0),
                 ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "tapin", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(V->tap_notify(H, c, NULL, 0, 0, 0, TAP_OPAQUE, 3, NULL, 0, 0, 0, 0, NULL, 0, 0),
                 ENGINE_SUCCESS);
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_SUCCESS);
    mh_conn_close(c);
}

#ifndef MCB_ENGINE_PU
static char vbmap_seen[32];
static ENGINE_ERROR_CODE vbmap_cb(const void *cookie, const void *map, size_t mapsize) {
    (void)cookie;
    size_t n = mapsize < sizeof(vbmap_seen) - 1 ? mapsize : sizeof(vbmap_seen) - 1;
    memcpy(vbmap_seen, map, n);
    vbmap_seen[n] = '\0';
    return ENGINE_SUCCESS;
}
#endif

static void test_vb_map(void) {
#ifndef MCB_ENGINE_PU
    mh_conn *c = mh_conn_open();
    CHECK_EQ_INT(V->get_engine_vb_map(H, c, vbmap_cb), ENGINE_SUCCESS);
    CHECK_EQ_STR(vbmap_seen, "test-vbmap");
    mh_conn_close(c);
#endif
}

/* ------------------------------------------------------------------------------------------
 * Concurrency: threads on their own connections, reconnecting as they go.
 */
#define THREADS 8
#define ITERATIONS 300
#define RECONNECT_EVERY 50

typedef struct {
    int id;
    int reconnects;
    int failures;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    mh_conn *c = mh_conn_open();
    char key[32], val[32], buf[32];
    for (int i = 0; i < ITERATIONS; i++) {
        uint64_t r = 0;
        if (arith(c, "cc:counter", true, false, 1, 0, &r) != ENGINE_SUCCESS) {
            w->failures++;
        }
        snprintf(key, sizeof(key), "cc:%d:%d", w->id, i % 16);
        snprintf(val, sizeof(val), "%d-%d", w->id, i);
        if (store(c, key, val, 0, 0, OPERATION_SET, 0, NULL) != ENGINE_SUCCESS ||
            get(c, key, buf, sizeof(buf), NULL, NULL) != ENGINE_SUCCESS || strcmp(buf, val) != 0) {
            w->failures++;
        }
        if (i % 3 == 0 && del(c, key, 0) != ENGINE_SUCCESS) {
            w->failures++;
        }
        if ((i + 1) % RECONNECT_EVERY == 0) {
            mh_conn_close(c);
            c = mh_conn_open();
            w->reconnects++;
        }
    }
    mh_conn_close(c);
    w->reconnects++;
    return NULL;
}

static void test_concurrent_connections(void) {
    mh_conn *c = mh_conn_open();
    CHECK_EQ_INT(store(c, "cc:counter", "0", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    long long before = stat_num(c, "disconnects");
    pthread_t threads[THREADS];
    worker workers[THREADS];
    for (int i = 0; i < THREADS; i++) {
        workers[i] = (worker){.id = i};
        CHECK(pthread_create(&threads[i], NULL, worker_main, &workers[i]) == 0);
    }
    int reconnects = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
        CHECK_EQ_INT(workers[i].failures, 0);
        reconnects += workers[i].reconnects;
    }
    char buf[32];
    CHECK_EQ_INT(get(c, "cc:counter", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(atoll(buf), THREADS * ITERATIONS);
    CHECK_EQ_INT(stat_num(c, "disconnects"), before + reconnects);
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_SUCCESS);
    mh_conn_close(c);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PATH/TO/libtest_engine.so\n", argv[0]);
        return 2;
    }
    engine_path = argv[1];
    if (mh_init() != 0) {
        fprintf(stderr, "mh_init failed\n");
        return 2;
    }
    api = mh_get_server_api();
    RUN(test_load_failures);

    char err[512] = "";
    eng = mh_engine_load(engine_path, "name=conformance;cache_size=2m;verbose=true", err,
                         sizeof(err));
    if (eng == NULL) {
        fprintf(stderr, "cannot load %s: %s\n", engine_path, err);
        return 1;
    }
    H = eng->handle;
    V = eng->v1;
    CHECK(api->engine == H); /* the server handle names the loaded engine, as memcached's */

    RUN(test_info);
    RUN(test_store_operations);
    RUN(test_remove);
    RUN(test_arithmetic);
    RUN(test_expiry_and_flush);
    RUN(test_stats);
    RUN(test_unknown_command);
    RUN(test_reserved_cookie_outlives_close);
    RUN(test_disconnect_events);
    RUN(test_tap);
    RUN(test_vb_map);
    RUN(test_concurrent_connections);

    mh_engine_unload(eng, false);
    CHECK(api->engine == NULL);
    CHECK_EQ_INT(mh_live_connections(), 0);
    CHECK_EQ_INT(mh_live_stats(), 0);
    mh_shutdown();
    fprintf(stderr, "conformance: %s (%d failed checks)\n", check_failures ? "FAILED" : "passed",
            check_failures);
    return check_failures ? 1 : 0;
}
