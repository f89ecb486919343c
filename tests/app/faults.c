/* faults.c - Redis failures seen through the server: a dead or paused lock
 * service answers 503 / 1006 and changes nothing; when it is back, claims
 * succeed again; with 3 nodes a minority may be down, a majority may not. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

static redis_proc g_redis[3];
static size_t g_nredis;
static server_proc g_srv;
static char g_dir[256];
static char g_db[320];

static void setup(void)
{
    memset(g_redis, 0, sizeof g_redis);
    memset(&g_srv, 0, sizeof g_srv);
    g_nredis = 0;
    app_dir_try(g_dir, sizeof g_dir, g_db, sizeof g_db, "faults.db");
}

static void teardown(void)
{
    app_down(&g_srv, g_redis, g_nredis, g_dir);
}

TestSuite(app_faults, .init = setup, .fini = teardown, .timeout = 60);

/* Persistent nodes: a restarted node must keep its fencing counters, or
 * every claim after the restart would carry a stale fence. */
static void start_all(size_t n, const char *lock_ttl)
{
    char csv[256];
    g_nredis = n;
    app_redis_up(g_redis, n, 1);
    redis_addrs_csv(g_redis, n, csv, sizeof csv);
    app_server_up(&g_srv, "--db", g_db, "--redis", csv, "--admin-token", APP_TOKEN, "--lock-ttl",
                  lock_ttl, "--lock-wait", "300", NULL);
}

static void claim_expect(long long id, const char *user, long status, long long code)
{
    http_reply r;
    app_claim(&g_srv, "POST", id, user, &r);
    json_decref(app_expect(&r, status, code));
    if (status == 503)
        cr_assert(r.retry_after[0] != '\0', "503 without Retry-After");
    http_reply_free(&r);
}

/* Claims until a 200 (bounded); in between only 503 1005/1006 are allowed
 * (the server reconnecting, or a lock key a paused node set late). */
static void claim_until_ok(long long id, const char *user)
{
    for (int i = 0; i < 100; i++) {
        http_reply r;
        app_claim(&g_srv, "POST", id, user, &r);
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
    app_db_state(g_db, id, &st);
    cr_assert_eq(st.stock, stock, "stock %lld, expected %lld", st.stock, stock);
    cr_assert_eq(st.records, records, "records %lld, expected %lld", st.records, records);
    cr_assert_eq(st.stock + st.records, st.total);
}

Test(app_faults, single_node_killed_and_restarted, .timeout = 60)
{
    APP_SETUP_OK();
    start_all(1, "2000");
    long long id = app_create_coupon(&g_srv, "faults", 10, 0);
    claim_expect(id, "u1", 200, 0);
    cr_assert_eq(redis_kill(&g_redis[0]), 0);
    for (int i = 0; i < 3; i++)
        claim_expect(id, "u2", 503, 1006);
    expect_db(id, 9, 1);

    cr_assert_eq(redis_restart(&g_redis[0]), 0);
    claim_until_ok(id, "u2");
    claim_expect(id, "u3", 200, 0);
    expect_db(id, 7, 3);
    /* Fences kept growing across the restart (the counter was persisted). */
    cr_assert_eq(app_db_int(g_db,
                            "SELECT COUNT(*) FROM coupon_record a JOIN coupon_record b "
                            "ON a.id<b.id WHERE a.fence>=b.fence"),
                 0);
}

Test(app_faults, single_node_paused_and_resumed, .timeout = 60)
{
    APP_SETUP_OK();
    /* A short TTL: a SET NX the paused node executes late expires soon. */
    start_all(1, "1000");
    long long id = app_create_coupon(&g_srv, "faults", 10, 0);
    claim_expect(id, "u1", 200, 0);
    cr_assert_eq(redis_pause(&g_redis[0]), 0);
    claim_expect(id, "u2", 503, 1006);
    expect_db(id, 9, 1);
    cr_assert_eq(redis_resume(&g_redis[0]), 0);
    claim_until_ok(id, "u2");
    expect_db(id, 8, 2);
}

Test(app_faults, three_nodes_minority_and_majority_down, .timeout = 60)
{
    APP_SETUP_OK();
    start_all(3, "2000");
    long long id = app_create_coupon(&g_srv, "faults", 10, 0);
    claim_expect(id, "u1", 200, 0);

    /* One of three down: the quorum (2) still answers. */
    cr_assert_eq(redis_kill(&g_redis[2]), 0);
    claim_until_ok(id, "u2");
    claim_expect(id, "u3", 200, 0);
    expect_db(id, 7, 3);

    /* Two of three down: no quorum. */
    cr_assert_eq(redis_kill(&g_redis[1]), 0);
    for (int i = 0; i < 3; i++)
        claim_expect(id, "u4", 503, 1006);
    expect_db(id, 7, 3);

    cr_assert_eq(redis_restart(&g_redis[1]), 0);
    cr_assert_eq(redis_restart(&g_redis[2]), 0);
    claim_until_ok(id, "u4");
    claim_expect(id, "u5", 200, 0);
    expect_db(id, 5, 5);
    cr_assert_eq(app_db_int(g_db,
                            "SELECT COUNT(*) FROM coupon_record a JOIN coupon_record b "
                            "ON a.id<b.id WHERE a.fence>=b.fence"),
                 0);
}
