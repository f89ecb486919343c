/* each.c - dlock_try_acquire_each / dlock_release_each: several independent
 * resources in one round per node. A history of random overlapping batches
 * (with single waiters queued among them) on one node and on three
 * masters, checked as multi_history.c checks sets: per resource, sections
 * ordered by start never overlap, fences rise in that order, each ends
 * within its validity. Then the cases one at a time: a partial grant, a
 * minority grant released at once, a paused node and a paused majority,
 * release_each's per-lock LOST / OK, a queued waiter not jumped, the
 * argument errors. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lock_common.h"

#define NODES 3
#define THREADS 6
#define RESOURCES 8
#define MAX_BATCH 5
#define RUN_MS 2500
#define MAX_RECS 200000
#define TTL_MS 5000

static redis_proc nodes[NODES];

static void teardown(void)
{
    tc_nodes_down(nodes, NODES);
}

TestSuite(lock_each, .fini = teardown);

/* ---- the history ---- */

typedef struct run {
    const redis_proc *rs;
    size_t n;
    int64_t stop_at;
    tc_sections hist;
    tc_tally tally[THREADS];
    int lost[THREADS]; /* releases that found a lock lost: a section ran unprotected */
} run;

static void *work(void *p)
{
    tc_worker *w = p;
    run *r = w->run;
    unsigned seed = (unsigned)(w->id * 2654435761u) ^ (unsigned)getpid();
    static const char *names[RESOURCES] = {"e0", "e1", "e2", "e3", "e4", "e5", "e6", "e7"};
    redis_proc order[NODES];
    dlock_client *c;

    /* Odd threads list the masters in reverse: their commands reach the
     * nodes in the other order. So two batches split the votes of a key (A
     * first on one node, B first on another). Only the quorum per resource
     * keeps them from both holding it. */
    for (size_t i = 0; i < r->n; i++)
        order[i] = r->rs[w->id % 2 ? r->n - 1 - i : i];
    c = tc_patient_client(order, r->n, 1000);

    if (c == NULL) {
        r->tally[w->id].failed++;
        return NULL;
    }
    while (dlock_now_ms() < r->stop_at) {
        int idx[RESOURCES];
        const char *set[MAX_BATCH];
        size_t k = 1 + (size_t)(rand_r(&seed) % MAX_BATCH), got = 0;
        dlock_lock *l[MAX_BATCH] = {NULL}, *held[MAX_BATCH];
        dlock_err rcs[MAX_BATCH], rc;
        tc_section x[MAX_BATCH];

        tc_pick_subset(&seed, RESOURCES, k, idx);
        for (size_t i = 0; i < k; i++)
            set[i] = names[idx[i]];
        if (k == 1 && rand_r(&seed) % 2 == 0) {
            /* A single waiter: it queues on the key (wake_on_release) and
             * is handed it by a release_each, which a batch must not jump. */
            rcs[0] = dlock_acquire_for(c, set[0], TTL_MS, 3000, &l[0]);
            rc = dlock_err_is_unavailable(rcs[0]) ? rcs[0] : DLOCK_OK;
        } else {
            rc = dlock_try_acquire_each(c, set, k, TTL_MS, l, rcs);
        }
        if (rc != DLOCK_OK) {
            tc_tally_result(&r->tally[w->id], rc);
            continue;
        }
        int64_t start = tc_now_ns();
        for (size_t i = 0; i < k; i++) {
            tc_tally_result(&r->tally[w->id], rcs[i]);
            if (rcs[i] != DLOCK_OK)
                continue;
            x[got].start_ns = start;
            x[got].res = idx[i];
            x[got].thread = w->id;
            x[got].fence = dlock_lock_fence(l[i]);
            x[got].valid_until_ns = dlock_lock_valid_until_ms(l[i]) * 1000000LL;
            held[got++] = l[i];
        }
        if (got == 0) {
            usleep((unsigned)rand_r(&seed) % 500);
            continue;
        }
        usleep(100 + (unsigned)rand_r(&seed) % 900);
        int64_t end = tc_now_ns();
        for (size_t i = 0; i < got; i++)
            x[i].end_ns = end;
        rc = dlock_release_each(c, held, got, rcs);
        for (size_t i = 0; i < got; i++) {
            /* LOST would mean a section ran past its lease: the history
             * below would show it too, but say it plainly. */
            if (rc == DLOCK_OK && rcs[i] == DLOCK_ERR_LOST)
                r->lost[w->id]++;
            dlock_lock_free(held[i]);
        }
        r->tally[w->id].acquired++;
        tc_sections_add(&r->hist, x, got);
    }
    dlock_client_free(c);
    return NULL;
}

static void history_check(const redis_proc *rs, size_t n)
{
    run r = {.rs = rs, .n = n};
    char why[256];
    int slow;

    cr_assert_eq(tc_sections_init(&r.hist, MAX_RECS), 0);
    r.stop_at = dlock_now_ms() + RUN_MS;
    cr_assert_eq(tc_run_workers(THREADS, work, &r), 0, "a worker thread did not start");
    cr_assert_eq(tc_tally_check(r.tally, THREADS, &slow, why, sizeof why), 0, "%s", why);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(r.lost[i], 0, "thread %d: %d locks found lost at release", i, r.lost[i]);
    cr_assert_eq(tc_sections_check(&r.hist, "e", RESOURCES, 10, why, sizeof why), 0, "%s", why);
    cr_log_info("%zu sections on %zu node(s), %d calls unavailable", r.hist.n, n, slow);
    tc_sections_free(&r.hist);
}

Test(lock_each, overlapping_batches_one_node, .timeout = 90)
{
    cr_assert_eq(tc_nodes_up(nodes, 1, 0), 0);
    history_check(nodes, 1);
}

Test(lock_each, overlapping_batches_three_masters, .timeout = 90)
{
    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
    history_check(nodes, NODES);
}

/* ---- one case at a time, on three masters ---- */

/* Puts another owner's lock key on one node. */
static void set_on(const redis_proc *r, const char *res, const char *val)
{
    char key[TC_KEY_LEN], out[64];
    const char *argv[5] = {"SET", tc_lock_key(key, res), val, "PX", "20000"};

    tc_cmd(r, out, sizeof out, 5, argv);
    cr_assert_str_eq(out, "OK");
}

static void free_all(dlock_lock **l, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dlock_lock_free(l[i]);
        l[i] = NULL;
    }
}

Test(lock_each, partial_grant_takes_the_free_ones, .timeout = 30)
{
    dlock_client *a, *b;
    const char *set[3] = {"q1", "q2", "q3"};
    dlock_lock *h = NULL, *l[3];
    dlock_err rcs[3], rel[2];
    char key[TC_KEY_LEN], val[64];

    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
    a = tc_client(nodes, NODES, 0);
    b = tc_client(nodes, NODES, 0);
    cr_assert(a != NULL && b != NULL);
    cr_assert_eq(dlock_try_acquire(b, "q2", 10000, &h), DLOCK_OK, "%s", TC_ERR(b));
    cr_assert_eq(dlock_try_acquire_each(a, set, 3, 10000, l, rcs), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(rcs[0], DLOCK_OK);
    cr_assert_eq(rcs[1], DLOCK_ERR_TAKEN);
    cr_assert_eq(rcs[2], DLOCK_OK);
    cr_assert_null(l[1]);
    cr_assert(strstr(TC_ERR(a), "\"q2\"") != NULL, "errstr names the taken one: %s", TC_ERR(a));
    /* Each granted one is a plain lock: its own resource, token and fence,
     * the token on every node, the fence the counters' value. */
    for (size_t i = 0; i < 3; i += 2) {
        cr_assert_eq(dlock_lock_count(l[i]), 1);
        cr_assert_str_eq(dlock_lock_resource(l[i]), set[i]);
        cr_assert_eq(dlock_lock_fence(l[i]), 1, "%s: first acquisition", set[i]);
        cr_assert(dlock_is_held(l[i]));
        cr_assert_gt(dlock_lock_validity_ms(l[i]), 9000);
        for (size_t k = 0; k < NODES; k++) {
            tc_get(&nodes[k], tc_lock_key(key, set[i]), val, sizeof val);
            cr_assert_str_eq(val, dlock_lock_token(l[i]), "%s on node %zu", set[i], k);
            cr_assert_eq(tc_get_ll(&nodes[k], tc_fence_key(key, set[i])), 1);
        }
    }
    cr_assert_str_neq(dlock_lock_token(l[0]), dlock_lock_token(l[2]), "a token per resource");
    /* The taken one is untouched: still b's, its fence not raised. */
    cr_assert_eq(tc_get_ll(&nodes[0], tc_fence_key(key, "q2")), 1);
    tc_get(&nodes[0], tc_lock_key(key, "q2"), val, sizeof val);
    cr_assert_str_eq(val, dlock_lock_token(h));
    /* Each key taken for single acquirers too; a second batch gets the
     * released one only. */
    {
        dlock_lock *rel_l[2] = {l[0], l[2]};
        dlock_lock *m[3];

        cr_assert_eq(dlock_release_each(a, rel_l, 2, rel), DLOCK_OK, "%s", TC_ERR(a));
        cr_assert_eq(rel[0], DLOCK_OK);
        cr_assert_eq(rel[1], DLOCK_OK);
        cr_assert_not(dlock_is_held(l[0]));
        cr_assert_eq(tc_wait_holding(nodes, NODES, "q1", 0, TC_SETTLE_MS), 0);
        cr_assert_eq(tc_wait_holding(nodes, NODES, "q3", 0, TC_SETTLE_MS), 0);
        cr_assert_eq(dlock_try_acquire_each(b, set, 3, 10000, m, rcs), DLOCK_ERR_ARG,
                     "b holds q2: not reentrant");
        cr_assert_eq(rcs[1], DLOCK_ERR_ARG);
        cr_assert_null(m[0]);
        cr_assert_eq(dlock_try_acquire_each(a, set, 3, 10000, m, rcs), DLOCK_OK);
        cr_assert_eq(rcs[0], DLOCK_OK);
        cr_assert_eq(rcs[1], DLOCK_ERR_TAKEN);
        cr_assert_eq(rcs[2], DLOCK_OK);
        cr_assert_eq(dlock_lock_fence(m[0]), 2, "q1's second acquisition");
        cr_assert_eq(dlock_release(a, m[0]), DLOCK_OK, "one of a batch released alone");
        cr_assert_eq(dlock_release(a, m[2]), DLOCK_OK);
        free_all(m, 3);
    }
    cr_assert_eq(dlock_release(b, h), DLOCK_OK);
    dlock_lock_free(h);
    free_all(l, 3);
    dlock_client_free(a);
    dlock_client_free(b);
}

Test(lock_each, minority_grant_is_released_at_once, .timeout = 30)
{
    dlock_client *c;
    const char *set[2] = {"n1", "n2"};
    dlock_lock *l[2];
    dlock_err rcs[2];

    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
    c = tc_client(nodes, NODES, 0);
    cr_assert_not_null(c);
    /* n2 held by another owner on nodes 0 and 1: node 2 grants it to us,
     * a minority, which must not stay set there until our TTL. */
    set_on(&nodes[0], "n2", "someone-else");
    set_on(&nodes[1], "n2", "someone-else");
    cr_assert_eq(dlock_try_acquire_each(c, set, 2, 20000, l, rcs), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(rcs[0], DLOCK_OK);
    cr_assert_eq(rcs[1], DLOCK_ERR_TAKEN);
    cr_assert_null(l[1]);
    cr_assert_eq(tc_wait_exists(&nodes[2], "n2", 0, TC_SETTLE_MS), 0, "node 2's grant undone");
    cr_assert_eq(tc_count_holding(nodes, NODES, "n2"), 2, "the other owner's keys stay");
    cr_assert_eq(tc_count_holding(nodes, NODES, "n1"), NODES);
    cr_assert_eq(dlock_release(c, l[0]), DLOCK_OK);
    free_all(l, 2);
    dlock_client_free(c);
}

Test(lock_each, paused_node_then_paused_majority, .timeout = 60)
{
    dlock_client *c;
    const char *set[3] = {"p1", "p2", "p3"};
    dlock_lock *l[3];
    dlock_err rcs[3], rc;

    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
    c = tc_client(nodes, NODES, 200);
    cr_assert_not_null(c);
    cr_assert_eq(redis_pause(&nodes[2]), 0);
    /* 2 of 3 answer: every resource granted on that quorum. */
    cr_assert_eq(dlock_try_acquire_each(c, set, 3, 10000, l, rcs), DLOCK_OK, "%s", TC_ERR(c));
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(rcs[i], DLOCK_OK, "%s: %s", set[i], dlock_strerror(rcs[i]));
        cr_assert_eq(dlock_lock_fence(l[i]), 1);
        cr_assert_eq(tc_count_holding(nodes, 2, set[i]), 2);
    }
    cr_assert_eq(dlock_release_each(c, l, 3, rcs), DLOCK_OK, "%s", TC_ERR(c));
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(rcs[i], DLOCK_OK);
    free_all(l, 3);
    /* 2 of 3 paused: no quorum for anything; nothing handed out. */
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    rc = dlock_try_acquire_each(c, set, 3, 10000, l, rcs);
    cr_assert(dlock_err_is_unavailable(rc), "got %s", dlock_strerror(rc));
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(rcs[i], rc, "every result is the call's code");
        cr_assert_null(l[i]);
    }
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(redis_resume(&nodes[2]), 0);
    /* The paused nodes run what was queued to them (the acquires, then
     * the releases and undos queued behind them): nothing stays held. */
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(tc_wait_holding(nodes, NODES, set[i], 0, 3000), 0, "%s left held", set[i]);
    /* And the fences kept rising. */
    cr_assert_eq(dlock_try_acquire_each(c, set, 3, 10000, l, rcs), DLOCK_OK, "%s", TC_ERR(c));
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(rcs[i], DLOCK_OK);
        cr_assert_gt(dlock_lock_fence(l[i]), 1);
    }
    cr_assert_eq(dlock_release_each(c, l, 3, rcs), DLOCK_OK, "%s", TC_ERR(c));
    free_all(l, 3);
    dlock_client_free(c);
}

Test(lock_each, release_each_reports_each_lock, .timeout = 30)
{
    dlock_client *c;
    const char *set[2] = {"r1", "r2"};
    dlock_lock *l[2];
    dlock_err rcs[2];

    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
    c = tc_client(nodes, NODES, 0);
    cr_assert_not_null(c);
    cr_assert_eq(dlock_try_acquire_each(c, set, 2, 10000, l, rcs), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert(rcs[0] == DLOCK_OK && rcs[1] == DLOCK_OK);
    /* r1's lease "ran out" and another owner took it on every node. */
    for (size_t k = 0; k < NODES; k++)
        set_on(&nodes[k], "r1", "other");
    cr_assert_eq(dlock_release_each(c, l, 2, rcs), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(rcs[0], DLOCK_ERR_LOST);
    cr_assert_eq(rcs[1], DLOCK_OK);
    cr_assert(strstr(TC_ERR(c), "\"r1\"") != NULL, "%s", TC_ERR(c));
    cr_assert_not(dlock_is_held(l[0]));
    cr_assert_not(dlock_is_held(l[1]));
    cr_assert_eq(tc_count_holding(nodes, NODES, "r1"), NODES, "the other owner's key stays");
    cr_assert_eq(tc_wait_holding(nodes, NODES, "r2", 0, TC_SETTLE_MS), 0);
    /* Released already: refused, nothing sent. */
    cr_assert_eq(dlock_release_each(c, l, 2, rcs), DLOCK_ERR_ARG);
    cr_assert_eq(rcs[1], DLOCK_ERR_ARG);
    free_all(l, 2);
    dlock_client_free(c);
}

/* A single waiter queued on a key is handed it by release_each; a batch
 * that comes while it waits or just after is refused that key. */
typedef struct waiter_arg {
    dlock_client *c;
    dlock_err rc;
    uint64_t fence;
    _Atomic int done;   /* set by the test: the waiter may release */
} waiter_arg;

static void *waiter(void *p)
{
    waiter_arg *w = p;
    dlock_lock *l = NULL;

    w->rc = dlock_acquire_for(w->c, "wq", 10000, 8000, &l);
    w->fence = dlock_lock_fence(l);
    /* Held until the test has tried its batch (bounded by the timeout). */
    for (int i = 0; i < 1000 && !atomic_load(&w->done); i++)
        usleep(10000);
    if (w->rc == DLOCK_OK)
        (void)dlock_release(w->c, l);
    dlock_lock_free(l);
    return NULL;
}

Test(lock_each, queued_waiter_is_not_jumped, .timeout = 60)
{
    dlock_client *a, *c;
    waiter_arg w = {0};
    const char *set[2] = {"wq", "wfree"};
    dlock_lock *h = NULL, *l[2];
    dlock_err rcs[2], rel[1];
    pthread_t th;
    long long seen = 0;

    cr_assert_eq(tc_nodes_up(nodes, NODES, 0), 0);
    a = tc_client(nodes, NODES, 0);
    c = tc_client(nodes, NODES, 0);
    w.c = tc_client(nodes, NODES, 0);
    cr_assert(a != NULL && c != NULL && w.c != NULL);
    /* a holds wq for 20 s: without the hand-off the waiter's 8 s run out. */
    cr_assert_eq(dlock_try_acquire(a, "wq", 20000, &h), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(pthread_create(&th, NULL, waiter, &w), 0);
    cr_assert_eq(tc_wait_listed(nodes, NODES, "wq", 1, 5000, &seen), -1, "waiter listed: %lld",
                 seen);
    /* While it waits: the batch is refused wq (held), gets wfree. */
    cr_assert_eq(dlock_try_acquire_each(c, set, 2, 10000, l, rcs), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(rcs[0], DLOCK_ERR_TAKEN);
    cr_assert_eq(rcs[1], DLOCK_OK);
    cr_assert_eq(dlock_release(c, l[1]), DLOCK_OK);
    free_all(l, 2);
    /* release_each hands wq to the waiter on every node in its script:
     * the batch right after finds it the waiter's, not free. */
    cr_assert_eq(dlock_release_each(a, &h, 1, rel), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(rel[0], DLOCK_OK);
    cr_assert_eq(dlock_try_acquire_each(c, set, 2, 10000, l, rcs), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(rcs[0], DLOCK_ERR_TAKEN, "the batch jumped the queued waiter");
    cr_assert_eq(rcs[1], DLOCK_OK);
    cr_assert_eq(dlock_release(c, l[1]), DLOCK_OK);
    free_all(l, 2);
    atomic_store(&w.done, 1);
    pthread_join(th, NULL);
    cr_assert_eq(w.rc, DLOCK_OK, "the waiter got wq by hand-off: %s", dlock_strerror(w.rc));
    cr_assert_eq(w.fence, dlock_lock_fence(h) + 1);
    dlock_lock_free(h);
    dlock_client_free(w.c);
    dlock_client_free(a);
    dlock_client_free(c);
}

Test(lock_each, argument_errors, .timeout = 30)
{
    dlock_client *c, *other;
    const char *dup[3] = {"x1", "x2", "x1"};
    const char *empty[2] = {"x1", ""};
    const char *many[DLOCK_MAX_MULTI + 1];
    char names[DLOCK_MAX_MULTI + 1][8];
    dlock_lock *l[DLOCK_MAX_MULTI + 1], *m = NULL, *mine[2];
    dlock_err rcs[DLOCK_MAX_MULTI + 1];
    const char *one[1] = {"x1"}, *pair[2] = {"x1", "x2"};

    cr_assert_eq(tc_nodes_up(nodes, 1, 0), 0);
    c = tc_client(nodes, 1, 0);
    other = tc_client(nodes, 1, 0);
    cr_assert(c != NULL && other != NULL);
    for (size_t i = 0; i <= DLOCK_MAX_MULTI; i++) {
        snprintf(names[i], sizeof names[i], "x%zu", i);
        many[i] = names[i];
    }
    cr_assert_eq(dlock_try_acquire_each(NULL, one, 1, 1000, l, rcs), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_try_acquire_each(c, NULL, 1, 1000, l, rcs), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_try_acquire_each(c, one, 0, 1000, l, rcs), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_try_acquire_each(c, many, DLOCK_MAX_MULTI + 1, 1000, l, rcs),
                 DLOCK_ERR_ARG);
    cr_assert_eq(dlock_try_acquire_each(c, one, 1, 0, l, rcs), DLOCK_ERR_ARG, "ttl 0");
    cr_assert_eq(dlock_try_acquire_each(c, one, 1, 1000, NULL, rcs), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_try_acquire_each(c, one, 1, 1000, l, NULL), DLOCK_ERR_ARG);
    cr_assert_null(l[0], "out set on every path");
    cr_assert_eq(dlock_try_acquire_each(c, empty, 2, 1000, l, rcs), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_try_acquire_each(c, dup, 3, 1000, l, rcs), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(c), "\"x1\"") != NULL, "%s", TC_ERR(c));
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(rcs[i], DLOCK_ERR_ARG);
        cr_assert_null(l[i]);
    }
    cr_assert_eq(tc_exists(&nodes[0], "x1"), 0, "nothing sent");
    /* The full DLOCK_MAX_MULTI works. */
    cr_assert_eq(dlock_try_acquire_each(c, many, DLOCK_MAX_MULTI, 1000, l, rcs), DLOCK_OK,
                 "%s", TC_ERR(c));
    for (size_t i = 0; i < DLOCK_MAX_MULTI; i++)
        cr_assert_eq(rcs[i], DLOCK_OK);
    cr_assert_eq(dlock_release_each(c, l, DLOCK_MAX_MULTI, rcs), DLOCK_OK, "%s", TC_ERR(c));
    for (size_t i = 0; i < DLOCK_MAX_MULTI; i++)
        cr_assert_eq(rcs[i], DLOCK_OK);
    free_all(l, DLOCK_MAX_MULTI);

    /* release_each: every handle is checked before anything is sent. */
    cr_assert_eq(dlock_try_acquire_each(c, pair, 2, 10000, mine, rcs), DLOCK_OK);
    cr_assert_eq(dlock_release_each(c, NULL, 1, rcs), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_release_each(c, mine, 0, rcs), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_release_each(c, mine, 2, NULL), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_release_each(other, mine, 2, rcs), DLOCK_ERR_ARG, "another client's");
    {
        dlock_lock *twice[2] = {mine[0], mine[0]};
        dlock_lock *with_null[2] = {mine[0], NULL};

        cr_assert_eq(dlock_release_each(c, twice, 2, rcs), DLOCK_ERR_ARG);
        cr_assert_eq(dlock_release_each(c, with_null, 2, rcs), DLOCK_ERR_ARG);
    }
    cr_assert_eq(dlock_acquire_multi(c, (const char *[]){"x3", "x4"}, 2, 10000, 0, &m), DLOCK_OK);
    {
        dlock_lock *with_multi[2] = {mine[0], m};

        cr_assert_eq(dlock_release_each(c, with_multi, 2, rcs), DLOCK_ERR_ARG);
        cr_assert(strstr(TC_ERR(c), "dlock_release") != NULL, "%s", TC_ERR(c));
    }
    cr_assert(dlock_is_held(mine[0]) && dlock_is_held(mine[1]) && dlock_is_held(m),
              "refused calls leave every lock held");
    cr_assert_eq(tc_exists(&nodes[0], "x1"), 1);
    /* Not reentrant: a name this thread holds. */
    cr_assert_eq(dlock_try_acquire_each(c, one, 1, 1000, l, rcs), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(c), "reentrant") != NULL, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release_each(c, mine, 2, rcs), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, m), DLOCK_OK);
    dlock_lock_free(m);
    free_all(mine, 2);
    dlock_client_free(other);
    dlock_client_free(c);
}
