/* wake.c - wake on release:
 *   - a blocked waiter gets the lock within a few ms of the release (not
 *     after its next poll);
 *   - it still gets it when the holder dies without releasing (the wait is
 *     bounded by the key's TTL);
 *   - contending threads share the lock fairly (FIFO hand-off, no
 *     barging).
 * The same holds for Redlock on 3 nodes. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "handoff_setup.h"

#define NODES 3
static redis_proc nodes[NODES];

static void setup(void)
{
    cr_assert_eq(ho_nodes_up(nodes, NODES, NULL), 0);
}

static void teardown(void)
{
    ho_nodes_down(nodes, NODES);
}

TestSuite(lock_wake, .init = setup, .fini = teardown);

/* A polling waiter would look every 250 ms: it could not see a release
 * sooner than up to 250 ms after it, so "< 50 ms" is the wake-up's doing. */
#define POLL_MS 250
#define WOKEN_WITHIN_MS 50

static dlock_client *client(size_t n, int wake)
{
    /* A 500 ms command timeout: a loaded machine must not turn a wait into
     * an error. */
    ho_client_opts o = {.wake = wake, .command_timeout_ms = 500, .retry_fixed_ms = POLL_MS};
    dlock_client *c = ho_client(nodes, n, &o, NULL);

    cr_assert_not_null(c);
    return c;
}

typedef struct waiter_run {
    dlock_client *c;
    const char *resource;
    int64_t deadline_ms;
    dlock_err rc;
    int64_t got_ms;
    uint64_t fence;
} waiter_run;

static void *waiter_main(void *arg)
{
    waiter_run *w = arg;
    dlock_lock *l = NULL;
    w->rc = dlock_acquire(w->c, w->resource, 5000, w->deadline_ms, &l);
    w->got_ms = dlock_now_ms();
    if (l != NULL) {
        w->fence = dlock_lock_fence(l);
        dlock_release(w->c, l);
        dlock_lock_free(l);
    }
    return NULL;
}

/* The holder keeps the lock 300 ms while a waiter blocks; the waiter must
 * hold it within WOKEN_WITHIN_MS of the release. holder_wakes = 0: the
 * holder is a polling client, whose release must still wake the waiter. */
static void woken_at_release_by(size_t n, const char *resource, int holder_wakes)
{
    dlock_client *holder = client(n, holder_wakes), *wc = client(n, 1);
    dlock_lock *h = NULL;
    pthread_t t;
    waiter_run w = {.c = wc, .resource = resource, .deadline_ms = dlock_now_ms() + 3000};

    cr_assert_eq(dlock_try_acquire(holder, resource, 5000, &h), DLOCK_OK);
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    usleep(300 * 1000);
    int64_t released = dlock_now_ms();
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.rc, DLOCK_OK, "waiter: %s", dlock_strerror(w.rc));
    cr_assert_lt(w.got_ms - released, WOKEN_WITHIN_MS, "waiter got the lock %lld ms after the release",
                 (long long)(w.got_ms - released));
    cr_assert_gt(w.fence, dlock_lock_fence(h), "the hand-off must still give a larger fence");
    dlock_lock_free(h);
    dlock_client_free(holder);
    dlock_client_free(wc);
}

static void woken_at_release(size_t n, const char *resource)
{
    woken_at_release_by(n, resource, 1);
}

Test(lock_wake, waiter_woken_at_release, .timeout = 20)
{
    woken_at_release(1, "wk-single");
}

Test(lock_wake, redlock_waiter_woken_at_release, .timeout = 20)
{
    woken_at_release(NODES, "wk-redlock");
}

/* The holder is a process killed while holding the lock: no release, no
 * wake. The waiter must get in once the key expires - blocking for the
 * key's remaining TTL, not until its own 4 s deadline. */
Test(lock_wake, holder_killed_waiter_gets_in_after_ttl, .timeout = 20)
{
    int pipefd[2];
    char ok = 0;
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid = tc_fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dlock_client *c = tc_client(nodes, 1, 500);
        dlock_lock *l = NULL;
        char r = (c != NULL && dlock_try_acquire(c, "wk-dead", 600, &l) == DLOCK_OK) ? 1 : 0;
        tc_write_all(pipefd[1], &r, 1);
        pause(); /* killed here, holding the lock */
        _exit(0);
    }
    cr_assert_eq(tc_read_all(pipefd[0], &ok, 1, 5000), 0);
    cr_assert_eq(ok, 1, "the holder process did not get the lock");
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(kill(pid, SIGKILL), 0);
    tc_wait_child(pid, 5000);
    close(pipefd[0]);
    close(pipefd[1]);

    dlock_client *wc = client(1, 1);
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_acquire(wc, "wk-dead", 5000, t0 + 4000, &l), DLOCK_OK);
    int64_t el = dlock_now_ms() - t0;
    cr_assert_lt(el, 600 + POLL_MS + 300, "waited %lld ms for a 600 ms key", (long long)el);
    cr_assert_eq(dlock_release(wc, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(wc);
}

/* Fairness: THREADS workers, each with its own client, loop acquire /
 * hold / release with no pause in between (the releaser is first in line
 * to barge back in). With the FIFO hand-off every worker gets its turn:
 * per-worker successes within a factor of 2. */
#define THREADS 8
#define RUN_MS 2000

typedef struct fair_worker {
    dlock_client *c;
    int64_t end_ms;
    int successes;
    int errors;
} fair_worker;

static void *fair_main(void *arg)
{
    fair_worker *fw = arg;
    while (dlock_now_ms() < fw->end_ms) {
        dlock_lock *l = NULL;
        dlock_err e = dlock_acquire(fw->c, "wk-fair", 5000, fw->end_ms, &l);
        if (e != DLOCK_OK) {
            if (e != DLOCK_ERR_TAKEN)
                fw->errors++;
            continue;
        }
        usleep(2000);
        if (dlock_release(fw->c, l) == DLOCK_OK)
            fw->successes++;
        else
            fw->errors++;
        dlock_lock_free(l);
    }
    return NULL;
}

static void fairness(size_t n)
{
    fair_worker fw[THREADS];
    pthread_t t[THREADS];
    int64_t end = dlock_now_ms() + RUN_MS;
    int lo = 1 << 30, hi = 0, total = 0;

    for (int i = 0; i < THREADS; i++)
        fw[i] = (fair_worker){.c = client(n, 1), .end_ms = end};
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, fair_main, &fw[i]), 0);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        cr_assert_eq(fw[i].errors, 0, "worker %d had %d errors", i, fw[i].errors);
        lo = fw[i].successes < lo ? fw[i].successes : lo;
        hi = fw[i].successes > hi ? fw[i].successes : hi;
        total += fw[i].successes;
        dlock_client_free(fw[i].c);
    }
    cr_log_info("fairness on %zu node(s): %d cycles, per worker %d..%d", n, total, lo, hi);
    cr_assert_gt(lo, 0, "a worker never got the lock (max %d)", hi);
    cr_assert_leq(hi, 2 * lo, "unfair: per-worker successes %d..%d", lo, hi);
}

Test(lock_wake, fifo_fairness_single, .timeout = 30)
{
    fairness(1);
}

Test(lock_wake, fifo_fairness_redlock, .timeout = 30)
{
    fairness(NODES);
}

/* ---- one node: the direct hand-off (lock/src/queue.c) ---- */

static long long zcard_waiters(const char *resource)
{
    char key[TC_KEY_LEN], out[64];
    snprintf(key, sizeof(key), "%s%s", DLOCK_WAITERS_NS, resource);
    const char *argv[2] = {"ZCARD", key};
    tc_cmd(&nodes[0], out, sizeof(out), 2, argv);
    return atoll(out);
}

/* Polls (bounded) until `want` waiters are listed on node 0. */
static void wait_listed(const char *resource, long long want)
{
    for (int i = 0; i < 500 && zcard_waiters(resource) < want; i++)
        usleep(2000);
    cr_assert_eq(zcard_waiters(resource), want, "waiters listed: %lld, want %lld",
                 zcard_waiters(resource), want);
}

#define QUEUED 5

typedef struct queued_run {
    dlock_client *c;
    const char *resource;
    int64_t deadline_ms;
    uint32_t ttl_ms;
    dlock_err rc;
    int order;          /* position in which it got the lock, from 1 */
    uint64_t fence;
    int64_t valid_until; /* dlock_lock_valid_until_ms right after the wake */
    int64_t key_dies_by; /* PTTL read right after: the key expires before this */
    dlock_stats stats;
} queued_run;

static pthread_mutex_t order_mu = PTHREAD_MUTEX_INITIALIZER;
static int order_next;

static void *queued_main(void *arg)
{
    queued_run *q = arg;
    dlock_lock *l = NULL;
    q->rc = dlock_acquire(q->c, q->resource, q->ttl_ms, q->deadline_ms, &l);
    if (l != NULL) {
        q->valid_until = dlock_lock_valid_until_ms(l);
        long long pttl = tc_pttl(&nodes[0], q->resource);
        q->key_dies_by = dlock_now_ms() + pttl;
        pthread_mutex_lock(&order_mu);
        q->order = ++order_next;
        pthread_mutex_unlock(&order_mu);
        q->fence = dlock_lock_fence(l);
        usleep(20 * 1000);
        dlock_release(q->c, l);
        dlock_lock_free(l);
    }
    dlock_client_stats(q->c, &q->stats);
    return NULL;
}

/* Waiters queued one after the other (each listed before the next starts)
 * get the lock in that order. Each is handed it by the previous holder's
 * release without a round of its own (one attempt: the one that listed
 * it). Fences keep growing, and each validity ends before the key's real
 * expiry (PTTL read right after the wake; the clients have no drift
 * allowance, so nothing hides an optimistic validity). */
Test(lock_wake, handoff_fifo_one_attempt_fence_validity, .timeout = 30)
{
    const char *res = "wk-fifo";
    dlock_options o;
    tc_addrs a;
    dlock_client *holder = client(1, 1);
    dlock_lock *h = NULL;
    queued_run q[QUEUED];
    pthread_t t[QUEUED];

    order_next = 0;
    cr_assert_eq(dlock_try_acquire(holder, res, 5000, &h), DLOCK_OK);
    for (int i = 0; i < QUEUED; i++) {
        tc_options(&o, &a, nodes, 1);
        o.drift_factor = 0.0;
        o.drift_min_ms = 0;
        o.command_timeout_ms = 500;
        q[i] = (queued_run){.resource = res, .deadline_ms = dlock_now_ms() + 8000, .ttl_ms = 3000};
        cr_assert_eq(dlock_client_new(&o, &q[i].c, NULL, 0), DLOCK_OK);
        cr_assert_eq(pthread_create(&t[i], NULL, queued_main, &q[i]), 0);
        wait_listed(res, i + 1);
        usleep(5 * 1000); /* the listing's microsecond score is older than the next one's */
    }
    usleep(100 * 1000); /* the last one is blocked in BLPOP, listed for a while */
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    uint64_t prev = dlock_lock_fence(h);
    for (int i = 0; i < QUEUED; i++)
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < QUEUED; i++) {
        cr_assert_eq(q[i].rc, DLOCK_OK, "waiter %d: %s", i, dlock_strerror(q[i].rc));
        cr_assert_eq(q[i].order, i + 1, "waiter %d got the lock in place %d", i, q[i].order);
        cr_assert_eq(q[i].stats.attempts, 1, "waiter %d made %llu attempts (a claim round?)", i,
                     (unsigned long long)q[i].stats.attempts);
        cr_assert_gt(q[i].fence, prev, "fence %llu after %llu", (unsigned long long)q[i].fence,
                     (unsigned long long)prev);
        prev = q[i].fence;
        cr_assert_leq(q[i].valid_until, q[i].key_dies_by,
                      "waiter %d: valid until %lld, but the key dies by %lld", i,
                      (long long)q[i].valid_until, (long long)q[i].key_dies_by);
        cr_assert_gt(q[i].valid_until, q[i].key_dies_by - 3000, "validity far too short");
        dlock_client_free(q[i].c);
    }
    cr_assert_eq(zcard_waiters(res), 0, "listings left behind");
    cr_assert_eq(tc_exists(&nodes[0], res), 0, "the last release must free the key");
    dlock_lock_free(h);
    dlock_client_free(holder);
}

/* A polling client (wake_on_release = 0) holds: its release must hand the
 * key to the blocked waiter at once, not leave it to wait for the key's TTL. */
Test(lock_wake, polling_holder_release_wakes_waiter, .timeout = 20)
{
    woken_at_release_by(1, "wk-mixed-release", 0);
}

/* A waiter that died while listed is handed the key (it was first in
 * line). That costs the next waiter at most one TTL - the previous
 * holder's (it bounded the next waiter's BLPOP) or the dead waiter's,
 * whichever ends later - never its own long deadline. */
Test(lock_wake, handoff_to_dead_waiter_costs_one_ttl, .timeout = 30)
{
    const char *res = "wk-deadwaiter";
    dlock_client *holder = client(1, 1), *wc = client(1, 1);
    dlock_lock *h = NULL;
    cr_assert_eq(dlock_try_acquire(holder, res, 1500, &h), DLOCK_OK);
    pid_t pid = tc_fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dlock_client *c = tc_client(nodes, 1, 500);
        dlock_lock *l = NULL;
        if (c != NULL)
            (void)dlock_acquire(c, res, 600, dlock_now_ms() + 20000, &l);
        _exit(0);
    }
    wait_listed(res, 1);
    cr_assert_eq(kill(pid, SIGKILL), 0);
    tc_wait_child(pid, 5000);
    waiter_run w = {.c = wc, .resource = res, .deadline_ms = dlock_now_ms() + 10000};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    wait_listed(res, 2);
    int64_t released = dlock_now_ms();
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    cr_assert_eq(tc_exists(&nodes[0], res), 1, "the key went to the dead waiter (listed first)");
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.rc, DLOCK_OK, "waiter: %s", dlock_strerror(w.rc));
    int64_t el = w.got_ms - released;
    cr_assert_lt(el, 1500 + 500, "the live waiter waited %lld ms behind a dead one's 600 ms key",
                 (long long)el);
    cr_assert_gt(w.fence, dlock_lock_fence(h) + 1, "the dead waiter's hand-off took a fence too");
    dlock_lock_free(h);
    dlock_client_free(holder);
    dlock_client_free(wc);
}

/* A waiter's deadline passes just as the holder releases: whether the
 * release lands before the waiter gave up (it gets the lock) or after (the
 * key is deleted), no key may be left locked for nobody. The release time
 * is swept across the waiter's deadline to hit the moments in between. */
Test(lock_wake, deadline_at_handoff_leaks_no_lock, .timeout = 60)
{
    const char *res = "wk-deadline";
    dlock_client *holder = client(1, 1), *wc = client(1, 1);
    int got = 0, gave_up = 0;

    for (int i = 0; i < 40; i++) {
        dlock_lock *h = NULL;
        cr_assert_eq(dlock_try_acquire(holder, res, 5000, &h), DLOCK_OK);
        int64_t deadline = dlock_now_ms() + 60;
        waiter_run w = {.c = wc, .resource = res, .deadline_ms = deadline};
        pthread_t t;
        cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
        /* from 5 ms before the deadline to 35 ms after, in 1 ms steps: the
         * waiter gives up a round trip or two after its deadline */
        int64_t at_us = (deadline - 5 + i) * 1000;
        while (dlock_now_ms() * 1000 < at_us)
            usleep(100);
        cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
        dlock_lock_free(h);
        cr_assert_eq(pthread_join(t, NULL), 0);
        cr_assert(w.rc == DLOCK_OK || w.rc == DLOCK_ERR_TAKEN, "waiter: %s", dlock_strerror(w.rc));
        if (w.rc == DLOCK_OK)
            got++;
        else
            gave_up++;
        /* waiter_main released what it got: the key must be free now */
        cr_assert_eq(tc_wait_exists(&nodes[0], res, 0, 200), 0,
                     "round %d (%s): the key is left locked (PTTL %lld)", i,
                     w.rc == DLOCK_OK ? "waiter got it" : "waiter gave up",
                     tc_pttl(&nodes[0], res));
        cr_assert_eq(zcard_waiters(res), 0, "round %d: a listing was left behind", i);
    }
    cr_log_info("deadline sweep: %d got the lock, %d gave up", got, gave_up);
    dlock_client_free(holder);
    dlock_client_free(wc);
}

/* Polling clients (wake_on_release = 0) and waking clients on one key:
 * never two holders at once, every waking worker gets its turns, and a
 * polling worker's only failures are TAKEN at its deadline. Fences grow
 * strictly in the order the holders held the lock. */
#define MIXED 6
#define MIXED_POLLING 2
static atomic_int in_section;
static pthread_mutex_t fences_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t fences[20000];
static int nfences;

typedef struct mixed_worker {
    dlock_client *c;
    int64_t end_ms;
    int successes, overlaps, errors;
} mixed_worker;

static void *mixed_main(void *arg)
{
    mixed_worker *m = arg;
    while (dlock_now_ms() < m->end_ms) {
        dlock_lock *l = NULL;
        dlock_err e = dlock_acquire(m->c, "wk-mixed", 5000, dlock_now_ms() + 300, &l);
        if (e != DLOCK_OK) {
            m->errors += e != DLOCK_ERR_TAKEN;
            continue;
        }
        if (atomic_exchange(&in_section, 1) != 0)
            m->overlaps++;
        pthread_mutex_lock(&fences_mu);
        if (nfences < (int)(sizeof(fences) / sizeof(fences[0])))
            fences[nfences++] = dlock_lock_fence(l);
        pthread_mutex_unlock(&fences_mu);
        usleep(500);
        atomic_store(&in_section, 0);
        if (dlock_release(m->c, l) == DLOCK_OK)
            m->successes++;
        else
            m->errors++;
        dlock_lock_free(l);
    }
    return NULL;
}

Test(lock_wake, mixed_polling_and_waking_clients, .timeout = 30)
{
    mixed_worker m[MIXED];
    pthread_t t[MIXED];
    int64_t end = dlock_now_ms() + 1500;
    int total = 0;

    nfences = 0;
    atomic_store(&in_section, 0);
    for (int i = 0; i < MIXED; i++)
        m[i] = (mixed_worker){.c = client(1, i >= MIXED_POLLING), .end_ms = end};
    for (int i = 0; i < MIXED; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, mixed_main, &m[i]), 0);
    for (int i = 0; i < MIXED; i++)
        cr_assert_eq(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < MIXED; i++) {
        cr_log_info("mixed worker %d (%s): %d", i, i < MIXED_POLLING ? "polling" : "waking",
                    m[i].successes);
        cr_assert_eq(m[i].overlaps, 0, "worker %d entered while another held the lock", i);
        cr_assert_eq(m[i].errors, 0, "worker %d had %d errors", i, m[i].errors);
        if (i >= MIXED_POLLING)
            cr_assert_gt(m[i].successes, 0, "waking worker %d never got the lock", i);
        total += m[i].successes;
        dlock_client_free(m[i].c);
    }
    cr_assert_eq(nfences, total);
    for (int i = 1; i < nfences; i++)
        cr_assert_gt(fences[i], fences[i - 1], "fence %d: %llu after %llu", i,
                     (unsigned long long)fences[i], (unsigned long long)fences[i - 1]);
}

/* The exact moment the sweep above can only hope to hit: the release
 * hands the key over after the waiter's last attempt (enter.lua, which
 * found the key held) and before it takes itself off the list. CLIENT
 * PAUSE WRITE holds both scripts back and then runs them in arrival order:
 * the waiter's last attempt, then the release. Then comes the waiter's
 * leave.lua, which must find the key handed to it. The waiter must take
 * it, not walk away from a key locked for its whole TTL. */
static void sleep_until(int64_t at_ms)
{
    while (dlock_now_ms() < at_ms)
        usleep(500);
}

Test(lock_wake, handoff_between_last_try_and_giving_up_is_taken, .timeout = 20)
{
    const char *res = "wk-giveup";
    dlock_client *holder = client(1, 1), *wc = client(1, 1);
    dlock_lock *h = NULL;
    char out[64];
    const char *pause[4] = {"CLIENT", "PAUSE", "400", "WRITE"};

    cr_assert_eq(dlock_try_acquire(holder, res, 5000, &h), DLOCK_OK);
    int64_t deadline = dlock_now_ms() + 300;
    waiter_run w = {.c = wc, .resource = res, .deadline_ms = deadline};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    wait_listed(res, 1);
    sleep_until(deadline - 50);
    tc_cmd(&nodes[0], out, sizeof(out), 4, pause);
    cr_assert_str_eq(out, "OK");
    /* the waiter's BLPOP times out at its deadline during the pause, and
     * its last attempt waits for the pause; the release queues behind it */
    sleep_until(deadline + 100);
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.rc, DLOCK_OK, "the waiter walked away from the key it was handed: %s",
                 dlock_strerror(w.rc));
    cr_assert_gt(w.fence, dlock_lock_fence(h));
    cr_assert_eq(tc_wait_exists(&nodes[0], res, 0, 200), 0, "the key is left locked");
    cr_assert_eq(zcard_waiters(res), 0);
    dlock_lock_free(h);
    dlock_client_free(holder);
    dlock_client_free(wc);
}

/* "Wait for ever" (deadline INT64_MAX) must still list the waiter with
 * timeouts Redis accepts, and the release must wake it. */
Test(lock_wake, waiter_without_deadline_is_woken, .timeout = 20)
{
    const char *res = "wk-forever";
    dlock_client *holder = client(1, 1), *wc = client(1, 1);
    dlock_lock *h = NULL;
    waiter_run w = {.c = wc, .resource = res, .deadline_ms = INT64_MAX};
    pthread_t t;

    cr_assert_eq(dlock_try_acquire(holder, res, 5000, &h), DLOCK_OK);
    cr_assert_eq(pthread_create(&t, NULL, waiter_main, &w), 0);
    wait_listed(res, 1);
    usleep(50 * 1000);
    int64_t released = dlock_now_ms();
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    cr_assert_eq(pthread_join(t, NULL), 0);
    cr_assert_eq(w.rc, DLOCK_OK, "waiter: %s", dlock_strerror(w.rc));
    cr_assert_lt(w.got_ms - released, WOKEN_WITHIN_MS);
    dlock_lock_free(h);
    dlock_client_free(holder);
    dlock_client_free(wc);
}
