/* fencing.c - fencing tokens:
 *   - a paused holder's successor gets a larger fence, and the holder
 *     learns it lost the lock;
 *   - fences keep increasing over 10 000 acquisitions while persistent
 *     nodes are killed and restarted;
 *   - without persistence, restarting a majority makes fences go backwards
 *     (the hazard docs/redlock.md describes). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lock_common.h"

#define NODES 3
static redis_proc nodes[NODES];

static void start_nodes(int persistent)
{
    cr_assert_eq(tc_nodes_up(nodes, NODES, persistent), 0);
}

static void setup(void)
{
    tc_tmpdir_on_tmpfs();
}

static void teardown(void)
{
    tc_kill_children();
    redis_stop_n(nodes, NODES);
}

TestSuite(lock_fencing, .init = setup, .fini = teardown);

typedef struct msg {
    int kind; /* 1 acquired, 2 lost report, 3 release result, 9 failure */
    int a, b;
    uint64_t fence;
} msg;

static void child_holder(int wfd)
{
    msg m = {.kind = 9};
    tc_lost lost;
    dlock_lock *l = NULL;
    dlock_client *c = tc_client(nodes, NODES, 0);
    tc_lost_init(&lost);
    if (!c || dlock_try_acquire(c, "fz", 500, &l) != DLOCK_OK)
        goto fail;
    dlock_renew_options ro = {.on_lost = tc_on_lost, .user = &lost};
    if (dlock_auto_renew(c, l, &ro) != DLOCK_OK)
        goto fail;
    m = (msg){.kind = 1, .fence = dlock_lock_fence(l)};
    if (tc_write_all(wfd, &m, sizeof m) != 0)
        _exit(3);
    /* The parent stops us here (SIGSTOP) for longer than the TTL. */
    dlock_err why = DLOCK_OK;
    int calls = tc_lost_wait(&lost, 15000, &why);
    test_sleep_ms(300); /* a second on_lost call would show up in this time */
    pthread_mutex_lock(&lost.mu);
    calls = lost.calls;
    pthread_mutex_unlock(&lost.mu);
    m = (msg){.kind = 2, .a = calls, .b = (int)why, .fence = (uint64_t)dlock_is_held(l)};
    if (tc_write_all(wfd, &m, sizeof m) != 0)
        _exit(3);
    m = (msg){.kind = 3, .a = (int)dlock_release(c, l)};
    if (tc_write_all(wfd, &m, sizeof m) != 0)
        _exit(3);
    dlock_lock_free(l);
    dlock_client_free(c);
    _exit(0);
fail:
    tc_write_all(wfd, &m, sizeof m);
    _exit(2);
}

Test(lock_fencing, stopped_holder_is_fenced_off, .timeout = 30)
{
    int pfd[2];
    msg m;
    int st;
    start_nodes(0);
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = tc_fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        child_holder(pfd[1]);
    }
    close(pfd[1]);
    cr_assert_eq(tc_read_all(pfd[0], &m, sizeof m, 5000), 0);
    cr_assert_eq(m.kind, 1, "child could not acquire");
    uint64_t fa = m.fence;
    test_sleep_ms(250); /* let a renewal or two happen: it is being renewed */
    cr_assert_gt(tc_pttl(&nodes[0], "fz"), 0);

    cr_assert_eq(kill(pid, SIGSTOP), 0);
    cr_assert_eq(waitpid(pid, &st, WUNTRACED), pid);
    cr_assert(WIFSTOPPED(st));
    /* Paused holder (think GC pause): its key expires, a new holder comes in. */
    dlock_client *c = tc_client(nodes, NODES, 0);
    dlock_lock *lb = NULL;
    cr_assert_eq(dlock_acquire(c, "fz", 5000, dlock_now_ms() + 3000, &lb), DLOCK_OK,
                 "%s", TC_ERR(c));
    uint64_t fb = dlock_lock_fence(lb);
    cr_assert_gt(fb, fa, "successor's fence %llu not above the stale holder's %llu",
                 (unsigned long long)fb, (unsigned long long)fa);

    cr_assert_eq(kill(pid, SIGCONT), 0);
    cr_assert_eq(tc_read_all(pfd[0], &m, sizeof m, 5000), 0);
    cr_assert_eq(m.kind, 2);
    cr_assert_eq(m.a, 1, "on_lost called %d times", m.a);
    /* LOST when the watchdog finds the validity gone; an unavailable code
     * when the pause caught it mid-round (its replies timed out). */
    cr_assert(m.b != DLOCK_OK && m.b != DLOCK_ERR_TAKEN && m.b != DLOCK_ERR_ARG, "on_lost with %s",
              dlock_strerror((dlock_err)m.b));
    cr_assert_eq(m.fence, 0, "dlock_is_held still true after the lock was lost");
    cr_assert_eq(tc_read_all(pfd[0], &m, sizeof m, 5000), 0);
    cr_assert_eq(m.kind, 3);
    cr_assert_eq(m.a, DLOCK_ERR_LOST, "stale holder's release gave %s",
                 dlock_strerror((dlock_err)m.a));
    cr_assert_eq(tc_wait_child(pid, 5000), 0);
    close(pfd[0]);

    /* The stale holder touched nothing: a quorum holds B's token, and no node
     * holds anything else once A's last key has had its TTL (500 ms) to go.
     * Not every node: B's grant on 2 of 3 is a legitimate acquisition (the
     * third may still have had A's key then), so all three need not hold
     * B's token. */
    size_t with_b = 0, other = NODES;
    int64_t until = test_now_ms() + 500 + TC_SETTLE_MS;
    do {
        with_b = 0, other = 0;
        for (size_t i = 0; i < NODES; i++) {
            char val[64];
            tc_get(&nodes[i], "lock:fz", val, sizeof val);
            if (strcmp(val, dlock_lock_token(lb)) == 0)
                with_b++;
            else if (tc_exists(&nodes[i], "fz") != 0)
                other++;
        }
        if (other > 0)
            test_sleep_ms(5);
    } while (other > 0 && test_now_ms() < until);
    cr_assert_geq(with_b, NODES / 2 + 1, "only %zu of %d nodes hold B's token", with_b, NODES);
    cr_assert_eq(other, 0, "%zu node(s) hold a token that is not B's", other);
    cr_assert_eq(dlock_release(c, lb), DLOCK_OK);
    dlock_lock_free(lb);
    dlock_client_free(c);
}

Test(lock_fencing, monotonic_across_restarts_with_persistence, .timeout = 90)
{
    start_nodes(1);
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    uint64_t last = 0;
    int restarted = 0, unconfirmed = 0;
    tc_options(&o, &a, nodes, NODES);
    o.command_timeout_ms = 500;
    /* A node that just died may cost one failed round: retry, the fences
     * are what this test is about. */
    o.retry_unavailable = 1;
    cr_assert_eq(dlock_client_new(&o, &c, NULL, 0), DLOCK_OK);
    for (int i = 0; i < 10000; i++) {
        int phase = i % 2000, k = (i / 2000) % NODES;
        if (phase == 500) {
            cr_assert_eq(redis_kill(&nodes[k]), 0);
        } else if (phase == 1500) {
            cr_assert_eq(redis_restart(&nodes[k]), 0);
            restarted++;
        } else if (i == 9000) {
            /* Every node killed and restarted at once: only the AOF remembers. */
            for (size_t j = 0; j < NODES; j++)
                if (nodes[j].pid > 0)
                    cr_assert_eq(redis_kill(&nodes[j]), 0);
            for (size_t j = 0; j < NODES; j++)
                cr_assert_eq(redis_restart(&nodes[j]), 0);
            restarted += NODES;
        }
        dlock_lock *l = NULL;
        dlock_err e = dlock_acquire(c, "mono", 2000, dlock_now_ms() + 3000, &l);
        cr_assert_eq(e, DLOCK_OK, "iteration %d: %s (%s)", i, dlock_strerror(e),
                     TC_ERR(c));
        uint64_t f = dlock_lock_fence(l);
        cr_assert_gt(f, last, "iteration %d: fence %llu after %llu", i, (unsigned long long)f,
                     (unsigned long long)last);
        last = f;
        e = dlock_release(c, l);
        /* Unconfirmed (a node died mid-round) is tolerable - the key then
         * expires - but never LOST: nothing here outlives its TTL. */
        cr_assert(e == DLOCK_OK || dlock_err_is_unavailable(e), "iteration %d: release %s: %s",
                  i, dlock_strerror(e), TC_ERR(c));
        unconfirmed += e != DLOCK_OK;
        dlock_lock_free(l);
    }
    cr_assert_eq(restarted, 5 + NODES);
    cr_assert_leq(unconfirmed, 20, "%d releases unconfirmed", unconfirmed);
    cr_assert_geq(last, 10000);
    dlock_client_free(c);
}

Test(lock_fencing, fences_go_backwards_without_persistence, .timeout = 20)
{
    start_nodes(0);
    dlock_client *c = tc_client(nodes, NODES, 300);
    dlock_lock *l = NULL;
    uint64_t before = 0;
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(dlock_try_acquire(c, "hz", 2000, &l), DLOCK_OK);
        before = dlock_lock_fence(l);
        cr_assert_eq(dlock_release(c, l), DLOCK_OK);
        dlock_lock_free(l);
        l = NULL;
    }
    cr_assert_geq(before, 5);
    /* A majority restarts empty (no AOF), then the one node that remembers
     * the counter dies: the quorum left has never seen the old fences. */
    cr_assert_eq(redis_kill(&nodes[0]), 0);
    cr_assert_eq(redis_restart(&nodes[0]), 0);
    cr_assert_eq(redis_kill(&nodes[1]), 0);
    cr_assert_eq(redis_restart(&nodes[1]), 0);
    cr_assert_eq(redis_kill(&nodes[2]), 0);
    dlock_err e = dlock_acquire(c, "hz", 2000, dlock_now_ms() + 2000, &l);
    if (e != DLOCK_OK)
        e = dlock_acquire(c, "hz", 2000, dlock_now_ms() + 2000, &l);
    cr_assert_eq(e, DLOCK_OK, "%s", TC_ERR(c));
    uint64_t after = dlock_lock_fence(l);
    cr_assert_lt(after, before, "fence %llu did not go back below %llu",
                 (unsigned long long)after, (unsigned long long)before);
    cr_assert_eq(after, 1, "restarted counters start again at 1");
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}
