/* audit.c - coupon-loadtest against real coupon-servers: exact counts
 * and JSON fields of a clean run, several servers with per-user limits, and
 * a DB tampered behind the servers' back caught as OVERSOLD by 1. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt_test_util.h"

static lt_rig rig;
static char *out;
static json_t *root;

static void fini(void)
{
    json_decref(root);
    root = NULL;
    free(out);
    out = NULL;
    lt_rig_down(&rig);
}

static void up1(void)
{
    lt_rig_up(&rig, 1, NULL);
}

static void up2(void)
{
    lt_rig_up(&rig, 2, NULL);
}

static json_t *parse_json_report(void)
{
    json_error_t jerr;
    json_t *r = json_loads(out, 0, &jerr);
    cr_assert_not_null(r, "--json output is not one JSON object (%s):\n%s", jerr.text, out);
    cr_assert(json_is_object(r));
    return r;
}

Test(loadtest_audit, clean_run_json_exact_counts, .init = up1, .fini = fini, .timeout = 120)
{
    char id[32];
    long long coupon = lt_create_coupon(&rig, 50, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "4", "--requests", "200",
                       "--db", rig.db_path, "--json", "--quiet", NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    root = parse_json_report();

    cr_assert_str_eq(json_string_value(json_object_get(root, "verdict")), "NO OVERSELL");
    cr_assert_eq(lt_jint(root, "oversold_by"), 0);
    cr_assert_eq(lt_jint(root, "requests"), 200);
    cr_assert_eq(lt_jint(root, "successes"), 50);
    cr_assert_eq(lt_jint(root, "threads"), 4);
    cr_assert_eq(lt_jint(root, "connections"), 4);
    json_t *by_code = json_object_get(root, "by_code");
    cr_assert_eq(lt_jint(by_code, "0"), 50);
    cr_assert_eq(lt_jint(by_code, "1003"), 150);
    cr_assert_eq(json_object_size(by_code), 2, "unexpected codes:\n%s", out);
    json_t *by_status = json_object_get(root, "by_status");
    cr_assert_eq(lt_jint(by_status, "200"), 50);
    cr_assert_eq(lt_jint(by_status, "409"), 150);
    cr_assert_eq(json_object_size(by_status), 2);
    cr_assert_eq(lt_jint(json_object_get(root, "errors"), "total"), 0);

    json_t *lat = json_object_get(root, "latency_ms");
    const char *keys[] = {"p50", "p90", "p99", "max"};
    double prev = 0;
    for (size_t i = 0; i < 4; i++) {
        json_t *v = json_object_get(lat, keys[i]);
        cr_assert(json_is_real(v), "latency_ms.%s missing", keys[i]);
        cr_assert_geq(json_real_value(v), prev, "latency_ms.%s below the previous percentile", keys[i]);
        prev = json_real_value(v);
    }
    cr_assert_gt(prev, 0.0);
    cr_assert_eq(lt_jint(lat, "count"), 200);
    cr_assert(json_is_real(json_object_get(root, "throughput")));

    json_t *audit = json_object_get(root, "audit");
    cr_assert(json_is_object(audit));
    cr_assert_eq(lt_jint(audit, "successes_seen"), 50);
    cr_assert_eq(lt_jint(audit, "issued_before"), 0);
    cr_assert_eq(lt_jint(audit, "issued_after"), 50);
    cr_assert_eq(lt_jint(audit, "issued_delta"), 50);
    cr_assert_eq(json_array_size(json_object_get(audit, "findings")), 0);
    cr_assert(json_is_true(json_object_get(audit, "complete")));
    json_t *db = json_object_get(audit, "db");
    cr_assert_eq(lt_jint(db, "total"), 50);
    cr_assert_eq(lt_jint(db, "stock"), 0);
    cr_assert_eq(lt_jint(db, "issued"), 50);
    cr_assert_eq(lt_jint(db, "users_over_limit"), 0);
    json_t *servers = json_object_get(audit, "servers");
    cr_assert_eq(json_array_size(servers), 1);
    cr_assert_eq(lt_jint(json_array_get(servers, 0), "issued"), 50);
    cr_assert_eq(lt_jint(json_array_get(servers, 0), "stock"), 0);
}

Test(loadtest_audit, two_servers_per_user_limit_text, .init = up2, .fini = fini, .timeout = 120)
{
    char id[32];
    /* 10 users, 2 each: 20 successes and the stock of 100 never runs out, so
     * the other 280 answers are all 1004. 300 uniform draws miss giving some
     * user 2 tries with probability ~1e-12. */
    long long coupon = lt_create_coupon(&rig, 100, 2);
    snprintf(id, sizeof id, "%lld", coupon);
    /* 6 connections multiplexed on 2 threads, spread over both servers. */
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "2", "--connections", "6",
                       "--requests", "300", "--users", "10", "--method", "GET", "--db", rig.db_path,
                       NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, "verdict: NO OVERSELL\n"), "%s", out);
    cr_assert_not_null(strstr(out, " 0: 20 "), "20 successes expected:\n%s", out);
    cr_assert_not_null(strstr(out, " 1004: 280"), "280 per-user refusals expected:\n%s", out);
    cr_assert_not_null(strstr(out, "requests:   300 answered in"), "%s", out);
    cr_assert_not_null(strstr(out, "  issued: 20 of 100\n"), "%s", out);
    /* The audit read back from each server. */
    cr_assert_not_null(strstr(out, rig.srv[0].url));
    cr_assert_not_null(strstr(out, rig.srv[1].url));
}

static long long tamper_setup(void)
{
    long long coupon = lt_create_coupon(&rig, 10, 1);
    char sql[200];
    cr_assert_eq(lt_claim(&rig, coupon, "alice"), 0);
    cr_assert_eq(lt_claim(&rig, coupon, "bob"), 0);
    cr_assert_eq(lt_claim(&rig, coupon, "carol"), 0);
    /* One record more than the stock paid for: stock 7 + issued 4 != total 10. */
    snprintf(sql, sizeof sql, "INSERT INTO coupon_record(coupon_id, user_id) VALUES (%lld, 'intruder')",
             coupon);
    lt_db_exec(&rig, sql);
    return coupon;
}

Test(loadtest_audit, tampered_db_is_oversold_by_1, .init = up1, .fini = fini, .timeout = 120)
{
    char id[32];
    long long coupon = tamper_setup();
    snprintf(id, sizeof id, "%lld", coupon);
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "2", "--requests", "4",
                       "--db", rig.db_path, NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, "verdict: OVERSOLD by 1\n"), "%s", out);
    cr_assert_not_null(strstr(out, "FINDING"), "%s", out);
}

Test(loadtest_audit, tampered_db_seen_through_the_server_json, .init = up1, .fini = fini, .timeout = 120)
{
    char id[32];
    long long coupon = tamper_setup();
    snprintf(id, sizeof id, "%lld", coupon);
    /* Without --db: the server's issued counts the records, so it shows too. */
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "2", "--requests", "4",
                       "--json", "--quiet", NULL};
    int st = lt_run_loadtest(a, &out);
    cr_assert_eq(st, 1, "exit %d:\n%s", st, out);
    root = parse_json_report();
    cr_assert_str_eq(json_string_value(json_object_get(root, "verdict")), "OVERSOLD by 1");
    cr_assert_eq(lt_jint(root, "oversold_by"), 1);
    cr_assert_eq(lt_jint(root, "successes"), 4);
    cr_assert(json_is_null(json_object_get(json_object_get(root, "audit"), "db")));
}

Test(loadtest_audit, server_dying_mid_run_is_exit_2, .init = up1, .fini = fini, .timeout = 120)
{
    char id[32];
    lt_bg_run b;
    long long coupon = lt_create_coupon(&rig, 0, 1);
    snprintf(id, sizeof id, "%lld", coupon);
    const char *a[] = {"--url", rig.urls, "--coupon", id, "--threads", "2", "--connections", "4",
                       "--duration", "3", "--timeout-ms", "1000", NULL};
    lt_bg_start(&b, a);
    /* Long enough for the pre-run reads to pass and the load to start. */
    test_sleep_ms(1000);
    cr_assert_eq(server_stop(&rig.srv[0], SIGKILL, NULL), 0);
    lt_bg_join(&b);
    out = b.output;
    cr_assert_eq(b.status, 2, "exit %d:\n%s", b.status, out);
    /* The run went on, counted the refused connections, and could not vouch. */
    cr_assert_not_null(strstr(out, "Couldn't connect to server"), "%s", out);
    cr_assert_not_null(strstr(out, "verdict: AUDIT INCOMPLETE"), "%s", out);
    cr_assert_not_null(strstr(out, "unreadable: cannot reach"), "%s", out);
}
