/*
 * lifecycle.c: the bucket engine's life and its connections'. Loading (create_instance,
 * get_info), initialize and its configuration, the connection events (ON_CONNECT, ON_AUTH,
 * ON_DISCONNECT, a disconnect while reserved), what the engines inside see of the host,
 * connections racing for an auto-created bucket, and destroy.
 *
 * What these tests assume where the issue leaves a detail open (the seed's behaviour unless
 * said otherwise); the library must match these:
 *  - Global destroy returns while a deleted bucket still waits for a connection's reference,
 *    and by the time it returns has released every host stats block it took
 *    (mh_live_stats() == 0), except the one of a bucket a connection still holds. It also
 *    returns while a connection still holds an item of a deleted bucket, and destroys that
 *    bucket's engine (once) itself.
 *  - ON_CONNECT, ON_AUTH (auto_create defaults to true; a missing bucket without auto_create
 *    leaves the connection with no bucket) and ON_DISCONNECT as the seed; a disconnect while
 *    an engine holds a reservation frees the connection's state at the last release and drops
 *    its reference to the bucket (the seed leaked both). When two connections need the same
 *    auto-created bucket at once, both end up attached to it, even while its engine is still
 *    initializing (the seed created under its engines lock, so the second found the first's).
 *  - Engines see the host's logger through get_extension; register_extension refuses; an
 *    engine's store_engine_specific does not touch the host's slot; a deleted bucket's library
 *    stays loaded.
 *  - destroy after create_instance alone, or after a failed initialize, frees what
 *    create_instance took (the host dlcloses the library then; under valgrind a leak shows).
 */
#include "suite.h"

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

static void wait_for_live(int want) {
    for (int i = 0; i < 30000 && mh_live_connections() != want; i++) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_EQ_INT(mh_live_connections(), want);
}

/* ------------------------------------------------------------------------------------------
 * Interface and configuration
 */
void test_create_instance_interface(void) {
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

void test_get_info(void) {
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

void test_init_null_config(void) {
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

void test_init_unknown_key_fails(void) {
    expect_init_failure("engine=%s;admin=admin;no_such_key=1", te_path);
}

void test_init_bad_default_value_fails(void) {
    expect_init_failure("engine=%s;default=maybe", te_path);
}

void test_init_bad_auto_create_value_fails(void) {
    expect_init_failure("engine=%s;auto_create=perhaps", te_path);
}

void test_init_missing_config_file_fails(void) {
    expect_init_failure("engine=%s;config_file=/nonexistent/bucket.conf", te_path);
}

void test_init_default_bucket_load_failure_fails(void) {
    expect_init_failure("engine=/nonexistent/libnope.so;default=true");
}

void test_init_default_bucket_config_rejected_fails(void) {
    /* The test engine refuses an unknown key, so the default bucket cannot initialize. */
    expect_init_failure("engine=%s;default=true;default_bucket_config=bogus\\=1", te_path);
}

void test_config_default_bucket(void) {
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

void test_config_default_bucket_name_auto_create(void) {
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

void test_config_default_bucket_name_no_auto_create(void) {
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

void test_config_file(void) {
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
void test_on_auth_attaches_user_bucket(void) {
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

void test_on_auth_without_auto_create(void) {
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

void test_on_disconnect_forwarded_to_its_bucket(void) {
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

void test_disconnect_while_reserved(void) {
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

void test_engine_server_api(void) {
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

void test_auto_create_race_on_connect(void) {
    if (boot("engine=%s;admin=admin;default_bucket_name=dflt;auto_create=true;"
             "default_bucket_config=slow\\=true",
             ep_path)) {
        auto_create_race(NULL);
    }
}

void test_auto_create_race_on_auth(void) {
    if (boot("engine=%s;admin=admin", ep_path)) { /* auto_create defaults to true */
        auto_create_race("racer");
    }
}

void test_concurrent_connect_disconnect(void) {
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

/* ------------------------------------------------------------------------------------------
 * Destroy
 */
void test_destroy_with_buckets(void) {
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

void test_destroy_while_bucket_deleting(void) {
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

/* Kept reachable on purpose, as destroy_survivor: memcached never closes connections, nor
 * releases their items, after destroy. */
static mh_conn *volatile race_survivor;
static item *volatile race_item;

/*
 * The seed's testapp "delete bucket shutdwn race": a connection keeps an item it stored, the
 * bucket is deleted (the delete completes), and global destroy runs with the item still held:
 * it neither hangs nor destroys the held engine twice, and destroys it once itself.
 */
void test_destroy_with_item_held_after_delete(void) {
    fail_fast();
    if (!boot_base()) {
        return;
    }
    mh_conn *a = admin_conn();
    CHECK(create_logged(a, "mybucket", "mybucket"));
    race_survivor = user_conn("mybucket");
    int since = mh_log_lines();
    race_item = held_item(race_survivor, "somekey", "some value1");
    uint64_t cas = 0;
    CHECK_EQ_INT(V->store(H, race_survivor, race_item, &cas, OPERATION_SET, 0), ENGINE_SUCCESS);
    CHECK_EQ_INT(delete_bucket(a, "mybucket", "force=false"), PROTOCOL_BINARY_RESPONSE_SUCCESS);
    CHECK_EQ_INT(engine_destroys(since, "mybucket"), 0);
    mh_conn_close(a);
    mh_engine_unload(eng, false); /* the alarm fails a hang */
    eng = NULL;
    CHECK_EQ_INT(engine_destroys(since, "mybucket"), 1);
    CHECK(!engine_destroyed_forced(since, "mybucket"));
    mh_shutdown();
}

/* ------------------------------------------------------------------------------------------
 * Issue 12: the answers real memcached 2.5.1 and its engine tests saw from the seed
 */

/* A SASL user with no bucket of its own, on the default bucket (no auto-create): SET and GET
 * work, and every item goes back to the default bucket's engine (the seed's try-form calls
 * found no bucket: "Internal error" and a leaked item per command). */
void test_sasl_user_without_bucket_uses_default(void) {
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
