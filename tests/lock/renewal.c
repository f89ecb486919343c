/* renewal.c - automatic renewal: keeps a lock past its TTL, stops the
 * moment it is released or freed, honours max_renewals / max_lease_ms,
 * reports unavailability and loss through on_lost, and never re-creates a
 * key that is gone. */
#include <criterion/criterion.h>
#include <stdio.h>

#include "delay_proxy.h"
#include "lock_common.h"

#define NODES 3
/* 1000 ms: renewals every ~333 ms keep ~650 ms of slack, enough on a loaded
 * 2-core machine (600 ms flaked once there with other suites running). */
#define TTL 1000
/* Renewal runs at about TTL/3; two periods and some slack. */
#define TWO_PERIODS (2 * TTL / 3 + 120)

static redis_proc nodes[NODES];
static tc_lost lost;
static delay_proxy *proxy; /* the test that needs one starts it */

static void setup(void)
{
    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
    tc_lost_init(&lost);
}

static void teardown(void)
{
    delay_proxy_stop(proxy);
    proxy = NULL;
    redis_stop_n(nodes, NODES);
    tc_lost_destroy(&lost);
}

TestSuite(lock_renewal, .init = setup, .fini = teardown);

static int lost_calls(void)
{
    pthread_mutex_lock(&lost.mu);
    int n = lost.calls;
    pthread_mutex_unlock(&lost.mu);
    return n;
}

static dlock_lock *renewed(dlock_client *c, const char *res, dlock_renew_options ro)
{
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(c, res, TTL, &l), DLOCK_OK, "%s", TC_ERR(c));
    ro.on_lost = tc_on_lost;
    ro.user = &lost;
    cr_assert_eq(dlock_auto_renew(c, l, &ro), DLOCK_OK);
    return l;
}

/* Redlock promises the key on a quorum, not on every node (a node that was
 * slow at acquire time may never have got it; renewal does not add it). */
static int holders_with_ttl(size_t n, const char *res)
{
    int k = 0;
    for (size_t i = 0; i < n; i++) {
        long long p = tc_pttl(&nodes[i], res);
        cr_assert_leq(p, TTL, "node %zu: PTTL %lld above the TTL", i, p);
        k += p > 0;
    }
    return k;
}

static void held_for(size_t n, dlock_lock *l, const char *res, int64_t ms)
{
    int64_t end = dlock_now_ms() + ms;
    int quorum = (int)n / 2 + 1;
    while (dlock_now_ms() < end) {
        cr_assert_eq(dlock_is_held(l), 1);
        cr_assert_gt(dlock_lock_validity_ms(l), 0);
        int k = holders_with_ttl(n, res);
        cr_assert_geq(k, quorum, "key with a TTL on only %d nodes", k);
        test_sleep_ms(30);
    }
}

static void check_keeps_and_stops(size_t n)
{
    dlock_client *c = tc_client(nodes, n, 0);
    dlock_lock *l = renewed(c, "rn", (dlock_renew_options){0});
    held_for(n, l, "rn", 3 * TTL);
    uint32_t r0 = dlock_lock_renewals(l);
    cr_assert_geq(r0, 4, "only %u renewals in 3 TTLs", r0);

    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    cr_assert_eq(dlock_is_held(l), 0);
    /* Both counters are read only once renewal has stopped (release stops
     * it first): read while the watchdog runs, the two reads are two
     * moments, and a renewal landing between them would make them
     * disagree. Read here, they are final and must agree exactly: this
     * client extended nothing but this lock's renewals. */
    uint32_t r1 = dlock_lock_renewals(l);
    dlock_stats s1, s2;
    dlock_client_stats(c, &s1);
    cr_assert_geq(r1, r0);
    cr_assert_eq(s1.extends, r1, "%llu extends counted for %u renewals",
                 (unsigned long long)s1.extends, r1);
    test_sleep_ms(TWO_PERIODS);
    /* No zombie renewal: the key stays gone and both counts stay put. */
    cr_assert_eq(tc_wait_holding(nodes, n, "rn", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(dlock_lock_renewals(l), r1);
    dlock_client_stats(c, &s2);
    cr_assert_eq(s2.extends, s1.extends);
    cr_assert_eq(lost_calls(), 0, "on_lost after a clean release");
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_renewal, keeps_held_then_release_stops_it_single, .timeout = 15)
{
    check_keeps_and_stops(1);
}

Test(lock_renewal, keeps_held_then_release_stops_it_redlock, .timeout = 15)
{
    check_keeps_and_stops(NODES);
}

Test(lock_renewal, renew_with_own_ttl, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    dlock_lock *l = renewed(c, "own", (dlock_renew_options){.ttl_ms = 2500});
    int64_t end = dlock_now_ms() + 1000;
    long long maxp = 0;
    while (dlock_now_ms() < end) {
        for (size_t i = 0; i < NODES; i++) {
            long long p = tc_pttl(&nodes[i], "own");
            if (p > maxp)
                maxp = p;
        }
        test_sleep_ms(20);
    }
    cr_assert_gt(maxp, TTL, "renewal did not extend to its own ttl_ms (max PTTL %lld)", maxp);
    cr_assert_leq(maxp, 2500);
    cr_assert_eq(dlock_is_held(l), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

static int64_t wait_not_held(dlock_lock *l, int64_t timeout_ms)
{
    int64_t t0 = dlock_now_ms();
    while (dlock_is_held(l) && dlock_now_ms() - t0 < timeout_ms)
        test_sleep_ms(5);
    return dlock_now_ms() - t0;
}

Test(lock_renewal, max_renewals_lets_the_lease_run_out, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    int64_t t0 = dlock_now_ms();
    dlock_lock *l = renewed(c, "cap", (dlock_renew_options){.max_renewals = 2});
    wait_not_held(l, 5000);
    int64_t el = dlock_now_ms() - t0;
    cr_assert_eq(dlock_is_held(l), 0);
    cr_assert_eq(dlock_lock_renewals(l), 2, "renewals %u", dlock_lock_renewals(l));
    /* Two renewals at ~TTL/3 each, then one TTL: well past a single TTL. */
    cr_assert_geq(el, TTL + 100, "lease ended after %lld ms", (long long)el);
    cr_assert_leq(el, 3 * TTL + 300, "lease ended after %lld ms", (long long)el);
    test_sleep_ms(TWO_PERIODS);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "cap", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(dlock_lock_renewals(l), 2);
    cr_assert_eq(dlock_release(c, l), DLOCK_ERR_LOST);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_renewal, max_lease_ms_bounds_total_time, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    int64_t t0 = dlock_now_ms();
    dlock_lock *l = renewed(c, "lease", (dlock_renew_options){.max_lease_ms = 1500});
    wait_not_held(l, 5000);
    int64_t el = dlock_now_ms() - t0;
    cr_assert_eq(dlock_is_held(l), 0);
    /* Renewed past the first TTL, and stopped within one TTL of the cap. */
    cr_assert_geq(el, TTL + 100, "lease ended after %lld ms", (long long)el);
    cr_assert_leq(el, 1500 + TTL + 300, "lease ended after %lld ms", (long long)el);
    test_sleep_ms(TWO_PERIODS);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "lease", 0, TC_SETTLE_MS), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_renewal, all_nodes_down_reports_unavailable, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 100);
    dlock_lock *l = renewed(c, "down", (dlock_renew_options){0});
    test_sleep_ms(150);
    for (size_t i = 0; i < NODES; i++)
        cr_assert_eq(redis_kill(&nodes[i]), 0);
    dlock_err why = DLOCK_OK;
    int calls = tc_lost_wait(&lost, TTL + 500, &why);
    cr_assert_eq(calls, 1);
    cr_assert(dlock_err_is_unavailable(why), "on_lost with %s", dlock_strerror(why));
    cr_assert_neq(why, DLOCK_ERR_TAKEN);
    cr_assert_eq(dlock_is_held(l), 0);
    test_sleep_ms(TWO_PERIODS);
    cr_assert_eq(lost_calls(), 1, "on_lost must be called once");
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_renewal, deleted_key_is_lost_not_recreated, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    dlock_lock *l = renewed(c, "del", (dlock_renew_options){0});
    char out[32];
    const char *del[] = {"DEL", "lock:del"};
    test_sleep_ms(TTL / 3 + 50);
    for (size_t i = 0; i < NODES; i++) {
        tc_cmd(&nodes[i], out, sizeof out, 2, del);
        cr_assert_str_eq(out, "1");
    }
    dlock_err why = DLOCK_OK;
    cr_assert_eq(tc_lost_wait(&lost, TTL + 300, &why), 1);
    cr_assert_eq(why, DLOCK_ERR_LOST, "on_lost with %s", dlock_strerror(why));
    cr_assert_eq(dlock_is_held(l), 0);
    uint32_t r = dlock_lock_renewals(l);
    test_sleep_ms(TWO_PERIODS + 150);
    cr_assert_eq(tc_count_holding(nodes, NODES, "del"), 0, "renewal re-created the key");
    cr_assert_eq(dlock_lock_renewals(l), r);
    cr_assert_eq(lost_calls(), 1);
    dlock_stats s;
    dlock_client_stats(c, &s);
    cr_assert_geq(s.lost, 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_ERR_LOST);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_renewal, taken_over_minority_still_held, .timeout = 15)
{
    /* One node loses our key: the quorum still holds it, renewal goes on. */
    dlock_client *c = tc_client(nodes, NODES, 0);
    dlock_lock *l = renewed(c, "minor", (dlock_renew_options){0});
    char out[32];
    const char *del[] = {"DEL", "lock:minor"};
    tc_cmd(&nodes[2], out, sizeof out, 2, del);
    held_for(2, l, "minor", 2 * TTL);
    cr_assert_eq(tc_exists(&nodes[2], "minor"), 0, "renewal re-created the key on node 2");
    cr_assert_eq(lost_calls(), 0);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(lock_renewal, free_stops_renewal, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    dlock_lock *l = renewed(c, "fr", (dlock_renew_options){0});
    test_sleep_ms(150);
    dlock_lock_free(l); /* no release: the TTL must free it, no renewal may outlive the handle */
    test_sleep_ms(TTL + 100);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "fr", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(lost_calls(), 0);
    dlock_client_free(c);
}

Test(lock_renewal, client_free_stops_watchdog, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    dlock_lock *l = renewed(c, "cf", (dlock_renew_options){0});
    test_sleep_ms(150);
    dlock_client_free(c);
    test_sleep_ms(TTL + 100);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "cf", 0, TC_SETTLE_MS), 0);
    /* The handle outlives its client and is still freed cleanly. */
    dlock_lock_free(l);
}

Test(lock_renewal, many_locks_one_watchdog, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    dlock_lock *ls[8];
    char name[8][16];
    for (int i = 0; i < 8; i++) {
        snprintf(name[i], sizeof name[i], "many%d", i);
        ls[i] = renewed(c, name[i], (dlock_renew_options){0});
    }
    test_sleep_ms(3 * TTL);
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(dlock_is_held(ls[i]), 1, "lock %d", i);
        cr_assert_geq(holders_with_ttl(NODES, name[i]), 2, "lock %d", i);
        cr_assert_eq(dlock_release(c, ls[i]), DLOCK_OK);
        dlock_lock_free(ls[i]);
    }
    cr_assert_eq(lost_calls(), 0);
    dlock_client_free(c);
}

static void *ping_through(void *arg)
{
    size_t up = 0;

    return dlock_ping(arg, &up) == DLOCK_OK && up == 1 ? arg : NULL;
}

/* A holder stalled past its validity while its key still lives on the
 * node: the watchdog's next renewal must report the lock lost, not revive
 * it. The relay holds the SET 2 s (the key outlives the client's validity
 * by that much), then a PING 2.8 s, which holds the client's mutex, and so
 * the watchdog, until the validity has ended. */
Test(lock_renewal, a_renewal_due_after_the_validity_reports_lost, .timeout = 30)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    pthread_t th;
    void *ok = NULL;

    proxy = delay_proxy_start(nodes[0].port);
    cr_assert_not_null(proxy);
    tc_options_via(&o, &a, nodes, 1, 0, delay_proxy_port(proxy));
    o.command_timeout_ms = 5000;
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    cr_assert_not_null(ping_through(c), "%s", TC_ERR(c));
    delay_proxy_arm(proxy, "lock:pv", 7, 2000);
    cr_assert_eq(dlock_try_acquire(c, "pv", 4000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(delay_proxy_held(proxy), 1, "the SET was not held back");
    int64_t valid_until = dlock_now_ms() + dlock_lock_validity_ms(l);
    delay_proxy_arm(proxy, "PING", 4, 2800);
    cr_assert_eq(pthread_create(&th, NULL, ping_through, c), 0);
    for (int i = 0; i < 500 && delay_proxy_held(proxy) < 2; i++)
        test_sleep_ms(10);
    cr_assert_eq(delay_proxy_held(proxy), 2, "the PING was not held back");
    /* Registered behind the PING: the first renewal is long overdue. */
    cr_assert_eq(dlock_auto_renew(c, l, &(dlock_renew_options){0, 0, 0, tc_on_lost, &lost}),
                 DLOCK_OK);
    cr_assert_eq(pthread_join(th, &ok), 0);
    cr_assert_not_null(ok, "the PING failed");
    cr_assert_geq(dlock_now_ms(), valid_until, "the stall ended within the validity");
    dlock_err why = DLOCK_OK;
    cr_assert_eq(tc_lost_wait(&lost, 2000, &why), 1, "no on_lost");
    cr_assert_eq(why, DLOCK_ERR_LOST, "on_lost with %s", dlock_strerror(why));
    cr_assert_eq(dlock_is_held(l), 0);
    cr_assert_eq(dlock_lock_renewals(l), 0);
    /* The key was still ours on the node (a renewal would have found it),
     * not prolonged (a renewal sets it back to 4 s; about 1 s is left),
     * and expires on its own. */
    long long pttl = tc_pttl(&nodes[0], "pv");
    cr_assert(pttl > 0 && pttl < 3000, "PTTL %lld: the key was prolonged or is gone", pttl);
    cr_assert_eq(tc_wait_exists(&nodes[0], "pv", 0, 4000), 0);
    cr_assert_eq(lost_calls(), 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}
