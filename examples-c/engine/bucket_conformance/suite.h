/*
 * suite.h: what the files of the bucket engine's conformance suite share: the libraries under
 * test, the host's handles on the loaded bucket engine, the helpers of suite.c, and every test
 * (one file per area; runner.c runs them, one child process each).
 */
#ifndef MCB_BUCKET_SUITE_H
#define MCB_BUCKET_SUITE_H

/* Before any system header, in every file of the suite: strsignal, RTLD_DEFAULT and the like. */
#define _GNU_SOURCE
#include "../mock_host.h"

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

/* One failure count for the whole program (defined in suite.c), not one per file. */
#define CHECK_SHARED_FAILURES
#include "../check.h"

#define OP_ECHO 0xe0
#define OP_ASYNC 0xe1
#define OP_GATE 0xe2

/*
 * How long a delete or an asynchronous command may take to complete: the test's whole time
 * budget (BUCKET_CONFORMANCE_TIMEOUT; the alarm that ends a hung test rings a little later), so
 * a timeout is a completion that never came, not a slow or busy machine.
 */
extern int io_timeout_ms;
#define IO_TIMEOUT_MS io_timeout_ms

extern const char *bucket_path;    /* libbucket_engine.so */
extern const char *te_path;        /* libtest_engine.so */
extern char ep_path[1024];         /* libep_stub_engine.so */
extern char de_path[1024];         /* default_engine.so (a copy of the test engine) */
extern char nosym_path[1024];      /* libmock_host.so: a library without create_instance */

/* The loaded bucket engine (boot sets them, teardown clears eng) and the host's server API. */
extern mh_engine *eng;
extern ENGINE_HANDLE *H;
extern ENGINE_HANDLE_V1 *V;
extern SERVER_HANDLE_V1 *api;

/* ------------------------------------------------------------------------------------------
 * suite.c
 */

/* A call held inside a bucket: get_stats whose ADD_STAT blocks until hold_finish. */
typedef struct {
    pthread_t thread;
    mh_conn *conn;
    ENGINE_ERROR_CODE rc;
} held_call;

/* Loads and initializes the bucket engine with the config (a printf format). */
__attribute__((format(printf, 1, 2))) bool boot(const char *fmt, ...);

/* The usual configuration: the test engine, an admin, no default bucket, no auto-create. */
bool boot_base(void);

/* Destroys the bucket engine; every host stats block must have been released. */
void teardown(void);

ENGINE_ERROR_CODE store(mh_conn *c, const char *key, const char *val,
                        ENGINE_STORE_OPERATION op, uint64_t in_cas, uint64_t *out_cas);

ENGINE_ERROR_CODE get(mh_conn *c, const char *key, char *buf, size_t buflen,
                      uint64_t *cas);

/* A get expected to find key with value val. */
bool has(mh_conn *c, const char *key, const char *val);

ENGINE_ERROR_CODE del(mh_conn *c, const char *key, uint64_t cas);

ENGINE_ERROR_CODE arith(mh_conn *c, const char *key, bool incr, bool create,
                        uint64_t delta, uint64_t initial, uint64_t *result);

/* get_stats into the connection's stat list. */
ENGINE_ERROR_CODE stats(mh_conn *c, const char *group);

/* One stat of a group, or NULL (the call must succeed). */
const char *stat_of(mh_conn *c, const char *group, const char *key);

long long stat_num(mh_conn *c, const char *group, const char *key);

/* Sends a request built from its parts through unknown_command. */
ENGINE_ERROR_CODE cmd(mh_conn *c, uint8_t opcode, const void *ext, uint8_t extlen,
                      const void *key, uint16_t keylen, const void *value,
                      uint32_t valuelen);

/* The same with NUL-terminated key and value (NULL for none). */
ENGINE_ERROR_CODE cmds(mh_conn *c, uint8_t opcode, const char *key, const char *value);

/* Whether the last reply carries msg in its key or its body (a trailing newline ignored). */
bool resp_says(const mh_conn *c, const char *msg);

/* Whether the last reply's key or body contains needle. */
bool resp_contains(const mh_conn *c, const char *needle);

/* A refusal: a reply with a non-SUCCESS status, or EINVAL / DISCONNECT with no reply. */
bool refused(ENGINE_ERROR_CODE rc, const mh_conn *c);

/* An admin connection: memcached fires ON_AUTH after the SASL exchange. */
mh_conn *admin_conn(void);

/* A connection authenticated as user (attached to the bucket of that name, if any). */
mh_conn *user_conn(const char *user);

ENGINE_ERROR_CODE create_op(mh_conn *c, uint8_t opcode, const char *name,
                            const char *path, const char *config);

ENGINE_ERROR_CODE create(mh_conn *c, const char *name, const char *path,
                         const char *config);

/* Creates a test-engine bucket whose engine knows its name (stat engine_name). */
bool create_ok(mh_conn *admin, const char *name);

/*
 * The whole DELETE exchange: EWOULDBLOCK, notify_io_complete, the retried call. Returns the
 * final reply's status, or -1 when the exchange went wrong.
 */
int delete_op(mh_conn *c, uint8_t opcode, const char *name, const char *config);

int delete_bucket(mh_conn *c, const char *name, const char *config);

/* LIST into buf (NUL-terminated); returns the reply status or -1. */
int list_op(mh_conn *c, uint8_t opcode, char *buf, size_t buflen);

/*
 * Whether LIST names exactly the space-separated names in `want` (any order), with single
 * spaces and no leading or trailing space.
 */
bool list_is(mh_conn *c, const char *want);

/* Starts a get_stats on conn and returns once it is inside the bucket's engine. */
void hold_start(held_call *h, mh_conn *conn);

/* Lets the held call finish and joins it. */
void hold_finish(held_call *h);

/* Whether the library `name` is mapped into this process. */
bool library_mapped(const char *name);

/*
 * For a test whose failure is a hang: waits (IO_TIMEOUT_MS) end after HANG_TIMEOUT_S and the
 * child's alarm rings a little later (the runner's allows the whole budget), so a hang fails
 * in seconds.
 */
#define HANG_TIMEOUT_S 20
void fail_fast(void);

/*
 * Creates a test-engine bucket whose engine is called engine_name and logs its destroy
 * ("test engine <engine_name>: destroyed (force=...)"), which the next three look for in the
 * lines logged since line `since` (mh_log_lines()).
 */
bool create_logged(mh_conn *admin, const char *name, const char *engine_name);
int engine_destroys(int since, const char *engine_name);
/* Waits (IO_TIMEOUT_MS) for that engine's destroy; whether it came. */
bool await_engine_destroyed(int since, const char *engine_name);
/* Whether that engine was destroyed with force=true. */
bool engine_destroyed_forced(int since, const char *engine_name);

/* An item held by the test: allocated with `value`, written and not released. */
item *held_item(mh_conn *c, const char *key, const char *value);

/* Whether `it`, read through get_item_info on c, has this key and value. */
bool item_reads(mh_conn *c, const item *it, const char *key, const char *value);

/* A reply with exactly this status (and ENGINE_SUCCESS returned). */
#define CHECK_REPLY(rc, conn, status)                                                          \
    do {                                                                                       \
        CHECK_EQ_INT((rc), ENGINE_SUCCESS);                                                    \
        CHECK_EQ_INT((conn)->responses, 1);                                                    \
        CHECK_EQ_INT((conn)->resp_status, (status));                                           \
    } while (0)

/* ------------------------------------------------------------------------------------------
 * The tests, by file (runner.c's table lists them in the order they run)
 */

/* lifecycle.c */
void test_create_instance_interface(void);
void test_get_info(void);
void test_init_null_config(void);
void test_init_unknown_key_fails(void);
void test_init_bad_default_value_fails(void);
void test_init_bad_auto_create_value_fails(void);
void test_init_missing_config_file_fails(void);
void test_init_default_bucket_load_failure_fails(void);
void test_init_default_bucket_config_rejected_fails(void);
void test_config_default_bucket(void);
void test_config_default_bucket_name_auto_create(void);
void test_config_default_bucket_name_no_auto_create(void);
void test_config_file(void);
void test_on_auth_attaches_user_bucket(void);
void test_on_auth_without_auto_create(void);
void test_on_disconnect_forwarded_to_its_bucket(void);
void test_disconnect_while_reserved(void);
void test_engine_server_api(void);
void test_auto_create_race_on_connect(void);
void test_auto_create_race_on_auth(void);
void test_concurrent_connect_disconnect(void);
void test_destroy_with_buckets(void);
void test_destroy_while_bucket_deleting(void);
void test_sasl_user_without_bucket_uses_default(void);
void test_destroy_with_item_held_after_delete(void);

/* admin.c */
void test_admin_create(void);
void test_admin_create_empty_spec(void);
void test_admin_create_exists(void);
void test_admin_create_load_failure(void);
void test_admin_create_init_failure(void);
void test_admin_create_invalid_names(void);
void test_admin_create_slow_engine_blocks_nobody(void);
void test_admin_delete(void);
void test_admin_delete_missing(void);
void test_admin_delete_bad_config(void);
void test_admin_delete_own_bucket(void);
void test_admin_delete_waits_for_calls_in_flight(void);
void test_admin_list(void);
void test_admin_select(void);
void test_admin_deprecated_opcodes(void);
void test_admin_requires_admin_user(void);
void test_admin_unset_means_no_admin(void);
void test_malformed_keylen_over_bodylen(void);
void test_malformed_extlen(void);
void test_malformed_names(void);
void test_malformed_body_over_64k(void);
void test_malformed_empty_packets(void);
void test_concurrent_admin_commands(void);
void test_admin_create_bad_name_not_stored(void);
void test_admin_delete_meets_client_holding_large_value(void);

/* items.c */
void test_proxied_calls_without_bucket(void);
void test_proxied_calls_reach_the_bucket(void);
void test_proxied_calls_on_deleted_bucket(void);
void test_other_opcodes_proxied(void);
void test_concurrent_delete_while_calls_in_flight(void);
void test_null_cookie_means_default_bucket(void);
void test_items_follow_their_engine_across_select(void);
void test_delete_while_set_value_arriving(void);
void test_delete_completes_with_item_held(void);
void test_delete_completes_with_item_held_same_connection(void);
void test_delete_completes_with_items_held_past_a_disconnect(void);
void test_create_reuses_name_while_old_engine_held(void);

/* tap.c */
void test_tap_iterator_shim(void);
void test_tap_disabled_for_default_engine(void);
void test_tap_item_held_across_delete(void);

/* stats.c */
void test_stats_bucket_admin_only(void);
void test_stats_bucket_conns(void);
void test_aggregate_stats(void);
void test_topkeys_item_calls(void);
void test_topkeys_bounded(void);
void test_topkeys_ep_engine_opcodes(void);
void test_topkeys_disabled(void);
void test_topkeys_bad_env_disables(void);

#endif /* MCB_BUCKET_SUITE_H */
