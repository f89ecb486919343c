/* bundle.c - the bundle claim of the store (coupon_bundle.h):
 *   - every listed coupon issued in one transaction or none;
 *   - sold-out, per-user limit, unknown id and bad lists refused with
 *     nothing written;
 *   - a stale fence on ANY row refuses the whole bundle;
 *   - the atomic-sql bundle rolls back whole.
 * Each test asserts the exact table state behind the API's back. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "coupon_bundle.h"
#include "dbtest.h"

TestSuite(db_bundle, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 60);

static int64_t stock_of(int64_t id)
{
    char sql[96];
    snprintf(sql, sizeof sql, "SELECT stock FROM coupon WHERE id = %lld", (long long)id);
    return dbt_scalar(dbt_path, sql);
}

static int64_t records_of(int64_t id)
{
    char sql[112];
    snprintf(sql, sizeof sql, "SELECT COUNT(*) FROM coupon_record WHERE coupon_id = %lld", (long long)id);
    return dbt_scalar(dbt_path, sql);
}

static void items_of(db_bundle_item *items, const int64_t *ids, size_t n, uint64_t fence)
{
    memset(items, 0, n * sizeof *items);
    for (size_t i = 0; i < n; i++) {
        items[i].coupon_id = ids[i];
        items[i].fence = fence;
    }
}

Test(db_bundle, issues_one_unit_of_every_coupon_in_one_go)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 1), b = dbt_create(dbt_db, "b", 3, 1), c = dbt_create(dbt_db, "c", 1, 1);
    int64_t ids[3] = {c, a, b}; /* not in id order: the items keep the caller's order */
    db_bundle_item it[3];

    items_of(it, ids, 3, 7);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "u1", it, 3, NULL, NULL), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(it[0].stock_left, 0);
    cr_assert_eq(it[1].stock_left, 4);
    cr_assert_eq(it[2].stock_left, 2);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(it[i].status, DB_OK);
        cr_assert_gt(it[i].record_id, 0);
        char sql[160];
        snprintf(sql, sizeof sql, "SELECT coupon_id FROM coupon_record WHERE id = %lld AND user_id = 'u1' AND fence = 7",
                 (long long)it[i].record_id);
        cr_assert_eq(dbt_scalar(dbt_path, sql), ids[i]);
    }
    cr_assert_eq(stock_of(a), 4);
    cr_assert_eq(stock_of(b), 2);
    cr_assert_eq(stock_of(c), 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 3);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon WHERE last_fence = 7"), 3);
}

Test(db_bundle, one_sold_out_coupon_refuses_the_bundle_and_names_it)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 0), b = dbt_create(dbt_db, "b", 0, 0), c = dbt_create(dbt_db, "c", 0, 0);
    int64_t ids[3] = {a, b, c};
    db_bundle_item it[3];

    items_of(it, ids, 3, 1);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "u1", it, 3, NULL, NULL), DB_SOLD_OUT);
    cr_assert_eq(it[0].status, DB_OK);
    cr_assert_eq(it[1].status, DB_SOLD_OUT);
    cr_assert_eq(it[2].status, DB_SOLD_OUT);
    cr_assert_eq(stock_of(a), 5);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);

    items_of(it, ids, 3, 0);
    cr_assert_eq(db_bundle_atomic(dbt_db, "u1", it, 3), DB_SOLD_OUT);
    cr_assert_eq(it[1].status, DB_SOLD_OUT);
    cr_assert_eq(it[2].status, DB_SOLD_OUT);
    /* The decrement of a was rolled back with the rest. */
    cr_assert_eq(stock_of(a), 5);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);
}

Test(db_bundle, a_user_at_one_limit_gets_nothing)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 1), b = dbt_create(dbt_db, "b", 5, 2);
    int64_t ids[2] = {a, b};
    db_bundle_item it[2];
    db_claim cl;

    cr_assert_eq(db_claim_coupon(dbt_db, a, "u1", 1, &cl), DB_OK, "%s", db_errmsg(dbt_db));
    items_of(it, ids, 2, 2);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "u1", it, 2, NULL, NULL), DB_USER_LIMIT);
    cr_assert_eq(it[0].status, DB_USER_LIMIT);
    cr_assert_eq(it[1].status, DB_OK);
    items_of(it, ids, 2, 0);
    cr_assert_eq(db_bundle_atomic(dbt_db, "u1", it, 2), DB_USER_LIMIT);
    cr_assert_eq(stock_of(a), 4);
    cr_assert_eq(stock_of(b), 5);
    cr_assert_eq(records_of(b), 0);
    /* Another user is not at the limit. */
    items_of(it, ids, 2, 0);
    cr_assert_eq(db_bundle_atomic(dbt_db, "u2", it, 2), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(stock_of(a), 3);
    cr_assert_eq(stock_of(b), 4);
}

Test(db_bundle, unknown_ids_and_bad_lists_write_nothing)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 0);
    int64_t ids[17];
    db_bundle_item it[17];

    ids[0] = a;
    ids[1] = a + 1000;
    items_of(it, ids, 2, 1);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "u1", it, 2, NULL, NULL), DB_NOT_FOUND);
    items_of(it, ids, 2, 0);
    cr_assert_eq(db_bundle_atomic(dbt_db, "u1", it, 2), DB_NOT_FOUND);
    ids[1] = a;
    items_of(it, ids, 2, 1);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "u1", it, 2, NULL, NULL), DB_INVALID);
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "twice"), "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_bundle_atomic(dbt_db, "u1", it, 2), DB_INVALID);
    for (int i = 0; i < 17; i++)
        ids[i] = a + i;
    items_of(it, ids, 17, 1);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "u1", it, 17, NULL, NULL), DB_INVALID);
    items_of(it, ids, 1, 1);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "", it, 1, NULL, NULL), DB_INVALID);
    cr_assert_eq(stock_of(a), 5);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);
}

/* The holder of a bundle {a, b} read both rows; its lease on b ran out and a
 * newer holder of b read b. The write is refused whole: a is not issued
 * either, though nobody newer touched a. */
Test(db_bundle, a_stale_fence_on_one_row_refuses_every_row)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 0), b = dbt_create(dbt_db, "b", 5, 0);
    int64_t ids[2] = {a, b};
    db_bundle_item it[2];
    db_claim_req other = {.user_id = "newer"};
    db_claim_view view;

    items_of(it, ids, 2, 10);
    cr_assert_eq(db_bundle_read(dbt_db, DB_FENCE_FULL, "old", it, 2), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_bundle_decide(it, 2), DB_OK);
    cr_assert_eq(db_claim_read(dbt_db, b, DB_FENCE_FULL, 11, &other, 1, &view), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_bundle_write(dbt_db, DB_FENCE_FULL, "old", it, 2), DB_STALE_FENCE);
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "fence 10"), "%s", db_errmsg(dbt_db));
    cr_assert_eq(it[0].record_id, 0);
    cr_assert_eq(it[0].status, DB_STALE_FENCE);
    cr_assert_eq(stock_of(a), 5);
    cr_assert_eq(stock_of(b), 5);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);
    /* a's row kept the fence its read registered, not a written one. */
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon WHERE last_fence = 10"), 1);

    /* Under --fence write the same: a newer write on b refuses the bundle. */
    items_of(it, ids, 2, 12);
    cr_assert_eq(db_bundle_read(dbt_db, DB_FENCE_WRITE, "old", it, 2), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_bundle_decide(it, 2), DB_OK);
    cr_assert_eq(db_claim_section(dbt_db, b, DB_FENCE_FULL, 13, &other, 1, NULL, NULL), DB_OK, "%s",
                 db_errmsg(dbt_db));
    cr_assert_eq(db_bundle_write(dbt_db, DB_FENCE_WRITE, "old", it, 2), DB_STALE_FENCE);
    cr_assert_eq(stock_of(a), 5);
    cr_assert_eq(stock_of(b), 4);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 1);
}

/* What the fence prevents: with --fence off the stale holder writes its
 * old read back over the newer holder's claim (the lost update). */
Test(db_bundle, without_the_fence_a_stale_bundle_oversells)
{
    int64_t a = dbt_create(dbt_db, "a", 1, 0), b = dbt_create(dbt_db, "b", 1, 0);
    int64_t ids[2] = {a, b};
    db_bundle_item it[2];
    db_claim cl;

    items_of(it, ids, 2, 0);
    cr_assert_eq(db_bundle_read(dbt_db, DB_FENCE_OFF, "old", it, 2), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_bundle_decide(it, 2), DB_OK);
    cr_assert_eq(dbt_claim_unfenced(dbt_db, b, "newer", 0, &cl), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_bundle_write(dbt_db, DB_FENCE_OFF, "old", it, 2), DB_OK, "%s", db_errmsg(dbt_db));
    /* b: one unit, two records. */
    cr_assert_eq(records_of(b), 2);
    cr_assert_eq(stock_of(b), 0);
    db_audit_row row;
    cr_assert_eq(db_audit(dbt_db, b, &row), DB_OK);
    cr_assert_eq(row.oversold_by, 1);
}

static int worked;
static void count_work(void *arg, size_t n)
{
    (void)arg;
    worked += (int)n;
}

Test(db_bundle, the_business_step_runs_once_per_issued_bundle)
{
    int64_t a = dbt_create(dbt_db, "a", 1, 0), b = dbt_create(dbt_db, "b", 1, 0);
    int64_t ids[2] = {a, b};
    db_bundle_item it[2];

    worked = 0;
    items_of(it, ids, 2, 1);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "u1", it, 2, count_work, NULL), DB_OK);
    cr_assert_eq(worked, 2);
    items_of(it, ids, 2, 2);
    cr_assert_eq(db_bundle_section(dbt_db, DB_FENCE_FULL, "u2", it, 2, count_work, NULL), DB_SOLD_OUT);
    cr_assert_eq(worked, 2, "a refused bundle runs no business step");
}
