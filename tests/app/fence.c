/* fence.c - fencing end to end: fences grow claim by claim and are stored
 * with each record. The row may have accepted a fence above the lock's
 * counter while the lease is fresh (Redis lost its counters). The server
 * then raises the counter to the row's fence, and the claim goes through
 * once healed. (A holder whose lease ran out is refused, 503 / 1010: app_lease.)
 * Built twice: on SQLite (app_fence) and on PostgreSQL (app_fence_pg), the
 * same assertions on the tables read back from either store. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "fence.db", .pg = APP_PG, .nredis = 1, .nservers = 1};
/* app_fence, or app_fence_pg on PostgreSQL (app_store.h). */
#define FENCE_SUITE APP_SUITE(app_fence)
TestSuite(FENCE_SUITE, .init = app_suite_init, .fini = app_suite_fini, .timeout = 30);

/* Claims and returns the fence of the 200 reply. */
static long long claim_ok(long long id, const char *user)
{
    http_reply r;
    app_claim(&g_app.srv[0], "POST", id, user, &r);
    json_t *root = app_expect(&r, 200, 0);
    long long fence = app_jint(json_object_get(root, "data"), "fence");
    json_decref(root);
    http_reply_free(&r);
    return fence;
}

static void expect_state(long long id, long long stock, long long records, long long last_fence)
{
    app_coupon_state st;
    app_expect_db(g_app.db, id, stock, records, &st);
    cr_assert_eq(app_db_int(g_app.db, "SELECT last_fence FROM coupon WHERE id=%lld", id),
                 last_fence);
}

static void expect_lock_free(long long id)
{
    char key[64], out[64];
    snprintf(key, sizeof key, APP_LOCK_KEY_FMT, id);
    const char *ex[] = {"EXISTS", key};
    app_redis(&g_app.redis[0], out, sizeof out, 2, ex);
    /* The refused claim released its lock: it does not block the next one. */
    cr_assert_str_eq(out, "0", "lock key %s still held after the claim", key);
}

/* coupon_fence_heals_total of server 0. */
static long long heals(void)
{
    long long v = app_metric(&g_app.srv[0], "coupon_fence_heals_total");
    cr_assert_geq(v, 0, "no coupon_fence_heals_total in /metrics");
    return v;
}

static long long counter(long long id)
{
    char key[64], out[64];
    snprintf(key, sizeof key, APP_FENCE_KEY_FMT, id);
    const char *get[] = {"GET", key};
    app_redis(&g_app.redis[0], out, sizeof out, 2, get);
    return strtoll(out, NULL, 10);
}

/* The row has accepted a fence far above the lock's counter while our
 * lease is fresh: only a counter that went back does that (the lease ran
 * out is app_lease's case). The server raises the counter to the row's
 * fence and retries once: the claim succeeds with a fence above it. */
Test(FENCE_SUITE, newer_fence_in_db_heals_the_counter, .timeout = 30)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "fenced", 10, 0);
    long long f1 = claim_ok(id, "a");
    long long f2 = claim_ok(id, "b");
    long long f3 = claim_ok(id, "c");
    cr_assert(f1 >= 1 && f1 < f2 && f2 < f3, "fences %lld %lld %lld", f1, f2, f3);
    expect_state(id, 7, 3, f3);
    cr_assert_eq(app_db_int(g_app.db, "SELECT fence FROM coupon_record WHERE user_id='c'"), f3);
    cr_assert_eq(heals(), 0);

    long long newer = f3 + 1000;
    app_db_exec(g_app.db, "UPDATE coupon SET last_fence=%lld WHERE id=%lld", newer, id);

    long long f4 = claim_ok(id, "d");
    cr_assert_eq(f4, newer + 1, "healed fence %lld, expected the row's %lld + 1", f4, newer);
    cr_assert_eq(heals(), 1);
    cr_assert_eq(counter(id), newer + 1);
    expect_state(id, 6, 4, f4);
    cr_assert_eq(app_db_int(g_app.db, "SELECT fence FROM coupon_record WHERE user_id='d'"), f4);
    expect_lock_free(id);
    /* Healed once: the next claims need nothing more. */
    cr_assert_eq(claim_ok(id, "e"), f4 + 1);
    cr_assert_eq(heals(), 1);
}

Test(FENCE_SUITE, reset_fence_counter_heals_after_one_refusal, .timeout = 30)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "fenced", 10, 0);
    claim_ok(id, "a");
    claim_ok(id, "b");
    long long f3 = claim_ok(id, "c");
    cr_assert_gt(f3, 2);

    /* The counter lost (a Redis that forgot its data): the next holder's
     * fence is lower than what the row has seen. */
    char key[64], out[64];
    snprintf(key, sizeof key, APP_FENCE_KEY_FMT, id);
    const char *exists[] = {"EXISTS", key};
    app_redis(&g_app.redis[0], out, sizeof out, 2, exists);
    cr_assert_str_eq(out, "1", "fence counter %s not found: key naming changed?", key);
    const char *reset[] = {"SET", key, "0"};
    app_redis(&g_app.redis[0], out, sizeof out, 3, reset);
    cr_assert_str_eq(out, "OK");

    /* Fence 1 is refused inside the request, the counter raised to f3, and
     * the retry (fence f3 + 1) is accepted: the client sees one success. */
    long long f = claim_ok(id, "d");
    cr_assert_eq(f, f3 + 1, "fence %lld after the heal, expected %lld", f, f3 + 1);
    cr_assert_eq(heals(), 1);
    expect_state(id, 6, 4, f);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE fence < %lld AND user_id='d'", f3),
                 0);
    expect_lock_free(id);
}

/* --hold-log: two lines per hold (begin, then hold with the outcome), the
 * applied ones naming the fence the client was told and the record written;
 * a refused hold says so and names no record. Read by chaos-check. */
Test(FENCE_SUITE, hold_log_records_each_hold, .timeout = 30)
{
    char path[400], line[1024], want[128];
    APP_SETUP_OK();
    /* In the temp dir: the db may be a PostgreSQL URL, not a file. */
    snprintf(path, sizeof path, "%s/holds.log", g_app.dir);
    app_env_server_up(&g_app, 1, "--hold-log", path, NULL);
    long long id = app_create_coupon(&g_app.srv[1], "logged", 10, 0);
    long long fences[3];
    const char *users[3] = {"h1", "h2", "h3"};
    for (int i = 0; i < 3; i++) {
        http_reply r;
        app_claim(&g_app.srv[1], "POST", id, users[i], &r);
        json_t *root = app_expect(&r, 200, 0);
        fences[i] = app_jint(json_object_get(root, "data"), "fence");
        json_decref(root);
        http_reply_free(&r);
    }
    /* The store has seen a newer fence than Redis hands out (as after Redis
     * lost its counters): h4's first hold is refused, the server heals the
     * counters and retries under a new lock, a hold of its own. */
    app_db_exec(g_app.db, "UPDATE coupon SET last_fence=%lld WHERE id=%lld", fences[2] + 100, id);
    app_claim_expect(&g_app.srv[1], "POST", id, "h4", 200, 0, 0);

    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no hold log at %s", path);
    int begins = 0, applied = 0, refused = 0, matched = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        cr_assert(strncmp(line, "begin pid=", 10) == 0 || strncmp(line, "hold pid=", 9) == 0, "bad line: %s", line);
        cr_assert_eq(line[strlen(line) - 1], '\n', "torn line: %s", line);
        begins += line[0] == 'b';
        applied += strstr(line, " outcome=applied ") != NULL;
        if (strstr(line, " outcome=refused ") != NULL) {
            refused++;
            cr_assert(strstr(line, " records=\n") != NULL, "a refused hold names records: %s", line);
        }
        for (int i = 0; i < 3; i++) {
            long long rec = app_db_int(g_app.db, "SELECT id FROM coupon_record WHERE user_id='%s'", users[i]);
            snprintf(want, sizeof want, " fence=%lld ", fences[i]);
            char recs[64];
            snprintf(recs, sizeof recs, " records=%lld\n", rec);
            matched += strstr(line, want) != NULL && strstr(line, recs) != NULL;
        }
    }
    fclose(f);
    cr_assert_eq(begins, 5, "%d begin lines, expected 5 (one per hold, the healed retry included)", begins);
    cr_assert_eq(applied, 4, "%d applied holds, expected 4", applied);
    cr_assert_eq(refused, 1, "%d refused holds, expected 1", refused);
    cr_assert_eq(matched, 3, "%d applied lines name the client's fence and its record, expected 3", matched);
}
