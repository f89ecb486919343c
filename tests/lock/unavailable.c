/* unavailable.c - single instance: a dead Redis gives UNREACHABLE, a
 * paused one TIMEOUT within the command timeout, and the same client works
 * again once the node is back (reconnect, no stale replies). */
#include <criterion/criterion.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;

TC_NODES_FIXTURE(&node, 1)
TestSuite(lock_unavailable, .init = tc_suite_init, .fini = tc_suite_fini);

#define CMD_TIMEOUT 200
#define MARGIN_MS 400

/* Twenty rounds whose replies are checked against the node itself: a reply
 * left over from an earlier round would be matched to the wrong command. */
static void assert_in_sync(dlock_client *c, const char *res)
{
    for (int i = 0; i < 20; i++) {
        dlock_lock *l = NULL;
        char val[64], key[TC_KEY_LEN];
        cr_assert_eq(dlock_try_acquire(c, res, 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
        tc_get(&node, tc_lock_key(key, res), val, sizeof val);
        cr_assert_str_eq(val, dlock_lock_token(l));
        cr_assert_eq(dlock_extend(c, l, 5000), DLOCK_OK);
        cr_assert_eq(dlock_release(c, l), DLOCK_OK);
        cr_assert_eq(tc_exists(&node, res), 0);
        dlock_lock_free(l);
    }
}

Test(lock_unavailable, dead_node_then_restart, .timeout = 15)
{
    dlock_client *c = tc_client(&node, 1, CMD_TIMEOUT);
    dlock_lock *l = (dlock_lock *)0x1;
    dlock_stats s;
    size_t up = 99;
    cr_assert_not_null(c);
    assert_in_sync(c, "dn-warm");
    cr_assert_eq(redis_kill(&node), 0);

    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "dn", 1000, &l), DLOCK_ERR_UNREACHABLE);
    cr_assert_null(l);
    cr_assert_leq(dlock_now_ms() - t0, 200 + CMD_TIMEOUT + MARGIN_MS);
    cr_assert_neq(TC_ERR(c)[0], '\0');
    cr_assert_eq(dlock_ping(c, &up), DLOCK_ERR_UNREACHABLE);
    cr_assert_eq(up, 0);
    /* retry_unavailable is off by default: a deadline does not make it wait. */
    t0 = dlock_now_ms();
    cr_assert_eq(dlock_acquire(c, "dn", 1000, t0 + 2000, &l), DLOCK_ERR_UNREACHABLE);
    cr_assert_lt(dlock_now_ms() - t0, 1000);
    dlock_client_stats(c, &s);
    cr_assert_geq(s.errors, 2);
    cr_assert_eq(s.acquires, 20);

    cr_assert_eq(redis_restart(&node), 0);
    cr_assert_eq(dlock_ping(c, &up), DLOCK_OK);
    cr_assert_eq(up, 1);
    assert_in_sync(c, "dn");
    dlock_client_stats(c, &s);
    cr_assert_geq(s.reconnects, 1);
    dlock_client_free(c);
}

Test(lock_unavailable, node_down_at_client_creation, .timeout = 15)
{
    cr_assert_eq(redis_kill(&node), 0);
    dlock_client *c = tc_client(&node, 1, CMD_TIMEOUT);
    cr_assert_not_null(c, "an unreachable node is not an error at creation");
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(c, "late", 1000, &l), DLOCK_ERR_UNREACHABLE);
    cr_assert_null(l);
    cr_assert_eq(redis_restart(&node), 0);
    assert_in_sync(c, "late");
    dlock_client_free(c);
}

Test(lock_unavailable, retry_unavailable_waits_for_the_node, .timeout = 15)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    tc_options(&o, &a, &node, 1);
    o.command_timeout_ms = CMD_TIMEOUT;
    o.retry_unavailable = 1;
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    cr_assert_eq(redis_kill(&node), 0);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_acquire(c, "ru", 1000, t0 + 400, &l), DLOCK_ERR_UNREACHABLE);
    int64_t el = dlock_now_ms() - t0;
    cr_assert_geq(el, 350, "did not retry until the deadline (%lld ms)", (long long)el);
    cr_assert_leq(el, 400 + 200 + MARGIN_MS);
    cr_assert_null(l);
    cr_assert_eq(redis_restart(&node), 0);
    cr_assert_eq(dlock_acquire(c, "ru", 1000, dlock_now_ms() + 2000, &l), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_unavailable, paused_node_times_out, .timeout = 15)
{
    dlock_client *c = tc_client(&node, 1, CMD_TIMEOUT);
    dlock_lock *held = NULL, *l = (dlock_lock *)0x1;
    size_t up = 99;
    cr_assert_not_null(c);
    cr_assert_eq(dlock_try_acquire(c, "held", 10000, &held), DLOCK_OK);
    cr_assert_eq(redis_pause(&node), 0);

    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "pz", 1000, &l), DLOCK_ERR_TIMEOUT);
    int64_t el = dlock_now_ms() - t0;
    cr_assert_null(l);
    cr_assert_geq(el, CMD_TIMEOUT - 5);
    cr_assert_leq(el, CMD_TIMEOUT + MARGIN_MS, "took %lld ms", (long long)el);
    t0 = dlock_now_ms();
    cr_assert_eq(dlock_extend(c, held, 10000), DLOCK_ERR_TIMEOUT);
    cr_assert_eq(dlock_release(c, held), DLOCK_ERR_TIMEOUT);
    /* The delete was sent: it may land any time, so the lock is not held. */
    cr_assert_eq(dlock_is_held(held), 0);
    cr_assert_eq(dlock_ping(c, &up), DLOCK_ERR_TIMEOUT);
    cr_assert_eq(up, 0);
    cr_assert_leq(dlock_now_ms() - t0, 3 * (CMD_TIMEOUT + 200) + MARGIN_MS);
    cr_assert(dlock_err_is_unavailable(DLOCK_ERR_TIMEOUT));

    cr_assert_eq(redis_resume(&node), 0);
    /* Back: the same client works, and its replies match its commands. */
    assert_in_sync(c, "pz2");
    /* The release that timed out was waiting in the paused node's socket
     * and ran when it resumed; a second release has nothing to send. */
    cr_assert_eq(tc_wait_exists(&node, "held", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(dlock_release(c, held), DLOCK_ERR_ARG);
    dlock_lock_free(held);
    dlock_client_free(c);
}
