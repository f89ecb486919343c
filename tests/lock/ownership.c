/* ownership.c - single instance: only the token holder can release or
 * extend, the key expires after the TTL, validity and fence as reported. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;
static dlock_client *ca, *cb;

TC_NODE_CLIENTS_FIXTURE(node, &ca, &cb)
TestSuite(lock_ownership, .init = tc_suite_init, .fini = tc_suite_fini);

Test(lock_ownership, expired_holder_cannot_release_or_extend, .timeout = 10)
{
    dlock_lock *la = NULL, *lb = NULL;
    dlock_stats s0, s1;
    char val[128];

    cr_assert_eq(dlock_try_acquire(ca, "wt", 200, &la), DLOCK_OK);
    test_sleep_ms(300);
    cr_assert_eq(dlock_is_held(la), 0, "validity ended, the handle must say so");
    cr_assert_eq(dlock_lock_validity_ms(la), 0);
    cr_assert_eq(dlock_try_acquire(cb, "wt", 10000, &lb), DLOCK_OK);
    cr_assert_str_neq(dlock_lock_token(la), dlock_lock_token(lb));
    cr_assert_gt(dlock_lock_fence(lb), dlock_lock_fence(la));

    dlock_client_stats(ca, &s0);
    cr_assert_eq(dlock_release(ca, la), DLOCK_ERR_LOST);
    tc_get(&node, "lock:wt", val, sizeof val);
    cr_assert_str_eq(val, dlock_lock_token(lb), "B's key was touched by A's release");

    long long p0 = tc_pttl(&node, "wt");
    cr_assert_eq(dlock_extend(ca, la, 60000), DLOCK_ERR_LOST);
    long long p1 = tc_pttl(&node, "wt");
    cr_assert_gt(p1, 0);
    cr_assert_leq(p1, p0, "A's extend reset B's TTL (%lld > %lld)", p1, p0);
    tc_get(&node, "lock:wt", val, sizeof val);
    cr_assert_str_eq(val, dlock_lock_token(lb));
    dlock_client_stats(ca, &s1);
    cr_assert_eq(s1.lost - s0.lost, 2);
    cr_assert_eq(s1.releases, s0.releases);
    cr_assert_eq(dlock_is_held(lb), 1);

    cr_assert_eq(dlock_release(cb, lb), DLOCK_OK);
    cr_assert_eq(tc_exists(&node, "wt"), 0);
    dlock_lock_free(la);
    dlock_lock_free(lb);
}

Test(lock_ownership, overwritten_key_is_not_ours, .timeout = 10)
{
    dlock_lock *l = NULL;
    char val[64];
    const char *set[] = {"SET", "lock:ow", "someone-else", "PX", "10000"};

    cr_assert_eq(dlock_try_acquire(ca, "ow", 10000, &l), DLOCK_OK);
    tc_cmd(&node, val, sizeof val, 5, set);
    cr_assert_str_eq(val, "OK");
    cr_assert_eq(dlock_extend(ca, l, 20000), DLOCK_ERR_LOST);
    cr_assert_eq(dlock_release(ca, l), DLOCK_ERR_LOST);
    tc_get(&node, "lock:ow", val, sizeof val);
    cr_assert_str_eq(val, "someone-else");
    cr_assert_leq(tc_pttl(&node, "ow"), 10000);
    cr_assert_eq(dlock_is_held(l), 0);
    dlock_lock_free(l);
}

Test(lock_ownership, release_twice_is_refused, .timeout = 10)
{
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(ca, "twice", 5000, &l), DLOCK_OK);
    cr_assert_eq(dlock_release(ca, l), DLOCK_OK);
    cr_assert_eq(dlock_is_held(l), 0);
    cr_assert_eq(tc_exists(&node, "twice"), 0);
    /* Someone else takes it; a second release of the old handle must not
     * free it: it is refused as "already released" and sends nothing. */
    dlock_lock *lb = NULL;
    cr_assert_eq(dlock_try_acquire(cb, "twice", 5000, &lb), DLOCK_OK);
    cr_assert_eq(dlock_release(ca, l), DLOCK_ERR_ARG);
    cr_assert_eq(tc_exists(&node, "twice"), 1);
    cr_assert_eq(dlock_release(cb, lb), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(lb);
}

Test(lock_ownership, expiry_frees_the_lock, .timeout = 10)
{
    dlock_lock *la = NULL, *lb = NULL;
    cr_assert_eq(dlock_try_acquire(ca, "exp", 300, &la), DLOCK_OK);
    long long pttl = tc_pttl(&node, "exp");
    cr_assert_gt(pttl, 0);
    cr_assert_leq(pttl, 300);
    cr_assert_eq(dlock_try_acquire(cb, "exp", 300, &lb), DLOCK_ERR_TAKEN);
    cr_assert_null(lb);
    /* Wait past the TTL as Redis counts it (the key's own PTTL) plus slack. */
    test_sleep_ms(pttl + 50);
    cr_assert_eq(tc_exists(&node, "exp"), 0);
    cr_assert_eq(dlock_try_acquire(cb, "exp", 300, &lb), DLOCK_OK);
    cr_assert_not_null(lb);
    cr_assert_eq(dlock_release(cb, lb), DLOCK_OK);
    dlock_lock_free(la);
    dlock_lock_free(lb);
}

Test(lock_ownership, extend_resets_ttl, .timeout = 10)
{
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(ca, "ext", 500, &l), DLOCK_OK);
    test_sleep_ms(200);
    cr_assert_eq(dlock_extend(ca, l, 3000), DLOCK_OK);
    long long pttl = tc_pttl(&node, "ext");
    cr_assert_gt(pttl, 2500);
    cr_assert_leq(pttl, 3000);
    int64_t v = dlock_lock_validity_ms(l);
    cr_assert_leq(v, 3000 - (3000 / 100 + 2));
    cr_assert_gt(v, 2500);
    test_sleep_ms(500); /* past the first TTL: still ours thanks to the extend */
    cr_assert_eq(dlock_is_held(l), 1);
    cr_assert_eq(dlock_try_acquire(cb, "ext", 500, &(dlock_lock *){NULL}), DLOCK_ERR_TAKEN);
    cr_assert_eq(dlock_release(ca, l), DLOCK_OK);
    dlock_lock_free(l);
}

static int is_token(const char *t)
{
    if (!t || strlen(t) != DLOCK_TOKEN_LEN - 1)
        return 0;
    for (const char *p = t; *p; p++)
        if (!isxdigit((unsigned char)*p) || isupper((unsigned char)*p))
            return 0;
    return 1;
}

Test(lock_ownership, validity_fence_and_token, .timeout = 20)
{
    uint64_t last = 0;
    char prev_token[DLOCK_TOKEN_LEN] = "";
    const uint32_t ttl = 1000;
    const int64_t drift = ttl / 100 + 2; /* the defaults: 0.01 * ttl + 2 */

    for (int i = 0; i < 40; i++) {
        dlock_client *c = (i % 2) ? ca : cb;
        dlock_lock *l = NULL;
        int64_t before = dlock_now_ms();
        cr_assert_eq(dlock_acquire(c, "vf", ttl, before + 2000, &l), DLOCK_OK);
        int64_t v = dlock_lock_validity_ms(l);
        int64_t after = dlock_now_ms();
        int64_t until = dlock_lock_valid_until_ms(l);
        /* validity = ttl - drift - time since the round started: exact
         * bounds from the instants before the call and after the read. */
        cr_assert_leq(v, ttl - drift);
        cr_assert_geq(v, ttl - drift - (after - before), "validity %lld", (long long)v);
        cr_assert_geq(until, before + ttl - drift);
        cr_assert_leq(until, after + ttl - drift);
        cr_assert_eq(dlock_is_held(l), 1);
        cr_assert_str_eq(dlock_lock_resource(l), "vf");
        cr_assert(is_token(dlock_lock_token(l)), "bad token %s", dlock_lock_token(l));
        cr_assert_str_neq(dlock_lock_token(l), prev_token);
        strcpy(prev_token, dlock_lock_token(l));
        cr_assert_gt(dlock_lock_fence(l), last, "fence %llu after %llu",
                     (unsigned long long)dlock_lock_fence(l), (unsigned long long)last);
        last = dlock_lock_fence(l);
        cr_assert_eq(dlock_release(c, l), DLOCK_OK);
        cr_assert_eq(dlock_is_held(l), 0);
        dlock_lock_free(l);
    }
    cr_assert_geq(last, 40);
}

Test(lock_ownership, fences_are_per_resource_and_grow, .timeout = 10)
{
    dlock_lock *a = NULL, *b = NULL, *a2 = NULL;
    cr_assert_eq(dlock_try_acquire(ca, "fa", 5000, &a), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(ca, "fb", 5000, &b), DLOCK_OK);
    /* Two resources held at once by one client: independent locks. */
    cr_assert_eq(dlock_is_held(a), 1);
    cr_assert_eq(dlock_is_held(b), 1);
    cr_assert_eq(dlock_release(ca, a), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(cb, "fa", 5000, &a2), DLOCK_OK);
    cr_assert_gt(dlock_lock_fence(a2), dlock_lock_fence(a));
    cr_assert_eq(dlock_release(cb, a2), DLOCK_OK);
    cr_assert_eq(dlock_release(ca, b), DLOCK_OK);
    dlock_lock_free(a);
    dlock_lock_free(b);
    dlock_lock_free(a2);
}

Test(lock_ownership, stats_count_exactly, .timeout = 10)
{
    dlock_client *c = tc_client(&node, 1, 0);
    dlock_lock *l = NULL, *x = NULL;
    dlock_stats s;
    cr_assert_not_null(c);
    cr_assert_eq(dlock_try_acquire(c, "st", 5000, &l), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(cb, "st", 5000, &x), DLOCK_ERR_TAKEN);
    /* The holder's own thread asking again: refused at once, before any
     * attempt (not reentrant; dlock.h), so no attempt is counted. */
    cr_assert_eq(dlock_try_acquire(c, "st", 5000, &x), DLOCK_ERR_ARG);
    /* Held by another client: one attempt, taken. */
    cr_assert_eq(dlock_try_acquire(cb, "st-b", 5000, &x), DLOCK_OK);
    {
        dlock_lock *y = NULL;

        cr_assert_eq(dlock_try_acquire(c, "st-b", 5000, &y), DLOCK_ERR_TAKEN);
    }
    cr_assert_eq(dlock_release(cb, x), DLOCK_OK);
    dlock_lock_free(x);
    cr_assert_eq(dlock_extend(c, l, 5000), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_client_stats(c, &s);
    cr_assert_eq(s.acquires, 1);
    cr_assert_eq(s.attempts, 2);
    cr_assert_eq(s.retries, 0);
    cr_assert_eq(s.taken, 1);
    cr_assert_eq(s.errors, 0);
    cr_assert_eq(s.releases, 1);
    cr_assert_eq(s.lost, 0);
    cr_assert_eq(s.extends, 1);
    cr_assert_eq(s.reconnects, 0);
    cr_assert_geq(s.round_trips, 4);
    dlock_lock_free(l);
    dlock_client_free(c);
}
