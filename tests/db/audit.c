/* audit.c - db_audit reads the tables and reports every kind of
 * oversell in the contract: more records than total, negative stock, stock
 * and records that disagree, users beyond the per-user limit. Tampering is
 * done with raw SQL behind the store's back. */
#include <criterion/criterion.h>
#include <string.h>

#include "dbtest.h"

TestSuite(db_audit, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 30);

static db_audit_row audit(int64_t id)
{
    db_audit_row a = dbt_audit(dbt_db, id);

    cr_assert_eq(a.coupon_id, id);
    return a;
}

/* Three claims by three users of a 10-unit, one-per-user coupon. */
static int64_t claimed_coupon(void)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "audited", 10, 1);

    cr_assert_eq(db_claim_coupon(dbt_db, id, "u1", 1, &c), DB_OK);
    cr_assert_eq(db_claim_atomic(dbt_db, id, "u2", &c), DB_OK);
    cr_assert_eq(db_claim_coupon(dbt_db, id, "u3", 2, &c), DB_OK);
    return id;
}

Test(db_audit, clean_coupon_is_not_oversold, .timeout = 30)
{
    int64_t id = claimed_coupon();
    db_audit_row a = audit(id);

    cr_assert_eq(a.total, 10);
    cr_assert_eq(a.stock, 7);
    cr_assert_eq(a.issued, 3);
    cr_assert_eq(a.users_over_limit, 0);
    cr_assert_eq(a.excess_records, 0);
    cr_assert_eq(a.oversold_by, 0);
}

Test(db_audit, fresh_and_sold_out_coupons_are_clean, .timeout = 30)
{
    db_claim c;
    int64_t fresh = dbt_create(dbt_db, "fresh", 4, 1);
    int64_t gone = dbt_create(dbt_db, "gone", 1, 1);
    db_audit_row a;

    cr_assert_eq(db_claim_coupon(dbt_db, gone, "u", 1, &c), DB_OK);
    a = audit(fresh);
    cr_assert_eq(a.total, 4);
    cr_assert_eq(a.stock, 4);
    cr_assert_eq(a.issued, 0);
    cr_assert_eq(a.oversold_by, 0);
    a = audit(gone);
    cr_assert_eq(a.stock, 0);
    cr_assert_eq(a.issued, 1);
    cr_assert_eq(a.oversold_by, 0);
}

Test(db_audit, extra_record_is_detected, .timeout = 30)
{
    int64_t id = claimed_coupon();
    db_audit_row a;

    dbt_exec(dbt_path, "INSERT INTO coupon_record(coupon_id, user_id, fence) VALUES (1, 'intruder', 0)");
    a = audit(id);
    cr_assert_eq(a.issued, 4);
    cr_assert_eq(a.stock, 7);
    cr_assert_eq(a.users_over_limit, 0);
    cr_assert_eq(a.oversold_by, 1);
}

Test(db_audit, more_records_than_total_is_detected, .timeout = 30)
{
    int64_t id = dbt_create(dbt_db, "tiny", 2, 0);
    db_audit_row a;

    /* Five records for two units, stock written as the unsafe claim would. */
    dbt_exec(dbt_path, "INSERT INTO coupon_record(coupon_id, user_id) VALUES (1,'a'),(1,'b'),(1,'c'),(1,'d'),(1,'e');"
                       "UPDATE coupon SET stock = 0 WHERE id = 1;");
    a = audit(id);
    cr_assert_eq(a.issued, 5);
    cr_assert_eq(a.stock, 0);
    cr_assert_eq(a.oversold_by, 3);
}

Test(db_audit, negative_stock_is_detected, .timeout = 30)
{
    int64_t id = dbt_create(dbt_db, "negative", 2, 0);
    db_audit_row a;

    /* Consistent counts (stock + issued == total) but below zero: -stock. */
    dbt_exec(dbt_path, "INSERT INTO coupon_record(coupon_id, user_id) VALUES (1,'a'),(1,'b'),(1,'c'),(1,'d');"
                       "UPDATE coupon SET stock = -2 WHERE id = 1;");
    a = audit(id);
    cr_assert_eq(a.stock, -2);
    cr_assert_eq(a.issued, 4);
    cr_assert_eq(a.oversold_by, 2);
}

Test(db_audit, lost_stock_update_is_detected, .timeout = 30)
{
    int64_t id = claimed_coupon();
    db_audit_row a;

    /* The lost update: stock says 9 units left though 3 are issued. */
    dbt_exec(dbt_path, "UPDATE coupon SET stock = 9 WHERE id = 1");
    a = audit(id);
    cr_assert_eq(a.issued, 3);
    cr_assert_eq(a.oversold_by, 2);
}

Test(db_audit, user_over_limit_is_detected, .timeout = 30)
{
    int64_t id = claimed_coupon();
    db_audit_row a;

    /* u1 gets two more records, u2 one more, stock kept consistent: only the
     * per-user limit is broken. */
    dbt_exec(dbt_path, "INSERT INTO coupon_record(coupon_id, user_id) VALUES (1,'u1'),(1,'u1'),(1,'u2');"
                       "UPDATE coupon SET stock = 4 WHERE id = 1;");
    a = audit(id);
    cr_assert_eq(a.issued, 6);
    cr_assert_eq(a.stock, 4);
    cr_assert_eq(a.users_over_limit, 2);
    cr_assert_eq(a.excess_records, 3);
    cr_assert_eq(a.oversold_by, 3);
}

Test(db_audit, unlimited_coupon_has_no_user_excess, .timeout = 30)
{
    db_claim c;
    int64_t id = dbt_create(dbt_db, "unlimited", 5, 0);
    db_audit_row a;

    for (int i = 0; i < 4; i++)
        cr_assert_eq(db_claim_atomic(dbt_db, id, "same", &c), DB_OK);
    a = audit(id);
    cr_assert_eq(a.users_over_limit, 0);
    cr_assert_eq(a.excess_records, 0);
    cr_assert_eq(a.oversold_by, 0);
}

Test(db_audit, extreme_values_do_not_overflow, .timeout = 30)
{
    int64_t id = dbt_create(dbt_db, "extreme", 0, 0);
    db_audit_row a;

    dbt_exec(dbt_path, "UPDATE coupon SET stock = -9223372036854775808 WHERE id = 1");
    a = audit(id);
    cr_assert_eq(a.oversold_by, INT64_MAX);
    dbt_exec(dbt_path, "UPDATE coupon SET stock = 9223372036854775807, total = 0 WHERE id = 1");
    a = audit(id);
    cr_assert_eq(a.oversold_by, INT64_MAX);
}

Test(db_audit, missing_coupon_and_bad_arguments, .timeout = 30)
{
    db_audit_row a;

    memset(&a, 0x5a, sizeof a);
    cr_assert_eq(db_audit(dbt_db, 42, &a), DB_NOT_FOUND);
    cr_assert_eq(a.coupon_id, 0);
    cr_assert_eq(a.oversold_by, 0);
    cr_assert_eq(db_audit(NULL, 1, &a), DB_INVALID);
    cr_assert_eq(db_audit(dbt_db, 1, NULL), DB_INVALID);
    /* The failed audit left no read transaction open: a write still works. */
    cr_assert_eq(dbt_create(dbt_db, "after", 1, 1), 1);
}
