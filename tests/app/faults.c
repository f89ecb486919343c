/* faults.c - failures seen through the server: a dead or paused lock
 * service answers 503 / 1006 and changes nothing; when it is back, claims
 * succeed again; with 3 nodes a minority may be down, a majority may not.
 * A store locked by a foreign writer past --db-busy-ms answers the same.
 * Built twice: on SQLite (app_faults) and on PostgreSQL (app_faults_pg). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "faults.db", .pg = APP_PG};
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
