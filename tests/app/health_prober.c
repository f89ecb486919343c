/* health_prober.c - /healthz off the HTTP threads. 2 of 3 Redis nodes are
 * SIGSTOPped and a foreign writer holds SQLite's write lock. 64 concurrent
 * /healthz then leave the coupon reads fast: the health prober waits on
 * Redis and the lock, no HTTP thread does. /healthz says 503 with both
 * parts down once the prober has noticed. */
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "prober.db", .flags = APP_ENV_CURL, .nredis = 3, .nservers = 0};
TestSuite(app_health_prober, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

/* A /healthz that probed the store on a request's db slot would hold the
 * slots for the store's busy timeout (5 s) at a time, so every read would
 * wait (broken so on purpose: reads took 4.7-4.9 s, then failed). The
 * median read is held to READ_BOUND_MS, and the slowest to a bound under
 * that 5 s. That leaves room for one read that a 2-core machine under
 * other suites' load schedules late (737 ms once in CI). */
enum { HEALTH_CALLS = 64, READS = 10, READ_BOUND_MS = 300, SLOWEST_BOUND_MS = 2500 };

static int cmp_ms(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static atomic_int g_stop;
static atomic_int g_health_answers; /* /healthz answered, any status */
static const server_proc *g_srv;

/* Asks /healthz over and over until told to stop: 64 of these keep every
 * HTTP thread busy with /healthz if it blocks. */
static void *health_caller(void *arg)
{
    (void)arg;
    while (!atomic_load(&g_stop)) {
        http_reply r;
        char url[256];
        snprintf(url, sizeof url, "%s/healthz", g_srv->url);
        if (http_request("GET", url, NULL, NULL, &r) == 0 && r.status != 0)
            atomic_fetch_add(&g_health_answers, 1);
        http_reply_free(&r);
    }
    return NULL;
}

/* data.<key> of a /healthz reply as a string, into out ("" when absent). */
static void health_field(const http_reply *r, const char *key, char *out, size_t cap)
{
    json_error_t err;
    json_t *root = r->body != NULL ? json_loads(r->body, 0, &err) : NULL;
    json_t *v = json_object_get(json_object_get(root, "data"), key);
    snprintf(out, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
    json_decref(root);
}

Test(app_health_prober, reads_stay_fast_while_healthz_is_asked_with_redis_and_the_store_stuck)
{
    APP_SETUP_OK();
    /* 64 callers from one address, each request on a new connection: the
     * per-address cap (libmicrohttpd counts a connection until it has seen
     * its close) is not this test's subject. */
    app_env_server_up(&g_app, 0, "--max-connections-per-ip", "0", NULL);
    g_srv = &g_app.srv[0];
    long long id = app_create_coupon(g_srv, "c", 5, 0);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/coupon/%lld", id);

    /* Stuck: 2 of 3 nodes stopped (quorum lost), the write lock held. */
    cr_assert_eq(redis_pause(&g_app.redis[1]), 0);
    cr_assert_eq(redis_pause(&g_app.redis[2]), 0);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(g_app.db, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));

    pthread_t th[HEALTH_CALLS];
    atomic_store(&g_stop, 0);
    for (int i = 0; i < HEALTH_CALLS; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, health_caller, NULL), 0);
    test_sleep_ms(300); /* the callers are in */

    int64_t took_ms[READS];
    long statuses[READS];
    for (int i = 0; i < READS; i++) {
        http_reply r;
        int64_t t0 = test_now_ms();
        app_request(g_srv, "GET", path, NULL, NULL, &r);
        int64_t took = test_now_ms() - t0;
        statuses[i] = r.status;
        took_ms[i] = took;
        http_reply_free(&r);
        fprintf(stderr, "read %d: %ld after %lld ms (%d /healthz answered so far)\n", i, statuses[i], (long long)took,
                atomic_load(&g_health_answers));
        test_sleep_ms(100);
    }

    /* Once the prober noticed (its round waits out --db-busy-ms, 5 s, and
     * the stopped nodes' timeouts): 503, both parts named. Bounded. */
    http_reply h = {0};
    char db_s[32] = "", lock_s[32] = "";
    int64_t until = test_now_ms() + 20000;
    for (;;) {
        app_request(g_srv, "GET", "/healthz", NULL, NULL, &h);
        health_field(&h, "db", db_s, sizeof db_s);
        health_field(&h, "lock", lock_s, sizeof lock_s);
        if ((h.status == 503 && strcmp(db_s, "down") == 0 && strcmp(lock_s, "down") == 0) || test_now_ms() >= until)
            break;
        http_reply_free(&h);
        test_sleep_ms(100);
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < HEALTH_CALLS; i++)
        pthread_join(th[i], NULL);
    cr_assert_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    cr_assert_eq(redis_resume(&g_app.redis[1]), 0);
    cr_assert_eq(redis_resume(&g_app.redis[2]), 0);

    qsort(took_ms, READS, sizeof took_ms[0], cmp_ms);
    int64_t median = took_ms[READS / 2], slowest = took_ms[READS - 1];
    fprintf(stderr, "app_health_prober: %d reads, median %lld ms, slowest %lld ms under %d concurrent /healthz\n",
            READS, (long long)median, (long long)slowest, HEALTH_CALLS);
    for (int i = 0; i < READS; i++)
        cr_assert_eq(statuses[i], 200, "read %d answered %ld", i, statuses[i]);
    cr_assert_lt(median, READ_BOUND_MS, "the median coupon read took %lld ms while /healthz was asked (bound %d ms)",
                 (long long)median, READ_BOUND_MS);
    cr_assert_lt(slowest, SLOWEST_BOUND_MS, "a coupon read took %lld ms while /healthz was asked (bound %d ms)",
                 (long long)slowest, SLOWEST_BOUND_MS);
    json_t *root = app_expect(&h, 503, 1006);
    json_t *data = json_object_get(root, "data");
    cr_assert_str_eq(app_jstr(data, "db"), "down", "%s", h.body);
    cr_assert_str_eq(app_jstr(data, "lock"), "down", "%s", h.body);
    cr_assert(json_is_integer(json_object_get(data, "age_ms")), "no data.age_ms: %s", h.body);
    json_decref(root);
    http_reply_free(&h);
}
