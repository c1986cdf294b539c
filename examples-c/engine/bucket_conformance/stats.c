/*
 * stats.c: stats. The `bucket` group and the per-bucket counts of the empty key,
 * aggregate_stats, and topkeys (what it counts, its bound, ep-engine opcodes, off or badly set).
 *
 * What these tests assume where the issue leaves a detail open (the seed's behaviour unless
 * said otherwise); the library must match these:
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
 */
#include "suite.h"

/* ------------------------------------------------------------------------------------------
 * Stats and topkeys
 */

void test_stats_bucket_admin_only(void) {
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

void test_stats_bucket_conns(void) {
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

void test_aggregate_stats(void) {
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

void test_topkeys_item_calls(void) {
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

void test_topkeys_bounded(void) {
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

void test_topkeys_ep_engine_opcodes(void) {
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

void test_topkeys_disabled(void) {
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

void test_topkeys_bad_env_disables(void) {
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
