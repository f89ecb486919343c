/* undo.c - the undo of a failed acquisition (acquire.c, Redlock step 5) on
 * a node whose SET lands late. It deletes only its own token's key (never
 * the key another client took there meanwhile). It hands the key to the
 * waiter queued behind it there at once, as the multi and batch undos do,
 * instead of leaving it to expire. Node C is reached through a relay
 * that lags every command of the failing client until its next one. */
#include <criterion/criterion.h>
#include <pthread.h>

#include "delay_proxy.h"
#include "lock_common.h"

#define NODES 3
/* Node C's command timeout for the failing client: the refusals of A and B
 * decide nothing, so its round ends when C's answer times out. */
#define CMD_TIMEOUT 300
/* How long the relay holds the undo at most: ample time for the steps the
 * tests put between the SET landing and the undo. */
#define LAG_MS 4000

static redis_proc nodes[NODES];
static delay_proxy *proxy;

static void setup(void)
{
    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0, "redis nodes did not start");
}

static void teardown(void)
{
    delay_proxy_stop(proxy);
    tc_nodes_down(nodes, NODES);
}

TestSuite(lock_undo, .init = setup, .fini = teardown);

/* A client on A, B and C through a fresh relay (the suite's proxy),
 * warmed up (connected, scripts loaded) before the relay starts to lag. */
static dlock_client *failing_client(void)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";

    proxy = delay_proxy_start(nodes[2].port);
    cr_assert_not_null(proxy);
    tc_options_via(&o, &a, nodes, NODES, 2, delay_proxy_port(proxy));
    o.command_timeout_ms = CMD_TIMEOUT;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    cr_assert_eq(dlock_try_acquire(c, "warm", 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_lock_free(l);
    return c;
}

/* res held by another token on A and B (a client of those two nodes). */
static dlock_client *hold_a_and_b(const char *res, dlock_lock **l)
{
    dlock_client *b = tc_client(nodes, 2, 0);

    cr_assert_not_null(b);
    cr_assert_eq(dlock_try_acquire(b, res, 20000, l), DLOCK_OK, "%s", TC_ERR(b));
    return b;
}

/* The failing attempt: A and B refuse, C's answer is late; its SET lands
 * on C when the undo is sent behind it, and the relay keeps the undo. */
static void fail_with_a_late_set_on_c(dlock_client *c, const char *res, uint32_t ttl_ms)
{
    dlock_lock *l = (dlock_lock *)0x1;

    delay_proxy_lag(proxy, LAG_MS);
    cr_assert_eq(dlock_try_acquire(c, res, ttl_ms, &l), DLOCK_ERR_TAKEN, "%s", TC_ERR(c));
    cr_assert_null(l);
    cr_assert_eq(tc_wait_exists(&nodes[2], res, 1, 2000), 1, "the late SET did not land on C");
}

/* Lets the relay send the undo it holds, and waits for it to have run: a
 * PING on the same connection answers after it. */
static void deliver_the_undo(dlock_client *c)
{
    size_t up = 0;

    delay_proxy_lag(proxy, 0);
    cr_assert_eq(dlock_ping(c, &up), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(up, NODES);
}

Test(lock_undo, an_undo_spares_the_key_another_client_took_meanwhile, .timeout = 30)
{
    dlock_lock *hb = NULL, *hc = NULL;
    dlock_client *a = failing_client(), *b = hold_a_and_b("u", &hb);
    dlock_client *c = tc_client(&nodes[2], 1, 0);

    cr_assert_not_null(c);
    /* A 300 ms TTL: the failed attempt's key on C expires while its undo
     * is still held back. */
    fail_with_a_late_set_on_c(a, "u", 300);
    cr_assert_eq(tc_wait_exists(&nodes[2], "u", 0, 2000), 0, "the failed attempt's key stayed");
    cr_assert_eq(dlock_try_acquire(c, "u", 20000, &hc), DLOCK_OK, "%s", TC_ERR(c));
    deliver_the_undo(a);
    /* The undo found another token there: C's holder keeps its key. */
    cr_assert_eq(tc_exists(&nodes[2], "u"), 1, "the undo deleted another holder's key");
    cr_assert_eq(dlock_extend(c, hc, 20000), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, hc), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(tc_exists(&nodes[2], "u"), 0);
    cr_assert_eq(dlock_release(b, hb), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(hb);
    dlock_lock_free(hc);
    dlock_client_free(a);
    dlock_client_free(b);
    dlock_client_free(c);
}

/* The undo goes to a node whose answer was lost, not only to those that
 * granted: C's SET landed though its reply came too late to count, and
 * our key must go with the undo, not stay until its TTL. The SET reaches C
 * here whether or not an undo follows it, so only the undo explains the
 * key's absence. */
Test(lock_undo, an_undo_reaches_the_node_whose_answer_was_lost, .timeout = 30)
{
    char fkey[TC_KEY_LEN];
    dlock_lock *hb = NULL, *l = (dlock_lock *)0x1;
    dlock_client *a = failing_client(), *b = hold_a_and_b("m", &hb);
    long long fence_c = tc_get_ll(&nodes[2], tc_fence_key(fkey, "m"));
    int64_t t0, took;

    delay_proxy_lag(proxy, LAG_MS);
    t0 = dlock_now_ms();
    /* A 20 s TTL: only the undo can remove the key within the test. */
    cr_assert_eq(dlock_try_acquire(a, "m", 20000, &l), DLOCK_ERR_TAKEN, "%s", TC_ERR(a));
    took = dlock_now_ms() - t0;
    cr_assert_null(l);
    /* The round waited out C's timeout: C's answer was lost, neither a
     * grant nor a refusal: C is a node where the SET may have landed. */
    cr_assert_geq(took, CMD_TIMEOUT, "the attempt ended after %lld ms, before C's timeout",
                  (long long)took);
    /* Whatever the relay holds goes to C now, in order: the late SET, and
     * the undo behind it if one was sent. */
    deliver_the_undo(a);
    cr_assert_eq(tc_get_ll(&nodes[2], fkey), fence_c + 1, "the late SET did not run on C");
    cr_assert_eq(tc_exists(&nodes[2], "m"), 0,
                 "the failed attempt's key stayed on the node whose answer was lost "
                 "(PTTL %lld ms: no undo sent there)", tc_pttl(&nodes[2], "m"));
    cr_assert_eq(dlock_release(b, hb), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(hb);
    dlock_client_free(a);
    dlock_client_free(b);
}

typedef struct waiter {
    dlock_client *c;
    dlock_err rc;
    int64_t granted_ms;
    dlock_lock *l;
} waiter;

static void *wait_for_h(void *arg)
{
    waiter *w = arg;

    w->rc = dlock_acquire(w->c, "h", 5000, dlock_now_ms() + 15000, &w->l);
    w->granted_ms = dlock_now_ms();
    return NULL;
}

Test(lock_undo, a_waiter_behind_a_failed_attempt_gets_the_key_at_once, .timeout = 60)
{
    dlock_lock *hb = NULL;
    dlock_client *a = failing_client(), *b = hold_a_and_b("h", &hb);
    waiter w = {tc_client(&nodes[2], 1, 0), DLOCK_ERR_ARG, 0, NULL};
    pthread_t th;

    cr_assert_not_null(w.c);
    /* A 20 s TTL: left to expire, the key would keep the waiter 20 s. */
    fail_with_a_late_set_on_c(a, "h", 20000);
    cr_assert_eq(pthread_create(&th, NULL, wait_for_h, &w), 0);
    long long seen = -1;
    cr_assert_eq(tc_wait_listed(&nodes[2], 1, "h", 1, 5000, &seen), -1, "listed: %lld", seen);
    cr_assert_eq(tc_wait_blocked(&nodes[2], 1, 5000), 1, "the waiter is not blocked on C");
    int64_t t0 = dlock_now_ms();
    deliver_the_undo(a);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_eq(w.rc, DLOCK_OK, "%s: %s", dlock_strerror(w.rc), TC_ERR(w.c));
    /* Handed over by the undo: well under a second, not the 20 s TTL. */
    cr_assert_lt(w.granted_ms - t0, 1000, "granted %lld ms after the undo",
                 (long long)(w.granted_ms - t0));
    cr_assert_eq(tc_listed_on(&nodes[2], "h"), 0);
    cr_assert_eq(dlock_release(w.c, w.l), DLOCK_OK, "%s", TC_ERR(w.c));
    cr_assert_eq(tc_exists(&nodes[2], "h"), 0);
    cr_assert_eq(dlock_release(b, hb), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(hb);
    dlock_lock_free(w.l);
    dlock_client_free(a);
    dlock_client_free(b);
    dlock_client_free(w.c);
}
