/* deadline.c - dlock_acquire retries until its deadline and no
 * longer, try-once means one attempt, and a freed lock is picked up. */
#include <criterion/criterion.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;
static dlock_client *holder, *waiter;

TC_NODE_CLIENTS_FIXTURE(node, &holder, &waiter)
TestSuite(lock_deadline, .init = tc_suite_init, .fini = tc_suite_fini);

/* Generous upper margin: a loaded two-core machine may deschedule us, but
 * sleeping a whole backoff past the deadline (up to retry_max_ms) or
 * retrying forever would show. */
#define MARGIN_MS 250

Test(lock_deadline, gives_up_at_deadline, .timeout = 10)
{
    dlock_lock *h = NULL, *w = (dlock_lock *)0x1;
    dlock_stats s;
    dlock_options o;
    tc_addrs a;
    dlock_client *poller = NULL;
    tc_options(&o, &a, &node, 1);
    o.wake_on_release = 0;
    cr_assert_eq(dlock_client_new(&o, &poller, NULL, 0), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(holder, "dl", 10000, &h), DLOCK_OK);
    /* Both ways of waiting give up at the deadline: blocked on the wake
     * list (the fixture's waiter, the default) and polling. */
    for (int k = 0; k < 4; k++) {
        int wait_ms = k % 2 == 0 ? 100 : 300;
        dlock_client *who = k < 2 ? waiter : poller;
        int64_t t0 = dlock_now_ms();
        dlock_err rc = dlock_acquire(who, "dl", 1000, t0 + wait_ms, &w);
        cr_assert_eq(rc, DLOCK_ERR_TAKEN, "round %d: got %s: %s", k, dlock_strerror(rc), TC_ERR(who));
        int64_t el = dlock_now_ms() - t0;
        cr_assert_null(w);
        cr_assert_geq(el, wait_ms - 5, "gave up early after %lld ms", (long long)el);
        cr_assert_leq(el, wait_ms + MARGIN_MS, "gave up late after %lld ms", (long long)el);
    }
    dlock_client_stats(poller, &s);
    cr_assert_gt(s.retries, 2, "backoff capped at 50 ms must retry several times");
    cr_assert_eq(s.attempts, s.taken);
    cr_assert_eq(s.acquires, 0);
    cr_assert_eq(s.errors, 0);
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    dlock_lock_free(h);
    dlock_client_free(poller);
}

Test(lock_deadline, fixed_retry_delay, .timeout = 10)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *h = NULL, *w = NULL;
    dlock_stats s;
    tc_options(&o, &a, &node, 1);
    o.retry_fixed_ms = 40;
    o.retry_jitter_ms = 0;
    o.wake_on_release = 0; /* the polling mode is under test */
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(holder, "fx", 10000, &h), DLOCK_OK);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_acquire(c, "fx", 1000, t0 + 210, &w), DLOCK_ERR_TAKEN);
    int64_t el = dlock_now_ms() - t0;
    cr_assert_leq(el, 210 + MARGIN_MS);
    dlock_client_stats(c, &s);
    /* 40 ms apart within 210 ms: attempts at 0,40,80,120,160,200 (the last
     * sleep is cut to the deadline): 5 or 6 attempts, never 20. */
    cr_assert_geq(s.attempts, 4);
    cr_assert_leq(s.attempts, 7);
    cr_assert_eq(s.retries, s.attempts - 1);
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    dlock_lock_free(h);
    dlock_client_free(c);
}

Test(lock_deadline, past_deadline_means_one_attempt, .timeout = 10)
{
    dlock_lock *h = NULL, *w = NULL;
    dlock_stats s0, s1;
    cr_assert_eq(dlock_try_acquire(holder, "once", 10000, &h), DLOCK_OK);
    dlock_client_stats(waiter, &s0);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_acquire(waiter, "once", 1000, t0 - 1000, &w), DLOCK_ERR_TAKEN);
    cr_assert_eq(dlock_try_acquire(waiter, "once", 1000, &w), DLOCK_ERR_TAKEN);
    cr_assert_leq(dlock_now_ms() - t0, 100);
    dlock_client_stats(waiter, &s1);
    cr_assert_eq(s1.attempts - s0.attempts, 2);
    cr_assert_eq(s1.taken - s0.taken, 2);
    cr_assert_eq(s1.retries - s0.retries, 0);
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    dlock_lock_free(h);
}

Test(lock_deadline, waiter_gets_released_lock, .timeout = 10)
{
    dlock_lock *h = NULL, *w = NULL;
    cr_assert_eq(dlock_try_acquire(holder, "handoff", 400, &h), DLOCK_OK);
    /* Not released: the waiter gets it once the TTL frees it, before its deadline. */
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_acquire(waiter, "handoff", 1000, t0 + 3000, &w), DLOCK_OK);
    int64_t el = dlock_now_ms() - t0;
    cr_assert_geq(el, 300, "acquired while the holder's TTL was running (%lld ms)", (long long)el);
    cr_assert_leq(el, 400 + 60 + MARGIN_MS);
    cr_assert_gt(dlock_lock_fence(w), dlock_lock_fence(h));
    cr_assert_eq(dlock_release(waiter, w), DLOCK_OK);
    cr_assert_eq(dlock_release(holder, h), DLOCK_ERR_LOST);
    dlock_lock_free(h);
    dlock_lock_free(w);
}

/* A deadline at the end of the clock ("wait for ever") is a deadline, not
 * an overflow: rounds.c bounded each round by deadline + command timeout. */
Test(lock_deadline, a_deadline_near_int64_max_waits, .timeout = 10)
{
    dlock_lock *h = NULL, *w = NULL;

    cr_assert_eq(dlock_acquire(holder, "far", 1000, INT64_MAX - 1, &h), DLOCK_OK, "%s",
                 TC_ERR(holder));
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK, "%s", TC_ERR(holder));
    /* And a wait behind a holder with it: granted when the 400 ms TTL ends. */
    cr_assert_eq(dlock_try_acquire(holder, "far", 400, &h), DLOCK_OK);
    cr_assert_eq(dlock_acquire(waiter, "far", 1000, INT64_MAX - 1, &w), DLOCK_OK, "%s",
                 TC_ERR(waiter));
    cr_assert_eq(dlock_release(waiter, w), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(w);
}
