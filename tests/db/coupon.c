/* coupon.c - creating and reading coupons: exact values from create,
 * get, list and peek, and DB_INVALID with no partial write on bad input. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbtest.h"

TestSuite(db_coupon, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 30);

Test(db_coupon, create_returns_exact_values, .timeout = 30)
{
    db_coupon c;

    cr_assert_eq(db_create_coupon(dbt_db, "Spring sale", 100, 2, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.id, 1);
    cr_assert_str_eq(c.name, "Spring sale");
    cr_assert_eq(c.total, 100);
    cr_assert_eq(c.stock, 100);
    cr_assert_eq(c.issued, 0);
    cr_assert_eq(c.per_user_limit, 2);
    cr_assert_eq(c.last_fence, 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT total FROM coupon WHERE id = 1"), 100);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT stock FROM coupon WHERE id = 1"), 100);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT per_user_limit FROM coupon WHERE id = 1"), 2);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon WHERE id = 1"), 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon WHERE created_at LIKE '20%Z'"), 1);
}

Test(db_coupon, get_counts_issued_from_records, .timeout = 30)
{
    db_coupon c;
    db_claim claim;
    int64_t id = dbt_create(dbt_db, "counted", 10, 0);

    for (int i = 0; i < 3; i++)
        cr_assert_eq(db_claim_coupon(dbt_db, id, "alice", 7, &claim), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_get_coupon(dbt_db, id, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(c.id, id);
    cr_assert_str_eq(c.name, "counted");
    cr_assert_eq(c.total, 10);
    cr_assert_eq(c.stock, 7);
    cr_assert_eq(c.issued, 3);
    cr_assert_eq(c.per_user_limit, 0);
    cr_assert_eq(c.last_fence, 7);
}

Test(db_coupon, get_missing_is_not_found, .timeout = 30)
{
    db_coupon c;

    dbt_create(dbt_db, "only", 1, 1);
    memset(&c, 0x5a, sizeof c);
    cr_assert_eq(db_get_coupon(dbt_db, 2, &c), DB_NOT_FOUND);
    cr_assert_eq(c.id, 0, "out parameter is cleared on failure");
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "2"), "errmsg: %s", db_errmsg(dbt_db));
    cr_assert_eq(db_get_coupon(dbt_db, 0, &c), DB_NOT_FOUND);
    cr_assert_eq(db_get_coupon(dbt_db, -5, &c), DB_NOT_FOUND);
    cr_assert_eq(db_get_coupon(NULL, 1, &c), DB_INVALID);
    cr_assert_eq(db_get_coupon(dbt_db, 1, NULL), DB_INVALID);
}

Test(db_coupon, list_returns_all_in_id_order, .timeout = 30)
{
    db_coupon *list = NULL;
    db_claim claim;
    size_t n = 99;
    char name[32];

    /* 20 rows: more than the first allocation, so the array must grow. */
    for (int i = 1; i <= 20; i++) {
        snprintf(name, sizeof name, "c%02d", i);
        cr_assert_eq(dbt_create(dbt_db, name, i, i % 3), i);
    }
    cr_assert_eq(db_claim_atomic(dbt_db, 4, "bob", &claim), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_list_coupons(dbt_db, &list, &n), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(n, 20);
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "c%02zu", i + 1);
        cr_assert_eq(list[i].id, (int64_t)i + 1);
        cr_assert_str_eq(list[i].name, name);
        cr_assert_eq(list[i].total, (int64_t)i + 1);
        cr_assert_eq(list[i].per_user_limit, (int64_t)(i + 1) % 3);
        cr_assert_eq(list[i].issued, i == 3 ? 1 : 0);
        cr_assert_eq(list[i].stock, i == 3 ? 3 : (int64_t)i + 1);
    }
    free(list);
}

Test(db_coupon, list_of_empty_table, .timeout = 30)
{
    db_coupon *list = (db_coupon *)&list;
    size_t n = 99;

    cr_assert_eq(db_list_coupons(dbt_db, &list, &n), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(n, 0);
    cr_assert_null(list);
    cr_assert_eq(db_list_coupons(dbt_db, NULL, &n), DB_INVALID);
    cr_assert_eq(db_list_coupons(dbt_db, &list, NULL), DB_INVALID);
}

Test(db_coupon, peek_stock, .timeout = 30)
{
    db_claim claim;
    int64_t stock = -1;
    int64_t id = dbt_create(dbt_db, "peek", 2, 1);

    cr_assert_eq(db_peek_stock(dbt_db, id, &stock), DB_OK);
    cr_assert_eq(stock, 2);
    cr_assert_eq(db_claim_coupon(dbt_db, id, "u", 1, &claim), DB_OK);
    cr_assert_eq(db_peek_stock(dbt_db, id, &stock), DB_OK);
    cr_assert_eq(stock, 1);
    stock = 77;
    cr_assert_eq(db_peek_stock(dbt_db, id + 1, &stock), DB_NOT_FOUND);
    cr_assert_eq(stock, 0);
    cr_assert_eq(db_peek_stock(dbt_db, id, NULL), DB_INVALID);
}

Test(db_coupon, boundary_values_are_accepted, .timeout = 30)
{
    db_coupon c;
    char name[DB_NAME_MAX + 1];

    memset(name, 'n', DB_NAME_MAX);
    name[DB_NAME_MAX] = '\0';
    cr_assert_eq(db_create_coupon(dbt_db, name, 0, 0, &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(strlen(c.name), DB_NAME_MAX);
    cr_assert_eq(db_get_coupon(dbt_db, c.id, &c), DB_OK);
    cr_assert_str_eq(c.name, name);
    cr_assert_eq(c.stock, 0);
    cr_assert_eq(c.per_user_limit, 0);
    /* Multi-byte UTF-8 counts in bytes. */
    cr_assert_eq(db_create_coupon(dbt_db, "caf\xc3\xa9", 1, 1, &c), DB_OK);
    cr_assert_str_eq(c.name, "caf\xc3\xa9");
    cr_assert_eq(db_create_coupon(dbt_db, "big", INT64_MAX, 1, &c), DB_OK);
    cr_assert_eq(db_get_coupon(dbt_db, c.id, &c), DB_OK);
    cr_assert_eq(c.total, INT64_MAX);
}

Test(db_coupon, bad_input_is_invalid_and_writes_nothing, .timeout = 30)
{
    db_coupon c;
    char long_name[DB_NAME_MAX + 2];

    memset(long_name, 'x', DB_NAME_MAX + 1);
    long_name[DB_NAME_MAX + 1] = '\0';
    cr_assert_eq(db_create_coupon(NULL, "a", 1, 1, &c), DB_INVALID);
    cr_assert_eq(db_create_coupon(dbt_db, NULL, 1, 1, &c), DB_INVALID);
    cr_assert_eq(db_create_coupon(dbt_db, "", 1, 1, &c), DB_INVALID);
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "name"), "errmsg: %s", db_errmsg(dbt_db));
    cr_assert_eq(db_create_coupon(dbt_db, long_name, 1, 1, &c), DB_INVALID);
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "longer than 128 bytes"), "errmsg: %s", db_errmsg(dbt_db));
    cr_assert_eq(db_create_coupon(dbt_db, "a", -1, 1, &c), DB_INVALID);
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "stock"), "errmsg: %s", db_errmsg(dbt_db));
    cr_assert_eq(db_create_coupon(dbt_db, "a", INT64_MIN, 1, &c), DB_INVALID);
    cr_assert_eq(db_create_coupon(dbt_db, "a", 1, -1, &c), DB_INVALID);
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "per_user_limit"), "errmsg: %s", db_errmsg(dbt_db));
    cr_assert_eq(db_create_coupon(dbt_db, "a", 1, 1, NULL), DB_INVALID);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon"), 0);
    /* The handle still works after the refusals. */
    cr_assert_eq(dbt_create(dbt_db, "after", 1, 1), 1);
}
