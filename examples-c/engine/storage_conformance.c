/*
 * storage_conformance.c: drives the built-in storage engine through the mock host the way
 * memcached would, checking every return code: configuration keys, every store operation,
 * items that outlive their removal, CAS, remove with CAS, arithmetic (create, wrap, floor,
 * non-numeric), expiry and flush (now and delayed) on the host's clock, limits, eviction,
 * stats, touch / get-and-touch through unknown_command, item_info's nvalue, TAP refusals, and
 * concurrent incr from several threads.
 *
 * Usage:
 *   storage_conformance direct PATH/TO/libmcb_engine.so
 *       loads the engine itself (several instances, one per configuration), and also calls
 *       it with a NULL cookie, as memcached's engine test harness does;
 *   storage_conformance bucket PATH/TO/libbucket_engine.so
 *       loads the bucket engine with a default bucket on `engine=builtin` (no library) and
 *       runs the semantic tests through it, on connections attached to that bucket.
 */
#define _POSIX_C_SOURCE 200809L
#include "mock_host.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* Binary opcodes memcached hands storage engines through unknown_command. */
#define OP_TOUCH 0x1c
#define OP_GAT 0x1d
#define OP_GATQ 0x1e

/* RUN for a test taking the connection it runs on (NULL: a NULL cookie). */
#define RUN_ON(test, conn)                                                                     \
    do {                                                                                       \
        int before_ = check_failures;                                                          \
        test(conn);                                                                            \
        fprintf(stderr, "%s %s (%s)\n", check_failures == before_ ? "ok  " : "FAIL", #test,    \
                (conn) != NULL ? "connection" : "NULL cookie");                                \
    } while (0)

static bool direct;
static ENGINE_HANDLE *H;
static ENGINE_HANDLE_V1 *V;
static SERVER_HANDLE_V1 *api;

#include "commands.h"

/* ------------------------------------------------------------------------------------------
 * More helpers: the calls memcached makes for one command (store, get and del: commands.h)
 */
static ENGINE_ERROR_CODE arith(mh_conn *c, const char *key, bool incr, bool create,
                               uint64_t delta, uint64_t initial, uint64_t *result,
                               uint64_t *cas) {
    uint64_t ignored = 0;
    return V->arithmetic(H, c, key, (int)strlen(key), incr, create, delta, initial, 0,
                         cas != NULL ? cas : &ignored, result, 0);
}

static long long stat_num(mh_conn *c, const char *key) {
    mh_conn_clear_stats(c);
    CHECK_EQ_INT(V->get_stats(H, c, NULL, 0, mh_add_stat), ENGINE_SUCCESS);
    const char *v = mh_conn_stat(c, key);
    CHECK(v != NULL);
    return v != NULL ? atoll(v) : -1;
}

static ENGINE_ERROR_CODE command(mh_conn *c, uint8_t opcode, uint32_t expiry, uint8_t extlen,
                                 const char *key) {
    union {
        protocol_binary_request_header header;
        char bytes[512];
    } req;
    uint32_t ext = htonl(expiry);
    size_t n = mh_build_request(&req, sizeof(req), opcode, &ext, extlen, key,
                                (uint16_t)(key != NULL ? strlen(key) : 0), NULL, 0, 0);
    CHECK(n > 0);
    c->responses = 0;
    return V->unknown_command(H, c, &req.header, mh_add_response);
}

/* ------------------------------------------------------------------------------------------
 * Tests (both modes)
 */
static void test_store_operations(mh_conn *c) {
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
    CHECK_EQ_INT(store(c, "so:a", "2", 7, 0, OPERATION_REPLACE, 0, &cas2), ENGINE_SUCCESS);
    CHECK(cas2 > cas1);

    /* APPEND/PREPEND keep the flags; absent keys are NOT_STORED. */
    CHECK_EQ_INT(store(c, "so:a", "-tail", 0, 0, OPERATION_APPEND, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "so:a", "head-", 0, 0, OPERATION_PREPEND, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "so:a", buf, sizeof(buf), &got_cas, &flags), ENGINE_SUCCESS);
    CHECK_EQ_STR(buf, "head-2-tail");
    CHECK_EQ_INT(flags, 7);
    CHECK_EQ_INT(store(c, "so:none", "x", 0, 0, OPERATION_APPEND, 0, NULL), ENGINE_NOT_STORED);
    CHECK_EQ_INT(store(c, "so:none", "x", 0, 0, OPERATION_PREPEND, 0, NULL), ENGINE_NOT_STORED);

    /* CAS: absent, mismatch, match. */
    CHECK_EQ_INT(store(c, "so:none", "x", 0, 0, OPERATION_CAS, 1, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(store(c, "so:a", "x", 0, 0, OPERATION_CAS, got_cas + 1000, NULL),
                 ENGINE_KEY_EEXISTS);
    uint64_t cas3 = 0;
    CHECK_EQ_INT(store(c, "so:a", "x", 0, 0, OPERATION_CAS, got_cas, &cas3), ENGINE_SUCCESS);
    CHECK(cas3 > got_cas);

    /* An unknown operation. */
    CHECK_EQ_INT(store(c, "so:a", "x", 0, 0, (ENGINE_STORE_OPERATION)99, 0, NULL),
                 ENGINE_ENOTSUP);
}

static void test_items_outlive_their_removal(mh_conn *c) {
    CHECK_EQ_INT(store(c, "ol:k", "held", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    item *it = NULL;
    CHECK_EQ_INT(V->get(H, c, &it, "ol:k", 4, 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "ol:k", "replaced", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(del(c, "ol:k", 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_SUCCESS);
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, c, it, &info));
    CHECK_EQ_INT(info.value[0].iov_len, 4);
    CHECK(memcmp(info.value[0].iov_base, "held", 4) == 0);
    V->release(H, c, it);
}

static void test_remove_with_cas(mh_conn *c) {
    uint64_t cas = 0;
    CHECK_EQ_INT(del(c, "rm:none", 0), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(store(c, "rm:k", "v", 0, 0, OPERATION_SET, 0, &cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(del(c, "rm:k", cas + 1), ENGINE_KEY_EEXISTS);
    CHECK_EQ_INT(del(c, "rm:k", cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(del(c, "rm:k", 0), ENGINE_KEY_ENOENT);
}

static void test_arithmetic(mh_conn *c) {
    uint64_t v = 0, cas = 0, got_cas = 0;
    char buf[64];
    CHECK_EQ_INT(arith(c, "ar:n", true, false, 1, 0, &v, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(arith(c, "ar:n", true, true, 1, 10, &v, &cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(v, 10);
    CHECK_EQ_INT(get(c, "ar:n", buf, sizeof(buf), &got_cas, NULL), ENGINE_SUCCESS);
    CHECK_EQ_STR(buf, "10");
    CHECK(got_cas == cas);
    CHECK_EQ_INT(arith(c, "ar:n", true, false, 5, 0, &v, &cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(v, 15);
    CHECK(cas > got_cas);
    CHECK_EQ_INT(arith(c, "ar:n", false, false, 100, 0, &v, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(v, 0);
    CHECK_EQ_INT(store(c, "ar:max", "18446744073709551615", 0, 0, OPERATION_SET, 0, NULL),
                 ENGINE_SUCCESS);
    CHECK_EQ_INT(arith(c, "ar:max", true, false, 2, 0, &v, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(v, 1);
    CHECK_EQ_INT(store(c, "ar:text", "abc", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(arith(c, "ar:text", true, false, 1, 0, &v, NULL), ENGINE_EINVAL);
}

static void test_expiry_and_flush(mh_conn *c) {
    char buf[16];
    /* memcached converts a client's expiry with realtime() before allocate. */
    rel_time_t in10 = api->core->realtime(10);
    CHECK_EQ_INT(store(c, "ex:k", "v", 0, in10, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "ex:forever", "v", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    mh_advance_time(9);
    CHECK_EQ_INT(get(c, "ex:k", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    mh_advance_time(2);
    CHECK_EQ_INT(get(c, "ex:k", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(get(c, "ex:forever", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);

    /* A delayed flush (relative seconds, as clients send it) hides what was stored before. */
    CHECK_EQ_INT(V->flush(H, c, 5), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "ex:forever", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    mh_advance_time(5);
    CHECK_EQ_INT(get(c, "ex:forever", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(store(c, "ex:after", "v", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "ex:after", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);

    /* Flush now. */
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "ex:after", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(stat_num(c, "curr_items"), 0);
}

static void test_limits(mh_conn *c) {
    char key[300];
    memset(key, 'k', sizeof(key));
    item *it = NULL;
    CHECK_EQ_INT(V->allocate(H, c, &it, key, 250, 1, 0, 0), ENGINE_SUCCESS);
    V->release(H, c, it);
    CHECK_EQ_INT(V->allocate(H, c, &it, key, 251, 1, 0, 0), ENGINE_EINVAL);
    CHECK_EQ_INT(V->allocate(H, c, &it, key, 0, 1, 0, 0), ENGINE_EINVAL);
    CHECK_EQ_INT(V->allocate(H, c, &it, "big", 3, 2 << 20, 0, 0), ENGINE_E2BIG);
    CHECK_EQ_INT(V->get(H, c, &it, key, -1, 0), ENGINE_EINVAL);
}

static void test_stats(mh_conn *c) {
    V->reset_stats(H, c);
    CHECK_EQ_INT(store(c, "st:a", "1", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    char buf[8];
    CHECK_EQ_INT(get(c, "st:a", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "st:none", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    CHECK_EQ_INT(stat_num(c, "total_items"), 1);
    CHECK_EQ_INT(stat_num(c, "get_hits"), 1);
    CHECK_EQ_INT(stat_num(c, "get_misses"), 1);
    CHECK(stat_num(c, "curr_items") >= 1);
    CHECK(stat_num(c, "bytes") > 0);
    CHECK(stat_num(c, "engine_maxbytes") > 0);
    CHECK(stat_num(c, "evictions") >= 0);
    CHECK(stat_num(c, "reclaimed") >= 0);
    mh_conn_clear_stats(c);
    CHECK_EQ_INT(V->get_stats(H, c, "settings", 8, mh_add_stat), ENGINE_SUCCESS);
    CHECK_EQ_STR(mh_conn_stat(c, "use_cas"), "true");
    CHECK_EQ_INT(V->get_stats(H, c, "bogus", 5, mh_add_stat), ENGINE_KEY_ENOENT);
    V->reset_stats(H, c);
    CHECK_EQ_INT(stat_num(c, "total_items"), 0);
    CHECK_EQ_INT(stat_num(c, "get_hits"), 0);
}

static void test_touch_and_gat(mh_conn *c) {
    CHECK_EQ_INT(store(c, "tg:k", "value", 0x01020304, 0, OPERATION_SET, 0, NULL),
                 ENGINE_SUCCESS);
    CHECK_EQ_INT(command(c, OP_TOUCH, 10, 4, "tg:k"), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_SUCCESS);

    CHECK_EQ_INT(command(c, OP_GAT, 10, 4, "tg:k"), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(c->resp_bodylen, 5);
    CHECK(memcmp(c->resp_body, "value", 5) == 0);
    CHECK_EQ_INT(c->resp_extlen, 4);
    uint32_t flags = 0;
    memcpy(&flags, c->resp_ext, 4);
    CHECK(flags == 0x01020304);
    CHECK(c->resp_cas != 0);

    /* Misses: GAT and TOUCH answer KEY_ENOENT, GATQ says nothing. */
    CHECK_EQ_INT(command(c, OP_GAT, 0, 4, "tg:none"), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    CHECK_EQ_INT(command(c, OP_TOUCH, 0, 4, "tg:none"), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    CHECK_EQ_INT(command(c, OP_GATQ, 0, 4, "tg:none"), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 0);

    /* The touched expiry applies: 10 s from now. */
    mh_advance_time(11);
    char buf[16];
    CHECK_EQ_INT(get(c, "tg:k", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);

    /* No extras: EINVAL answered; other opcodes: see test_scrub_and_unknown_opcodes. */
    CHECK_EQ_INT(command(c, OP_TOUCH, 0, 0, "tg:k"), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_EINVAL);
}

static void test_item_info_nvalue(mh_conn *c) {
    CHECK_EQ_INT(store(c, "ii:k", "abc", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    item *it = NULL;
    CHECK_EQ_INT(V->get(H, c, &it, "ii:k", 4, 0), ENGINE_SUCCESS);
    item_info none = {.nvalue = 0};
    CHECK(!V->get_item_info(H, c, it, &none));
    struct {
        item_info info;
        struct iovec more[2];
    } big = {.info = {.nvalue = 3}};
    CHECK(V->get_item_info(H, c, it, &big.info));
    CHECK_EQ_INT(big.info.nvalue, 1);
    CHECK_EQ_INT(big.info.nbytes, 3);
    V->release(H, c, it);
}

static void test_tap_is_not_supported(mh_conn *c) {
    CHECK(V->get_tap_iterator(H, c, NULL, 0, 0, NULL, 0) == NULL);
    if (direct) {
        CHECK_EQ_INT(V->tap_notify(H, c, NULL, 0, 0, 0, TAP_MUTATION, 0, "k", 1, 0, 0, 0, "v",
                                   1, 0),
                     ENGINE_ENOTSUP);
    }
}

#define THREADS 4
#define INCRS 200

static void *incr_main(void *arg) {
    (void)arg;
    mh_conn *c = mh_conn_open();
    for (int i = 0; i < INCRS; i++) {
        uint64_t v = 0;
        CHECK_EQ_INT(arith(c, "cc:n", true, false, 1, 0, &v, NULL), ENGINE_SUCCESS);
    }
    mh_conn_close(c);
    return NULL;
}

static void test_concurrent_incr(mh_conn *c) {
    CHECK_EQ_INT(store(c, "cc:n", "0", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_create(&threads[i], NULL, incr_main, NULL) == 0);
    }
    for (int i = 0; i < THREADS; i++) {
        CHECK(pthread_join(threads[i], NULL) == 0);
    }
    char buf[32];
    CHECK_EQ_INT(get(c, "cc:n", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(atoll(buf), THREADS * INCRS);
}

/* With a NULL cookie nothing can answer through the host's callbacks (they need a
 * connection): the calls must still be safe and say so. */
static void test_callbacks_with_a_null_cookie(mh_conn *c) {
    CHECK(c == NULL);
    CHECK_EQ_INT(V->get_stats(H, NULL, NULL, 0, mh_add_stat), ENGINE_SUCCESS);
    union {
        protocol_binary_request_header header;
        char bytes[64];
    } req;
    uint32_t ext = 0;
    CHECK(mh_build_request(&req, sizeof(req), OP_TOUCH, &ext, 4, "k", 1, NULL,
                           0, 0) > 0);
    /* The host's callback refuses a NULL cookie: the engine reports the failure. */
    CHECK_EQ_INT(V->unknown_command(H, NULL, &req.header, mh_add_response), ENGINE_FAILED);
    V->reset_stats(H, NULL);
    CHECK_EQ_INT(V->flush(H, NULL, 0), ENGINE_SUCCESS);
}

/* Tests defined at the end of the file (issue 12). */
static void test_get_miss_writes_null(mh_conn *c);
static void test_scrub_and_unknown_opcodes(mh_conn *c);

static void run_semantics(mh_conn *c) {
    RUN_ON(test_store_operations, c);
    RUN_ON(test_items_outlive_their_removal, c);
    RUN_ON(test_remove_with_cas, c);
    RUN_ON(test_arithmetic, c);
    RUN_ON(test_limits, c);
    RUN_ON(test_item_info_nvalue, c);
    RUN_ON(test_tap_is_not_supported, c);
    RUN_ON(test_get_miss_writes_null, c);
    if (c == NULL) {
        RUN_ON(test_callbacks_with_a_null_cookie, c);
        return;
    }
    RUN_ON(test_expiry_and_flush, c);
    RUN_ON(test_stats, c);
    RUN_ON(test_touch_and_gat, c);
    RUN_ON(test_concurrent_incr, c);
    RUN_ON(test_scrub_and_unknown_opcodes, c);
}

/* ------------------------------------------------------------------------------------------
 * Direct mode only: configurations and instances
 */
static const char *lib_path;

static mh_engine *load(const char *config) {
    char err[512] = "";
    mh_engine *e = mh_engine_load(lib_path, config, err, sizeof(err));
    if (e == NULL) {
        fprintf(stderr, "load(%s): %s\n", config != NULL ? config : "(null)", err);
    }
    return e;
}

static void use(mh_engine *e) {
    H = e->handle;
    V = e->v1;
}

static void test_configuration_keys(void) {
    char err[512] = "";
    int lines = mh_log_lines();
    CHECK(mh_engine_load(lib_path, "no_such_key=1", err, sizeof(err)) == NULL);
    /* The engine logs its reason, then the host its failure. */
    CHECK(mh_log_lines() >= lines + 2);
    CHECK(mh_engine_load(lib_path, "cache_size=lots", err, sizeof(err)) == NULL);
    CHECK(mh_engine_load(lib_path, "item_size_max=10", err, sizeof(err)) == NULL);
    mh_engine *e = load("use_cas=true;verbose=1;eviction=true;cache_size=2m;preallocate=false;"
                        "factor=1.25;chunk_size=48;item_size_max=1m;ignore_vbucket=true;"
                        "vb0=false");
    CHECK(e != NULL);
    if (e != NULL) {
        mh_engine_unload(e, false);
    }
    check_only_interface_1(lib_path);
}

static void test_info(void) {
    const engine_info *info = V->get_info(H);
    CHECK(info != NULL);
    if (info == NULL) {
        return;
    }
    CHECK(strstr(info->description, "storage engine") != NULL);
    CHECK_EQ_INT(info->num_features, 2);
    const feature_info *features = info->features;
    CHECK_EQ_INT(features[0].feature, ENGINE_FEATURE_CAS);
    CHECK_EQ_INT(features[1].feature, ENGINE_FEATURE_LRU);
}

static void test_instances_are_independent(void) {
    mh_engine *a = load(NULL);
    mh_engine *b = load(NULL);
    CHECK(a != NULL && b != NULL && a->handle != b->handle);
    if (a == NULL || b == NULL) {
        return;
    }
    char buf[8];
    use(a);
    CHECK_EQ_INT(store(NULL, "in:k", "a", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    use(b);
    CHECK_EQ_INT(get(NULL, "in:k", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    mh_engine_unload(a, false);
    mh_engine_unload(b, false);
}

static void test_use_cas_false(void) {
    mh_engine *e = load("use_cas=false");
    CHECK(e != NULL);
    if (e == NULL) {
        return;
    }
    use(e);
    uint64_t cas = 1;
    CHECK_EQ_INT(store(NULL, "uc:k", "v", 0, 0, OPERATION_SET, 0, &cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(cas, 0);
    mh_engine_unload(e, false);
}

static void store_big(int i, ENGINE_ERROR_CODE want) {
    static char value[900 * 1024];
    memset(value, 'x', sizeof(value) - 1);
    char key[32];
    snprintf(key, sizeof(key), "big%d", i);
    item *it = NULL;
    ENGINE_ERROR_CODE rc =
        V->allocate(H, NULL, &it, key, strlen(key), sizeof(value), 0, 0);
    CHECK_EQ_INT(rc, ENGINE_SUCCESS);
    if (rc != ENGINE_SUCCESS) {
        return;
    }
    uint64_t cas = 0;
    CHECK_EQ_INT(V->store(H, NULL, it, &cas, OPERATION_SET, 0), want);
    V->release(H, NULL, it);
}

static void test_eviction(void) {
    /* A tiny cache still holds one 1 MiB page: each item fits, evicting the one before. */
    mh_engine *e = load("cache_size=1");
    CHECK(e != NULL);
    if (e == NULL) {
        return;
    }
    use(e);
    for (int i = 0; i < 3; i++) {
        store_big(i, ENGINE_SUCCESS);
    }
    char buf[8];
    CHECK_EQ_INT(get(NULL, "big2", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(NULL, "big0", buf, sizeof(buf), NULL, NULL), ENGINE_KEY_ENOENT);
    mh_conn *c = mh_conn_open();
    CHECK_EQ_INT(stat_num(c, "evictions"), 2);
    CHECK_EQ_INT(stat_num(c, "engine_maxbytes"), 1);
    mh_conn_close(c);
    mh_engine_unload(e, false);

    /* Without eviction: ENOMEM. */
    e = load("cache_size=1;eviction=false");
    CHECK(e != NULL);
    if (e == NULL) {
        return;
    }
    use(e);
    store_big(0, ENGINE_SUCCESS);
    store_big(1, ENGINE_ENOMEM);
    CHECK_EQ_INT(get(NULL, "big0", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);
    mh_engine_unload(e, false);
}

/* ------------------------------------------------------------------------------------------
 */
static void usage(void) {
    fprintf(stderr, "usage: storage_conformance direct|bucket LIBRARY\n");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        usage();
        return 2;
    }
    direct = strcmp(argv[1], "direct") == 0;
    if (!direct && strcmp(argv[1], "bucket") != 0) {
        usage();
        return 2;
    }
    lib_path = argv[2];
    if (mh_init() != 0) {
        fprintf(stderr, "mh_init failed\n");
        return 1;
    }
    api = mh_get_server_api();

    mh_engine *main_engine = NULL;
    if (direct) {
        RUN(test_configuration_keys);
        main_engine = load("cache_size=8m");
    } else {
        main_engine = load("engine=builtin;default=true;default_bucket_config=cache_size\\=8m");
    }
    CHECK(main_engine != NULL);
    if (main_engine == NULL) {
        return 1;
    }
    use(main_engine);
    if (direct) {
        RUN(test_info);
        /* memcached's engine test harness passes NULL cookies. */
        run_semantics(NULL);
    }
    mh_conn *c = mh_conn_open();
    run_semantics(c);
    mh_conn_close(c);
    mh_engine_unload(main_engine, false);

    if (direct) {
        RUN(test_instances_are_independent);
        RUN(test_use_cas_false);
        RUN(test_eviction);
    }
    mh_shutdown();
    if (check_failures > 0) {
        fprintf(stderr, "%d check(s) failed\n", check_failures);
        return 1;
    }
    fprintf(stderr, "storage conformance (%s): all passed\n", argv[1]);
    return 0;
}

/* ------------------------------------------------------------------------------------------
 * Issue 12: what memcached's default engine answers, which its engine tests check
 */

/* A get that misses sets the caller's item pointer to NULL. */
static void test_get_miss_writes_null(mh_conn *c) {
    item *it = (item *)&it; /* anything but NULL */
    CHECK_EQ_INT(V->get(H, c, &it, "gm:none", 7, 0), ENGINE_KEY_ENOENT);
    CHECK(it == NULL);
}

/* SCRUB (0xf0) takes back the expired items and answers SUCCESS; an opcode the engine does not
 * know is answered UNKNOWN_COMMAND, the call itself succeeding (the answer was sent). */
static void test_scrub_and_unknown_opcodes(mh_conn *c) {
    CHECK_EQ_INT(V->flush(H, c, 0), ENGINE_SUCCESS);
    rel_time_t in5 = api->core->realtime(5);
    CHECK_EQ_INT(store(c, "sc:old", "v", 0, in5, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(store(c, "sc:new", "v", 0, 0, OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    mh_advance_time(6);
    CHECK_EQ_INT(stat_num(c, "curr_items"), 2); /* expired, not yet taken back */
    CHECK_EQ_INT(command(c, 0xf0, 0, 0, NULL), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(stat_num(c, "curr_items"), 1);
    char buf[8];
    CHECK_EQ_INT(get(c, "sc:new", buf, sizeof(buf), NULL, NULL), ENGINE_SUCCESS);

    CHECK_EQ_INT(command(c, 0x55, 0, 0, "sc:new"), ENGINE_SUCCESS);
    CHECK_EQ_INT(c->responses, 1);
    CHECK_EQ_INT(c->resp_status, PROTOCOL_BINARY_RESPONSE_UNKNOWN_COMMAND);
}
