/* faults.c - failures seen through the server: a dead or paused lock
 * service answers 503 / 1006 and changes nothing; when it is back, claims
 * succeed again; with 3 nodes a minority may be down, a majority may not.
 * A store locked by a foreign writer past --db-busy-ms answers the same;
 * locked for less, the claim waits and succeeds.
 * Built twice: on SQLite (app_faults) and on PostgreSQL (app_faults_pg). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "faults.db", .pg = APP_PG, .flags = APP_ENV_CURL};
/* app_faults, or app_faults_pg on PostgreSQL (app_store.h). */
#define FAULTS_SUITE APP_SUITE(app_faults)
TestSuite(FAULTS_SUITE, .init = app_suite_init, .fini = app_suite_fini, .timeout = 60);

/* Persistent nodes: a restarted node must keep its fencing counters, or
 * every claim after the restart would carry a stale fence. */
static void start_all(size_t n, const char *lock_ttl)
{
    app_env_up(&g_app, n, 1, 1, "--lock-ttl", lock_ttl, "--lock-wait", "300", NULL);
}

static void claim_expect(long long id, const char *user, long status, long long code)
{
    app_claim_expect(&g_app.srv[0], "POST", id, user, status, code, APP_RETRY_AFTER);
}

/* Claims until a 200 (bounded); in between only 503 1005/1006 are allowed
 * (the server reconnecting, or a lock key a paused node set late). */
static void claim_until_ok(long long id, const char *user)
{
    for (int i = 0; i < 100; i++) {
        http_reply r;
        app_claim(&g_app.srv[0], "POST", id, user, &r);
        if (r.status == 200) {
            json_decref(app_expect(&r, 200, 0));
            http_reply_free(&r);
            return;
        }
        json_t *root = app_envelope(&r, 503);
        long long code = app_jint(root, "code");
        cr_assert(code == 1005 || code == 1006, "unexpected code %lld: %s", code, r.body);
        json_decref(root);
        http_reply_free(&r);
        test_sleep_ms(100);
    }
    cr_assert_fail("no successful claim within 100 attempts after recovery");
}

static void expect_db(long long id, long long stock, long long records)
{
    app_coupon_state st;
    app_expect_db(g_app.db, id, stock, records, &st);
    cr_assert_eq(st.stock + st.records, st.total);
}

Test(FAULTS_SUITE, single_node_killed_and_restarted, .timeout = 60)
{
    APP_SETUP_OK();
    start_all(1, "2000");
    long long id = app_create_coupon(&g_app.srv[0], "faults", 10, 0);
    claim_expect(id, "u1", 200, 0);
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    for (int i = 0; i < 3; i++)
        claim_expect(id, "u2", 503, 1006);
    expect_db(id, 9, 1);

    cr_assert_eq(redis_restart(&g_app.redis[0]), 0);
    claim_until_ok(id, "u2");
    claim_expect(id, "u3", 200, 0);
    expect_db(id, 7, 3);
    /* Fences kept growing across the restart (the counter was persisted). */
    cr_assert_eq(app_db_int(g_app.db,
                            "SELECT COUNT(*) FROM coupon_record a JOIN coupon_record b "
                            "ON a.id<b.id WHERE a.fence>=b.fence"),
                 0);
}

Test(FAULTS_SUITE, single_node_paused_and_resumed, .timeout = 60)
{
    APP_SETUP_OK();
    /* A short TTL: a SET NX the paused node executes late expires soon. */
    start_all(1, "1000");
    long long id = app_create_coupon(&g_app.srv[0], "faults", 10, 0);
    claim_expect(id, "u1", 200, 0);
    cr_assert_eq(redis_pause(&g_app.redis[0]), 0);
    claim_expect(id, "u2", 503, 1006);
    expect_db(id, 9, 1);
    cr_assert_eq(redis_resume(&g_app.redis[0]), 0);
    claim_until_ok(id, "u2");
    expect_db(id, 8, 2);
}

Test(FAULTS_SUITE, three_nodes_minority_and_majority_down, .timeout = 60)
{
    APP_SETUP_OK();
    start_all(3, "2000");
    long long id = app_create_coupon(&g_app.srv[0], "faults", 10, 0);
    claim_expect(id, "u1", 200, 0);

    /* One of three down: the quorum (2) still answers. */
    cr_assert_eq(redis_kill(&g_app.redis[2]), 0);
    claim_until_ok(id, "u2");
    claim_expect(id, "u3", 200, 0);
    expect_db(id, 7, 3);

    /* Two of three down: no quorum. */
    cr_assert_eq(redis_kill(&g_app.redis[1]), 0);
    for (int i = 0; i < 3; i++)
        claim_expect(id, "u4", 503, 1006);
    expect_db(id, 7, 3);

    cr_assert_eq(redis_restart(&g_app.redis[1]), 0);
    cr_assert_eq(redis_restart(&g_app.redis[2]), 0);
    claim_until_ok(id, "u4");
    claim_expect(id, "u5", 200, 0);
    expect_db(id, 5, 5);
    cr_assert_eq(app_db_int(g_app.db,
                            "SELECT COUNT(*) FROM coupon_record a JOIN coupon_record b "
                            "ON a.id<b.id WHERE a.fence>=b.fence"),
                 0);
}

/* The store, not Redis, fails: a foreign writer holds its write lock
 * (app_store_hold_writes: SQLite's BEGIN IMMEDIATE, PostgreSQL's LOCK TABLE
 * coupon IN EXCLUSIVE MODE) past --db-busy-ms. The claim waits that long,
 * answers 503 / 1006 with Retry-After, writes nothing, and gives its Redis
 * lock back: once the writer is gone the next claim succeeds at once (a lock
 * left behind would answer 1005 until its 5 s TTL ran out). */
Test(FAULTS_SUITE, store_locked_by_a_foreign_writer, .timeout = 60)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 1, "--lock-ttl", "5000", "--lock-wait", "300", "--db-busy-ms", "500", "--threads", "2",
               NULL);
    long long id = app_create_coupon(&g_app.srv[0], "faults", 10, 0);
    claim_expect(id, "u1", 200, 0);

    app_store_hold *writer = app_store_hold_writes(g_app.db);
    int64_t t0 = test_now_ms();
    claim_expect(id, "u2", 503, 1006);
    int64_t waited = test_now_ms() - t0;
    app_store_hold_release(writer);
    /* It waited for the store (not failing at once), and no longer than the
     * busy timeout allows (the margin: a loaded machine). */
    cr_assert(waited >= 400 && waited < 4000, "answered after %lld ms with --db-busy-ms 500", (long long)waited);
    expect_db(id, 9, 1);

    claim_expect(id, "u2", 200, 0);
    expect_db(id, 8, 2);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE user_id='u2'"), 1);
}

/* A claim sent from a thread of its own, which asserts nothing: the test's
 * thread meanwhile ends the foreign writer's transaction. */
typedef struct bg_claim {
    char url[256];
    long status;    /* HTTP status, 0 on a transport error */
    long long code; /* the envelope's code, -1 when none */
    pthread_t th;
} bg_claim;

static void *bg_claim_main(void *arg)
{
    bg_claim *c = arg;
    app_body body;
    CURL *h = curl_easy_init();

    if (h == NULL)
        return NULL;
    if (app_curl_post(h, c->url, &body, 2000, &c->status) == CURLE_OK) {
        json_t *root = NULL;
        c->code = app_body_code(&body, &root);
        json_decref(root);
    }
    curl_easy_cleanup(h);
    return NULL;
}

/* The writer holds the store for 1 s, well inside --db-busy-ms: the claim
 * waits for it (its lock's TTL covers the wait), then succeeds, once. */
Test(FAULTS_SUITE, store_locked_briefly_the_claim_waits_and_succeeds, .timeout = 60)
{
    APP_SETUP_OK();
    app_env_up(&g_app, 1, 0, 1, "--lock-ttl", "10000", "--lock-wait", "300", "--db-busy-ms", "5000", "--threads",
               "2", NULL);
    long long id = app_create_coupon(&g_app.srv[0], "faults", 10, 0);
    claim_expect(id, "u1", 200, 0);

    app_store_hold *writer = app_store_hold_writes(g_app.db);
    bg_claim c = {.status = 0, .code = -1};
    app_url(c.url, sizeof c.url, &g_app.srv[0], "/api/v1/coupon/add?coupon_id=%lld&user_id=u2", id);
    int64_t t0 = test_now_ms();
    cr_assert_eq(pthread_create(&c.th, NULL, bg_claim_main, &c), 0);
    test_sleep_ms(1000);
    /* Plain reads pass the writer: the claim is waiting, nothing of it written. */
    long long during = app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE user_id='u2'");
    app_store_hold_release(writer);
    cr_assert_eq(pthread_join(c.th, NULL), 0);
    int64_t waited = test_now_ms() - t0;

    cr_assert_eq(during, 0, "u2's claim wrote while the writer held the store");
    cr_assert(c.status == 200 && c.code == 0, "the waiting claim: %ld / %lld", c.status, c.code);
    cr_assert(waited >= 1000 && waited < 5000, "answered after %lld ms (held 1000, --db-busy-ms 5000)",
              (long long)waited);
    expect_db(id, 8, 2);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE user_id='u2'"), 1);
}
