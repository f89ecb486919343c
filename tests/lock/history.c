/* history.c - Jepsen-style history check: forked processes lock one
 * resource over 3 persistent nodes while one node at a time is killed and
 * restarted. Every recorded critical section must be disjoint from the
 * others (within its validity), and fences must rise in interval order.
 *
 * The checker must fail only when the lock is wrong, and must fail when it
 * is. LOCK_HISTORY_BREAK=1 in the environment makes each worker lock a
 * resource of its own (the lock, as far as the others are concerned, is
 * gone), and the test then reports overlapping sections. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lock_common.h"

#define NODES 3
#define PROCS 4
#define RUN_MS 3000
#define MAX_RECS 20000

static redis_proc nodes[NODES];

static void setup(void)
{
    tc_tmpdir_on_tmpfs();
    cr_assert_eq(tc_nodes_up(nodes, NODES, 1), 0);
}

static void teardown(void)
{
    tc_kill_children();
    redis_stop_n(nodes, NODES);
}

TestSuite(lock_history, .init = setup, .fini = teardown);

/* One critical section, stamped in nanoseconds on the library's clock
 * (CLOCK_BOOTTIME: one clock for every process on the machine, so intervals
 * from different processes compare directly). Whole milliseconds are too
 * coarse: a section may end and the next one start within one millisecond,
 * and with equal stamps the checker could not tell their order (about 1
 * run in 40 would "fail" that way, with a correct lock). */
typedef struct rec {
    int64_t start;       /* ns; acquire returned (the lock was ours no later than this) */
    int64_t end;         /* ns; just before release was called */
    int64_t valid_until; /* ns; end of the validity the library promised */
    uint64_t fence;
    int proc;
    int release_rc;
    char detail[120]; /* the client's error detail when the release failed */
} rec;

#define NS_PER_MS 1000000

static void child_loop(int id, int wfd, int64_t stop_at)
{
    dlock_options o;
    tc_addrs a;
    dlock_client *c = NULL;
    unsigned seed = (unsigned)(getpid() * 2654435761u);
    /* The deliberate break (see the top of the file): a resource per worker. */
    const char *env = getenv("LOCK_HISTORY_BREAK");
    char resource[32] = "history";
    if (env != NULL && strcmp(env, "1") == 0)
        snprintf(resource, sizeof resource, "history-%d", id);
    tc_options(&o, &a, nodes, NODES);
    o.command_timeout_ms = 300;
    o.retry_unavailable = 1;
    if (dlock_client_new(&o, &c, NULL, 0) != DLOCK_OK)
        _exit(2);
    while (dlock_now_ms() < stop_at) {
        dlock_lock *l = NULL;
        if (dlock_acquire(c, resource, 1000, dlock_now_ms() + 500, &l) != DLOCK_OK)
            continue;
        rec r = {.start = tc_now_ns(),
                 .valid_until = dlock_lock_valid_until_ms(l) * NS_PER_MS,
                 .fence = dlock_lock_fence(l),
                 .proc = id};
        usleep(200 + rand_r(&seed) % 1500);
        r.end = tc_now_ns();
        r.release_rc = (int)dlock_release(c, l);
        if (r.release_rc != DLOCK_OK)
            dlock_client_errstr(c, r.detail, sizeof r.detail);
        dlock_lock_free(l);
        /* sizeof(rec) < PIPE_BUF: each record arrives whole. */
        if (tc_write_all(wfd, &r, sizeof r) != 0)
            _exit(3);
    }
    dlock_client_free(c);
    _exit(0);
}

typedef struct reader {
    int fd;
    rec *recs;
    size_t n;
} reader;

/* Drains the pipe while the children run, so they never block on it. */
static void *read_all(void *p)
{
    reader *rd = p;
    rec r;
    while (tc_read_all(rd->fd, &r, sizeof r, 30000) == 0)
        if (rd->n < MAX_RECS)
            rd->recs[rd->n++] = r;
    return NULL;
}

/* Time first, then the fence: with a correct lock no two sections share a
 * start, and should two ever stamp the same nanosecond, the fence (the
 * order the lock handed them out) decides instead of the order their
 * records happened to reach the pipe. */
static int by_start_then_fence(const void *x, const void *y)
{
    const rec *a = x, *b = y;
    if (a->start != b->start)
        return (a->start > b->start) - (a->start < b->start);
    return (a->fence > b->fence) - (a->fence < b->fence);
}

Test(lock_history, no_overlap_and_rising_fences_under_node_restarts, .timeout = 60)
{
    int pfd[2];
    pid_t pids[PROCS];
    pthread_t th;
    reader rd = {.recs = calloc(MAX_RECS, sizeof(rec))};
    cr_assert_not_null(rd.recs);
    cr_assert_eq(pipe(pfd), 0);
    int64_t stop_at = dlock_now_ms() + RUN_MS;
    for (int i = 0; i < PROCS; i++) {
        pids[i] = tc_fork();
        cr_assert_geq(pids[i], 0);
        if (pids[i] == 0) {
            close(pfd[0]);
            child_loop(i, pfd[1], stop_at);
        }
    }
    close(pfd[1]);
    rd.fd = pfd[0];
    cr_assert_eq(pthread_create(&th, NULL, read_all, &rd), 0);

    /* The nemesis: one node at a time killed, left down, restarted. */
    int kills = 0;
    for (int k = 0; dlock_now_ms() < stop_at - 400; k = (k + 1) % NODES) {
        test_sleep_ms(250);
        cr_assert_eq(redis_kill(&nodes[k]), 0);
        kills++;
        test_sleep_ms(250);
        cr_assert_eq(redis_restart(&nodes[k]), 0);
    }
    for (int i = 0; i < PROCS; i++)
        cr_assert_eq(tc_wait_child(pids[i], 15000), 0, "worker %d failed", i);
    pthread_join(th, NULL);
    close(pfd[0]);

    cr_assert_geq(kills, 3);
    cr_assert_geq(rd.n, 50, "only %zu critical sections recorded", rd.n);
    int procs_seen[PROCS] = {0};
    qsort(rd.recs, rd.n, sizeof(rec), by_start_then_fence);
    int64_t busy_until = 0;
    for (size_t i = 0; i < rd.n; i++) {
        const rec *r = &rd.recs[i];
        procs_seen[r->proc]++;
        cr_assert_geq(r->start, busy_until,
                      "section %zu (proc %d, fence %llu) started %lld ns before the previous "
                      "one ended: two holders", i, r->proc, (unsigned long long)r->fence,
                      (long long)(busy_until - r->start));
        cr_assert_lt(r->end, r->valid_until, "section %zu outlived its validity", i);
        if (i > 0)
            cr_assert_gt(r->fence, rd.recs[i - 1].fence, "fence %llu after %llu at section %zu",
                         (unsigned long long)r->fence,
                         (unsigned long long)rd.recs[i - 1].fence, i);
        int64_t eff = r->end < r->valid_until ? r->end : r->valid_until;
        if (eff > busy_until)
            busy_until = eff;
    }
    for (int i = 0; i < PROCS; i++)
        cr_assert_gt(procs_seen[i], 0, "worker %d never got the lock", i);
    /* Safety first (above), then what each release reported. */
    for (size_t i = 0; i < rd.n; i++) {
        const rec *r = &rd.recs[i];
        /* A node killed mid-section can leave the release unconfirmed
         * (unavailable), but LOST would claim the section ran unprotected:
         * with 1000 ms TTLs, sections of a few ms and fsync'd keys it never did. */
        cr_assert(r->release_rc == DLOCK_OK ||
                      dlock_err_is_unavailable((dlock_err)r->release_rc),
                  "section %zu (proc %d, held %lld us): release %s: %s", i, r->proc,
                  (long long)(r->end - r->start) / 1000, dlock_strerror((dlock_err)r->release_rc),
                  r->detail);
    }
    free(rd.recs);
}
