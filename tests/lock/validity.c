/* validity.c - Redlock validity: time spent waiting for a slow node is
 * taken off the validity, and a quorum reached after the TTL is no lock. */
#include <criterion/criterion.h>

#include "lock_common.h"

#define NODES 3
static redis_proc nodes[NODES];

TC_NODES_FIXTURE(nodes, NODES)
TestSuite(lock_validity, .init = tc_suite_init, .fini = tc_suite_fini);

typedef struct resumer {
    redis_proc *node;
    int64_t delay_ms;
    int rc;
} resumer;

static void *resume_later(void *p)
{
    resumer *r = p;
    test_sleep_ms(r->delay_ms);
    r->rc = redis_resume(r->node);
    return NULL;
}

/* Node 2 dead and node 1 paused: the quorum of two needs node 1, whose
 * answer arrives only when the helper thread resumes it after delay_ms. */
static dlock_err acquire_with_slow_node(dlock_client *c, const char *res, uint32_t ttl,
                                        int64_t delay_ms, dlock_lock **l, int64_t *t0_out,
                                        int64_t *elapsed)
{
    pthread_t th;
    resumer rs = {.node = &nodes[1], .delay_ms = delay_ms};
    cr_assert_eq(redis_kill(&nodes[2]), 0);
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    cr_assert_eq(pthread_create(&th, NULL, resume_later, &rs), 0);
    int64_t t0 = dlock_now_ms();
    dlock_err e = dlock_try_acquire(c, res, ttl, l);
    *elapsed = dlock_now_ms() - t0;
    *t0_out = t0;
    pthread_join(th, NULL);
    cr_assert_eq(rs.rc, 0);
    return e;
}

Test(lock_validity, slow_node_shrinks_validity, .timeout = 15)
{
    const uint32_t ttl = 3000;
    const int64_t delay = 400;
    dlock_client *c = tc_client(nodes, NODES, 2000);
    dlock_lock *l = NULL;
    int64_t t0, el;
    dlock_err e = acquire_with_slow_node(c, "slow", ttl, delay, &l, &t0, &el);
    cr_assert_eq(e, DLOCK_OK, "%s: %s", dlock_strerror(e), TC_ERR(c));
    int64_t v = dlock_lock_validity_ms(l);
    int64_t upto = dlock_now_ms() - t0; /* the round started after t0, we read before now */
    const int64_t drift = ttl / 100 + 2;
    cr_assert_geq(el, delay - 10, "acquire returned before the slow node answered");
    cr_assert_leq(v, (int64_t)ttl - drift - delay, "validity %lld ignores the %lld ms wait",
                  (long long)v, (long long)delay);
    /* validity = ttl - drift - time since the round started, exactly. */
    cr_assert_geq(v, (int64_t)ttl - drift - upto, "validity %lld, elapsed %lld", (long long)v,
                  (long long)el);
    cr_assert_eq(tc_wait_exists(&nodes[0], "slow", 1, TC_SETTLE_MS), 1);
    cr_assert_eq(tc_wait_exists(&nodes[1], "slow", 1, TC_SETTLE_MS), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_validity, quorum_after_ttl_is_no_lock, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 2000);
    dlock_lock *l = (dlock_lock *)0x1;
    int64_t t0, el;
    dlock_stats s;
    dlock_err e = acquire_with_slow_node(c, "late", 300, 500, &l, &t0, &el);
    cr_assert(e == DLOCK_ERR_EXPIRED || e == DLOCK_ERR_TIMEOUT, "got %s", dlock_strerror(e));
    cr_assert_null(l);
    dlock_client_stats(c, &s);
    cr_assert_eq(s.acquires, 0);
    /* Nothing may stay behind: the late node's fresh key is given back. */
    int64_t deadline = dlock_now_ms() + 200;
    while (tc_count_holding(nodes, 2, "late") != 0 && dlock_now_ms() < deadline)
        test_sleep_ms(5);
    cr_assert_eq(tc_wait_holding(nodes, 2, "late", 0, TC_SETTLE_MS), 0);
    /* And the resource is free for the next client at once. */
    dlock_client *c2 = tc_client(nodes, NODES, 300);
    dlock_lock *l2 = NULL;
    cr_assert_eq(dlock_try_acquire(c2, "late", 1000, &l2), DLOCK_OK, "%s",
                 TC_ERR(c2));
    cr_assert_eq(dlock_release(c2, l2), DLOCK_OK);
    dlock_lock_free(l2);
    dlock_client_free(c2);
    dlock_client_free(c);
}

Test(lock_validity, drift_is_subtracted, .timeout = 10)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    tc_options(&o, &a, nodes, NODES);
    o.drift_factor = 0.2;
    o.drift_min_ms = 50;
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(dlock_try_acquire(c, "drift", 1000, &l), DLOCK_OK);
    int64_t t1 = dlock_now_ms();
    /* drift = 1000 * 0.2 + 50 = 250, counted from the start of the round. */
    cr_assert_geq(dlock_lock_valid_until_ms(l), t0 + 1000 - 250);
    cr_assert_leq(dlock_lock_valid_until_ms(l), t1 + 1000 - 250);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = (dlock_lock *)0x1;
    /* A TTL smaller than its own drift can never be valid. */
    cr_assert_eq(dlock_try_acquire(c, "drift", 40, &l), DLOCK_ERR_EXPIRED);
    cr_assert_null(l);
    int64_t deadline = dlock_now_ms() + 100;
    while (tc_count_holding(nodes, NODES, "drift") != 0 && dlock_now_ms() < deadline)
        test_sleep_ms(5);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "drift", 0, TC_SETTLE_MS), 0);
    dlock_client_free(c);
}

/* An extend whose round outlived its own TTL (minus drift) is no extend:
 * the PEXPIRE may have been applied, but a key given 300 ms 600 ms ago is
 * another client's to take by now. One node, paused for 600 ms during the
 * round; a command timeout long enough that the round waits for it. */
Test(lock_validity, an_extend_that_outlives_its_ttl_is_lost, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, 1, 3000);
    dlock_lock *l = NULL;
    pthread_t th;
    resumer rs = {.node = &nodes[0], .delay_ms = 600};

    cr_assert_not_null(c);
    cr_assert_eq(dlock_try_acquire(c, "ext", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(redis_pause(&nodes[0]), 0);
    cr_assert_eq(pthread_create(&th, NULL, resume_later, &rs), 0);
    dlock_err e = dlock_extend(c, l, 300);
    pthread_join(th, NULL);
    cr_assert_eq(rs.rc, 0);
    cr_assert_eq(e, DLOCK_ERR_LOST, "an extend answered after its 300 ms TTL: %s (%s)", dlock_strerror(e), TC_ERR(c));
    cr_assert_eq(dlock_is_held(l), 0, "the lock is still held after an extend that outlived its TTL");
    dlock_lock_free(l);
    dlock_client_free(c);
}
