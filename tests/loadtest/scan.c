/* scan.c - reading "code" from reply bodies without a JSON parser, and
 * the per-thread counters merged into one. */
#include <criterion/criterion.h>
#include <string.h>

#include "loadtest.h"

static long scan(const char *s)
{
    return lt_scan_code(s, strlen(s));
}

Test(loadtest_scan, codes_of_contract_replies, .timeout = 10)
{
    cr_assert_eq(scan("{\"code\": 0, \"msg\": \"ok\", \"data\": {\"stock\": 3}}"), 0);
    cr_assert_eq(scan("{\"code\":1003,\"msg\":\"sold out\",\"data\":null}"), 1003);
    cr_assert_eq(scan("{\n  \"code\" :\t1005,\n  \"msg\": \"busy\"}"), 1005);
    cr_assert_eq(scan("{\"code\":-7}"), -7);
}

Test(loadtest_scan, code_text_inside_a_string_is_not_the_key, .timeout = 10)
{
    cr_assert_eq(scan("{\"msg\":\"bad \\\"code\\\": 99\",\"code\":1001}"), 1001);
    /* "code" as a value, not followed by ':', is skipped too. */
    cr_assert_eq(scan("{\"msg\":\"code\",\"code\":1004}"), 1004);
}

Test(loadtest_scan, malformed_bodies_are_missing, .timeout = 10)
{
    cr_assert_eq(scan(""), LT_CODE_MISSING);
    cr_assert_eq(scan("<html>502 Bad Gateway</html>"), LT_CODE_MISSING);
    cr_assert_eq(scan("{\"code\":\"0\"}"), LT_CODE_MISSING);
    cr_assert_eq(scan("{\"code\":}"), LT_CODE_MISSING);
    cr_assert_eq(scan("{\"co"), LT_CODE_MISSING);
    cr_assert_eq(scan("{\"code\":12345678901}"), LT_CODE_MISSING);
    cr_assert_eq(lt_scan_code("{\"code\":1003}", 0), LT_CODE_MISSING);
}

static lt_stats a, b; /* large: static */

Test(loadtest_scan, stats_merge_counts_codes_and_successes, .timeout = 10)
{
    lt_stats_init(&a);
    lt_stats_init(&b);
    lt_stats_add_code(&a, 0, 5);
    lt_stats_add_code(&a, 1003, 7);
    lt_stats_add_code(&b, 1003, 2);
    lt_stats_add_code(&b, 0, 1);
    lt_stats_add_code(&b, LT_CODE_MISSING, 4);
    b.by_status[409] = 2;
    b.errors = 3;
    b.errors_by_curl[7] = 3;
    lt_stats_merge(&a, &b);
    cr_assert_eq(a.successes, 6);
    cr_assert_eq(a.n_codes, 3);
    cr_assert_eq(a.codes[0].code, 0);
    cr_assert_eq(a.codes[0].count, 6);
    cr_assert_eq(a.codes[1].code, 1003);
    cr_assert_eq(a.codes[1].count, 9);
    cr_assert_eq(a.codes[2].code, LT_CODE_MISSING);
    cr_assert_eq(a.codes[2].count, 4);
    cr_assert_eq(a.by_status[409], 2);
    cr_assert_eq(a.errors, 3);
    cr_assert_eq(a.errors_by_curl[7], 3);
}

Test(loadtest_scan, codes_beyond_the_table_go_to_other, .timeout = 10)
{
    lt_stats_init(&a);
    for (long c = 0; c < LT_CODE_SLOTS + 3; c++)
        lt_stats_add_code(&a, 2000 + c, 1);
    cr_assert_eq(a.n_codes, LT_CODE_SLOTS);
    cr_assert_eq(a.code_other, 3);
}
