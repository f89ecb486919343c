/* busy.c - another connection holds the write lock: every write answers
 * DB_BUSY after the busy timeout and changes nothing, while reads keep
 * answering from the last commit (WAL) and never see uncommitted writes. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "dbtest.h"

static db_store *db;
static sqlite3 *holder; /* raw connection that takes the write lock */
static int64_t id;

static void setup(void)
{
    dbt_setup();
    db = dbt_open();
    id = dbt_create(db, "contended", 5, 1);
    db_close(db);
    /* 100 ms: long enough to be a real wait, short enough for a quick test. */
    cr_assert_eq(db_open(dbt_path, 100, &db, NULL, 0), DB_OK);
    cr_assert_eq(sqlite3_open_v2(dbt_path, &holder, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
}

static void teardown(void)
{
    if (holder != NULL)
        cr_assert_eq(sqlite3_close(holder), SQLITE_OK);
    holder = NULL;
    db_close(db);
    db = NULL;
    dbt_teardown();
}

TestSuite(db_busy, .init = setup, .fini = teardown, .timeout = 30);

static void hold(const char *sql)
{
    char *err = NULL;
    int rc = sqlite3_exec(holder, sql, NULL, NULL, &err);

    cr_assert_eq(rc, SQLITE_OK, "%s: %s", sql, err != NULL ? err : "");
    sqlite3_free(err);
}

static void expect_unchanged(void)
{
    db_coupon c;

    cr_assert_eq(db_get_coupon(db, id, &c), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(c.stock, 5);
    cr_assert_eq(c.issued, 0);
    cr_assert_eq(c.last_fence, 0);
}

Test(db_busy, writes_answer_busy_and_change_nothing, .timeout = 30)
{
    db_claim claim;
    db_coupon c;

    hold("BEGIN IMMEDIATE");
    cr_assert_eq(db_claim_coupon(db, id, "u", 5, &claim), DB_BUSY, "%s", db_errmsg(db));
    cr_assert_not_null(strstr(db_errmsg(db), "locked"), "errmsg: %s", db_errmsg(db));
    cr_assert_eq(db_claim_atomic(db, id, "u", &claim), DB_BUSY, "%s", db_errmsg(db));
    /* The unsafe claim's read succeeds (WAL); its write transaction waits. */
    cr_assert_eq(dbt_claim_unfenced(db, id, "u", 0, &claim), DB_BUSY, "%s", db_errmsg(db));
    cr_assert_eq(db_create_coupon(db, "new", 1, 1, &c), DB_BUSY, "%s", db_errmsg(db));
    hold("COMMIT");
    expect_unchanged();
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon"), 1);

    /* The same holder retries once the database is free: same fence, accepted. */
    cr_assert_eq(db_claim_coupon(db, id, "u", 5, &claim), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(claim.stock, 4);
}

Test(db_busy, reads_go_on_under_a_writer_and_see_only_commits, .timeout = 30)
{
    db_coupon c;
    db_coupon *list = NULL;
    db_audit_row a;
    size_t n = 0;
    int64_t stock = -1;

    hold("BEGIN IMMEDIATE; UPDATE coupon SET stock = 0; "
         "INSERT INTO coupon_record(coupon_id, user_id) VALUES (1, 'uncommitted');");
    cr_assert_eq(db_ping(db), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(db_peek_stock(db, id, &stock), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(stock, 5);
    cr_assert_eq(db_get_coupon(db, id, &c), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(c.issued, 0);
    cr_assert_eq(db_list_coupons(db, &list, &n), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(n, 1);
    cr_assert_eq(list[0].stock, 5);
    free(list);
    cr_assert_eq(db_audit(db, id, &a), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(a.oversold_by, 0);
    hold("ROLLBACK");
    expect_unchanged();
}

Test(db_busy, a_failed_write_leaves_the_handle_usable, .timeout = 30)
{
    db_claim claim;

    for (int i = 0; i < 3; i++) {
        hold("BEGIN IMMEDIATE");
        cr_assert_eq(db_claim_coupon(db, id, "u", 1, &claim), DB_BUSY);
        hold("COMMIT");
    }
    /* No transaction was left open by the failures: BEGIN works again. */
    cr_assert_eq(db_claim_coupon(db, id, "u", 1, &claim), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(db_claim_coupon(db, id, "u", 2, &claim), DB_USER_LIMIT);
    cr_assert_eq(db_claim_coupon(db, id, "v", 2, &claim), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(claim.stock, 3);
}
