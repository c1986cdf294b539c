/*
 * runner.c: the runner of the bucket engine's conformance suite (issue 3), bucket_conformance.
 * The suite loads libbucket_engine.so into the mock memcached host the way memcached does
 * (dlopen, create_instance(1, ...), initialize(config)) and drives it with connections, events,
 * item calls and the admin commands, with the C test engine (libtest_engine.so) behind its
 * buckets. One function per behaviour of the issue; every return code is checked.
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
 * The tests live in one file per area, each opening with what it covers and what it assumes
 * where the issue leaves a detail open: lifecycle.c (loading, configuration, connection events,
 * destroy), admin.c (the admin commands), items.c (items and holds), tap.c and stats.c; what they
 * share is suite.c (see suite.h). This file holds the test table, in the order the tests run,
 * and the runner.
 */
#include "suite.h"

/* ------------------------------------------------------------------------------------------
 * Runner
 */
typedef struct {
    const char *name;
    void (*fn)(void);
} test_case;

#define T(f) {#f, test_##f}

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
    T(delete_completes_with_item_held),
    T(delete_completes_with_item_held_same_connection),
    T(delete_completes_with_items_held_past_a_disconnect),
    T(destroy_with_item_held_after_delete),
    T(admin_delete_meets_client_holding_large_value),
    T(create_reuses_name_while_old_engine_held),
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
