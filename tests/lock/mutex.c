/* mutex.c - mutual exclusion under contention: threads and forked
 * processes do a deliberately non-atomic read-modify-write of a counter
 * under the lock, on 1, 3 and 5 nodes; the final count must be exact and
 * every fence handed out distinct. */
#include <criterion/criterion.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lock_common.h"

#define NODES 5
static redis_proc nodes[NODES];
static redis_proc counter; /* outside the lock nodes: the protected "storage" */

static void setup(void)
{
    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
    cr_assert_eq(tc_nodes_up(&counter, 1, 0), 0);
}

static void teardown(void)
{
    tc_kill_children();
    redis_stop_n(nodes, NODES);
    redis_stop(&counter);
}

TestSuite(lock_mutex, .init = setup, .fini = teardown);

typedef struct worker {
    size_t n_nodes;
    int iters;
    int failures;          /* acquisitions or releases that did not succeed */
    uint64_t *fences;      /* iters entries */
    char why[160];
} worker;

/* The critical section: GET, pause, SET+1 over a private hiredis
 * connection. Without mutual exclusion two workers read the same value and
 * one increment is lost, so the final count comes out short. */
static int worker_loop(worker *w)
{
    /* This suite is about exclusion, not availability. */
    dlock_client *c = tc_patient_client(nodes, w->n_nodes, 1000);
    redisContext *rc = redisConnect("127.0.0.1", counter.port);
    struct timeval tv = {2, 0};
    if (!c || !rc || rc->err) {
        snprintf(w->why, sizeof w->why, "setup failed");
        w->failures = w->iters;
        goto out;
    }
    redisSetTimeout(rc, tv);
    for (int i = 0; i < w->iters; i++) {
        dlock_lock *l = NULL;
        dlock_err e = dlock_acquire(c, "mutex", 5000, dlock_now_ms() + 20000, &l);
        if (e != DLOCK_OK) {
            snprintf(w->why, sizeof w->why, "acquire: %s (%s)", dlock_strerror(e),
                     TC_ERR(c));
            w->failures++;
            continue;
        }
        w->fences[i] = dlock_lock_fence(l);
        redisReply *r = redisCommand(rc, "GET counter");
        long long v = (r && r->type == REDIS_REPLY_STRING) ? atoll(r->str) : 0;
        freeReplyObject(r);
        usleep(100);
        r = redisCommand(rc, "SET counter %lld", v + 1);
        if (!r || r->type != REDIS_REPLY_STATUS)
            w->failures++;
        freeReplyObject(r);
        e = dlock_release(c, l);
        /* Unconfirmed (unavailable) only delays the next holder until the
         * TTL; LOST would mean the section was not exclusive. */
        if (e != DLOCK_OK && !dlock_err_is_unavailable(e)) {
            snprintf(w->why, sizeof w->why, "release: %s (%s)", dlock_strerror(e),
                     TC_ERR(c));
            w->failures++;
        }
        dlock_lock_free(l);
    }
out:
    if (rc)
        redisFree(rc);
    dlock_client_free(c);
    return w->failures;
}

static void *worker_thread(void *p)
{
    worker_loop(p);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void assert_fences_distinct(uint64_t *f, size_t n)
{
    qsort(f, n, sizeof *f, cmp_u64);
    cr_assert_geq(f[0], 1);
    for (size_t i = 1; i < n; i++)
        cr_assert_gt(f[i], f[i - 1], "fence %llu handed out twice", (unsigned long long)f[i]);
}

static void run_threads(size_t n_nodes, int threads, int iters)
{
    pthread_t th[16];
    worker w[16];
    uint64_t *all = calloc((size_t)(threads * iters), sizeof *all);
    cr_assert_not_null(all);
    for (int t = 0; t < threads; t++) {
        memset(&w[t], 0, sizeof w[t]);
        w[t].n_nodes = n_nodes;
        w[t].iters = iters;
        w[t].fences = all + (size_t)t * (size_t)iters;
        cr_assert_eq(pthread_create(&th[t], NULL, worker_thread, &w[t]), 0);
    }
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < threads; t++)
        cr_assert_eq(w[t].failures, 0, "thread %d: %s", t, w[t].why);
    cr_assert_eq(tc_get_ll(&counter, "counter"), (long long)threads * iters);
    assert_fences_distinct(all, (size_t)(threads * iters));
    for (size_t i = 0; i < n_nodes; i++)
        cr_assert_eq(tc_wait_exists(&nodes[i], "mutex", 0, TC_SETTLE_MS), 0, "lock key left on node %zu", i);
    free(all);
}

static void run_processes(size_t n_nodes, int procs, int iters)
{
    int pfd[2];
    pid_t pid[16];
    uint64_t *all = calloc((size_t)(procs * iters), sizeof *all);
    cr_assert_not_null(all);
    cr_assert_eq(pipe(pfd), 0);
    for (int p = 0; p < procs; p++) {
        pid[p] = tc_fork();
        cr_assert_geq(pid[p], 0);
        if (pid[p] == 0) {
            /* Child: its own client, created after fork (a client never
             * crosses fork); reports fences, exits nonzero on any failure. */
            close(pfd[0]);
            worker w = {.n_nodes = n_nodes, .iters = iters};
            w.fences = calloc((size_t)iters, sizeof *w.fences);
            if (!w.fences)
                _exit(2);
            int f = worker_loop(&w);
            if (f)
                fprintf(stderr, "child %d: %d failures: %s\n", p, f, w.why);
            if (tc_write_all(pfd[1], w.fences, (size_t)iters * sizeof *w.fences) != 0)
                _exit(3);
            free(w.fences);
            _exit(f ? 1 : 0);
        }
    }
    close(pfd[1]);
    for (int p = 0; p < procs; p++)
        cr_assert_eq(tc_read_all(pfd[0], all + (size_t)p * (size_t)iters,
                                 (size_t)iters * sizeof *all, 60000),
                     0);
    close(pfd[0]);
    for (int p = 0; p < procs; p++)
        cr_assert_eq(tc_wait_child(pid[p], 10000), 0, "child %d failed", p);
    cr_assert_eq(tc_get_ll(&counter, "counter"), (long long)procs * iters);
    assert_fences_distinct(all, (size_t)(procs * iters));
    for (size_t i = 0; i < n_nodes; i++)
        cr_assert_eq(tc_wait_exists(&nodes[i], "mutex", 0, TC_SETTLE_MS), 0, "lock key left on node %zu", i);
    free(all);
}

Test(lock_mutex, single_threads, .timeout = 60)
{
    run_threads(1, 8, 200);
}

Test(lock_mutex, single_processes, .timeout = 60)
{
    run_processes(1, 4, 150);
}

Test(lock_mutex, redlock3_threads, .timeout = 60)
{
    run_threads(3, 6, 120);
}

Test(lock_mutex, redlock3_processes, .timeout = 60)
{
    run_processes(3, 4, 100);
}

Test(lock_mutex, redlock5_threads, .timeout = 60)
{
    run_threads(5, 6, 100);
}

Test(lock_mutex, redlock5_processes, .timeout = 60)
{
    run_processes(5, 4, 100);
}
