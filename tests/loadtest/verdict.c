/* verdict.c - the audit's arithmetic: each oversold condition, the
 * successes-vs-issued cross-check, server/DB agreement, and N = the largest. */
#include <criterion/criterion.h>
#include <string.h>

#include "loadtest.h"

static lt_audit a;
static lt_coupon_view servers[2];

static lt_coupon_view view(const char *src, int64_t total, int64_t stock, int64_t issued)
{
    lt_coupon_view v;
    memset(&v, 0, sizeof v);
    v.ok = 1;
    snprintf(v.source, sizeof v.source, "%s", src);
    v.total = total;
    v.stock = stock;
    v.issued = issued;
    v.per_user_limit = 1;
    return v;
}

/* A clean run: 50 of 50 sold, 50 successes seen, two servers and the DB agree. */
static void setup_clean(void)
{
    memset(&a, 0, sizeof a);
    a.coupon_id = 1;
    a.before = view("http://s1", 50, 50, 0);
    a.have_db = 1;
    a.db_before = view("db x", 50, 50, 0);
    a.db_before.has_users = 1;
    servers[0] = view("http://s1", 50, 0, 50);
    servers[1] = view("http://s2", 50, 0, 50);
    a.after = servers;
    a.n_after = 2;
    a.db_after = view("db x", 50, 0, 50);
    a.db_after.has_users = 1;
    a.successes_seen = 50;
}

static const char *verdict(void)
{
    static char buf[64];
    return lt_verdict(&a, buf, sizeof buf);
}

Test(loadtest_verdict, clean_run, .init = setup_clean, .timeout = 10)
{
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 0);
    cr_assert_eq(a.n_findings, 0);
    cr_assert_eq(a.incomplete, 0);
    cr_assert_str_eq(verdict(), "NO OVERSELL");
}

Test(loadtest_verdict, one_extra_record_is_oversold_by_1, .init = setup_clean, .timeout = 10)
{
    /* Someone inserted a record behind the servers' back: every view sees 51. */
    servers[0].issued = servers[1].issued = a.db_after.issued = 51;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 1);
    cr_assert_str_eq(verdict(), "OVERSOLD by 1");
    cr_assert_gt(a.n_findings, 0);
}

Test(loadtest_verdict, negative_stock_counts_its_depth, .init = setup_clean, .timeout = 10)
{
    servers[0].stock = servers[1].stock = a.db_after.stock = -3;
    servers[0].issued = servers[1].issued = a.db_after.issued = 53;
    a.successes_seen = 53;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 3);
    cr_assert_str_eq(verdict(), "OVERSOLD by 3");
}

Test(loadtest_verdict, stock_and_records_disagree, .init = setup_clean, .timeout = 10)
{
    /* The "none" strategy's signature: stock 10 left, yet 50 records. */
    servers[0].stock = servers[1].stock = a.db_after.stock = 10;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 10);
}

Test(loadtest_verdict, per_user_excess_from_the_db, .init = setup_clean, .timeout = 10)
{
    a.db_after.users_over_limit = 2;
    a.db_after.excess_records = 4;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 4);
}

Test(loadtest_verdict, per_user_excess_ignored_when_unlimited, .init = setup_clean, .timeout = 10)
{
    a.db_after.per_user_limit = 0;
    servers[0].per_user_limit = servers[1].per_user_limit = 0;
    a.db_after.excess_records = 4;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 0);
}

Test(loadtest_verdict, a_lost_success_fails_the_cross_check, .init = setup_clean, .timeout = 10)
{
    /* Store says 50 were issued, the client was told 51 times "success". */
    a.successes_seen = 51;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 1);
    cr_assert_str_eq(verdict(), "OVERSOLD by 1");
}

Test(loadtest_verdict, an_invented_record_fails_the_cross_check, .init = setup_clean, .timeout = 10)
{
    a.successes_seen = 47;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 3);
}

Test(loadtest_verdict, server_disagreeing_with_db, .init = setup_clean, .timeout = 10)
{
    servers[1].issued = 48;
    servers[1].stock = 2;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 2);
}

Test(loadtest_verdict, servers_compared_without_db, .init = setup_clean, .timeout = 10)
{
    a.have_db = 0;
    servers[1].stock = 5;
    lt_audit_evaluate(&a);
    /* s2 alone: stock 5 + issued 50 != 50 (5); s2 vs s1 stock differs by 5. */
    cr_assert_eq(a.oversold_by, 5);
}

Test(loadtest_verdict, unreadable_source_is_incomplete_not_clean, .init = setup_clean, .timeout = 10)
{
    servers[1].ok = 0;
    snprintf(servers[1].err, sizeof servers[1].err, "cannot reach http://s2");
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 0);
    cr_assert_eq(a.incomplete, 1);
    cr_assert_str_eq(verdict(), "AUDIT INCOMPLETE");
}

Test(loadtest_verdict, oversell_beats_incomplete, .init = setup_clean, .timeout = 10)
{
    a.db_after.ok = 0;
    servers[0].issued = 52;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.incomplete, 1);
    cr_assert_eq(a.oversold_by, 2);
    cr_assert_str_eq(verdict(), "OVERSOLD by 2");
}

/* A sale standing still: nothing sold, stock left, every answer a 1005. */
static void setup_stuck(void)
{
    setup_clean();
    servers[0] = view("http://s1", 50, 50, 0);
    servers[1] = view("http://s2", 50, 50, 0);
    a.db_after = view("db x", 50, 50, 0);
    a.db_after.has_users = 1;
    a.successes_seen = 0;
    a.answered = 64;
    a.lock_refusals = 64;
}

Test(loadtest_verdict, every_claim_1005_with_stock_left_is_stuck, .init = setup_stuck, .timeout = 10)
{
    lt_audit_evaluate(&a);
    cr_assert_eq(a.oversold_by, 0);
    cr_assert_eq(a.stuck, 1);
    cr_assert_str_eq(verdict(), "STUCK");
}

Test(loadtest_verdict, one_claim_through_is_not_stuck, .init = setup_stuck, .timeout = 10)
{
    /* One success among the refusals: slow, but the sale moves. */
    servers[0].stock = servers[1].stock = a.db_after.stock = 49;
    servers[0].issued = servers[1].issued = a.db_after.issued = 1;
    a.successes_seen = 1;
    a.lock_refusals = 63;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.stuck, 0);
    cr_assert_str_eq(verdict(), "NO OVERSELL");
}

Test(loadtest_verdict, refusals_of_another_kind_are_not_stuck, .init = setup_stuck, .timeout = 10)
{
    /* 1006 (Redis down) is an outage the health check reports, not a stuck lock. */
    a.lock_refusals = 60;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.stuck, 0);
}

Test(loadtest_verdict, sold_out_is_not_stuck, .init = setup_stuck, .timeout = 10)
{
    servers[0].stock = servers[1].stock = a.db_after.stock = 0;
    servers[0].issued = servers[1].issued = a.db_after.issued = 50;
    a.before.issued = a.db_before.issued = 50;
    a.before.stock = a.db_before.stock = 0;
    lt_audit_evaluate(&a);
    cr_assert_eq(a.stuck, 0);
}

Test(loadtest_verdict, an_oversell_wins_over_stuck, .init = setup_stuck, .timeout = 10)
{
    servers[0].issued = servers[1].issued = a.db_after.issued = 51;
    lt_audit_evaluate(&a);
    cr_assert_gt(a.oversold_by, 0);
    cr_assert_eq(a.stuck, 0);
    cr_assert_str_eq(verdict(), "OVERSOLD by 51");
}
