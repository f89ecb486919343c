/* main.c - dlock-bench: runs the workers, checks the counter, prints one JSON line.
 * main is the steps in order: parse, set up, run, sum up, check, report, clean up. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

/* Each worker holds n_ports + 1 sockets; 64 workers on 5 nodes already
 * pass the usual soft limit of 1024 descriptors on some systems. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        /* Best effort: if it fails, a worker that runs out of descriptors
         * fails its connect with a reason, and the run is reported broken. */
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static uint64_t random_run_id(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v)
        return v;
    /* Only raw-mode tokens depend on it, and they need uniqueness, not secrecy. */
    return (uint64_t)cm_now_ns() ^ ((uint64_t)getpid() << 32);
}

/* DEL or GET bench:counter on the first node. Returns 0 (and *value for GET). */
static int counter_cmd(int port, int del, long long *value)
{
    char err[BENCH_ERR_LEN];
    int result = -1;
    redisReply *r = NULL;
    redisContext *c = bench_redis_connect(port, err, sizeof err);
    if (c == NULL)
        goto out;
    const char *argv[] = {del ? "DEL" : "GET", BENCH_COUNTER_KEY};
    r = bench_redis_cmd(c, err, sizeof err, 2, argv);
    if (r == NULL)
        goto out;
    if (!del) {
        if (r->type == REDIS_REPLY_NIL) {
            *value = 0;
        } else if (r->type == REDIS_REPLY_STRING) {
            char *end = NULL;
            errno = 0;
            *value = strtoll(r->str, &end, 10);
            if (end == r->str || *end != '\0' || errno == ERANGE) {
                snprintf(err, sizeof err, "GET %s: not an integer", BENCH_COUNTER_KEY);
                goto out;
            }
        } else {
            snprintf(err, sizeof err, "GET %s: unexpected reply type %d", BENCH_COUNTER_KEY, r->type);
            goto out;
        }
    }
    result = 0;
out:
    if (result != 0)
        fprintf(stderr, "dlock-bench: counter on port %d: %s\n", port, err);
    if (r != NULL)
        freeReplyObject(r);
    if (c != NULL)
        redisFree(c);
    return result;
}

/* Everything one run owns; clean_up frees what set_up made, however far it got. */
typedef struct bench_run {
    bench_config cfg;
    bench_shared sh;
    bench_worker *workers; /* cfg.workers entries, each owning its two histograms */
    cm_hist *acq;          /* the workers' acq histograms merged */
    cm_hist *cycle;        /* the workers' cycle histograms merged */
    int sync_init;         /* sh.mu and sh.cond exist */
    int created;           /* worker threads started, all joined once run_workers returns
                              (--api async: the logical workers, run on this thread) */
    dlock_stats async_st;  /* --api async: the one client's counters over the measured loop */
} bench_run;

/* What the JSON line reports besides the configuration and the histograms. */
typedef struct bench_totals {
    uint64_t successes, failures, round_trips, release_failures;
    dlock_stats st;
    uint64_t pw_min, pw_max;
    double elapsed_s;
    long long counter;
    uint64_t violations;
} bench_totals;

/* JSON number in ms with 3 decimals, or null when there is no sample. */
static void print_ms(const char *name, const cm_hist *h, double us)
{
    if (h->n == 0)
        printf(",\"%s\":null", name);
    else
        printf(",\"%s\":%.3f", name, us / 1000.0);
}

static cm_hist *new_hist(void)
{
    cm_hist *h = malloc(sizeof *h);
    if (h != NULL)
        cm_hist_init(h);
    return h;
}

/* The workers and the histograms, all before the first thread: a worker
 * never allocates, so an out-of-memory ends the run before it starts. */
static int alloc_workers(bench_run *r)
{
    r->workers = calloc((size_t)r->cfg.workers, sizeof *r->workers);
    r->acq = new_hist();
    r->cycle = new_hist();
    if (r->workers == NULL || r->acq == NULL || r->cycle == NULL)
        goto oom;
    for (int i = 0; i < r->cfg.workers; i++) {
        r->workers[i].sh = &r->sh;
        r->workers[i].id = i;
        r->workers[i].acq = new_hist();
        r->workers[i].cycle = new_hist();
        if (r->workers[i].acq == NULL || r->workers[i].cycle == NULL)
            goto oom;
    }
    return 0;
oom:
    fprintf(stderr, "dlock-bench: out of memory\n");
    return -1;
}

static int init_gate(bench_shared *sh)
{
    if (pthread_mutex_init(&sh->mu, NULL) != 0) {
        fprintf(stderr, "dlock-bench: cannot create the start mutex\n");
        return -1;
    }
    if (pthread_cond_init(&sh->cond, NULL) != 0) {
        fprintf(stderr, "dlock-bench: cannot create the start condition\n");
        bench_pthread_check(pthread_mutex_destroy(&sh->mu), "start mutex: destroy");
        return -1;
    }
    return 0;
}

/* Everything before the first thread: signals, limits, the shared state, the
 * counter, the workers' memory and the start gate. -1 after a message. */
static int set_up(bench_run *r)
{
    /* A node closing a socket mid-write must give an error, not kill the bench. */
    if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) {
        fprintf(stderr, "dlock-bench: cannot ignore SIGPIPE\n");
        return -1;
    }
    raise_fd_limit();

    r->sh.cfg = &r->cfg;
    r->sh.state = BENCH_WAIT;
    atomic_init(&r->sh.inside, 0);
    atomic_init(&r->sh.overlaps, 0);
    r->sh.run_id = random_run_id();

    /* A leftover counter from an earlier run would read as lost updates. */
    if (r->cfg.mode == BENCH_CONTENDED && counter_cmd(r->cfg.counter_port, 1, NULL) != 0)
        return -1;
    if (alloc_workers(r) != 0 || init_gate(&r->sh) != 0)
        return -1;
    r->sync_init = 1;
    return 0;
}

/* Start gate: every worker has connected (or failed), then all start at once.
 * The end time is fixed here, so the set-up never counts as run time. */
static void open_gate(bench_run *r, int create_failed)
{
    bench_shared *sh = &r->sh;
    bench_pthread_check(pthread_mutex_lock(&sh->mu), "start gate: lock");
    while (sh->ready < r->created)
        bench_pthread_check(pthread_cond_wait(&sh->cond, &sh->mu), "start gate: wait");
    int setup_failed = create_failed;
    for (int i = 0; i < r->created; i++)
        setup_failed |= r->workers[i].failed;
    sh->start_ns = cm_now_ns();
    sh->end_ns = sh->start_ns + (int64_t)llround(r->cfg.duration_s * 1e9);
    sh->state = setup_failed ? BENCH_ABORT : BENCH_GO;
    bench_pthread_check(pthread_cond_broadcast(&sh->cond), "start gate: broadcast");
    bench_pthread_check(pthread_mutex_unlock(&sh->mu), "start gate: unlock");
}

/* Starts the threads, opens the gate and joins every thread started. A
 * thread that cannot be created still lets the others through the gate (to
 * ABORT), so none hangs. 0 when every worker ran; -1 after naming each
 * failure. */
static int run_workers(bench_run *r)
{
#ifdef BENCH_HAVE_UV
    if (r->cfg.api == BENCH_API_ASYNC) {
        /* One thread, this one: no gate to open, every worker starts on the loop. */
        r->created = r->cfg.workers;
        return bench_async_run(&r->sh, r->workers, &r->async_st);
    }
#endif
    void *(*entry)(void *) = r->cfg.mode == BENCH_RAW ? bench_raw_worker : bench_lock_worker;
    int create_failed = 0;
    for (; r->created < r->cfg.workers; r->created++) {
        bench_worker *w = &r->workers[r->created];
        int rc = pthread_create(&w->thread, NULL, entry, w);
        if (rc != 0) {
            fprintf(stderr, "dlock-bench: pthread_create (worker %d): %s\n", r->created,
                    strerror(rc));
            create_failed = 1;
            break;
        }
    }
    open_gate(r, create_failed);
    /* A join fails only on a bug; a thread left running would use freed memory. */
    for (int i = 0; i < r->created; i++)
        bench_pthread_check(pthread_join(r->workers[i].thread, NULL), "pthread_join");

    int broken = create_failed;
    for (int i = 0; i < r->created; i++) {
        if (r->workers[i].failed) {
            fprintf(stderr, "dlock-bench: %s\n", r->workers[i].err);
            broken = 1;
        }
    }
    return broken ? -1 : 0;
}

/* The workers' counters summed, their histograms merged into r's. */
static void sum_workers(bench_run *r, bench_totals *t)
{
    int64_t last_end = r->sh.start_ns;
    t->pw_min = UINT64_MAX;
    t->pw_max = 0;
    for (int i = 0; i < r->created; i++) {
        const bench_worker *w = &r->workers[i];
        t->successes += w->successes;
        t->failures += w->acquire_failures;
        t->round_trips += w->lock_round_trips;
        t->release_failures += w->release_failures;
        if (w->successes < t->pw_min)
            t->pw_min = w->successes;
        if (w->successes > t->pw_max)
            t->pw_max = w->successes;
        if (w->ended_ns > last_end)
            last_end = w->ended_ns;
        t->st.attempts += w->stats.attempts;
        t->st.retries += w->stats.retries;
        t->st.taken += w->stats.taken;
        t->st.errors += w->stats.errors;
        t->st.lost += w->stats.lost;
        t->st.script_loads += w->stats.script_loads;
        t->st.reconnects += w->stats.reconnects;
        cm_hist_merge(r->acq, w->acq);
        cm_hist_merge(r->cycle, w->cycle);
    }
    t->elapsed_s = (double)(last_end - r->sh.start_ns) / 1e9;
    if (r->cfg.api == BENCH_API_ASYNC) {
        /* One client for every worker: its counters are the run's, not a worker's. */
        t->round_trips = r->async_st.round_trips;
        t->st = r->async_st;
    }
}

/* Contended mode only: reads the counter back and counts the violations.
 * 0, or -1 after a message when the counter cannot be read. */
static int count_violations(const bench_run *r, bench_totals *t)
{
    if (r->cfg.mode != BENCH_CONTENDED)
        return 0;
    if (counter_cmd(r->cfg.counter_port, 0, &t->counter) != 0)
        return -1;
    /* Lost updates and observed overlaps are two views of the same
     * violations; the larger is a lower bound on how many happened. */
    long long diff = t->counter - (long long)t->successes;
    uint64_t lost = (uint64_t)(diff < 0 ? -diff : diff);
    uint64_t overlaps = atomic_load(&r->sh.overlaps);
    t->violations = lost > overlaps ? lost : overlaps;
    return 0;
}

/* The one JSON line; its keys and formats are what scripts and docs read. */
static void print_json(const bench_run *r, const bench_totals *t)
{
    const bench_config *cfg = &r->cfg;
    printf("{\"driver\":\"c\",\"lib\":\"libdlock\",\"mode\":\"%s\",\"retry\":\"%s\"",
           bench_mode_name(cfg->mode), bench_retry_name(cfg));
    printf(",\"redis_nodes\":%zu,\"workers\":%d,\"hold_ms\":%" PRIu32 ",\"ttl_ms\":%" PRIu32,
           cfg->n_ports, cfg->workers, cfg->hold_ms, cfg->ttl_ms);
    printf(",\"duration_s\":%g,\"elapsed_s\":%.3f", cfg->duration_s, t->elapsed_s);
    printf(",\"successes\":%" PRIu64 ",\"ops_per_s\":%.1f,\"acquire_failures\":%" PRIu64,
           t->successes, t->elapsed_s > 0 ? (double)t->successes / t->elapsed_s : 0.0, t->failures);
    printf(",\"counter\":%lld,\"violations\":%" PRIu64, t->counter, t->violations);
    print_ms("acq_p50_ms", r->acq, cm_hist_quantile_mid(r->acq, 0.50));
    print_ms("acq_p99_ms", r->acq, cm_hist_quantile_mid(r->acq, 0.99));
    print_ms("acq_max_ms", r->acq, (double)r->acq->max);
    print_ms("cycle_p50_ms", r->cycle, cm_hist_quantile_mid(r->cycle, 0.50));
    print_ms("cycle_p99_ms", r->cycle, cm_hist_quantile_mid(r->cycle, 0.99));
    if (t->successes == 0)
        printf(",\"lock_rt_per_success\":null");
    else
        printf(",\"lock_rt_per_success\":%.3f", (double)t->round_trips / (double)t->successes);
    printf(",\"per_worker_min\":%" PRIu64 ",\"per_worker_max\":%" PRIu64, t->pw_min, t->pw_max);
    /* Last, so the keys before keep their places: the API and the OS threads
     * the workers ran on (one per worker blocking, one for all async). */
    printf(",\"api\":\"%s\",\"threads\":%d}\n", bench_api_name(cfg->api),
           cfg->api == BENCH_API_ASYNC ? 1 : cfg->workers);
}

/* Diagnostics on stderr, then the JSON line on stdout. 0, or -1 after a
 * message when stdout could not take the line. */
static int report(const bench_run *r, const bench_totals *t)
{
    const dlock_stats *st = &t->st;
    if (t->release_failures > 0)
        fprintf(stderr,
                "dlock-bench: %" PRIu64 " releases found the lock lost or without quorum "
                "(hold too close to the TTL, or nodes failing)\n",
                t->release_failures);
    /* Diagnostics stay on stderr so stdout remains exactly one JSON line. */
    if (st->errors > 0 || st->reconnects > 0 || st->lost > 0 || st->script_loads > 0)
        fprintf(stderr,
                "dlock-bench: libdlock stats: attempts %" PRIu64 ", retries %" PRIu64
                ", taken %" PRIu64 ", errors %" PRIu64 ", lost %" PRIu64 ", reconnects %" PRIu64
                ", script loads %" PRIu64 "\n",
                st->attempts, st->retries, st->taken, st->errors, st->lost, st->reconnects,
                st->script_loads);
    print_json(r, t);
    /* ferror too: a failed printf above may leave nothing for fflush to fail on. */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "dlock-bench: writing the result: %s\n", strerror(errno));
        return -1;
    }
    return 0;
}

static void clean_up(bench_run *r)
{
    if (r->sync_init) {
        bench_pthread_check(pthread_cond_destroy(&r->sh.cond), "start condition: destroy");
        bench_pthread_check(pthread_mutex_destroy(&r->sh.mu), "start mutex: destroy");
    }
    if (r->workers != NULL) {
        for (int i = 0; i < r->cfg.workers; i++) {
            free(r->workers[i].acq);
            free(r->workers[i].cycle);
        }
    }
    free(r->workers);
    free(r->acq);
    free(r->cycle);
}

/* Exit 0: run done, no violation; 1: violations, Redis or run error; 2: usage error. */
int main(int argc, char **argv)
{
    bench_run r;
    bench_totals t;
    int status = 1;
    memset(&r, 0, sizeof r);
    memset(&t, 0, sizeof t);

    int pr = bench_parse_args(argc, argv, &r.cfg);
    if (pr != 0)
        return pr > 0 ? 0 : 2;
    if (set_up(&r) == 0 && run_workers(&r) == 0) {
        sum_workers(&r, &t);
        if (count_violations(&r, &t) == 0 && report(&r, &t) == 0)
            status = t.violations > 0 ? 1 : 0;
    }
    clean_up(&r);
    return status;
}
