/* quorum.c - Redlock over 3 and 5 nodes: a minority down or paused is
 * tolerated, a majority gives NO_QUORUM with nothing left behind, and the
 * nodes are asked in parallel (a paused node costs one timeout, not one
 * per node). */
#include <criterion/criterion.h>

#include "lock_common.h"

#define NODES 5
static redis_proc nodes[NODES];

TC_NODES_FIXTURE(nodes, NODES)
TestSuite(lock_quorum, .init = tc_suite_init, .fini = tc_suite_fini);

/* Timeouts large enough that "one timeout" (parallel) and "two timeouts"
 * (sequential) stay apart even with a generous margin for a loaded machine. */
#define CMD_TIMEOUT 600
#define MARGIN_MS 400

Test(lock_quorum, shape, .timeout = 10)
{
    dlock_client *c3 = tc_client(nodes, 3, 0), *c5 = tc_client(nodes, 5, 0);
    size_t up = 0;
    cr_assert_eq(dlock_client_nodes(c3), 3);
    cr_assert_eq(dlock_client_quorum(c3), 2);
    cr_assert_eq(dlock_client_nodes(c5), 5);
    cr_assert_eq(dlock_client_quorum(c5), 3);
    cr_assert_eq(dlock_ping(c5, &up), DLOCK_OK);
    cr_assert_eq(up, 5);
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(c5, "shape", 5000, &l), DLOCK_OK);
    cr_assert_eq(tc_wait_holding(nodes, 5, "shape", 5, TC_SETTLE_MS), 5);
    cr_assert_eq(dlock_release(c5, l), DLOCK_OK);
    cr_assert_eq(tc_wait_holding(nodes, 5, "shape", 0, TC_SETTLE_MS), 0);
    dlock_lock_free(l);
    dlock_client_free(c3);
    dlock_client_free(c5);
}

Test(lock_quorum, three_nodes_one_down_two_down, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, 3, CMD_TIMEOUT);
    dlock_lock *l = NULL;
    size_t up = 0;
    cr_assert_not_null(c);
    cr_assert_eq(redis_kill(&nodes[2]), 0);
    cr_assert_eq(dlock_ping(c, &up), DLOCK_OK);
    cr_assert_eq(up, 2);
    cr_assert_eq(dlock_try_acquire(c, "q", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(tc_wait_holding(nodes, 2, "q", 2, TC_SETTLE_MS), 2);
    cr_assert_eq(dlock_extend(c, l, 8000), DLOCK_OK);
    cr_assert_gt(tc_pttl(&nodes[0], "q"), 5000);
    cr_assert_gt(tc_pttl(&nodes[1], "q"), 5000);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    cr_assert_eq(tc_wait_holding(nodes, 2, "q", 0, TC_SETTLE_MS), 0);
    dlock_lock_free(l);
    l = (dlock_lock *)0x1;

    cr_assert_eq(redis_kill(&nodes[1]), 0);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_acquire(c, "q", 5000, t0 + 500, &l), DLOCK_ERR_NO_QUORUM);
    cr_assert_leq(dlock_now_ms() - t0, 500 + MARGIN_MS);
    cr_assert_null(l);
    cr_assert_neq(TC_ERR(c)[0], '\0');
    /* The one live node granted it, then the failed attempt gave it back. */
    cr_assert_eq(tc_wait_exists(&nodes[0], "q", 0, TC_SETTLE_MS), 0, "partial lock left on the live node");
    cr_assert_eq(dlock_ping(c, &up), DLOCK_ERR_NO_QUORUM);
    cr_assert_eq(up, 1);
    dlock_stats s;
    dlock_client_stats(c, &s);
    cr_assert_geq(s.errors, 1);

    /* Back to a majority: the same client works again. */
    cr_assert_eq(redis_restart(&nodes[1]), 0);
    cr_assert_eq(dlock_acquire(c, "q", 5000, dlock_now_ms() + 2000, &l), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_quorum, no_quorum_with_retry_until_deadline, .timeout = 15)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    tc_options(&o, &a, nodes, 3);
    o.command_timeout_ms = CMD_TIMEOUT;
    o.retry_unavailable = 1;
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    cr_assert_eq(redis_kill(&nodes[0]), 0);
    cr_assert_eq(redis_kill(&nodes[2]), 0);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_acquire(c, "qr", 2000, t0 + 400, &l), DLOCK_ERR_NO_QUORUM);
    int64_t el = dlock_now_ms() - t0;
    cr_assert_geq(el, 350);
    cr_assert_leq(el, 400 + CMD_TIMEOUT + MARGIN_MS, "took %lld ms", (long long)el);
    cr_assert_eq(tc_wait_exists(&nodes[1], "qr", 0, TC_SETTLE_MS), 0);
    dlock_client_free(c);
}

Test(lock_quorum, contention_is_taken_not_no_quorum, .timeout = 10)
{
    dlock_client *a = tc_client(nodes, 3, 0), *b = tc_client(nodes, 3, 0);
    dlock_lock *la = NULL, *lb = NULL;
    cr_assert_eq(dlock_try_acquire(a, "ct", 5000, &la), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(b, "ct", 5000, &lb), DLOCK_ERR_TAKEN);
    /* The loser's attempt did not disturb the holder's keys. */
    char val[64];
    cr_assert_eq(tc_wait_holding(nodes, 3, "ct", 3, TC_SETTLE_MS), 3);
    for (size_t i = 0; i < 3; i++) {
        tc_get(&nodes[i], "lock:ct", val, sizeof val);
        cr_assert_str_eq(val, dlock_lock_token(la));
    }
    cr_assert_eq(dlock_release(a, la), DLOCK_OK);
    dlock_lock_free(la);
    dlock_client_free(a);
    dlock_client_free(b);
}

Test(lock_quorum, split_vote_is_rolled_back, .timeout = 10)
{
    /* Another owner holds the key on one of three nodes: we win 2 of 3 and
     * hold a quorum. On two of three we lose and must give our key back. */
    char out[64];
    dlock_client *c = tc_client(nodes, 3, 0);
    dlock_lock *l = NULL;
    const char *set1[] = {"SET", "lock:sv", "other", "PX", "10000"};
    tc_cmd(&nodes[0], out, sizeof out, 5, set1);
    cr_assert_eq(dlock_try_acquire(c, "sv", 5000, &l), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    tc_get(&nodes[0], "lock:sv", out, sizeof out);
    cr_assert_str_eq(out, "other");
    dlock_lock_free(l);
    l = (dlock_lock *)0x1;
    tc_cmd(&nodes[1], out, sizeof out, 5, set1);
    cr_assert_eq(dlock_try_acquire(c, "sv", 5000, &l), DLOCK_ERR_TAKEN);
    cr_assert_null(l);
    cr_assert_eq(tc_wait_exists(&nodes[2], "sv", 0, TC_SETTLE_MS), 0, "minority key not rolled back");
    tc_get(&nodes[0], "lock:sv", out, sizeof out);
    cr_assert_str_eq(out, "other");
    dlock_client_free(c);
}

Test(lock_quorum, paused_minority_costs_one_timeout, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, 5, CMD_TIMEOUT);
    dlock_lock *l = NULL;
    cr_assert_not_null(c);
    cr_assert_eq(redis_pause(&nodes[0]), 0);
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "pm", 10000, &l), DLOCK_OK, "%s", TC_ERR(c));
    int64_t el = dlock_now_ms() - t0;
    /* Sequential requests would wait 2 x CMD_TIMEOUT for the two paused nodes. */
    cr_assert_leq(el, CMD_TIMEOUT + MARGIN_MS, "acquire took %lld ms", (long long)el);
    cr_assert_eq(tc_wait_holding(nodes + 2, 3, "pm", 3, TC_SETTLE_MS), 3);
    t0 = dlock_now_ms();
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    cr_assert_leq(dlock_now_ms() - t0, CMD_TIMEOUT + MARGIN_MS);
    cr_assert_eq(tc_wait_holding(nodes + 2, 3, "pm", 0, TC_SETTLE_MS), 0);
    dlock_lock_free(l);
    l = NULL;

    /* Resumed nodes take part again: with two others dead, the quorum of
     * three needs both resumed nodes. */
    cr_assert_eq(redis_resume(&nodes[0]), 0);
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(redis_kill(&nodes[3]), 0);
    cr_assert_eq(redis_kill(&nodes[4]), 0);
    dlock_err e = dlock_acquire(c, "pm-after", 5000, dlock_now_ms() + 2000, &l);
    cr_assert_eq(e, DLOCK_OK, "%s: %s", dlock_strerror(e), TC_ERR(c));
    cr_assert_eq(tc_wait_exists(&nodes[0], "pm-after", 1, TC_SETTLE_MS), 1);
    cr_assert_eq(tc_wait_exists(&nodes[1], "pm-after", 1, TC_SETTLE_MS), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_quorum, paused_one_of_three, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, 3, CMD_TIMEOUT);
    dlock_lock *l = NULL;
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "p3", 10000, &l), DLOCK_OK);
    cr_assert_leq(dlock_now_ms() - t0, CMD_TIMEOUT + MARGIN_MS);
    cr_assert_eq(dlock_extend(c, l, 10000), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = NULL;
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(redis_kill(&nodes[0]), 0);
    cr_assert_eq(dlock_acquire(c, "p3-after", 5000, dlock_now_ms() + 2000, &l), DLOCK_OK,
                 "%s", TC_ERR(c));
    cr_assert_eq(tc_wait_exists(&nodes[1], "p3-after", 1, TC_SETTLE_MS), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_quorum, five_nodes_two_paused_one_dead, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, 5, CMD_TIMEOUT);
    dlock_lock *l = (dlock_lock *)0x1;
    size_t up = 9;
    cr_assert_eq(redis_pause(&nodes[0]), 0);
    cr_assert_eq(redis_pause(&nodes[3]), 0);
    cr_assert_eq(redis_kill(&nodes[4]), 0);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "f5", 5000, &l), DLOCK_ERR_NO_QUORUM);
    cr_assert_leq(dlock_now_ms() - t0, CMD_TIMEOUT + MARGIN_MS);
    cr_assert_null(l);
    cr_assert_eq(tc_wait_exists(&nodes[1], "f5", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(tc_wait_exists(&nodes[2], "f5", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(dlock_ping(c, &up), DLOCK_ERR_NO_QUORUM);
    cr_assert_eq(up, 2);
    cr_assert_eq(dlock_err_is_unavailable(DLOCK_ERR_NO_QUORUM), 1);
    dlock_client_free(c);
}

/* Node 2 refused (a foreign key), nodes 0 and 1 granted; then node 0 stops
 * answering. The lock is still on nodes 0 and 1 - a quorum - so an extend or
 * release that cannot reach node 0 has not shown the lock lost. It must say
 * "unavailable", not LOST. LOST tells the caller its critical section may
 * have run unprotected, and makes renewal give up a lock that is fine. */
static dlock_lock *held_on_0_and_1(dlock_client *c, const char *res)
{
    char out[64], key[TC_KEY_LEN];
    const char *set[] = {"SET", tc_lock_key(key, res), "foreign", "PX", "20000"};
    dlock_lock *l = NULL;
    tc_cmd(&nodes[2], out, sizeof out, 5, set);
    cr_assert_str_eq(out, "OK");
    cr_assert_eq(dlock_try_acquire(c, res, 10000, &l), DLOCK_OK);
    cr_assert_eq(tc_wait_holding(nodes, 2, res, 2, TC_SETTLE_MS), 2);
    return l;
}

Test(lock_quorum, unreachable_holder_extend_is_not_lost, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, 3, CMD_TIMEOUT);
    dlock_lock *l = held_on_0_and_1(c, "ux");
    cr_assert_eq(redis_pause(&nodes[0]), 0);
    dlock_err e = dlock_extend(c, l, 10000);
    cr_assert(dlock_err_is_unavailable(e), "extend with a holder paused gave %s: %s",
              dlock_strerror(e), TC_ERR(c));
    cr_assert_eq(dlock_is_held(l), 1);
    cr_assert_eq(redis_resume(&nodes[0]), 0);
    /* Proof the lock was never lost: both holders still have our token. */
    char val[64];
    for (size_t i = 0; i < 2; i++) {
        tc_get(&nodes[i], "lock:ux", val, sizeof val);
        cr_assert_str_eq(val, dlock_lock_token(l), "node %zu", i);
    }
    cr_assert_eq(dlock_extend(c, l, 10000), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_quorum, unreachable_holder_release_is_not_lost, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, 3, CMD_TIMEOUT);
    dlock_lock *l = held_on_0_and_1(c, "ur");
    cr_assert_eq(redis_pause(&nodes[0]), 0);
    dlock_err e = dlock_release(c, l);
    cr_assert(dlock_err_is_unavailable(e), "release with a holder paused gave %s: %s",
              dlock_strerror(e), TC_ERR(c));
    cr_assert_eq(redis_resume(&nodes[0]), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* c's attempt at res must fail with want, and leave no key on the nodes
 * of mask (the undo removes what a minority granted there). */
static void refused_below_majority(dlock_client *c, const char *res, dlock_err want,
                                   uint32_t mask)
{
    dlock_lock *l = (dlock_lock *)0x1;
    dlock_err rc = dlock_try_acquire(c, res, 5000, &l);

    cr_assert_eq(rc, want, "%s: %s (%s)", res, dlock_strerror(rc), TC_ERR(c));
    cr_assert_null(l);
    for (size_t i = 0; i < NODES; i++)
        if (mask & (1u << i))
            cr_assert_eq(tc_wait_exists(&nodes[i], res, 0, TC_SETTLE_MS), 0,
                         "%s: a key left on node %zu", res, i);
}

/* Even counts: a majority of 2 is 2, of 4 is 3. Half the nodes (one of
 * two, two of four) paused or held by another token never grant. */
Test(lock_quorum, even_counts_never_grant_below_a_majority, .timeout = 30)
{
    dlock_client *c2 = tc_client(nodes, 2, CMD_TIMEOUT), *c4 = tc_client(nodes, 4, CMD_TIMEOUT);
    dlock_client *other = tc_client(&nodes[1], 1, 0), *other3 = tc_client(&nodes[3], 1, 0);
    dlock_lock *o1 = NULL, *o3 = NULL, *l = NULL;
    dlock_client *const cs[] = {c2, c4, other, other3};

    cr_assert(c2 != NULL && c4 != NULL && other != NULL && other3 != NULL);
    /* 1 of 2: the other node paused, then held by another token. */
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    refused_below_majority(c2, "e2", DLOCK_ERR_NO_QUORUM, 0x1);
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(dlock_try_acquire(other, "e2", 10000, &o1), DLOCK_OK, "%s", TC_ERR(other));
    refused_below_majority(c2, "e2", DLOCK_ERR_TAKEN, 0x1);
    cr_assert_eq(tc_exists(&nodes[1], "e2"), 1, "the other holder's key was touched");
    /* 2 of 4: two nodes paused; then one paused and one held elsewhere. */
    cr_assert_eq(redis_pause(&nodes[2]), 0);
    cr_assert_eq(redis_pause(&nodes[3]), 0);
    refused_below_majority(c4, "e4", DLOCK_ERR_NO_QUORUM, 0x3);
    cr_assert_eq(redis_resume(&nodes[3]), 0);
    cr_assert_eq(dlock_try_acquire(other3, "e4", 10000, &o3), DLOCK_OK, "%s", TC_ERR(other3));
    refused_below_majority(c4, "e4", DLOCK_ERR_TAKEN, 0x3);
    /* 3 of 4 is a majority. */
    cr_assert_eq(redis_resume(&nodes[2]), 0);
    /* Retried: node C's breaker, open since the pause, lets a probe through
     * only after its backoff. */
    cr_assert_eq(dlock_acquire(c4, "e4", 5000, dlock_now_ms() + 5000, &l), DLOCK_OK, "%s",
                 TC_ERR(c4));
    cr_assert_eq(tc_wait_holding(nodes, 3, "e4", 3, TC_SETTLE_MS), 3);
    /* Checked last: the refusals above, not these numbers, are the rule. */
    cr_assert_eq(dlock_client_quorum(c2), 2);
    cr_assert_eq(dlock_client_quorum(c4), 3);
    cr_assert_eq(dlock_release(c4, l), DLOCK_OK, "%s", TC_ERR(c4));
    cr_assert_eq(dlock_release(other, o1), DLOCK_OK);
    cr_assert_eq(dlock_release(other3, o3), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(o1);
    dlock_lock_free(o3);
    for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
        dlock_client_free(cs[i]);
}
