/* bundle.c - coupon-loadtest --coupons (spread, uniform and --zipf)
 * and --bundle K against real servers:
 *   - clean runs say NO OVERSELL with exact counts;
 *   - a store that loses a bundle's second record (an SQLite trigger
 *     playing the half-applied write) is caught as partial bundles;
 *   - a stale holder under --fence off is caught as OVERSOLD;
 *   - bad option combinations are usage errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <sqlite3.h>

#include "lt_test_util.h"

static lt_rig rig;

static void rig_fini(void)
{
    lt_rig_down(&rig);
}

TestSuite(loadtest_bundle, .fini = rig_fini, .timeout = 120);

static json_t *run_json(const char *const *args, int want_status)
{
    char *out = NULL;
    int st = lt_run_loadtest(args, &out);
    cr_assert_eq(st, want_status, "exit %d:\n%s", st, out ? out : "");
    /* The JSON report is the last line of stdout (progress goes to stderr, quieted). */
    const char *brace = out != NULL ? strstr(out, "{\"coupons\"") : NULL;
    cr_assert_not_null(brace, "no JSON report:\n%s", out ? out : "");
    json_error_t err;
    json_t *root = json_loadb(brace, strcspn(brace, "\n"), 0, &err);
    cr_assert_not_null(root, "%s:\n%s", err.text, out);
    free(out);
    return root;
}

static long long records_of(long long coupon_id)
{
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    long long n = -1;
    cr_assert_eq(sqlite3_open_v2(rig.db_path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM coupon_record WHERE coupon_id = ?1", -1, &st, NULL),
                 SQLITE_OK);
    cr_assert_eq(sqlite3_bind_int64(st, 1, coupon_id), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    cr_assert_geq(n, 0);
    return n;
}

static void make_coupons(int n, long long stock, long long *first)
{
    for (int i = 0; i < n; i++) {
        long long id = lt_create_coupon(&rig, stock, 1);
        if (i == 0)
            *first = id;
    }
}

Test(loadtest_bundle, bundles_over_ten_coupons_are_audited_whole)
{
    const char *extra[] = {"--bundle-lock", "multi", NULL};
    lt_rig_up(&rig, 2, extra);
    long long first = 0;
    make_coupons(10, 40, &first);
    char coupon[24];
    snprintf(coupon, sizeof coupon, "%lld", first);
    const char *args[] = {"--url", rig.urls, "--coupon", coupon, "--coupons", "10", "--bundle", "3", "--threads", "8",
                          "--requests", "400", "--db", rig.db_path, "--json", "--quiet", NULL};
    json_t *r = run_json(args, 0);
    cr_assert_str_eq(json_string_value(json_object_get(r, "verdict")), "NO OVERSELL");
    cr_assert_eq(lt_jint(r, "answered"), 400);
    cr_assert_eq(lt_jint(r, "partial_bundles"), 0);
    cr_assert_eq(json_is_true(json_object_get(r, "bundle_checked")), 1);
    /* 400 units of stock in all, 3 per bundle: the sale runs out, and the
     * DB holds exactly three records per success. */
    long long ok = lt_jint(r, "successes");
    cr_assert_eq(lt_jint(r, "units_issued"), 3 * ok);
    cr_assert_gt(ok, 0);
    cr_assert_leq(3 * ok, 400);
    json_decref(r);
}

Test(loadtest_bundle, a_store_that_drops_one_record_is_caught_as_partial)
{
    lt_rig_up(&rig, 1, NULL);
    long long first = 0;
    make_coupons(3, 1000, &first);
    /* The half-applied write, played by the store: coupon first+1's
     * records vanish as they are inserted (its stock still goes down). */
    char sql[256], coupon[24];
    snprintf(sql, sizeof sql,
             "CREATE TRIGGER half AFTER INSERT ON coupon_record WHEN NEW.coupon_id = %lld "
             "BEGIN DELETE FROM coupon_record WHERE id = NEW.id; END;",
             first + 1);
    lt_db_exec(&rig, sql);
    snprintf(coupon, sizeof coupon, "%lld", first);
    const char *args[] = {"--url", rig.urls, "--coupon", coupon, "--coupons", "3", "--bundle", "3", "--threads", "2",
                          "--requests", "20", "--db", rig.db_path, "--json", "--quiet", NULL};
    json_t *r = run_json(args, 1);
    cr_assert_eq(lt_jint(r, "successes"), 20);
    /* Every 200 lacks one of its three records. */
    cr_assert_eq(lt_jint(r, "partial_bundles"), 20);
    cr_assert_str_neq(json_string_value(json_object_get(r, "verdict")), "NO OVERSELL");
    json_decref(r);
}

Test(loadtest_bundle, a_stale_bundle_without_the_fence_is_oversold)
{
    const char *extra[] = {"--bundle-lock", "sorted", "--fence", "off", "--lock-ttl", "50", "--work-us", "20000",
                           "--fault-pause-ms", "80:2", NULL};
    lt_rig_up(&rig, 2, extra);
    long long first = 0;
    make_coupons(4, 100000, &first);
    char coupon[24];
    snprintf(coupon, sizeof coupon, "%lld", first);
    const char *args[] = {"--url", rig.urls, "--coupon", coupon, "--coupons", "4", "--bundle", "2", "--threads", "16",
                          "--duration", "3", "--db", rig.db_path, "--json", "--quiet", NULL};
    json_t *r = run_json(args, 1);
    const char *v = json_string_value(json_object_get(r, "verdict"));
    cr_assert(strncmp(v, "OVERSOLD by ", 12) == 0, "verdict %s", v);
    cr_assert_gt(lt_jint(r, "oversold_coupons"), 0);
    json_decref(r);
}

Test(loadtest_bundle, zipf_spread_puts_most_claims_on_the_first_coupons)
{
    lt_rig_up(&rig, 1, NULL);
    long long first = 0;
    make_coupons(20, 100000, &first);
    char range[64];
    snprintf(range, sizeof range, "%lld-%lld", first, first + 19);
    const char *args[] = {"--url", rig.urls, "--coupons", range, "--zipf", "1.5", "--threads", "4", "--requests",
                          "600", "--db", rig.db_path, "--json", "--quiet", "--seed", "7", NULL};
    json_t *r = run_json(args, 0);
    cr_assert_eq(lt_jint(r, "successes"), 600);
    json_decref(r);
    /* Weights 1/k^1.5 over 20 coupons: the first ~40 %, the last ~0.4 %. */
    long long hot = records_of(first), cold = records_of(first + 19);
    cr_log_info("zipf 1.5: first coupon %lld of 600, last %lld", hot, cold);
    cr_assert_gt(hot, 150, "the first coupon got %lld of 600", hot);
    cr_assert_lt(cold, 40, "the last coupon got %lld of 600", cold);
}

Test(loadtest_bundle, bad_spread_options_are_usage_errors)
{
    char *out = NULL;
    const char *cases[][10] = {
        {"--url", "http://127.0.0.1:1", "--coupons", "0", "--requests", "1", NULL},
        {"--url", "http://127.0.0.1:1", "--coupons", "5-2", "--requests", "1", NULL},
        {"--url", "http://127.0.0.1:1", "--coupons", "1,2,2", "--requests", "1", NULL},
        {"--url", "http://127.0.0.1:1", "--coupons", "3", "--bundle", "4", "--requests", "1", NULL},
        {"--url", "http://127.0.0.1:1", "--coupon", "1", "--bundle", "2", "--requests", "1", NULL},
        {"--url", "http://127.0.0.1:1", "--coupons", "3", "--bundle", "17", "--requests", "1", NULL},
        {"--url", "http://127.0.0.1:1", "--coupons", "3", "--rate", "10", "--requests", "1", NULL},
        {"--url", "http://127.0.0.1:1", "--requests", "1", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int st = lt_run_loadtest(cases[i], &out);
        cr_assert_eq(st, 2, "case %zu: exit %d:\n%s", i, st, out ? out : "");
        free(out);
        out = NULL;
    }
}
