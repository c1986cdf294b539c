/*
 * tap.c: TAP. The iterator shim the bucket engine hands out, TAP off for default_engine
 * buckets, and an item a TAP step handed out holding its engine like any other.
 *
 * What these tests assume where the issue leaves a detail open (the seed's behaviour unless
 * said otherwise); the library must match these:
 *  - Tap: get_tap_iterator returns a shim (called with the bucket engine's handle) that
 *    returns TAP_DISCONNECT once the bucket is not RUNNING; NULL for a bucket whose engine
 *    path contains "default_engine".
 */
#include "suite.h"

void test_tap_iterator_shim(void) {
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

void test_tap_disabled_for_default_engine(void) {
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
 * Issue 12: the answers real memcached 2.5.1 and its engine tests saw from the seed
 */

/* An item a TAP step handed out is held like any other: a delete of its bucket completes
 * while memcached still sends it, the item still reads and goes back to its engine, and the
 * engine is destroyed after that. */
void test_tap_item_held_across_delete(void) {
    fail_fast();
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    mh_conn *a2 = admin_conn();
    CHECK(create_logged(a, "tapd", "tapd"));
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
        CHECK_EQ_INT(delete_bucket(a, "tapd", NULL), PROTOCOL_BINARY_RESPONSE_SUCCESS);
        CHECK_EQ_INT(stats(a2, "bucket"), ENGINE_SUCCESS);
        CHECK(mh_conn_stat(a2, "tapd") == NULL);
        CHECK_EQ_INT(iter(H, c, &it, &es, &nes, &ttl, &flags, &seqno, &vb), TAP_DISCONNECT);
        CHECK_EQ_INT(engine_destroys(since, "tapd"), 0);
        CHECK(item_reads(c, it, "t1", "a"));
        V->release(H, c, it);
        CHECK(!mh_log_contains(since, "Potential memory leak"));
        CHECK(await_engine_destroyed(since, "tapd"));
    }
    mh_conn_close(c);
    mh_conn_close(a2);
    mh_conn_close(a);
    teardown();
}
