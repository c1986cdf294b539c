/*
 * The cache tiers from C: several pthreads read the same keys through one cache, so each
 * key's loader runs exactly once (single flight) and later reads hit the thread's own L1 or
 * the shared L2. Then, on the main thread: set, peek, delete, purge, update, a bulk get,
 * negative caching, a failing loader, the isolation of two cache names on one store, the
 * promotion and admission rules, and the rejection of bad arguments. Every return code is checked; the program exits 0 on success.
 */
#define _POSIX_C_SOURCE 200809L

#include "mcb_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define KEYS 64
#define ROUNDS 3

#define CHECK(cond)                                                              \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

#define OK(call) CHECK((call) == MCB_CACHE_OK)

/* Counts loader runs; the loader answers "value-<key>". */
struct source {
    atomic_int loads;
    char scratch[THREADS + 1][64]; /* one buffer per caller: the value is copied on return */
};

static _Thread_local int thread_slot;

static int32_t load_value(void *ctx, const uint8_t *key, size_t key_len, mcb_cache_loaded *out) {
    struct source *src = ctx;
    atomic_fetch_add(&src->loads, 1);
    char *buf = src->scratch[thread_slot];
    int n = snprintf(buf, 64, "value-%.*s", (int)key_len, (const char *)key);
    if (n < 0 || n >= 64) {
        return MCB_CACHE_LOAD_ERROR;
    }
    out->value = (const uint8_t *)buf;
    out->value_len = (size_t)n;
    return MCB_CACHE_LOAD_VALUE;
}

static int32_t load_nothing(void *ctx, const uint8_t *key, size_t key_len, mcb_cache_loaded *out) {
    (void)key, (void)key_len, (void)out;
    atomic_fetch_add(&((struct source *)ctx)->loads, 1);
    return MCB_CACHE_LOAD_NO_VALUE;
}

static int32_t load_error(void *ctx, const uint8_t *key, size_t key_len, mcb_cache_loaded *out) {
    (void)ctx, (void)key, (void)key_len, (void)out;
    return MCB_CACHE_LOAD_ERROR;
}

static void key_name(int i, char *buf, size_t len) {
    int n = snprintf(buf, len, "k%d", i);
    CHECK(n > 0 && (size_t)n < len);
}

static void expect_value(const mcb_cache_value *v, const char *key) {
    char want[64];
    int n = snprintf(want, sizeof want, "value-%s", key);
    CHECK(n > 0 && v->has_value);
    CHECK(v->len == (size_t)n && memcmp(v->bytes, want, v->len) == 0);
}

struct worker {
    mcb_cache *cache;
    struct source *src;
    int slot;
};

static void *reader(void *arg) {
    struct worker *w = arg;
    thread_slot = w->slot;
    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < KEYS; i++) {
            char key[16];
            key_name(i, key, sizeof key);
            mcb_cache_value v;
            OK(mcb_cache_get(w->cache, (const uint8_t *)key, strlen(key), load_value, w->src, &v));
            expect_value(&v, key);
            CHECK(v.level >= MCB_CACHE_LEVEL_L1 && v.level <= MCB_CACHE_LEVEL_L3);
            if (round > 0) {
                CHECK(v.level == MCB_CACHE_LEVEL_L1); /* this thread's L1 holds it now */
            }
            mcb_cache_value_free(&v);
        }
    }
    return NULL;
}

static const uint8_t *k(const char *s) { return (const uint8_t *)s; }

/* The levels of three reads of "h" on a thread of its own. */
struct levels {
    mcb_cache *cache;
    int32_t level[3];
};

static void *read_thrice(void *arg) {
    struct levels *l = arg;
    for (int i = 0; i < 3; i++) {
        mcb_cache_value v;
        OK(mcb_cache_get(l->cache, k("h"), 1, NULL, NULL, &v));
        CHECK(v.has_value);
        l->level[i] = v.level;
        mcb_cache_value_free(&v);
    }
    return NULL;
}

/*
 * A one-off load into a full L2 under admission `rule`: it is served either way, and kept in
 * L2 (seen by peek) only if the rule lets it in. L2 is filled with keys read three times each
 * (an L1 of one entry, so that the reads reach L2).
 */
static bool one_off_load_kept(int32_t rule) {
    mcb_l2 *l2 = NULL;
    OK(mcb_l2_new(4096, 1, &l2));
    mcb_cache_options opts;
    mcb_cache_options_default(&opts);
    CHECK(opts.admission == MCB_CACHE_ADMIT_ALWAYS && opts.promotion == MCB_CACHE_PROMOTE_ALWAYS);
    opts.admission = rule;
    opts.l1_capacity = 1;
    mcb_cache *cache = NULL;
    OK(mcb_cache_new(l2, "admission", &opts, NULL, &cache));
    for (int i = 0; i < 100; i++) {
        char key[16];
        key_name(i, key, sizeof key);
        OK(mcb_cache_set(cache, k(key), strlen(key), k("0123456789"), 10, MCB_CACHE_TTL_DEFAULT));
    }
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 100; i++) {
            char key[16];
            key_name(i, key, sizeof key);
            mcb_cache_value v;
            OK(mcb_cache_get(cache, k(key), strlen(key), NULL, NULL, &v));
            mcb_cache_value_free(&v);
        }
    }
    struct source src = {0};
    mcb_cache_value v;
    OK(mcb_cache_get(cache, k("once"), 4, load_value, &src, &v));
    expect_value(&v, "once");
    CHECK(v.level == MCB_CACHE_LEVEL_L3);
    mcb_cache_value_free(&v);
    mcb_cache_peeked p;
    OK(mcb_cache_peek(cache, k("once"), 4, false, &p));
    mcb_cache_value_free(&p.value);
    mcb_cache_free(cache);
    mcb_l2_free(l2);
    return p.present;
}

int main(void) {
    mcb_l2 *l2 = NULL;
    OK(mcb_l2_new(1 << 20, 0, &l2));

    mcb_cache_options opts;
    mcb_cache_options_default(&opts);
    CHECK(opts.ttl_ms == 30000 && opts.neg_ttl_ms == 5000 && opts.set_tries == 3);
    opts.l1_capacity = 2 * KEYS;

    mcb_cache *users = NULL, *sessions = NULL;
    OK(mcb_cache_new(l2, "users", &opts, NULL, &users));
    OK(mcb_cache_new(l2, "sessions", NULL, NULL, &sessions));

    /* Several threads, one loader run per key. */
    struct source src = {0};
    pthread_t threads[THREADS];
    struct worker workers[THREADS];
    for (int t = 0; t < THREADS; t++) {
        workers[t] = (struct worker){users, &src, t + 1};
        CHECK(pthread_create(&threads[t], NULL, reader, &workers[t]) == 0);
    }
    for (int t = 0; t < THREADS; t++) {
        CHECK(pthread_join(threads[t], NULL) == 0);
    }
    CHECK(atomic_load(&src.loads) == KEYS);

    /* Names isolate: "sessions" does not see "users"' keys. */
    mcb_cache_value v;
    OK(mcb_cache_get(sessions, k("k1"), 2, NULL, NULL, &v));
    CHECK(!v.has_value && v.level == MCB_CACHE_LEVEL_MISS);

    /* set, then peek (L2 only), delete. */
    OK(mcb_cache_set(users, k("k1"), 2, k("new"), 3, 60000));
    OK(mcb_cache_get(users, k("k1"), 2, NULL, NULL, &v));
    CHECK(v.has_value && v.len == 3 && memcmp(v.bytes, "new", 3) == 0 && v.level == MCB_CACHE_LEVEL_L1);
    mcb_cache_value_free(&v);
    mcb_cache_peeked p;
    OK(mcb_cache_peek(users, k("k1"), 2, false, &p));
    CHECK(p.present && p.value.has_value && !p.stale && p.remaining_ms > 0 && p.remaining_ms <= 60000);
    mcb_cache_value_free(&p.value);
    /* A copy into the caller's buffer; too small a buffer says how much is needed. */
    uint8_t buf[8];
    mcb_cache_copied c;
    CHECK(mcb_cache_get_into(users, k("k1"), 2, NULL, NULL, buf, 2, &c) == MCB_CACHE_BUFFER_TOO_SMALL);
    CHECK(c.len == 3 && c.has_value);
    OK(mcb_cache_get_into(users, k("k1"), 2, NULL, NULL, buf, sizeof buf, &c));
    CHECK(c.len == 3 && c.has_value && memcmp(buf, "new", 3) == 0 && c.level == MCB_CACHE_LEVEL_L1);
    OK(mcb_cache_get_into(users, k("none"), 4, NULL, NULL, NULL, 0, &c));
    CHECK(!c.has_value && c.len == 0 && c.level == MCB_CACHE_LEVEL_MISS);
    OK(mcb_cache_delete(users, k("k1"), 2));
    OK(mcb_cache_peek(users, k("k1"), 2, true, &p));
    CHECK(!p.present);

    /* Negative caching: the "no value" loader runs once. */
    atomic_store(&src.loads, 0);
    for (int i = 0; i < 3; i++) {
        OK(mcb_cache_get(users, k("ghost"), 5, load_nothing, &src, &v));
        CHECK(!v.has_value && v.level == (i == 0 ? MCB_CACHE_LEVEL_L3 : MCB_CACHE_LEVEL_L1));
    }
    CHECK(atomic_load(&src.loads) == 1);

    /* A failing loader caches nothing. */
    CHECK(mcb_cache_get(users, k("bad"), 3, load_error, NULL, &v) == MCB_CACHE_LOADER_FAILED);

    /* Bulk: a hit, a miss without loader, two loads on up to 3 threads, in input order. */
    mcb_cache_bulk_op ops[4] = {
        {k("k2"), 2, NULL, NULL},
        {k("none"), 4, NULL, NULL},
        {k("b1"), 2, load_value, &src},
        {k("b2"), 2, load_value, &src},
    };
    mcb_cache_bulk_result results[4];
    OK(mcb_cache_get_bulk(users, ops, 4, 0 /* the default: 3 */, results));
    for (int i = 0; i < 4; i++) {
        OK(results[i].status);
    }
    expect_value(&results[0].value, "k2");
    CHECK(!results[1].value.has_value && results[1].value.level == MCB_CACHE_LEVEL_MISS);
    expect_value(&results[2].value, "b1");
    expect_value(&results[3].value, "b2");
    CHECK(results[3].value.level == MCB_CACHE_LEVEL_L3);
    for (int i = 0; i < 4; i++) {
        mcb_cache_value_free(&results[i].value);
    }

    /* purge drops this cache's entries only; update is accepted. */
    OK(mcb_cache_set(sessions, k("s"), 1, k("x"), 1, MCB_CACHE_TTL_DEFAULT));
    OK(mcb_cache_purge(users, false));
    OK(mcb_cache_update(users));
    OK(mcb_cache_peek(users, k("k2"), 2, true, &p));
    CHECK(!p.present);
    OK(mcb_cache_peek(sessions, k("s"), 1, false, &p));
    CHECK(p.present);
    mcb_cache_value_free(&p.value);

    /* Bad arguments are rejected, outputs untouched. */
    mcb_cache *untouched = NULL;
    opts.ttl_ms = -5;
    CHECK(mcb_cache_new(l2, "bad", &opts, NULL, &untouched) == MCB_CACHE_INVALID_ARGUMENT);
    CHECK(untouched == NULL);
    mcb_cache_options_default(&opts);
    opts.resurrect_ttl_ms = 0;
    CHECK(mcb_cache_new(l2, "bad", &opts, NULL, &untouched) == MCB_CACHE_INVALID_ARGUMENT);
    mcb_cache_options_default(&opts);
    opts.promotion = 7;
    CHECK(mcb_cache_new(l2, "bad", &opts, NULL, &untouched) == MCB_CACHE_INVALID_ARGUMENT);
    mcb_cache_options_default(&opts);
    opts.admission = -1;
    CHECK(mcb_cache_new(l2, "bad", &opts, NULL, &untouched) == MCB_CACHE_INVALID_ARGUMENT);
    CHECK(untouched == NULL);
    CHECK(mcb_cache_get(NULL, k("k"), 1, NULL, NULL, &v) == MCB_CACHE_INVALID_ARGUMENT);
    CHECK(mcb_cache_get(users, NULL, 1, NULL, NULL, &v) == MCB_CACHE_INVALID_ARGUMENT);
    CHECK(mcb_cache_set(users, k("k"), 1, k("v"), 1, -7) == MCB_CACHE_INVALID_ARGUMENT);
    CHECK(mcb_cache_get_bulk(users, NULL, 4, 0, results) == MCB_CACHE_INVALID_ARGUMENT);
    CHECK(mcb_cache_get_into(users, k("k"), 1, NULL, NULL, NULL, 4, &c) == MCB_CACHE_INVALID_ARGUMENT);

    /* Admission: a full L2 keeps a one-off load by default, not under the frequency rule. */
    CHECK(one_off_load_kept(MCB_CACHE_ADMIT_ALWAYS));
    CHECK(!one_off_load_kept(MCB_CACHE_ADMIT_FREQUENCY));
    /* Second-hit promotion: on a thread that did not set it, a key's first L2 hit stays in L2,
     * its second goes to L1. */
    mcb_cache_options_default(&opts);
    opts.promotion = MCB_CACHE_PROMOTE_SECOND_HIT;
    mcb_cache *hits = NULL;
    OK(mcb_cache_new(l2, "hits", &opts, NULL, &hits));
    OK(mcb_cache_set(hits, k("h"), 1, k("x"), 1, MCB_CACHE_TTL_DEFAULT));
    struct levels seen = {hits, {0}};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, read_thrice, &seen) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(seen.level[0] == MCB_CACHE_LEVEL_L2 && seen.level[1] == MCB_CACHE_LEVEL_L2);
    CHECK(seen.level[2] == MCB_CACHE_LEVEL_L1);
    mcb_cache_free(hits);

    mcb_cache_free(users);
    mcb_cache_free(sessions);
    mcb_cache_free(NULL);
    mcb_l2_free(l2);
    mcb_l2_free(NULL);
    mcb_cache_value_free(NULL);
    puts("cache threads example: ok");
    return 0;
}
