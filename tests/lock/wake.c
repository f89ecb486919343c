/* wake.c - wake on release: a blocked waiter gets the lock within a few ms
 * of the release (not after its next poll), still gets it when the holder
 * dies without releasing (the wait is bounded by the key's TTL), contending
 * threads share the lock fairly (FIFO hand-off, no barging), and the same
 * holds for Redlock on 3 nodes. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "lock_common.h"

#define NODES 3
static redis_proc nodes[NODES];

static void setup(void)
{
    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
}

static void teardown(void)
{
    tc_kill_children();
    tc_nodes_down(nodes, NODES);
}

TestSuite(lock_wake, .init = setup, .fini = teardown);

/* A polling waiter would look every 250 ms: it could not see a release
 * sooner than up to 250 ms after it, so "< 50 ms" is the wake-up's doing. */
#define POLL_MS 250
#define WOKEN_WITHIN_MS 50

static dlock_client *client(size_t n, int wake)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    tc_options(&o, &a, nodes, n);
    o.retry_fixed_ms = POLL_MS;
    o.wake_on_release = wake;
    o.command_timeout_ms = 500; /* a loaded machine must not turn a wait into an error */
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
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
 * hold it within WOKEN_WITHIN_MS of the release. */
static void woken_at_release(size_t n, const char *resource)
{
    dlock_client *holder = client(n, 1), *wc = client(n, 1);
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
