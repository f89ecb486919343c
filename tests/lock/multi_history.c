/* multi_history.c - many threads take random overlapping sets of resources
 * (random order, sizes 1..4, some as single dlock_acquire_for so the
 * one-node queue and its hand-off join in) on one node and on three
 * masters. Every section is stamped with a nanosecond clock and the fence
 * of each resource. The check, per resource: sections ordered by start
 * (then fence) never overlap, fences rise in that order, and each ends
 * within its validity. Every thread made progress (no deadlock, no
 * starvation for the run). Every call ended OK, TAKEN or (a round timed
 * out on the loaded machine) unavailable.
 *
 * That the check can fail: DLOCK_TEST_BREAK_MULTI=1 in the environment
 * makes the workers skip the lock (sections then overlap and the suite
 * fails; docs/single-instance.md quotes the output). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lock_common.h"

#define THREADS 8
#define RESOURCES 6
#define MAX_SET 4
#define RUN_MS 2000
#define MAX_RECS 200000
#define TTL_MS 5000

static redis_proc nodes[3];

static void teardown(void)
{
    tc_nodes_down(nodes, 3);
}

TestSuite(lock_multi_history, .fini = teardown);

typedef struct run {
    const redis_proc *rs;
    size_t n;
    int broken;           /* DLOCK_TEST_BREAK_MULTI: no lock taken */
    int64_t stop_at;
    tc_sections hist;
    _Atomic uint64_t fake_fence; /* broken mode only */
    tc_tally tally[THREADS];
} run;

static void *work(void *p)
{
    tc_worker *w = p;
    run *r = w->run;
    unsigned seed = (unsigned)(w->id * 2654435761u) ^ (unsigned)getpid();
    static const char *names[RESOURCES] = {"h0", "h1", "h2", "h3", "h4", "h5"};
    dlock_client *c = tc_patient_client(r->rs, r->n, 1000);

    if (c == NULL) {
        r->tally[w->id].failed++;
        return NULL;
    }
    while (dlock_now_ms() < r->stop_at) {
        int idx[RESOURCES];
        const char *set[MAX_SET];
        size_t k = 1 + (size_t)(rand_r(&seed) % MAX_SET);
        dlock_lock *l = NULL;
        dlock_err rc = DLOCK_OK;
        tc_section x[MAX_SET];

        tc_pick_subset(&seed, RESOURCES, k, idx);
        for (size_t i = 0; i < k; i++)
            set[i] = names[idx[i]];
        if (!r->broken) {
            if (k == 1 && rand_r(&seed) % 2 == 0)
                rc = dlock_acquire_for(c, set[0], TTL_MS, 3000, &l);
            else
                rc = dlock_acquire_multi_for(c, set, k, TTL_MS, 3000, &l);
            if (rc != DLOCK_OK) {
                tc_tally_result(&r->tally[w->id], rc);
                continue;
            }
        }
        int64_t start = tc_now_ns();
        for (size_t i = 0; i < k; i++) {
            x[i].start_ns = start;
            x[i].res = idx[i];
            x[i].thread = w->id;
            if (r->broken) {
                x[i].fence = atomic_fetch_add(&r->fake_fence, 1) + 1;
                x[i].valid_until_ns = INT64_MAX;
            } else {
                x[i].fence = dlock_lock_fence_of(l, i);
                x[i].valid_until_ns = dlock_lock_valid_until_ms(l) * 1000000LL;
            }
        }
        usleep(100 + (unsigned)rand_r(&seed) % 900);
        int64_t end = tc_now_ns();
        for (size_t i = 0; i < k; i++)
            x[i].end_ns = end;
        if (!r->broken) {
            (void)dlock_release(c, l);
            dlock_lock_free(l);
        }
        r->tally[w->id].acquired++;
        tc_sections_add(&r->hist, x, k);
    }
    dlock_client_free(c);
    return NULL;
}

static void history_check(const redis_proc *rs, size_t n)
{
    run r = {.rs = rs, .n = n};
    char why[256];
    int slow;

    r.broken = getenv("DLOCK_TEST_BREAK_MULTI") != NULL;
    cr_assert_eq(tc_sections_init(&r.hist, MAX_RECS), 0);
    r.stop_at = dlock_now_ms() + RUN_MS;
    /* Every thread finished (the joins returned within the suite timeout:
     * no deadlock) and each got sets several times. */
    cr_assert_eq(tc_run_workers(THREADS, work, &r), 0, "a worker thread did not start");
    cr_assert_eq(tc_tally_check(r.tally, THREADS, &slow, why, sizeof why), 0, "%s", why);
    cr_assert_eq(tc_sections_check(&r.hist, "h", RESOURCES, 10, why, sizeof why), 0, "%s", why);
    cr_log_info("%zu sections on %zu node(s), %d calls unavailable", r.hist.n, n, slow);
    tc_sections_free(&r.hist);
}

Test(lock_multi_history, overlapping_sets_one_node, .timeout = 90)
{
    cr_assert_eq(tc_nodes_up(nodes, 1, 0), 0);
    history_check(nodes, 1);
}

Test(lock_multi_history, overlapping_sets_three_masters, .timeout = 90)
{
    cr_assert_eq(tc_nodes_up(nodes, 3, 0), 0);
    history_check(nodes, 3);
}

/* The textbook deadlock: {a,b} against {b,a}, back to back, many times.
 * With one dlock_acquire per resource in the caller's order, each would
 * hold its first and wait for its second; here both finish every round. */
typedef struct pair_arg {
    const redis_proc *rs;
    int reverse;
    int done;
} pair_arg;

static void *pair_work(void *p)
{
    pair_arg *a = p;
    const char *ab[2] = {"pa", "pb"}, *ba[2] = {"pb", "pa"};
    dlock_client *c = tc_patient_client(a->rs, 1, 300);

    if (c == NULL)
        return NULL;
    for (int i = 0; i < 200; i++) {
        dlock_lock *l = NULL;

        if (dlock_acquire_multi_for(c, a->reverse ? ba : ab, 2, TTL_MS, 10000, &l) != DLOCK_OK)
            break;
        (void)dlock_release(c, l);
        dlock_lock_free(l);
        a->done++;
    }
    dlock_client_free(c);
    return NULL;
}

Test(lock_multi_history, opposite_orders_never_deadlock, .timeout = 90)
{
    pair_arg args[2] = {{nodes, 0, 0}, {nodes, 1, 0}};
    pthread_t th[2];

    cr_assert_eq(tc_nodes_up(nodes, 1, 0), 0);
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, pair_work, &args[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    cr_assert_eq(args[0].done, 200);
    cr_assert_eq(args[1].done, 200);
}
