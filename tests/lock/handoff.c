/* handoff.c - the one-node FIFO queue with direct hand-off (queue.c) under
 * faults, on real redis-servers:
 *   - a real step of the server's wall clock (the clockshift shim) must
 *     never give a waiter a validity longer than the key it was handed
 *     (and so two holders);
 *   - a waiter whose listing was removed and added again must still take
 *     its hand-off;
 *   - a waiter that gives up while Redis is stalled must not leave the key
 *     locked for its TTL;
 *   - a queued acquire without the right password must say AUTH, as a try
 *     does. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff_setup.h"

static redis_proc node;

static void teardown(void)
{
    ho_nodes_down(&node, 1);
}

TestSuite(lock_handoff, .fini = teardown);

/* One node; clock_shift: with the wall-clock step shim preloaded. */
static void node_up(int clock_shift, const char *password)
{
    ho_nodes_opts o = {.clock_shift = clock_shift, .password = password};

    cr_assert_eq(ho_nodes_up(&node, 1, &o), 0, "redis-server did not start");
}

/* A queued client (one node, wake_on_release: the hand-off path). A
 * command timeout long enough that a loaded machine does not turn a wait
 * into an error. */
static dlock_client *client(int command_timeout_ms, const char *password)
{
    ho_client_opts o = {.wake = 1, .command_timeout_ms = command_timeout_ms, .password = password};
    char err[DLOCK_ERRSTR_LEN] = "";
    dlock_client *c = ho_client(&node, 1, &o, err);

    cr_assert_not_null(c, "client: %s", err);
    return c;
}

/* Bounded wait until `want` waiters are listed on res. */
static void wait_listed(const char *res, long long want)
{
    long long got = -1;

    cr_assert_eq(tc_wait_listed(&node, 1, res, want, 15000, &got), -1,
                 "%lld waiters listed on %s, expected %lld", got, res, want);
}

/* What a holder saw at the instant it was handed the lock: its handle's
 * end of validity, and the key's real PTTL read right after on a separate
 * connection (redis_cmd), with the instant that read was answered. The
 * key certainly lives no longer than answered_ms + pttl, so a handle
 * valid past that instant outlives its key: another client may then take
 * the key while the handle still says held. */
typedef struct handed {
    dlock_err rc;
    uint64_t fence;
    int64_t valid_until_ms;
    long long pttl;
    int64_t answered_ms;
} handed;

static void look(handed *h, const dlock_lock *l, const char *res)
{
    h->fence = dlock_lock_fence(l);
    h->valid_until_ms = dlock_lock_valid_until_ms(l);
    h->pttl = tc_pttl(&node, res);
    h->answered_ms = dlock_now_ms();
}

static void assert_within_key(const handed *h, const char *who)
{
    long long key_left = h->pttl > 0 ? h->pttl : 0;

    cr_assert_eq(h->rc, DLOCK_OK, "%s: acquire gave %s", who, dlock_strerror(h->rc));
    /* +1: PTTL is whole ms. */
    cr_assert_leq(h->valid_until_ms, h->answered_ms + key_left + 1,
                  "%s (fence %llu) was handed a validity of %lld ms more, but the key's real PTTL "
                  "was %lld ms: its handle outlives the key",
                  who, (unsigned long long)h->fence, (long long)(h->valid_until_ms - h->answered_ms),
                  h->pttl);
}

/* A waiter thread: acquires (queued), looks at what it was handed, then
 * holds until told to release (release_now) and releases. */
typedef struct waiter {
    dlock_client *c;
    const char *res;
    uint32_t ttl_ms;
    int64_t deadline_ms;
    handed h;
    dlock_lock *lock;    /* kept by the thread when keep is set */
    int keep;            /* do not release: the main thread owns the handle after the join */
    atomic_int holding;
    atomic_int release_now;
    int64_t got_ms;
    unsigned long long retries;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    dlock_lock *l = NULL;
    dlock_stats st;
    int64_t end;

    w->h.rc = dlock_acquire(w->c, w->res, w->ttl_ms, w->deadline_ms, &l);
    w->got_ms = test_now_ms();
    if (l != NULL)
        look(&w->h, l, w->res);
    dlock_client_stats(w->c, &st);
    w->retries = (unsigned long long)st.retries;
    atomic_store(&w->holding, 1);
    if (l == NULL)
        return NULL;
    if (w->keep) {
        w->lock = l;
        return NULL;
    }
    end = test_now_ms() + 20000;
    while (!atomic_load(&w->release_now) && test_now_ms() < end)
        test_sleep_ms(2);
    dlock_release(w->c, l);
    dlock_lock_free(l);
    return NULL;
}

static void wait_holding(waiter *w)
{
    int64_t end = test_now_ms() + 20000;

    while (!atomic_load(&w->holding) && test_now_ms() < end)
        test_sleep_ms(2);
    cr_assert(atomic_load(&w->holding), "a waiter was never handed the lock");
}

/* A +3 s step of the server's clock taken while the waiter is listed,
 * before the release. A validity counted from two readings of the server's
 * clock (TIME) would count the step, and the waiter would believe it held a
 * 1 s key for 4 s. Asserted: its validity is within the key's real PTTL,
 * and a third client that takes the key after it expires finds the
 * waiter's handle no longer valid (no two holders). */
Test(lock_handoff, clock_step_before_handoff_gives_no_second_holder, .timeout = 60)
{
    const char *res = "step-before";
    dlock_client *hc, *wc, *third;
    dlock_lock *h = NULL, *t = NULL;
    waiter w;
    pthread_t th;
    int64_t tried_at = 0, end;
    dlock_err rc = DLOCK_ERR_TAKEN;

    node_up(1, NULL);
    hc = client(500, NULL);
    wc = client(500, NULL);
    third = client(500, NULL);
    cr_assert_eq(dlock_try_acquire(hc, res, 10000, &h), DLOCK_OK, "%s", TC_ERR(hc));
    memset(&w, 0, sizeof w);
    w.c = wc;
    w.res = res;
    w.ttl_ms = 1000;
    w.deadline_ms = dlock_now_ms() + 20000;
    w.keep = 1;
    cr_assert_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
    wait_listed(res, 1);
    cr_assert_eq(redis_clock_step(&node, 3000), 0);
    cr_assert_eq(dlock_release(hc, h), DLOCK_OK, "%s", TC_ERR(hc));
    pthread_join(th, NULL);
    assert_within_key(&w.h, "the waiter handed the key after the step");
    /* The third client polls until the key is free. */
    end = dlock_now_ms() + 10000;
    while (dlock_now_ms() < end) {
        tried_at = dlock_now_ms();
        rc = dlock_try_acquire(third, res, 1000, &t);
        if (rc != DLOCK_ERR_TAKEN)
            break;
        test_sleep_ms(10);
    }
    cr_assert_eq(rc, DLOCK_OK, "the third client never got the key: %s", TC_ERR(third));
    cr_assert_leq(w.h.valid_until_ms, tried_at,
                  "two holders: the third client took the key (fence %llu) while the waiter's "
                  "handle (fence %llu) was valid for %lld ms more",
                  (unsigned long long)dlock_lock_fence(t), (unsigned long long)w.h.fence,
                  (long long)(w.h.valid_until_ms - tried_at));
    cr_assert_gt(dlock_lock_fence(t), w.h.fence);
    dlock_release(third, t);
    dlock_lock_free(t);
    dlock_release(wc, w.lock);
    dlock_lock_free(w.lock);
    dlock_lock_free(h);
    dlock_client_free(third);
    dlock_client_free(wc);
    dlock_client_free(hc);
}

/* Steps during every holder's lease along a queue of three waiters: each
 * hand-off comes after a step taken while the previous holder held the
 * key, and every one of them must stay within the key it was handed. */
#define CHAIN 3
Test(lock_handoff, clock_steps_during_leases_never_outlive_the_key, .timeout = 90)
{
    const char *res = "step-chain";
    dlock_client *hc, *wc[CHAIN];
    dlock_lock *h = NULL;
    waiter w[CHAIN];
    pthread_t th[CHAIN];
    long long offset = 0;

    node_up(1, NULL);
    hc = client(500, NULL);
    cr_assert_eq(dlock_try_acquire(hc, res, 15000, &h), DLOCK_OK, "%s", TC_ERR(hc));
    memset(w, 0, sizeof w);
    for (int i = 0; i < CHAIN; i++) {
        wc[i] = client(500, NULL);
        w[i].c = wc[i];
        w[i].res = res;
        w[i].ttl_ms = 5000;
        w[i].deadline_ms = dlock_now_ms() + 30000;
        cr_assert_eq(pthread_create(&th[i], NULL, waiter_main, &w[i]), 0);
        wait_listed(res, i + 1); /* listed in this order: handed in this order */
    }
    offset += 1500;
    cr_assert_eq(redis_clock_step(&node, offset), 0);
    cr_assert_eq(dlock_release(hc, h), DLOCK_OK, "%s", TC_ERR(hc));
    for (int i = 0; i < CHAIN; i++) {
        char who[64];

        wait_holding(&w[i]);
        snprintf(who, sizeof who, "waiter %d", i + 1);
        assert_within_key(&w[i].h, who);
        /* The next step lands inside this holder's lease, before the
         * hand-off to the next waiter. */
        offset += 1500;
        cr_assert_eq(redis_clock_step(&node, offset), 0);
        atomic_store(&w[i].release_now, 1);
    }
    for (int i = 0; i < CHAIN; i++) {
        pthread_join(th[i], NULL);
        if (i > 0)
            cr_assert_gt(w[i].h.fence, w[i - 1].h.fence);
        dlock_client_free(wc[i]);
    }
    dlock_lock_free(h);
    dlock_client_free(hc);
}

/* A waiter whose listing is removed (here FLUSHALL, as an expired hand-off
 * or a restart would) and that lists itself again must take the next
 * hand-off. A waiter that counted every later hand-off from its first
 * listing would find the validity used up and pass the key on, again and
 * again, while later threads won: it would get the lock seconds after the
 * release, after a hundred retries. */
#define LATER 2
typedef struct looper {
    dlock_client *c;
    const char *res;
    atomic_int *stop;
    atomic_int *first_done;
    int before_first; /* acquisitions while the first waiter had not got the lock */
    int total;
} looper;

static void *looper_main(void *arg)
{
    looper *lp = arg;
    int64_t end = test_now_ms() + 30000;

    while (!atomic_load(lp->stop) && test_now_ms() < end) {
        dlock_lock *l = NULL;

        if (dlock_acquire(lp->c, lp->res, 50, dlock_now_ms() + 200, &l) != DLOCK_OK)
            continue;
        lp->total++;
        if (!atomic_load(lp->first_done))
            lp->before_first++;
        test_sleep_ms(2);
        dlock_release(lp->c, l);
        dlock_lock_free(l);
    }
    return NULL;
}

Test(lock_handoff, relisted_waiter_keeps_its_turn, .timeout = 90)
{
    const char *res = "relisted";
    const char *flush[] = {"FLUSHALL"};
    dlock_client *hc, *wc, *lc[LATER];
    dlock_lock *h = NULL;
    waiter w;
    looper lp[LATER];
    pthread_t th, lt[LATER];
    atomic_int stop = 0, first_done = 0;
    char out[64];
    int64_t released_at;

    node_up(0, NULL);
    hc = client(500, NULL);
    wc = client(500, NULL);
    cr_assert_eq(dlock_try_acquire(hc, res, 6000, &h), DLOCK_OK, "%s", TC_ERR(hc));
    memset(&w, 0, sizeof w);
    w.c = wc;
    w.res = res;
    w.ttl_ms = 50;
    w.deadline_ms = dlock_now_ms() + 30000;
    w.keep = 1;
    cr_assert_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
    wait_listed(res, 1);
    /* Mid-queue: the holder's key and the listing go; the holder takes the
     * key again at once, and the waiter, blocked until the old key's TTL
     * would have run out (about 6 s), lists itself again then. */
    tc_cmd(&node, out, sizeof out, 1, flush);
    dlock_lock_free(h);
    h = NULL;
    cr_assert_eq(dlock_try_acquire(hc, res, 20000, &h), DLOCK_OK, "%s", TC_ERR(hc));
    test_sleep_ms(200);
    wait_listed(res, 1);
    /* Later threads queue behind it and keep the key busy. */
    for (int i = 0; i < LATER; i++) {
        lc[i] = client(500, NULL);
        lp[i] = (looper){.c = lc[i], .res = res, .stop = &stop, .first_done = &first_done};
        cr_assert_eq(pthread_create(&lt[i], NULL, looper_main, &lp[i]), 0);
    }
    wait_listed(res, 1 + LATER);
    released_at = test_now_ms();
    cr_assert_eq(dlock_release(hc, h), DLOCK_OK, "%s", TC_ERR(hc));
    pthread_join(th, NULL);
    atomic_store(&first_done, 1);
    test_sleep_ms(100);
    atomic_store(&stop, 1);
    for (int i = 0; i < LATER; i++)
        pthread_join(lt[i], NULL);
    cr_assert_eq(w.h.rc, DLOCK_OK, "the first waiter: %s", dlock_strerror(w.h.rc));
    fprintf(stderr,
            "relisted_waiter_keeps_its_turn: first waiter got the lock %lld ms after the "
            "release, %llu retries in all; later threads meanwhile: %d and %d acquisitions\n",
            (long long)(w.got_ms - released_at), w.retries, lp[0].before_first,
            lp[1].before_first);
    /* It was first in the queue: the release hands it the key. A generous
     * bound for a loaded machine; a waiter that lost its turn would take
     * seconds, and the later threads would win a hundred times first. */
    cr_assert_lt(w.got_ms - released_at, 1000,
                 "the first waiter got the lock %lld ms after the release (%llu retries) while "
                 "later threads made %d and %d acquisitions",
                 (long long)(w.got_ms - released_at), w.retries, lp[0].before_first,
                 lp[1].before_first);
    cr_assert_leq(lp[0].before_first + lp[1].before_first, 2,
                  "later threads won %d times before the first waiter",
                  lp[0].before_first + lp[1].before_first);
    if (w.lock != NULL) {
        dlock_release(wc, w.lock);
        dlock_lock_free(w.lock);
    }
    dlock_lock_free(h);
    for (int i = 0; i < LATER; i++)
        dlock_client_free(lc[i]);
    dlock_client_free(wc);
    dlock_client_free(hc);
}

/* Redis stalls (SIGSTOP), the holder releases into the stall (its pass.lua
 * waits in the socket and hands the key to the waiter when Redis runs
 * again), and the waiter gives up inside the stall, its leave.lua
 * unanswered. The waiter must still pass the key on: otherwise a third
 * client finds it TAKEN for the waiter's whole TTL (5 s) with nobody
 * holding it. */
Test(lock_handoff, waiter_gives_up_in_a_stall, .timeout = 60)
{
    const char *res = "stall";
    dlock_client *hc, *wc, *third;
    dlock_lock *h = NULL, *t = NULL;
    waiter w;
    pthread_t th;
    int64_t resumed_at, got_at = 0, end;
    dlock_err rc = DLOCK_ERR_TAKEN;

    node_up(0, NULL);
    hc = client(100, NULL);
    wc = client(100, NULL);
    third = client(500, NULL);
    cr_assert_eq(dlock_try_acquire(hc, res, 10000, &h), DLOCK_OK, "%s", TC_ERR(hc));
    memset(&w, 0, sizeof w);
    w.c = wc;
    w.res = res;
    w.ttl_ms = 5000;
    w.deadline_ms = dlock_now_ms() + 500;
    w.keep = 1;
    cr_assert_eq(pthread_create(&th, NULL, waiter_main, &w), 0);
    wait_listed(res, 1);
    test_sleep_ms(100);
    cr_assert_eq(redis_pause(&node), 0);
    /* Into the stall: unanswered, so not OK; the script waits in the
     * socket and runs on SIGCONT. */
    cr_assert_neq(dlock_release(hc, h), DLOCK_OK);
    pthread_join(th, NULL); /* gave up inside the stall */
    cr_assert_neq(w.h.rc, DLOCK_OK, "the waiter got the lock from a stalled Redis");
    cr_assert_eq(redis_resume(&node), 0);
    resumed_at = test_now_ms();
    end = resumed_at + 8000;
    while (test_now_ms() < end) {
        rc = dlock_try_acquire(third, res, 1000, &t);
        if (rc == DLOCK_OK) {
            got_at = test_now_ms();
            break;
        }
        test_sleep_ms(10);
    }
    cr_assert_eq(rc, DLOCK_OK, "the third client never got the key: %s", TC_ERR(third));
    fprintf(stderr, "waiter_gives_up_in_a_stall: the third client got the key %lld ms after "
                    "SIGCONT\n",
            (long long)(got_at - resumed_at));
    /* The waiter's TTL is 5 s; the clean-up frees the key as soon as Redis
     * runs its queued commands. */
    cr_assert_lt(got_at - resumed_at, 2000,
                 "the key stayed locked %lld ms after the stall, with nobody holding it",
                 (long long)(got_at - resumed_at));
    dlock_release(third, t);
    dlock_lock_free(t);
    dlock_lock_free(h);
    dlock_client_free(third);
    dlock_client_free(wc);
    dlock_client_free(hc);
}

/* A waiter past its stay (gone without leaving: a crash, a leave that was
 * lost) is skipped by the release, not handed the key: else the key would
 * sit under a token nobody holds for that waiter's whole TTL. Its entry is
 * written as enter.lua writes one, "<token>:<ttl ms>:<stay ms>" scored
 * with its enqueue time in microseconds of Redis's clock, 60 s ago for a
 * stay of 1 s. */
Test(lock_handoff, a_waiter_past_its_stay_is_not_handed_the_key, .timeout = 30)
{
    const char *res = "stale";
    dlock_client *hc, *nc;
    dlock_lock *h = NULL, *n = NULL;
    char secs[64], score[32], out[128];
    const char *time_argv[] = {"EVAL", "return redis.call('TIME')[1]", "0"};

    node_up(0, NULL);
    hc = client(500, NULL);
    nc = client(500, NULL);
    cr_assert_eq(dlock_try_acquire(hc, res, 10000, &h), DLOCK_OK, "%s", TC_ERR(hc));
    cr_assert_eq(redis_cmd(&node, secs, sizeof secs, 3, time_argv), 0);
    snprintf(score, sizeof score, "%lld", (strtoll(secs, NULL, 10) - 60) * 1000000LL);
    const char *zadd_argv[] = {"ZADD", DLOCK_WAITERS_NS "stale", score, "0123456789abcdef0123456789abcdef:10000:1000"};
    cr_assert_eq(redis_cmd(&node, out, sizeof out, 4, zadd_argv), 0);
    cr_assert_str_eq(out, "1", "ZADD: %s", out);
    cr_assert_eq(dlock_release(hc, h), DLOCK_OK, "%s", TC_ERR(hc));
    cr_assert_eq(tc_exists(&node, res), 0, "the release handed the key to a waiter 60 s past its 1 s stay");
    cr_assert_eq(dlock_try_acquire(nc, res, 1000, &n), DLOCK_OK, "%s", TC_ERR(nc));
    cr_assert_eq(dlock_release(nc, n), DLOCK_OK, "%s", TC_ERR(nc));
    dlock_lock_free(n);
    dlock_lock_free(h);
    dlock_client_free(nc);
    dlock_client_free(hc);
}

/* enter.lua's EVALSHA has 12 arguments, and Redis
 * answers an unauthenticated client sending more than 10 with "ERR
 * Protocol error: unauthenticated multibulk length". A queued acquire
 * must report AUTH like a try does. */
static void both_calls_say_auth(const char *password)
{
    dlock_client *c;
    dlock_lock *l = NULL;
    dlock_err tried, waited;

    node_up(0, "s3cret-pass");
    c = client(500, password);
    tried = dlock_try_acquire(c, "auth", 1000, &l);
    cr_assert_eq(tried, DLOCK_ERR_AUTH, "try: %s (%s)", dlock_strerror(tried), TC_ERR(c));
    waited = dlock_acquire(c, "auth", 1000, dlock_now_ms() + 300, &l);
    cr_assert_eq(waited, DLOCK_ERR_AUTH, "queued acquire: %s (%s)", dlock_strerror(waited),
                 TC_ERR(c));
    cr_assert_null(l);
    dlock_client_free(c);
}

Test(lock_handoff, queued_acquire_without_password_says_auth, .timeout = 30)
{
    both_calls_say_auth(NULL);
}

Test(lock_handoff, queued_acquire_with_wrong_password_says_auth, .timeout = 30)
{
    both_calls_say_auth("wrong-pass");
}
