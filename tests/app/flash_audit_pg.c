/* flash_audit_pg.c - the flash crowd on PostgreSQL through coupon-loadtest,
 * audited from the database. Two coupon-servers share one PostgreSQL
 * database (--db postgresql://...) and three Redis masters.
 * coupon-loadtest fires 4000 claims from 32 connections at a coupon of 200,
 * auditing the servers and the database (its PostgreSQL read path). Under
 * redlock (fence full) and atomic-sql exactly the stock is sold, which the
 * tables confirm; under `none` the same load oversells and the audit says so.
 *
 * The binary starts one postgres for all its tests (app_pg_server.c) and
 * each test gets its own database; without the server binaries every test
 * skips. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

#define PG_STOCK 200
#define PG_REQUESTS "4000"

/* A fresh database per test on the binary's one postgres (app_pg_server.c). */
const app_suite_plan app_plan = {.db_name = "unused.db", .pg = 1};
TestSuite(app_flash_audit_pg, .init = app_suite_init, .fini = app_suite_fini, .timeout = 180);

static long long pg_int(const char *sql_fmt, long long id)
{
    char sql[512], out[64];

    snprintf(sql, sizeof sql, sql_fmt, id);
    cr_assert_eq(pg_sql(g_app.db, sql, out, sizeof out), 0, "%s (see stderr)", sql);
    return atoll(out);
}

/* Two servers with strategy on 3 nodes, a coupon, the load with the DB
 * audit; returns the load tester's exit status, its report in *report. */
static int sale(const char *strategy, const char *work_us, long long *id, char **report)
{
    const char *bin = getenv("COUPON_LOADTEST_BIN");
    char urls[256], coupon[32];

    APP_SETUP_OK();
    cr_assert(bin != NULL && bin[0] != '\0', "COUPON_LOADTEST_BIN is not set");
    app_env_up(&g_app, 3, 0, 2, "--strategy", strategy, "--work-us", work_us, "--lock-batch", "1", NULL);
    *id = app_create_coupon(&g_app.srv[0], "flash", PG_STOCK, 1);
    snprintf(urls, sizeof urls, "%s,%s", g_app.srv[0].url, g_app.srv[1].url);
    snprintf(coupon, sizeof coupon, "%lld", *id);
    const char *argv[] = {bin, "--url", urls, "--coupon", coupon, "--threads", "2", "--connections", "32",
                          "--requests", PG_REQUESTS, "--db", g_app.db, "--quiet", NULL};
    int st = run_command(argv, 120000, report);
    cr_assert_not_null(*report);
    cr_log_info("%s on PostgreSQL:\n%s", strategy, *report);
    return st;
}

static void expect_exact(const char *strategy)
{
    long long id;
    char *report = NULL;
    char line[256];
    int st = sale(strategy, "500", &id, &report);

    cr_assert_eq(st, 0, "coupon-loadtest exit %d:\n%s", st, report);
    cr_assert_eq(text_line(report, "verdict:", "NO OVERSELL", line, sizeof line), 0, "%s", report);
    /* The audit read the database itself, not only the servers. */
    cr_assert_eq(text_line(report, "  after   db postgresql://", NULL, line, sizeof line), 0, "%s", report);
    cr_assert_not_null(strstr(line, "stock 0  issued 200"), "%s", line);
    free(report);
    /* And the tables say the same, read behind both programs' backs. */
    cr_assert_eq(pg_int("SELECT COUNT(*) FROM coupon_record WHERE coupon_id = %lld", id), PG_STOCK);
    cr_assert_eq(pg_int("SELECT stock FROM coupon WHERE id = %lld", id), 0);
    cr_assert_eq(pg_int("SELECT COUNT(DISTINCT user_id) FROM coupon_record WHERE coupon_id = %lld", id), PG_STOCK);
    if (strcmp(strategy, "redlock") == 0)
        /* One claim per acquisition: fences strictly increase with the record id. */
        cr_assert_eq(pg_int("SELECT COUNT(*) FROM coupon_record a JOIN coupon_record b ON a.coupon_id = b.coupon_id "
                            "AND a.id < b.id WHERE a.coupon_id = %lld AND a.fence >= b.fence",
                            id),
                     0);
}

Test(app_flash_audit_pg, redlock_three_nodes_sells_exactly_the_stock)
{
    expect_exact("redlock");
}

Test(app_flash_audit_pg, atomic_sql_sells_exactly_the_stock)
{
    expect_exact("atomic-sql");
}

Test(app_flash_audit_pg, none_oversells_and_the_audit_says_so)
{
    long long id;
    char *report = NULL;
    char line[256];
    int st = sale("none", "2000", &id, &report);

    /* The same read/work/write with no lock: the lost update, on PostgreSQL
     * too (no transaction spans the section, by design). */
    cr_assert_eq(st, 1, "coupon-loadtest exit %d (1 = oversold):\n%s", st, report);
    cr_assert_eq(text_line(report, "verdict:", "OVERSOLD by", line, sizeof line), 0, "%s", report);
    free(report);
    long long records = pg_int("SELECT COUNT(*) FROM coupon_record WHERE coupon_id = %lld", id);
    long long stock = pg_int("SELECT stock FROM coupon WHERE id = %lld", id);
    cr_assert(records > PG_STOCK || records + stock != PG_STOCK, "records %lld stock %lld", records, stock);
}
