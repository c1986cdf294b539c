/*
 * host_selftest.c: checks the mock host on its own, without any engine: parse_config's
 * grammar, the clock (realtime/abstime and the 30-day rule), event registration and dispatch,
 * the cookie API (reservations keep a closed connection alive, notify_io_complete wakes a
 * waiter), extensions and the logger, the stat API and get_config.
 */
#define _POSIX_C_SOURCE 200809L
#include "mock_host.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

static SERVER_HANDLE_V1 *api;

/* ------------------------------------------------------------------------------------------
 * parse_config
 */
typedef struct {
    size_t size;
    float ratio;
    bool flag;
    char *text;
    struct config_item items[6];
} cfg;

static void cfg_init(cfg *c) {
    memset(c, 0, sizeof(*c));
    c->items[0] =
        (struct config_item){.key = "size", .datatype = DT_SIZE, .value.dt_size = &c->size};
    c->items[1] =
        (struct config_item){.key = "ratio", .datatype = DT_FLOAT, .value.dt_float = &c->ratio};
    c->items[2] =
        (struct config_item){.key = "flag", .datatype = DT_BOOL, .value.dt_bool = &c->flag};
    c->items[3] =
        (struct config_item){.key = "text", .datatype = DT_STRING, .value.dt_string = &c->text};
    c->items[4] = (struct config_item){.key = "config_file", .datatype = DT_CONFIGFILE};
    c->items[5] = (struct config_item){.key = NULL};
}

static void cfg_free(cfg *c) {
    free(c->text);
    c->text = NULL;
}

static int parse(cfg *c, const char *s) {
    cfg_free(c);
    cfg_init(c);
    return api->core->parse_config(s, c->items, NULL);
}

static void test_parse_config_types(void) {
    cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(parse(&c, "size=42;ratio=1.5;flag=true;text=hello"), 0);
    CHECK_EQ_INT(c.size, 42);
    CHECK(c.ratio == 1.5f);
    CHECK(c.flag);
    CHECK_EQ_STR(c.text, "hello");
    CHECK(c.items[0].found && c.items[1].found && c.items[2].found && c.items[3].found);

    CHECK_EQ_INT(parse(&c, "size=2k"), 0);
    CHECK_EQ_INT(c.size, 2048);
    CHECK_EQ_INT(parse(&c, "size=3M"), 0);
    CHECK_EQ_INT(c.size, 3 * 1024 * 1024);
    CHECK_EQ_INT(parse(&c, "size=1g"), 0);
    CHECK_EQ_INT(c.size, 1024 * 1024 * 1024);

    const char *truths[] = {"true", "TRUE", "on", "On"};
    const char *lies[] = {"false", "False", "off", "OFF"};
    char buf[32];
    for (size_t i = 0; i < 4; i++) {
        snprintf(buf, sizeof(buf), "flag=%s", truths[i]);
        CHECK_EQ_INT(parse(&c, buf), 0);
        CHECK(c.flag);
        snprintf(buf, sizeof(buf), "flag=%s", lies[i]);
        c.flag = true;
        CHECK_EQ_INT(parse(&c, buf), 0);
        CHECK(!c.flag);
        CHECK(c.items[2].found);
    }
    CHECK_EQ_INT(parse(&c, ""), 0);
    CHECK(!c.items[0].found);
    CHECK_EQ_INT(parse(&c, "  ;  "), -1); /* a pair without '=' */
    cfg_free(&c);
}

static void test_parse_config_whitespace_and_escapes(void) {
    cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(parse(&c, "  size = 7 ;  text =  two words  ; flag= on"), 0);
    CHECK_EQ_INT(c.size, 7);
    CHECK_EQ_STR(c.text, "two words");
    CHECK(c.flag);
    CHECK_EQ_INT(parse(&c, "text=semi\\;colon;size=1"), 0);
    CHECK_EQ_STR(c.text, "semi;colon");
    CHECK_EQ_INT(c.size, 1);
    CHECK_EQ_INT(parse(&c, "text=a\\=b"), 0);
    CHECK_EQ_STR(c.text, "a=b");
    CHECK_EQ_INT(parse(&c, "text=back\\\\slash"), 0);
    CHECK_EQ_STR(c.text, "back\\slash");
    CHECK_EQ_INT(parse(&c, "text=keep\\ "), 0);
    CHECK_EQ_STR(c.text, "keep ");
    CHECK_EQ_INT(parse(&c, "text=x;"), 0);
    CHECK_EQ_STR(c.text, "x");
    cfg_free(&c);
}

static void test_parse_config_errors(void) {
    cfg c;
    cfg_init(&c);
    CHECK_EQ_INT(parse(&c, "flag=maybe"), -1);
    CHECK_EQ_INT(parse(&c, "size=12x"), -1);
    CHECK_EQ_INT(parse(&c, "size=-1"), -1);
    CHECK_EQ_INT(parse(&c, "size="), -1);
    CHECK_EQ_INT(parse(&c, "ratio=fast"), -1);
    CHECK_EQ_INT(parse(&c, "size"), -1);
    /* An unknown key is reported with 1, and the rest is still parsed. */
    CHECK_EQ_INT(parse(&c, "bogus=1;size=5"), 1);
    CHECK_EQ_INT(c.size, 5);
    /* Keys up to 79 bytes, values up to 1023. */
    char big[2048];
    memset(big, 'k', 100);
    snprintf(big + 100, sizeof(big) - 100, "=1");
    CHECK_EQ_INT(parse(&c, big), -1);
    memcpy(big, "text=", 5);
    memset(big + 5, 'v', 1500);
    big[1505] = '\0';
    CHECK_EQ_INT(parse(&c, big), -1);
    memset(big + 5, 'v', 1023);
    big[5 + 1023] = '\0';
    CHECK_EQ_INT(parse(&c, big), 0);
    CHECK_EQ_INT(strlen(c.text), 1023);
    /* An error goes to the FILE given. */
    char *text = NULL;
    size_t len = 0;
    FILE *err = open_memstream(&text, &len);
    CHECK(err != NULL);
    if (err != NULL) {
        cfg_free(&c);
        cfg_init(&c);
        CHECK_EQ_INT(api->core->parse_config("nosuch=1", c.items, err), 1);
        fclose(err);
        CHECK(text != NULL && strstr(text, "nosuch") != NULL);
        free(text);
    }
    cfg_free(&c);
}

static void test_parse_config_file(void) {
    char path[] = "/tmp/mcb-host-selftest-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) {
        return;
    }
    const char *contents = "# a comment line: size=999\nflag=on\n  text = from file  \nsize=9\n";
    CHECK_EQ_INT(write(fd, contents, strlen(contents)), (long long)strlen(contents));
    close(fd);

    cfg c;
    cfg_init(&c);
    char buf[128];
    snprintf(buf, sizeof(buf), "ratio=0.5;config_file=%s", path);
    CHECK_EQ_INT(parse(&c, buf), 0);
    CHECK(c.flag);
    CHECK_EQ_STR(c.text, "from file");
    CHECK_EQ_INT(c.size, 9);
    CHECK(c.ratio == 0.5f);
    CHECK_EQ_INT(parse(&c, "config_file=/nonexistent/mcb.conf"), -1);
    cfg_free(&c);
    unlink(path);
}

static void test_get_config(void) {
    size_t threads = 0;
    struct config_item items[] = {
        {.key = "threads", .datatype = DT_SIZE, .value.dt_size = &threads},
        {.key = NULL},
    };
    mh_set_settings("threads=4");
    CHECK(api->core->get_config(items));
    CHECK_EQ_INT(threads, 4);
}

/* ------------------------------------------------------------------------------------------
 * Clock
 */
static void test_clock(void) {
    time_t started = mh_process_started();
    rel_time_t now = api->core->get_current_time();
    CHECK(now >= 2); /* the clock starts in the past: 0 never means now */
    CHECK_EQ_INT(api->core->realtime(0), 0);
    /* The clock follows the wall clock, so a second may pass between reading it and the call
     * (under valgrind it did): a relative time is now + delta for a now read around the call. */
    rel_time_t in_60 = api->core->realtime(60);
    rel_time_t in_30_days = api->core->realtime(60 * 60 * 24 * 30);
    rel_time_t after = api->core->get_current_time();
    CHECK(in_60 >= now + 60 && in_60 <= after + 60);
    CHECK(in_30_days >= now + 60 * 60 * 24 * 30 && in_30_days <= after + 60 * 60 * 24 * 30);
    /* Beyond 30 days: an absolute time. */
    CHECK_EQ_INT(api->core->realtime(started + 100), 100);
    CHECK_EQ_INT(api->core->realtime(started - 5), 1);
    CHECK_EQ_INT(api->core->realtime(started), 1);
    CHECK_EQ_INT(api->core->abstime(100), started + 100);
    mh_advance_time(10);
    CHECK(api->core->get_current_time() >= now + 10);
}

/* ------------------------------------------------------------------------------------------
 * Events
 */
typedef struct {
    int count[MAX_ENGINE_EVENT_TYPE];
    const void *last_cookie;
    char user[32];
    char config[32];
    int order[8];
    int norder;
} event_log;

static event_log events;
static ENGINE_HANDLE fake_engine = {.interface = 1};

static void on_event(const void *cookie, ENGINE_EVENT_TYPE type, const void *data,
                     const void *cb_data) {
    events.count[type]++;
    events.last_cookie = cookie;
    if (type == ON_AUTH && data != NULL) {
        const auth_data_t *a = data;
        snprintf(events.user, sizeof(events.user), "%s", a->username ? a->username : "");
        snprintf(events.config, sizeof(events.config), "%s", a->config ? a->config : "");
    }
    if (type == ON_CONNECT && events.norder < 8) {
        events.order[events.norder++] = *(const int *)cb_data;
    }
}

static void test_events(void) {
    static const int first = 1, second = 2;
    api->callback->register_callback(&fake_engine, ON_CONNECT, on_event, &first);
    api->callback->register_callback(&fake_engine, ON_CONNECT, on_event, &second);
    api->callback->register_callback(&fake_engine, ON_DISCONNECT, on_event, &first);
    api->callback->register_callback(&fake_engine, ON_AUTH, on_event, &first);
    api->callback->register_callback(&fake_engine, ON_LOG_LEVEL, on_event, &first);
    /* Out of range: ignored, not stored. */
    api->callback->register_callback(&fake_engine, (ENGINE_EVENT_TYPE)MAX_ENGINE_EVENT_TYPE,
                                     on_event, &first);

    mh_conn *c = mh_conn_open();
    CHECK_EQ_INT(events.count[ON_CONNECT], 2);
    CHECK(events.last_cookie == c);
    CHECK_EQ_INT(events.norder, 2);
    CHECK(events.order[0] == 2 && events.order[1] == 1); /* newest first, as memcached */

    mh_conn_auth(c, "alice", "bucket=1");
    CHECK_EQ_INT(events.count[ON_AUTH], 1);
    CHECK_EQ_STR(events.user, "alice");
    CHECK_EQ_STR(events.config, "bucket=1");
    auth_data_t data = {0};
    api->cookie->get_auth_data(c, &data);
    CHECK_EQ_STR(data.username, "alice");
    CHECK_EQ_STR(data.config, "bucket=1");

    api->callback->perform_callbacks(ON_SWITCH_CONN, NULL, c); /* nobody registered: no-op */
    EXTENSION_LOG_LEVEL level = api->log->get_level();
    api->log->set_level(EXTENSION_LOG_DEBUG);
    CHECK_EQ_INT(events.count[ON_LOG_LEVEL], 1);
    CHECK_EQ_INT(api->log->get_level(), EXTENSION_LOG_DEBUG);
    api->log->set_level(level);

    mh_conn_close(c);
    CHECK_EQ_INT(events.count[ON_DISCONNECT], 1);
    CHECK(events.last_cookie == c);
}

/* ------------------------------------------------------------------------------------------
 * Cookies
 */
static void *notify_later(void *arg) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    api->cookie->notify_io_complete(arg, ENGINE_KEY_EEXISTS);
    return NULL;
}

static void test_cookies(void) {
    int live = mh_live_connections();
    mh_conn *a = mh_conn_open();
    mh_conn *b = mh_conn_open();
    CHECK_EQ_INT(mh_live_connections(), live + 2);
    CHECK(api->cookie->get_socket_fd(a) != api->cookie->get_socket_fd(b));
    CHECK_EQ_INT(api->cookie->get_socket_fd(NULL), -1);

    int marker = 7;
    CHECK(api->cookie->get_engine_specific(a) == NULL);
    api->cookie->store_engine_specific(a, &marker);
    CHECK(api->cookie->get_engine_specific(a) == &marker);
    CHECK(api->cookie->get_engine_specific(b) == NULL);

    auth_data_t data = {.username = "stale", .config = "stale"};
    api->cookie->get_auth_data(b, &data);
    CHECK(data.username == NULL && data.config == NULL);

    /* A reservation keeps a closed connection alive until released. */
    CHECK_EQ_INT(api->cookie->reserve(a), ENGINE_SUCCESS);
    mh_conn_close(a);
    CHECK_EQ_INT(mh_live_connections(), live + 2);
    CHECK(api->cookie->get_engine_specific(a) == &marker);
    CHECK_EQ_INT(api->cookie->release(a), ENGINE_SUCCESS);
    CHECK_EQ_INT(mh_live_connections(), live + 1);
    CHECK_EQ_INT(api->cookie->reserve(NULL), ENGINE_EINVAL);

    /* notify_io_complete wakes a waiter, from another thread, with the status it passed. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, notify_later, b) == 0);
    CHECK_EQ_INT(mh_conn_wait_io(b, 5000), ENGINE_KEY_EEXISTS);
    pthread_join(t, NULL);
    /* A notification before the wait is not lost; a wait without one times out. */
    api->cookie->notify_io_complete(b, ENGINE_SUCCESS);
    CHECK_EQ_INT(mh_conn_wait_io(b, 5000), ENGINE_SUCCESS);
    CHECK_EQ_INT(mh_conn_wait_io(b, 10), ENGINE_TMPFAIL);
    mh_conn_close(b);
    CHECK_EQ_INT(mh_live_connections(), live);
}

/* ------------------------------------------------------------------------------------------
 * Extensions, logger, stats, misc
 */
static int custom_logged;
static const char *custom_name(void) {
    return "custom";
}
static void custom_log(EXTENSION_LOG_LEVEL severity, const void *cookie, const char *fmt, ...) {
    (void)severity;
    (void)cookie;
    (void)fmt;
    custom_logged++;
}
static EXTENSION_LOGGER_DESCRIPTOR custom_logger = {.get_name = custom_name, .log = custom_log};

static const char *daemon_name(void) {
    return "daemon";
}
static EXTENSION_DAEMON_DESCRIPTOR daemon_ext = {.get_name = daemon_name};

static void test_extensions(void) {
    EXTENSION_LOGGER_DESCRIPTOR *logger = api->extension->get_extension(EXTENSION_LOGGER);
    CHECK(logger != NULL && logger == api->log->get_logger());
    CHECK(logger != NULL && strstr(logger->get_name(), "stderr") != NULL);
    int lines = mh_log_lines();
    logger->log(EXTENSION_LOG_WARNING, NULL, "selftest %s %d", "warning", 1);
    CHECK_EQ_INT(mh_log_lines(), lines + 1);
    char last[128];
    mh_last_log(last, sizeof(last));
    CHECK_EQ_STR(last, "selftest warning 1");
    logger->log(EXTENSION_LOG_DETAIL, NULL, "below the level");
    CHECK_EQ_INT(mh_log_lines(), lines + 1);

    CHECK(api->extension->register_extension(EXTENSION_LOGGER, &custom_logger));
    EXTENSION_LOGGER_DESCRIPTOR *now = api->extension->get_extension(EXTENSION_LOGGER);
    CHECK(now == &custom_logger);
    now->log(EXTENSION_LOG_INFO, NULL, "to the custom logger");
    CHECK_EQ_INT(custom_logged, 1);
    api->extension->unregister_extension(EXTENSION_LOGGER, &custom_logger);
    CHECK(api->extension->get_extension(EXTENSION_LOGGER) == logger);

    CHECK(api->extension->get_extension(EXTENSION_DAEMON) == NULL);
    CHECK(api->extension->register_extension(EXTENSION_DAEMON, &daemon_ext));
    CHECK(api->extension->get_extension(EXTENSION_DAEMON) == &daemon_ext);
    api->extension->unregister_extension(EXTENSION_DAEMON, &daemon_ext);
    CHECK(api->extension->get_extension(EXTENSION_DAEMON) == NULL);
    CHECK(!api->extension->register_extension(EXTENSION_DAEMON, NULL));
}

static void test_stats_and_misc(void) {
    int live = mh_live_stats();
    void *s = api->stat->new_stats();
    CHECK(s != NULL);
    CHECK_EQ_INT(mh_live_stats(), live + 1);
    api->stat->release_stats(s);
    api->stat->release_stats(NULL);
    CHECK_EQ_INT(mh_live_stats(), live);
    int ev = mh_evictions();
    api->stat->evicting(NULL, "k", 1);
    CHECK_EQ_INT(mh_evictions(), ev + 1);

    CHECK(api->core->hash("abc", 3, 0) == api->core->hash("abc", 3, 0));
    CHECK(api->core->hash("abc", 3, 0) != api->core->hash("abc", 3, 1));
    CHECK(api->core->server_version() != NULL);
    CHECK(!mh_shutdown_requested());
    api->core->shutdown();
    CHECK(mh_shutdown_requested());
    CHECK_EQ_INT(api->interface, 1);
#ifndef MCB_ENGINE_PU
    CHECK(api->alloc_hooks != NULL);
    CHECK_EQ_INT(api->alloc_hooks->get_extra_stats_size(), 0);
#endif
}

int main(void) {
    if (mh_init() != 0) {
        fprintf(stderr, "mh_init failed\n");
        return 2;
    }
    api = mh_get_server_api();
    RUN(test_parse_config_types);
    RUN(test_parse_config_whitespace_and_escapes);
    RUN(test_parse_config_errors);
    RUN(test_parse_config_file);
    RUN(test_get_config);
    RUN(test_clock);
    RUN(test_events);
    RUN(test_cookies);
    RUN(test_extensions);
    RUN(test_stats_and_misc);
    CHECK_EQ_INT(mh_live_connections(), 0);
    mh_shutdown();
    fprintf(stderr, "host_selftest: %s (%d failed checks)\n", check_failures ? "FAILED" : "passed",
            check_failures);
    return check_failures ? 1 : 0;
}
