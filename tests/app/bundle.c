/* bundle.c - POST /api/v1/coupon/bundle end to end:
 *   - each --bundle-lock way issues every listed coupon with its own record
 *     and fence;
 *   - sold out (409 / 1003 naming the ids), a user at a limit (409 / 1004),
 *     bad lists (400), GET (405) and unknown ids (404) write nothing;
 *   - /metrics counts bundles.
 * Built twice: on SQLite (app_bundle) and on PostgreSQL (app_bundle_pg). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "bundle.db", .pg = APP_PG, .nredis = 1};
#define BUNDLE_SUITE APP_SUITE(app_bundle)
TestSuite(BUNDLE_SUITE, .init = app_suite_init, .fini = app_suite_fini, .timeout = 60);

static void bundle(const char *method, const char *user, const char *ids, http_reply *r)
{
    char path[1200];
    snprintf(path, sizeof path, "/api/v1/coupon/bundle?user_id=%s&coupon_ids=%s", user, ids);
    app_request(&g_app.srv[0], method, path, NULL, NULL, r);
}

static json_t *bundle_expect(const char *user, const char *ids, long status, long long code)
{
    http_reply r;
    bundle("POST", user, ids, &r);
    json_t *root = app_expect(&r, status, code);
    if (status == 503)
        cr_assert_neq(r.retry_after[0], '\0', "a 503 without Retry-After: %s", r.body);
    http_reply_free(&r);
    return root;
}

static long long records(void)
{
    return app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record");
}

/* Every way: 200 with one record per coupon, in the request's order, each
 * in the store for this user and coupon, with the fence the reply gives. */
static void issues_every_coupon(const char *way, int fenced)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--bundle-lock", way, NULL);
    long long a = app_create_coupon(&g_app.srv[0], "a", 5, 1);
    long long b = app_create_coupon(&g_app.srv[0], "b", 5, 1);
    long long c = app_create_coupon(&g_app.srv[0], "c", 1, 1);
    char ids[96];
    snprintf(ids, sizeof ids, "%lld,%lld,%lld", c, a, b);

    json_t *root = bundle_expect("u1", ids, 200, 0);
    json_t *data = json_object_get(root, "data");
    cr_assert_str_eq(app_jstr(data, "user_id"), "u1");
    json_t *cids = json_object_get(data, "coupon_ids"), *recs = json_object_get(data, "record_ids"),
           *fences = json_object_get(data, "fences");
    cr_assert(json_array_size(cids) == 3 && json_array_size(recs) == 3 && json_array_size(fences) == 3, "%s",
              json_dumps(data, 0));
    long long want[3] = {c, a, b};
    for (size_t i = 0; i < 3; i++) {
        long long rec = json_integer_value(json_array_get(recs, i));
        long long fence = json_integer_value(json_array_get(fences, i));
        cr_assert_eq(json_integer_value(json_array_get(cids, i)), want[i]);
        cr_assert_eq(app_db_int(g_app.db,
                                "SELECT COUNT(*) FROM coupon_record WHERE id = %lld AND coupon_id = %lld AND "
                                "user_id = 'u1' AND fence = %lld",
                                rec, want[i], fence),
                     1, "record %lld of coupon %lld with fence %lld", rec, want[i], fence);
        if (fenced)
            cr_assert_gt(fence, 0, "a lock way answered fence 0");
        else
            cr_assert_eq(fence, 0, "atomic-sql takes no lock, so no fence");
    }
    json_decref(root);
    app_coupon_state st;
    app_expect_db(g_app.db, a, 4, 1, &st);
    app_expect_db(g_app.db, b, 4, 1, &st);
    app_expect_db(g_app.db, c, 0, 1, &st);
    cr_assert_eq(app_metric(&g_app.srv[0], "coupon_bundles_total{result=\"ok\"}"), 1);

    /* c is sold out now: the next bundle with it gets nothing of a or b. */
    root = bundle_expect("u2", ids, 409, 1003);
    json_t *so = json_object_get(json_object_get(root, "data"), "sold_out");
    cr_assert(json_array_size(so) == 1 && json_integer_value(json_array_get(so, 0)) == c, "sold_out: %s",
              json_dumps(so, 0));
    json_decref(root);
    /* u1 holds its limit (1) of a and b: refused whole. */
    snprintf(ids, sizeof ids, "%lld,%lld", a, b);
    json_decref(bundle_expect("u1", ids, 409, 1004));
    app_expect_db(g_app.db, a, 4, 1, &st);
    app_expect_db(g_app.db, b, 4, 1, &st);
    cr_assert_eq(records(), 3);
    cr_assert_eq(app_metric(&g_app.srv[0], "coupon_bundles_total{result=\"sold_out\"}"), 1);
    cr_assert_eq(app_metric(&g_app.srv[0], "coupon_bundles_total{result=\"user_limit\"}"), 1);
}

Test(BUNDLE_SUITE, request_order_issues_every_coupon) { issues_every_coupon("request-order", 1); }
Test(BUNDLE_SUITE, sorted_issues_every_coupon) { issues_every_coupon("sorted", 1); }
Test(BUNDLE_SUITE, multi_issues_every_coupon) { issues_every_coupon("multi", 1); }
Test(BUNDLE_SUITE, atomic_sql_issues_every_coupon) { issues_every_coupon("atomic-sql", 0); }

/* The limit checked under the lock (not a fast path): a coupon whose stock
 * is left but that the user already holds. */
Test(BUNDLE_SUITE, a_limit_reached_by_a_single_claim_refuses_the_bundle)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long a = app_create_coupon(&g_app.srv[0], "a", 5, 1);
    long long b = app_create_coupon(&g_app.srv[0], "b", 5, 2);
    char ids[64];
    app_claim_expect(&g_app.srv[0], "POST", a, "u1", 200, 0, 0);
    snprintf(ids, sizeof ids, "%lld,%lld", b, a);
    json_decref(bundle_expect("u1", ids, 409, 1004));
    app_coupon_state st;
    app_expect_db(g_app.db, b, 5, 0, &st);
    json_decref(bundle_expect("u2", ids, 200, 0));
}

Test(BUNDLE_SUITE, bad_lists_get_and_unknown_ids_write_nothing)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long a = app_create_coupon(&g_app.srv[0], "a", 5, 0);
    long long b = app_create_coupon(&g_app.srv[0], "b", 5, 0);
    char ids[512], seventeen[512] = "";
    size_t off = 0;
    for (int i = 0; i < 17; i++)
        off += (size_t)snprintf(seventeen + off, sizeof seventeen - off, "%s%lld", i ? "," : "", a + i);

    const char *bad[] = {"", "1", "1,1", "1,,2", ",1,2", "1,2,", "a,b", "0,1", "-1,2", "1;2", "99999999999999999999,1",
                         seventeen};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(ids, sizeof ids, "%s", bad[i]);
        json_t *root = bundle_expect("u1", ids, 400, 1001);
        cr_assert_not_null(strstr(app_jstr(root, "msg"), "coupon_ids"), "msg for '%s': %s", bad[i],
                           app_jstr(root, "msg"));
        json_decref(root);
    }
    snprintf(ids, sizeof ids, "%lld,%lld", a, a);
    json_decref(bundle_expect("u1", ids, 400, 1001));
    snprintf(ids, sizeof ids, "%lld,%lld", a, b);
    json_decref(bundle_expect("bad%20user", ids, 400, 1001));
    http_reply r;
    app_request(&g_app.srv[0], "POST", "/api/v1/coupon/bundle?user_id=u1", NULL, NULL, &r);
    json_decref(app_expect(&r, 400, 1001));
    http_reply_free(&r);
    /* GET is not accepted here: a bundle changes state. */
    bundle("GET", "u1", ids, &r);
    json_decref(app_expect(&r, 405, 1008));
    http_reply_free(&r);
    snprintf(ids, sizeof ids, "%lld,%lld", a, b + 1000);
    json_decref(bundle_expect("u1", ids, 404, 1002));
    app_coupon_state st;
    app_expect_db(g_app.db, a, 5, 0, &st);
    app_expect_db(g_app.db, b, 5, 0, &st);
    cr_assert_eq(records(), 0);
    /* No lock was taken for any of them: the refusals come before it. */
    char key[64], out[64];
    snprintf(key, sizeof key, APP_FENCE_KEY_FMT, a);
    const char *get[] = {"EXISTS", key};
    app_redis(&g_app.redis[0], out, sizeof out, 2, get);
    cr_assert_str_eq(out, "0");
}

/* --bundle-lock: an unknown way is a usage error (exit 2, one line). */
Test(BUNDLE_SUITE, an_unknown_bundle_lock_is_refused_at_start_up)
{
    APP_SETUP_OK();
    const char *bin = getenv("COUPON_SERVER_BIN");
    cr_assert_not_null(bin, "COUPON_SERVER_BIN is not set");
    char *out = NULL;
    const char *argv[] = {bin, "--listen", "127.0.0.1:0", "--db", g_app.db, "--bundle-lock", "alphabetical", NULL};
    int st = run_command(argv, 10000, &out);
    cr_assert_eq(st, 2, "exit %d: %s", st, out ? out : "");
    cr_assert_not_null(strstr(out, "--bundle-lock: unknown way 'alphabetical'"), "%s", out);
    free(out);
}

/* coupon-loadtest's bundle load on this store (the SQLite file, or the
 * PostgreSQL database of app_bundle_pg): it reads every record of its users
 * back from the store and finds every bundle whole. */
Test(BUNDLE_SUITE, the_load_tester_audits_bundles_from_the_store)
{
    APP_SETUP_OK();
    const char *bin = getenv("COUPON_LOADTEST_BIN");
    cr_assert(bin != NULL && bin[0] != '\0', "COUPON_LOADTEST_BIN is not set");
    app_env_server_up(&g_app, 0, "--bundle-lock", "multi", NULL);
    long long first = app_create_coupon(&g_app.srv[0], "a", 60, 1);
    for (int i = 1; i < 4; i++)
        (void)app_create_coupon(&g_app.srv[0], "more", 60, 1);
    char coupon[32], line[256], *report = NULL;
    snprintf(coupon, sizeof coupon, "%lld", first);
    const char *argv[] = {bin, "--url", g_app.srv[0].url, "--coupon", coupon, "--coupons", "4", "--bundle", "2",
                          "--threads", "4", "--requests", "200", "--db", g_app.db, "--quiet", NULL};
    int st = run_command(argv, 120000, &report);
    cr_assert_not_null(report);
    cr_log_info("%s", report);
    cr_assert_eq(st, 0, "coupon-loadtest exit %d:\n%s", st, report);
    cr_assert_eq(text_line(report, "verdict:", "NO OVERSELL", line, sizeof line), 0, "%s", report);
    cr_assert_eq(text_line(report, "bundles:", "partial, 0 200s without", line, sizeof line), 0, "%s", report);
    cr_assert_not_null(strstr(line, " 0 partial"), "%s", line);
    /* Two records per bundle issued, and nothing else, whatever the draw. */
    long long issued = atoll(line + strlen("bundles:"));
    cr_assert_gt(issued, 0, "%s", line);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record"), 2 * issued);
    free(report);
}
