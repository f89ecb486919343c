/* async_queue.c - the event-loop client waiting in the nodes' queues (wake
 * on release) against real redis-servers, on one node and on Redlock over
 * three masters: handed the key by a release with no second attempt, in
 * line with blocking waiters, its wait bounded by the holder's expiry, a
 * master paused while it waits, and a cancel or a free while queued that
 * leaves every queue and hands on keys handed over meanwhile. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "async_loop.h"

#define NODES 3
static redis_proc node[NODES];

static void setup(void)
{
    cr_assert_eq(tc_nodes_up(node, NODES, 0), 0, "redis did not start");
    aloop_init();
}

static void teardown(void)
{
    aloop_fini();
    tc_nodes_down(node, NODES);
}

TestSuite(lock_async_queue, .init = setup, .fini = teardown, .timeout = 60);

/* Runs the loop (bounded) until each of the first n nodes has `want`
 * clients blocked in a BLPOP: an async waiter is then listed and waiting. */
static int run_until_blocked(size_t n, long long want, int64_t timeout_ms)
{
    int64_t until = test_now_ms() + timeout_ms;
    size_t ok = 0;

    for (;;) {
        ok = 0;
        for (size_t i = 0; i < n; i++)
            ok += tc_wait_blocked(&node[i], want, 0) == want;
        if (ok == n || test_now_ms() >= until)
            return ok == n;
        run_until(&(int){0}, 10);
    }
}

/* An async acquire of res on the first n nodes that waits in their queues
 * behind a holder. */
static dlock_async_op *queue_behind_on(size_t n, dlock_async *a, const char *res, uint32_t ttl,
                                       outcome *o)
{
    dlock_async_op *op = NULL;

    cr_assert_eq(dlock_async_acquire_for(a, res, ttl, 10000, on_acquired, o, &op), DLOCK_OK);
    cr_assert(run_until_blocked(n, 1, 3000), "the async waiter never blocked in its BLPOPs");
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(tc_listed_on(&node[i], res), 1, "the async waiter is not listed on %zu", i);
    cr_assert_eq(o->calls, 0);
    return op;
}

static dlock_async_op *queue_behind(dlock_async *a, const char *res, uint32_t ttl,
                                    outcome *o)
{
    return queue_behind_on(1, a, res, ttl, o);
}

Test(lock_async_queue, a_release_hands_the_key_to_the_async_waiter)
{
    dlock_async *a = aloop_client(node, 1, 0);
    dlock_client *b = tc_client(node, 1, 0);
    dlock_lock *held = NULL;
    outcome o = {0};
    dlock_stats st;
    uint64_t fence;

    cr_assert_eq(dlock_try_acquire(b, "q1", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    fence = dlock_lock_fence(held);
    (void)queue_behind(a, "q1", 5000, &o);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert(run_until(&o.calls, 3000), "no callback after the release");
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    /* The hand-off is a grant (its INCR), and it needed no second attempt:
     * one enter.lua refused, then the key came by the release. */
    cr_assert_eq(dlock_lock_fence(o.lock), fence + 1);
    dlock_async_stats(a, &st);
    cr_assert_eq(st.attempts, 1, "%llu attempts: polled, not handed over",
                 (unsigned long long)st.attempts);
    cr_assert_eq(st.taken, 1);
    cr_assert_eq(tc_listed_on(&node[0], "q1"), 0);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    cr_assert_eq(tc_exists(&node[0], "q1"), 0);
    dlock_client_free(b);
    async_down(a);
}

typedef struct blocking_waiter {
    dlock_client *c;
    dlock_err rc;
    int64_t got_ms, released_ms;
} blocking_waiter;

static void *blocking_wait(void *arg)
{
    blocking_waiter *w = arg;
    dlock_lock *l = NULL;

    w->rc = dlock_acquire_for(w->c, "q2", 5000, 10000, &l);
    w->got_ms = test_now_ms();
    if (w->rc == DLOCK_OK) {
        test_sleep_ms(150);
        w->released_ms = test_now_ms();
        w->rc = dlock_release(w->c, l);
        dlock_lock_free(l);
    }
    return NULL;
}

/* Blocking and async waiters in one line: served in the order they
 * listed themselves, the async one after the blocking one's section. */
Test(lock_async_queue, blocking_and_async_waiters_are_served_in_arrival_order)
{
    dlock_async *a = aloop_client(node, 1, 0);
    dlock_client *b = tc_client(node, 1, 0);
    blocking_waiter w = {tc_client(node, 1, 0), DLOCK_ERR_ARG, 0, 0};
    dlock_lock *held = NULL;
    pthread_t t;
    outcome o = {0};

    cr_assert_eq(dlock_try_acquire(b, "q2", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    cr_assert_eq(pthread_create(&t, NULL, blocking_wait, &w), 0);
    cr_assert_eq(tc_wait_blocked(&node[0], 1, 3000), 1, "the blocking waiter never blocked");
    cr_assert_eq(dlock_async_acquire_for(a, "q2", 5000, 10000, on_acquired, &o, NULL), DLOCK_OK);
    cr_assert(run_until_blocked(1, 2, 3000), "the async waiter never blocked");
    cr_assert_eq(tc_listed_on(&node[0], "q2"), 2);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert(run_until(&o.calls, 5000), "the async waiter was never served");
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.rc, DLOCK_OK, "blocking waiter: %s", dlock_strerror(w.rc));
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_geq(o.at_ms, w.released_ms, "the async waiter jumped the line");
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    dlock_client_free(w.c);
    dlock_client_free(b);
    async_down(a);
}

/* A holder that dies keeps no waiter past its key's expiry: the wait is
 * bounded by the holder's PTTL, then the waiter enters again and takes
 * the free key. */
Test(lock_async_queue, the_wait_ends_when_the_holders_key_expires)
{
    dlock_async *a = aloop_client(node, 1, 0);
    dlock_client *b = tc_client(node, 1, 0);
    dlock_lock *held = NULL;
    outcome o = {0};
    int64_t t0;

    cr_assert_eq(dlock_try_acquire(b, "q3", 400, &held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held); /* never released: the holder "died" */
    t0 = test_now_ms();
    cr_assert_eq(dlock_async_acquire_for(a, "q3", 5000, 10000, on_acquired, &o, NULL), DLOCK_OK);
    cr_assert(run_until(&o.calls, 5000), "no callback");
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_lt(o.at_ms - t0, 2000, "waited %lld ms for a 400 ms key",
                 (long long)(o.at_ms - t0));
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    dlock_client_free(b);
    async_down(a);
}

Test(lock_async_queue, a_cancel_while_queued_leaves_the_queue)
{
    dlock_async *a = aloop_client(node, 1, 0);
    dlock_client *b = tc_client(node, 1, 0);
    dlock_lock *held = NULL;
    dlock_async_op *op;
    outcome o = {0};

    cr_assert_eq(dlock_try_acquire(b, "q4", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    op = queue_behind(a, "q4", 5000, &o);
    cr_assert_eq(dlock_async_cancel(a, op), 1);
    cr_assert(run_until(&o.calls, 3000));
    cr_assert_eq(o.calls, 1);
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED, "%s", o.detail);
    cr_assert_null(o.lock);
    cr_assert_eq(tc_listed_on(&node[0], "q4"), 0, "the cancelled waiter is still listed");
    /* Nobody is listed: the release deletes the key, hands it to no one. */
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert_eq(tc_exists(&node[0], "q4"), 0);
    dlock_client_free(b);
    async_down(a);
}

/* The release hands the key over, and the cancel comes before the loop
 * has read the news: leave.lua finds the key ours, and it is handed on at
 * once, never left to its 60 s TTL. */
Test(lock_async_queue, a_key_handed_over_while_cancelling_is_handed_on)
{
    dlock_async *a = aloop_client(node, 1, 0);
    dlock_client *b = tc_client(node, 1, 0);
    dlock_lock *held = NULL;
    dlock_async_op *op;
    outcome o = {0};

    cr_assert_eq(dlock_try_acquire(b, "q5", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    op = queue_behind(a, "q5", 60000, &o);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert_eq(tc_exists(&node[0], "q5"), 1, "the release did not hand the key over");
    cr_assert_eq(dlock_async_cancel(a, op), 1);
    cr_assert(run_until(&o.calls, 3000));
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED, "%s", o.detail);
    cr_assert_null(o.lock);
    cr_assert_eq(wait_key(&node[0], "q5", 0, 2000), 0, "the handed key was left behind");
    dlock_client_free(b);
    async_down(a);
}

/* Freed while queued: the callback fires (cancelled) before the free
 * returns, and the waiter leaves the queue. */
Test(lock_async_queue, a_free_while_queued_cancels_and_leaves_the_queue)
{
    dlock_async *a = aloop_client(node, 1, 0);
    dlock_client *b = tc_client(node, 1, 0);
    dlock_lock *held = NULL;
    outcome o = {0};
    long long listed = -1;

    cr_assert_eq(dlock_try_acquire(b, "q6", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    (void)queue_behind(a, "q6", 5000, &o);
    dlock_async_free(a);
    cr_assert_eq(o.calls, 1);
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED, "%s", o.detail);
    for (int i = 0; i < 10; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    for (int i = 0; i < 100 && (listed = tc_listed_on(&node[0], "q6")) != 0; i++)
        test_sleep_ms(10);
    cr_assert_eq(listed, 0, "the freed client's waiter is still listed");
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert_eq(tc_exists(&node[0], "q6"), 0);
    dlock_client_free(b);
}

/* ---- Redlock over three masters ---- */

Test(lock_async_queue, on_redlock_a_release_hands_the_key_to_the_async_waiter)
{
    dlock_async *a = aloop_client(node, NODES, 0);
    dlock_client *b = tc_client(node, NODES, 0);
    dlock_lock *held = NULL;
    outcome o = {0};
    dlock_stats st;
    uint64_t fence;

    cr_assert_eq(dlock_try_acquire(b, "r1", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    fence = dlock_lock_fence(held);
    (void)queue_behind_on(NODES, a, "r1", 5000, &o);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert(run_until(&o.calls, 3000), "no callback after the release");
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    /* Handed over by a quorum of masters, each hand-off a grant (INCR). */
    cr_assert_eq(dlock_lock_fence(o.lock), fence + 1);
    cr_assert_geq(tc_count_holding(node, NODES, "r1"), 2);
    dlock_async_stats(a, &st);
    cr_assert_eq(st.attempts, 1, "%llu attempts: polled, not handed over",
                 (unsigned long long)st.attempts);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    cr_assert_eq(tc_wait_holding(node, NODES, "r1", 0, 2000), 0);
    dlock_client_free(b);
    async_down(a);
}

/* A master paused while the waiter waits: the release reaches the other
 * two, whose hand-offs are a quorum, and the loop goes on meanwhile. */
Test(lock_async_queue, on_redlock_the_hand_off_comes_with_a_master_paused)
{
    dlock_async *a = aloop_client(node, NODES, 0);
    dlock_client *b = tc_client(node, NODES, 0);
    dlock_lock *held = NULL;
    outcome o = {0};

    cr_assert_eq(dlock_try_acquire(b, "r2", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    (void)queue_behind_on(NODES, a, "r2", 5000, &o);
    cr_assert_eq(redis_pause(&node[2]), 0);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    run_until(&o.calls, 3000);
    cr_assert_eq(redis_resume(&node[2]), 0);
    cr_assert_eq(o.calls, 1, "no callback while a master was paused");
    cr_assert_eq(o.rc, DLOCK_OK, "%s", o.detail);
    cr_assert_eq(release(a, o.lock).rc, DLOCK_OK);
    dlock_lock_free(o.lock);
    cr_assert_eq(tc_wait_holding(node, NODES, "r2", 0, 2000), 0, "a key was left behind");
    dlock_client_free(b);
    async_down(a);
}

Test(lock_async_queue, on_redlock_a_cancel_while_queued_leaves_every_queue)
{
    dlock_async *a = aloop_client(node, NODES, 0);
    dlock_client *b = tc_client(node, NODES, 0);
    dlock_lock *held = NULL;
    dlock_async_op *op;
    outcome o = {0};

    cr_assert_eq(dlock_try_acquire(b, "r3", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    op = queue_behind_on(NODES, a, "r3", 5000, &o);
    cr_assert_eq(dlock_async_cancel(a, op), 1);
    cr_assert(run_until(&o.calls, 3000));
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED, "%s", o.detail);
    for (size_t i = 0; i < NODES; i++)
        cr_assert_eq(tc_listed_on(&node[i], "r3"), 0, "still listed on node %zu", i);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert_eq(tc_wait_holding(node, NODES, "r3", 0, 2000), 0, "a key was handed to no one");
    dlock_client_free(b);
    async_down(a);
}

Test(lock_async_queue, on_redlock_keys_handed_over_while_cancelling_are_handed_on)
{
    dlock_async *a = aloop_client(node, NODES, 0);
    dlock_client *b = tc_client(node, NODES, 0);
    dlock_lock *held = NULL;
    dlock_async_op *op;
    outcome o = {0};

    cr_assert_eq(dlock_try_acquire(b, "r4", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    op = queue_behind_on(NODES, a, "r4", 60000, &o);
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert_geq(tc_count_holding(node, NODES, "r4"), 2, "the release handed nothing over");
    cr_assert_eq(dlock_async_cancel(a, op), 1);
    cr_assert(run_until(&o.calls, 3000));
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED, "%s", o.detail);
    cr_assert_null(o.lock);
    for (size_t i = 0; i < NODES; i++)
        cr_assert_eq(wait_key(&node[i], "r4", 0, 2000), 0, "a handed key was left on %zu", i);
    dlock_client_free(b);
    async_down(a);
}

Test(lock_async_queue, on_redlock_a_free_while_queued_leaves_every_queue)
{
    dlock_async *a = aloop_client(node, NODES, 0);
    dlock_client *b = tc_client(node, NODES, 0);
    dlock_lock *held = NULL;
    outcome o = {0};

    cr_assert_eq(dlock_try_acquire(b, "r5", 20000, &held), DLOCK_OK, "%s", TC_ERR(b));
    (void)queue_behind_on(NODES, a, "r5", 5000, &o);
    dlock_async_free(a);
    cr_assert_eq(o.calls, 1);
    cr_assert_eq(o.rc, DLOCK_ERR_CANCELLED, "%s", o.detail);
    for (int i = 0; i < 10; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(tc_wait_listed(node, NODES, "r5", 0, 2000, &(long long){0}), -1,
                 "the freed client's waiter is still listed");
    cr_assert_eq(dlock_release(b, held), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(held);
    cr_assert_eq(tc_wait_holding(node, NODES, "r5", 0, 2000), 0);
    dlock_client_free(b);
}
