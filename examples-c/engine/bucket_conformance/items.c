/*
 * items.c: items and holds. The proxied engine calls (on a connection with no bucket, on its
 * bucket, on a deleted one; unknown opcodes), calls without a connection (a NULL cookie), items
 * going back to the engine that made them, calls in flight that keep a deleted bucket from
 * stopping, and items held across a delete, which completes while their engine stays until
 * the last of them came back.
 *
 * What these tests assume where the issue leaves a detail open (the seed's behaviour unless
 * said otherwise); the library must match these:
 *  - With no bucket, or a bucket that is not RUNNING: allocate, remove, get, store,
 *    arithmetic, flush, get_stats, unknown_command (non-admin opcodes) and tap_notify return
 *    ENGINE_DISCONNECT; the try-form calls do what the seed's did: get_engine_vb_map returns
 *    ENGINE_SUCCESS without calling back, get_tap_iterator and get_stats_struct return NULL,
 *    get_item_info false, errinfo 0; release, item_set_cas and reset_stats do nothing. A
 *    connection still attached to a deleted bucket stays on it (gets DISCONNECT) even after a
 *    new bucket of that name exists.
 *  - Items held across a DELETE (issue 22): the delete completes once no call is inside, as
 *    the seed's does, whatever items connections still hold; get_item_info, item_set_cas and
 *    release of such an item still reach the engine that made it, and that engine is destroyed
 *    (once, with the DELETE's force) after the last of its items came back, or at global
 *    destroy. The test engine logs each destroy ("test engine NAME: destroyed (force=...)").
 */
#include "suite.h"

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

void test_proxied_calls_without_bucket(void) {
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

void test_proxied_calls_reach_the_bucket(void) {
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

void test_proxied_calls_on_deleted_bucket(void) {
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

void test_other_opcodes_proxied(void) {
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

void test_concurrent_delete_while_calls_in_flight(void) {
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

/* ------------------------------------------------------------------------------------------
 * Issue 12: the answers real memcached 2.5.1 and its engine tests saw from the seed
 */

/* Calls without a connection (a NULL cookie, as memcached's extensions and engine test
 * harness make them) use the default bucket, the item calls included. */
void test_null_cookie_means_default_bucket(void) {
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

/* Items go back to the engine that made them, whichever bucket the connection moved to (here
 * an ep-engine stand-in whose item calls all fail). */
void test_items_follow_their_engine_across_select(void) {
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

/* A bucket deleted while a SET's value is still arriving: the delete completes at once (an
 * item held is no call inside), the item (allocated, not yet stored) still reads and goes back
 * to its engine, its store gets DISCONNECT, and the engine is destroyed only after the release. */
void test_delete_while_set_value_arriving(void) {
    fail_fast();
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    mh_conn *a2 = admin_conn();
    CHECK(create_logged(a, "gone", "gone"));
    mh_conn *c = user_conn("gone");
    item *it = NULL;
    CHECK_EQ_INT(V->allocate(H, c, &it, "k", 1, 5, 0, 0), ENGINE_SUCCESS);
    int since = mh_log_lines();
    CHECK_EQ_INT(delete_bucket(a, "gone", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(stats(a2, "bucket"), ENGINE_SUCCESS);
    CHECK(mh_conn_stat(a2, "gone") == NULL);
    item_info info = {.nvalue = 1};
    CHECK(V->get_item_info(H, c, it, &info));
    if (info.value[0].iov_len == 5) {
        memcpy(info.value[0].iov_base, "value", 5);
    }
    uint64_t cas = 0;
    CHECK_EQ_INT(V->store(H, c, it, &cas, OPERATION_SET, 0), ENGINE_DISCONNECT);
    CHECK_EQ_INT(engine_destroys(since, "gone"), 0);
    V->release(H, c, it);
    CHECK(await_engine_destroyed(since, "gone"));
    CHECK(!mh_log_contains(since, "Potential memory leak"));
    mh_conn_close(c);
    mh_conn_close(a2);
    mh_conn_close(a);
    teardown();
}

/* ------------------------------------------------------------------------------------------
 * Issue 22: a delete completes while a connection still holds one of the bucket's items
 */

/*
 * The seed's testapp "delete bucket": a connection keeps an item of the bucket (allocated, not
 * released) while the admin deletes it. The delete completes as the seed's does: notified,
 * SUCCESS on the retry, "Not found." for a second one, no longer listed, and the connection
 * still attached gets the seed's answers. The held item still reaches the engine that made it
 * (get_item_info reads it, item_set_cas stamps it, release gives it back), and that engine is
 * destroyed once, after the release.
 */
void test_delete_completes_with_item_held(void) {
    fail_fast();
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_logged(a, "someuser", "someuser"));
    mh_conn *c = user_conn("someuser");
    int since = mh_log_lines();
    item *it = held_item(c, "somekey", "the value");
    CHECK_EQ_INT(delete_bucket(a, "someuser", "force=false"), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_REPLY(cmds(a, DELETE_BUCKET, "someuser", "force=false"), a,
                PROTOCOL_BINARY_RESPONSE_KEY_ENOENT);
    CHECK(list_is(a, ""));
    CHECK_EQ_INT(stats(a, "bucket"), ENGINE_SUCCESS);
    CHECK(mh_conn_stat(a, "someuser") == NULL);
    expect_all_disconnected(c); /* its unrecorded items log that they reach no engine */
    int quiet = mh_log_lines();
    CHECK_EQ_INT(engine_destroys(since, "someuser"), 0);
    if (it != NULL) {
        CHECK(item_reads(c, it, "somekey", "the value"));
        V->item_set_cas(H, c, it, 4242);
        item_info info = {.nvalue = 1};
        CHECK(V->get_item_info(H, c, it, &info));
        CHECK(info.cas == 4242);
        CHECK_EQ_INT(engine_destroys(since, "someuser"), 0);
        V->release(H, c, it);
    }
    CHECK(await_engine_destroyed(since, "someuser"));
    CHECK(!mh_log_contains(quiet, "Potential memory leak"));
    CHECK(!mh_log_contains(quiet, "no longer there"));
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
    CHECK_EQ_INT(engine_destroys(since, "someuser"), 1);
}

/*
 * The seed's testapp "delete bucket (same connection)": the admin deleting the bucket is
 * attached to it (SELECT) and holds an item of it too, beside another connection's. The delete
 * completes, the admin is detached (no default bucket: DISCONNECT), and both items still go
 * back to the old engine, which is destroyed after the second release, not the first.
 */
void test_delete_completes_with_item_held_same_connection(void) {
    fail_fast();
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_logged(a, "someuser", "someuser"));
    CHECK_REPLY(cmds(a, SELECT_BUCKET, "someuser", NULL), a, PROTOCOL_BINARY_RESPONSE_SUCCESS);
    mh_conn *c = user_conn("someuser");
    int since = mh_log_lines();
    item *mine = held_item(a, "adminkey", "admin's value");
    item *theirs = held_item(c, "somekey", "the value");
    CHECK_EQ_INT(delete_bucket(a, "someuser", "force=false"), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    item *none = NULL;
    CHECK_EQ_INT(V->allocate(H, a, &none, "k", 1, 1, 0, 0), ENGINE_DISCONNECT);
    CHECK_EQ_INT(V->allocate(H, c, &none, "k", 1, 1, 0, 0), ENGINE_DISCONNECT);
    CHECK(list_is(a, ""));
    if (mine != NULL) {
        CHECK(item_reads(a, mine, "adminkey", "admin's value"));
        V->release(H, a, mine);
    }
    CHECK_EQ_INT(engine_destroys(since, "someuser"), 0); /* the other item still holds it */
    if (theirs != NULL) {
        CHECK(item_reads(c, theirs, "somekey", "the value"));
        V->release(H, c, theirs);
    }
    CHECK(await_engine_destroyed(since, "someuser"));
    CHECK(!mh_log_contains(since, "Potential memory leak"));
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
    CHECK_EQ_INT(engine_destroys(since, "someuser"), 1);
}

/*
 * Several items of one engine out on one connection at once (a multi-get's), and a connection
 * that goes away before it gave them all back: a connection holds three items of a bucket and
 * another connection one; the bucket is deleted;
 * the first connection gives back two, then disconnects with the third still out (its record
 * moves to the orphans) and releases it afterwards, the other connection releases its own last.
 * Each item reads until its release, and the engine is destroyed once, only after the last.
 */
void test_delete_completes_with_items_held_past_a_disconnect(void) {
    fail_fast();
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_logged(a, "shared", "shared"));
    mh_conn *c = user_conn("shared");
    mh_conn *d = user_conn("shared");
    int since = mh_log_lines();
    item *one = held_item(c, "k1", "one");
    item *two = held_item(c, "k2", "two");
    item *three = held_item(c, "k3", "three");
    item *other = held_item(d, "k4", "four");
    CHECK(one != NULL && two != NULL && three != NULL && other != NULL);
    if (one == NULL || two == NULL || three == NULL || other == NULL) {
        return;
    }
    CHECK_EQ_INT(delete_bucket(a, "shared", "force=false"), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(item_reads(c, two, "k2", "two"));
    V->release(H, c, two);
    CHECK(item_reads(c, one, "k1", "one"));
    V->release(H, c, one);
    CHECK_EQ_INT(engine_destroys(since, "shared"), 0); /* the third item still holds it */
    /* ON_DISCONNECT with the third item out, the host's connection kept by a reservation the
     * bucket engine does not see (as memcached keeps a closing connection until it released
     * its items): the bucket engine frees the connection's state and orphans the record. */
    SERVER_HANDLE_V1 *host = mh_get_server_api();
    CHECK_EQ_INT(host->cookie->reserve(c), ENGINE_SUCCESS);
    mh_conn_close(c);
    CHECK(item_reads(c, three, "k3", "three"));
    V->release(H, c, three);
    CHECK_EQ_INT(engine_destroys(since, "shared"), 0); /* the other connection's still does */
    CHECK(item_reads(d, other, "k4", "four"));
    V->release(H, d, other);
    CHECK(await_engine_destroyed(since, "shared"));
    CHECK(!mh_log_contains(since, "Potential memory leak"));
    host->cookie->release(c);
    mh_conn_close(d);
    mh_conn_close(a);
    teardown();
    CHECK_EQ_INT(engine_destroys(since, "shared"), 1);
}

/*
 * A new CREATE of the name while the old engine still has an item held (a GET's, as memcached
 * holds one while it sends the value): the new bucket has an engine of its own. The old item
 * reads and is stamped in the old engine only, the new bucket's item of the same key keeps its
 * value and CAS, the connection still attached to the old bucket is not moved to the new one,
 * and releasing the old item destroys the old engine alone.
 */
void test_create_reuses_name_while_old_engine_held(void) {
    fail_fast();
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_logged(a, "x", "x-old"));
    mh_conn *c = user_conn("x");
    CHECK_EQ_INT(store(c, "k", "old", OPERATION_SET, 0, NULL), ENGINE_SUCCESS);
    item *old = NULL;
    CHECK_EQ_INT(V->get(H, c, &old, "k", 1, 0), ENGINE_SUCCESS);
    int since = mh_log_lines();
    CHECK_EQ_INT(delete_bucket(a, "x", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK(create_logged(a, "x", "x-new"));
    CHECK(list_is(a, "x"));
    mh_conn *d = user_conn("x");
    CHECK_EQ_STR(stat_of(d, NULL, "engine_name"), "x-new");
    char buf[16];
    CHECK_EQ_INT(get(d, "k", buf, sizeof(buf), NULL), ENGINE_KEY_ENOENT);
    uint64_t new_cas = 0;
    CHECK_EQ_INT(store(d, "k", "new", OPERATION_SET, 0, &new_cas), ENGINE_SUCCESS);
    CHECK_EQ_INT(get(c, "k", buf, sizeof(buf), NULL), ENGINE_DISCONNECT);
    if (old != NULL) {
        CHECK(item_reads(c, old, "k", "old"));
        V->item_set_cas(H, c, old, new_cas + 1000);
        item_info info = {.nvalue = 1};
        CHECK(V->get_item_info(H, c, old, &info));
        CHECK(info.cas == new_cas + 1000);
        uint64_t cas = 0;
        CHECK_EQ_INT(get(d, "k", buf, sizeof(buf), &cas), ENGINE_SUCCESS);
        CHECK_EQ_STR(buf, "new");
        CHECK(cas == new_cas);
        CHECK_EQ_INT(engine_destroys(since, "x-old"), 0);
        V->release(H, c, old);
    }
    CHECK(await_engine_destroyed(since, "x-old"));
    CHECK_EQ_INT(engine_destroys(since, "x-new"), 0);
    CHECK(has(d, "k", "new"));
    CHECK_EQ_STR(stat_of(d, NULL, "engine_name"), "x-new");
    mh_conn_close(d);
    mh_conn_close(c);
    mh_conn_close(a);
    teardown();
    CHECK_EQ_INT(engine_destroys(since, "x-old"), 1);
    CHECK_EQ_INT(engine_destroys(since, "x-new"), 1);
}
