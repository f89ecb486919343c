/* fence.c - the fencing check enforced by the database: a claim whose
 * fence is lower than the coupon's last_fence is refused and changes nothing;
 * the same fence again is accepted (`<=`); a higher one is accepted. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "dbtest.h"

TestSuite(db_fence, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 30);

static void expect_state(int64_t id, int64_t stock, int64_t records, int64_t last_fence)
{
    db_coupon c;

    cr_assert_eq(db_get_coupon(dbt_db, id, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.stock, stock);
    cr_assert_eq(c.issued, records);
    cr_assert_eq(c.last_fence, last_fence);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), records);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), last_fence);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT stock FROM coupon"), stock);
}

Test(db_fence, stale_fence_is_refused_and_changes_nothing, .timeout = 30)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "fenced", 10, 0);

    cr_assert_eq(db_claim_coupon(dbt_db, id, "holder5", 5, &c), DB_OK, "%s", db_errmsg(dbt_db));
    expect_state(id, 9, 1, 5);

    /* Holder 3's lock expired while it was paused; holder 5 has written. */
    memset(&c, 0x5a, sizeof c);
    cr_assert_eq(db_claim_coupon(dbt_db, id, "holder3", 3, &c), DB_STALE_FENCE, "%s", db_errmsg(dbt_db));
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "fence 3"), "errmsg: %s", db_errmsg(dbt_db));
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "5"), "errmsg: %s", db_errmsg(dbt_db));
    cr_assert_eq(c.record_id, 0);
    cr_assert_eq(c.stock, 0);
    expect_state(id, 9, 1, 5);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE user_id = 'holder3'"), 0);

    /* The same holder writing again under the same acquisition: `<=`. */
    cr_assert_eq(db_claim_coupon(dbt_db, id, "holder5", 5, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.stock, 8);
    expect_state(id, 8, 2, 5);

    /* The next acquisition. */
    cr_assert_eq(db_claim_coupon(dbt_db, id, "holder6", 6, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.stock, 7);
    expect_state(id, 7, 3, 6);

    /* Now 5 is stale too. */
    cr_assert_eq(db_claim_coupon(dbt_db, id, "holder5", 5, &c), DB_STALE_FENCE);
    expect_state(id, 7, 3, 6);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE fence = 5"), 2);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE fence = 6"), 1);
}

Test(db_fence, records_carry_their_fences_in_order, .timeout = 30)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "ordered", 10, 0);
    const uint64_t fences[] = {1, 2, 2, 7, 3, 8, 8, 1, 9};
    const db_status expect[] = {DB_OK, DB_OK, DB_OK, DB_OK, DB_STALE_FENCE, DB_OK, DB_OK, DB_STALE_FENCE, DB_OK};
    const int64_t kept[] = {1, 2, 2, 7, 8, 8, 9};

    for (size_t i = 0; i < sizeof fences / sizeof fences[0]; i++)
        cr_assert_eq(db_claim_coupon(dbt_db, id, "u", fences[i], &c), expect[i], "claim %zu (fence %llu): %s", i,
                     (unsigned long long)fences[i], db_errmsg(dbt_db));
    expect_state(id, 3, 7, 9);
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        char sql[96];
        snprintf(sql, sizeof sql, "SELECT fence FROM coupon_record ORDER BY id LIMIT 1 OFFSET %zu", i);
        cr_assert_eq(dbt_scalar(dbt_path, sql), kept[i], "record %zu", i);
    }
}

Test(db_fence, fences_are_per_coupon, .timeout = 30)
{
    db_claim c;
    int64_t a = dbt_create(dbt_db, "a", 5, 0);
    int64_t b = dbt_create(dbt_db, "b", 5, 0);

    /* Each coupon has its own lock key and so its own token sequence. */
    cr_assert_eq(db_claim_coupon(dbt_db, a, "u", 100, &c), DB_OK);
    cr_assert_eq(db_claim_coupon(dbt_db, b, "u", 1, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_claim_coupon(dbt_db, a, "u", 99, &c), DB_STALE_FENCE);
    cr_assert_eq(db_claim_coupon(dbt_db, b, "u", 2, &c), DB_OK);
}

Test(db_fence, stale_holder_is_refused_even_when_sold_out, .timeout = 30)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "last one", 1, 0);

    cr_assert_eq(db_claim_coupon(dbt_db, id, "u", 5, &c), DB_OK);
    /* The fenced read comes first: an older holder learns nothing, not even
     * that it is sold out (the server's fast path answers sold-out before
     * the lock anyway). A newer holder reads the truth and registers. */
    cr_assert_eq(db_claim_coupon(dbt_db, id, "v", 3, &c), DB_STALE_FENCE);
    cr_assert_eq(db_claim_coupon(dbt_db, id, "v", 6, &c), DB_SOLD_OUT);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 6);
}

Test(db_fence, stale_claim_does_not_count_against_the_user, .timeout = 30)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "one each", 5, 1);

    cr_assert_eq(db_claim_coupon(dbt_db, id, "other", 4, &c), DB_OK);
    cr_assert_eq(db_claim_coupon(dbt_db, id, "grace", 2, &c), DB_STALE_FENCE);
    cr_assert_eq(db_claim_coupon(dbt_db, id, "grace", 4, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_claim_coupon(dbt_db, id, "grace", 5, &c), DB_USER_LIMIT);
}
