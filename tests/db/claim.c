/* claim.c - single-connection behaviour of the three claims
 * (db_claim_coupon: the fenced critical section; db_claim_atomic; the
 * section unfenced, as `none` runs it): decrement and record,
 * sold out, per-user limit, unlimited, not found, bad input; every refusal
 * leaves the tables exactly as they were. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "dbtest.h"

TestSuite(db_claim, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 30);

/* One claim API behind one signature, so each behaviour is checked for all three. */
typedef enum { FENCED, ATOMIC, UNSAFE } claim_kind;

static db_status claim(claim_kind k, int64_t id, const char *user, uint64_t fence, db_claim *out)
{
    switch (k) {
    case FENCED:
        return db_claim_coupon(dbt_db, id, user, fence, out);
    case ATOMIC:
        return db_claim_atomic(dbt_db, id, user, out);
    case UNSAFE:
        return dbt_claim_unfenced(dbt_db, id, user, 0, out);
    }
    return DB_ERROR;
}

static int64_t records(void)
{
    return dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record");
}

static int64_t stock_of(int64_t id)
{
    int64_t s = -999;
    cr_assert_eq(db_peek_stock(dbt_db, id, &s), DB_OK, "%s", db_errmsg(dbt_db));
    return s;
}

static void check_decrement_and_record(claim_kind k, int64_t expect_fence)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "one", 3, 1);
    char sql[160];

    cr_assert_eq(claim(k, id, "alice", 11, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.record_id, 1);
    cr_assert_eq(c.stock, 2);
    cr_assert_eq(stock_of(id), 2);
    cr_assert_eq(records(), 1);
    snprintf(sql, sizeof sql,
             "SELECT COUNT(*) FROM coupon_record WHERE id = 1 AND coupon_id = %lld AND user_id = 'alice' "
             "AND fence = %lld",
             (long long)id, (long long)expect_fence);
    cr_assert_eq(dbt_scalar(dbt_path, sql), 1);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), expect_fence);

    cr_assert_eq(claim(k, id, "bob", 12, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.record_id, 2);
    cr_assert_eq(c.stock, 1);
}

Test(db_claim, fenced_decrements_and_records_the_fence, .timeout = 30) { check_decrement_and_record(FENCED, 11); }
Test(db_claim, atomic_decrements_and_records_fence_zero, .timeout = 30) { check_decrement_and_record(ATOMIC, 0); }
Test(db_claim, unsafe_alone_decrements_and_records, .timeout = 30) { check_decrement_and_record(UNSAFE, 0); }

static void check_sold_out(claim_kind k)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "scarce", 2, 1);

    cr_assert_eq(claim(k, id, "u1", 1, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(claim(k, id, "u2", 2, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.stock, 0);
    memset(&c, 0x5a, sizeof c);
    cr_assert_eq(claim(k, id, "u3", 3, &c), DB_SOLD_OUT, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.record_id, 0);
    cr_assert_eq(c.stock, 0);
    cr_assert_eq(stock_of(id), 0);
    cr_assert_eq(records(), 2);
    /* The fenced read registers the holder even when it then finds nothing
     * to sell: no older holder may act on the coupon after it. */
    if (k == FENCED)
        cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 3);
    /* A coupon created with stock 0 is sold out from the start. */
    id = dbt_create(dbt_db, "empty", 0, 1);
    cr_assert_eq(claim(k, id, "u1", 4, &c), DB_SOLD_OUT);
    cr_assert_eq(records(), 2);
}

Test(db_claim, fenced_sold_out, .timeout = 30) { check_sold_out(FENCED); }
Test(db_claim, atomic_sold_out, .timeout = 30) { check_sold_out(ATOMIC); }
Test(db_claim, unsafe_sold_out, .timeout = 30) { check_sold_out(UNSAFE); }

static void check_user_limit(claim_kind k)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "two each", 10, 2);

    cr_assert_eq(claim(k, id, "carol", 1, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(claim(k, id, "carol", 2, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(claim(k, id, "carol", 3, &c), DB_USER_LIMIT, "%s", db_errmsg(dbt_db));
    cr_assert_eq(stock_of(id), 8);
    cr_assert_eq(records(), 2);
    if (k == FENCED)
        cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 3,
                     "the refused claim's read registered its fence");
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT MAX(fence) FROM coupon_record"), k == FENCED ? 2 : 0,
                 "but wrote no record");
    /* The limit is per user: another user still gets one. */
    cr_assert_eq(claim(k, id, "dave", 4, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.stock, 7);
    cr_assert_eq(records(), 3);
    /* And per coupon: carol may claim another coupon. */
    id = dbt_create(dbt_db, "other", 1, 2);
    cr_assert_eq(claim(k, id, "carol", 5, &c), DB_OK, "%s", db_errmsg(dbt_db));
}

Test(db_claim, fenced_user_limit, .timeout = 30) { check_user_limit(FENCED); }
Test(db_claim, atomic_user_limit, .timeout = 30) { check_user_limit(ATOMIC); }
Test(db_claim, unsafe_user_limit, .timeout = 30) { check_user_limit(UNSAFE); }

static void check_unlimited(claim_kind k)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "unlimited", 5, 0);

    for (int i = 0; i < 5; i++)
        cr_assert_eq(claim(k, id, "erin", (uint64_t)i + 1, &c), DB_OK, "claim %d: %s", i, db_errmsg(dbt_db));
    cr_assert_eq(claim(k, id, "erin", 6, &c), DB_SOLD_OUT);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE user_id = 'erin'"), 5);
    cr_assert_eq(stock_of(id), 0);
}

Test(db_claim, fenced_limit_zero_is_unlimited, .timeout = 30) { check_unlimited(FENCED); }
Test(db_claim, atomic_limit_zero_is_unlimited, .timeout = 30) { check_unlimited(ATOMIC); }
Test(db_claim, unsafe_limit_zero_is_unlimited, .timeout = 30) { check_unlimited(UNSAFE); }

static void check_not_found(claim_kind k)
{
    db_claim c;

    dbt_create(dbt_db, "exists", 5, 1);
    cr_assert_eq(claim(k, 2, "frank", 1, &c), DB_NOT_FOUND);
    cr_assert_eq(claim(k, 0, "frank", 1, &c), DB_NOT_FOUND);
    cr_assert_eq(claim(k, -1, "frank", 1, &c), DB_NOT_FOUND);
    cr_assert_eq(records(), 0);
    cr_assert_eq(stock_of(1), 5);
}

Test(db_claim, fenced_not_found, .timeout = 30) { check_not_found(FENCED); }
Test(db_claim, atomic_not_found, .timeout = 30) { check_not_found(ATOMIC); }
Test(db_claim, unsafe_not_found, .timeout = 30) { check_not_found(UNSAFE); }

static void check_bad_input(claim_kind k)
{
    db_claim c;
    char long_user[DB_USER_MAX + 2];
    char max_user[DB_USER_MAX + 1];
    int64_t id = dbt_create(dbt_db, "guarded", 5, 0);

    memset(long_user, 'u', DB_USER_MAX + 1);
    long_user[DB_USER_MAX + 1] = '\0';
    memset(max_user, 'm', DB_USER_MAX);
    max_user[DB_USER_MAX] = '\0';
    cr_assert_eq(claim(k, id, NULL, 1, &c), DB_INVALID);
    cr_assert_eq(claim(k, id, "", 1, &c), DB_INVALID);
    cr_assert_eq(claim(k, id, long_user, 1, &c), DB_INVALID);
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "64"), "errmsg: %s", db_errmsg(dbt_db));
    cr_assert_eq(claim(k, id, "ok", 1, NULL), DB_INVALID);
    cr_assert_eq(stock_of(id), 5);
    cr_assert_eq(records(), 0);
    /* DB_USER_MAX bytes exactly is allowed. */
    cr_assert_eq(claim(k, id, max_user, 1, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(records(), 1);
}

Test(db_claim, fenced_bad_input, .timeout = 30) { check_bad_input(FENCED); }
Test(db_claim, atomic_bad_input, .timeout = 30) { check_bad_input(ATOMIC); }
Test(db_claim, unsafe_bad_input, .timeout = 30) { check_bad_input(UNSAFE); }

Test(db_claim, null_handle_is_invalid, .timeout = 30)
{
    db_claim c;

    cr_assert_eq(db_claim_coupon(NULL, 1, "u", 1, &c), DB_INVALID);
    cr_assert_eq(db_claim_atomic(NULL, 1, "u", &c), DB_INVALID);
    cr_assert_eq(db_claim_section(NULL, 1, DB_FENCE_OFF, 0, NULL, 0, NULL, NULL), DB_INVALID);
}

Test(db_claim, fence_beyond_int64_is_invalid, .timeout = 30)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "wide", 5, 0);

    /* It would wrap to a negative number and pass `last_fence <= ?` as the
     * oldest fence of all. */
    cr_assert_eq(db_claim_coupon(dbt_db, id, "u", (uint64_t)INT64_MAX + 1, &c), DB_INVALID);
    cr_assert_eq(db_claim_coupon(dbt_db, id, "u", UINT64_MAX, &c), DB_INVALID);
    cr_assert_eq(records(), 0);
    cr_assert_eq(db_claim_coupon(dbt_db, id, "u", (uint64_t)INT64_MAX, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), INT64_MAX);
}

Test(db_claim, user_ids_are_compared_exactly, .timeout = 30)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "case", 5, 1);

    cr_assert_eq(db_claim_atomic(dbt_db, id, "Alice", &c), DB_OK);
    cr_assert_eq(db_claim_atomic(dbt_db, id, "alice", &c), DB_OK);
    cr_assert_eq(db_claim_atomic(dbt_db, id, "alice ", &c), DB_OK);
    /* Quotes are data, never SQL: bound parameters. */
    cr_assert_eq(db_claim_atomic(dbt_db, id, "x'); DROP TABLE coupon; --", &c), DB_OK);
    cr_assert_eq(db_claim_atomic(dbt_db, id, "alice", &c), DB_USER_LIMIT);
    cr_assert_eq(records(), 4);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE user_id LIKE 'x'');%'"), 1);
}
