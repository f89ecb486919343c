/* main.c - dlock-bench: runs the workers, checks the counter, prints one JSON line. */
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
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static uint64_t random_run_id(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v)
        return v;
    /* Only raw-mode tokens depend on it, and they need uniqueness, not secrecy. */
    return (uint64_t)bench_now_ns() ^ ((uint64_t)getpid() << 32);
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

/* JSON number in ms with 3 decimals, or null when there is no sample. */
static void print_ms(const char *name, const bench_hist *h, double us)
{
    if (h->total == 0)
        printf(",\"%s\":null", name);
    else
        printf(",\"%s\":%.3f", name, us / 1000.0);
}

int main(int argc, char **argv)
{
    bench_config cfg;
    bench_shared sh;
    bench_worker *workers = NULL;
    bench_hist *acq = NULL;
    bench_hist *cycle = NULL;
    int created = 0;
    int sync_init = 0;
    int status = 1;

    int pr = bench_parse_args(argc, argv, &cfg);
    if (pr != 0)
        return pr > 0 ? 0 : 2;

    /* A node closing a socket mid-write must give an error, not kill the bench. */
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    memset(&sh, 0, sizeof sh);
    sh.cfg = &cfg;
    sh.state = BENCH_WAIT;
    atomic_init(&sh.inside, 0);
    atomic_init(&sh.overlaps, 0);
    sh.run_id = random_run_id();

    /* A leftover counter from an earlier run would read as lost updates. */
    if (cfg.mode == BENCH_CONTENDED && counter_cmd(cfg.ports[0], 1, NULL) != 0)
        goto out;

    workers = calloc((size_t)cfg.workers, sizeof *workers);
    acq = calloc(1, sizeof *acq);
    cycle = calloc(1, sizeof *cycle);
    if (workers == NULL || acq == NULL || cycle == NULL) {
        fprintf(stderr, "dlock-bench: out of memory\n");
        goto out;
    }
    for (int i = 0; i < cfg.workers; i++) {
        workers[i].sh = &sh;
        workers[i].id = i;
        workers[i].acq = calloc(1, sizeof *workers[i].acq);
        workers[i].cycle = calloc(1, sizeof *workers[i].cycle);
        if (workers[i].acq == NULL || workers[i].cycle == NULL) {
            fprintf(stderr, "dlock-bench: out of memory\n");
            goto out;
        }
    }
    if (pthread_mutex_init(&sh.mu, NULL) != 0) {
        fprintf(stderr, "dlock-bench: cannot create the start mutex\n");
        goto out;
    }
    if (pthread_cond_init(&sh.cond, NULL) != 0) {
        fprintf(stderr, "dlock-bench: cannot create the start condition\n");
        pthread_mutex_destroy(&sh.mu);
        goto out;
    }
    sync_init = 1;

    void *(*entry)(void *) = cfg.mode == BENCH_RAW ? bench_raw_worker : bench_lock_worker;
    int create_failed = 0;
    for (; created < cfg.workers; created++) {
        int rc = pthread_create(&workers[created].thread, NULL, entry, &workers[created]);
        if (rc != 0) {
            fprintf(stderr, "dlock-bench: pthread_create (worker %d): %s\n", created, strerror(rc));
            create_failed = 1;
            break;
        }
    }

    /* Start gate: every worker has connected (or failed), then all start at once. */
    pthread_mutex_lock(&sh.mu);
    while (sh.ready < created)
        pthread_cond_wait(&sh.cond, &sh.mu);
    int setup_failed = create_failed;
    for (int i = 0; i < created; i++)
        setup_failed |= workers[i].failed;
    sh.start_ns = bench_now_ns();
    sh.end_ns = sh.start_ns + (int64_t)llround(cfg.duration_s * 1e9);
    sh.state = setup_failed ? BENCH_ABORT : BENCH_GO;
    pthread_cond_broadcast(&sh.cond);
    pthread_mutex_unlock(&sh.mu);

    for (int i = 0; i < created; i++)
        pthread_join(workers[i].thread, NULL);
    int joined = created;

    int broken = create_failed;
    for (int i = 0; i < joined; i++) {
        if (workers[i].failed) {
            fprintf(stderr, "dlock-bench: %s\n", workers[i].err);
            broken = 1;
        }
    }
    if (broken)
        goto out;

    uint64_t successes = 0, failures = 0, round_trips = 0, release_failures = 0;
    dlock_stats st = {0};
    uint64_t pw_min = UINT64_MAX, pw_max = 0;
    int64_t last_end = sh.start_ns;
    for (int i = 0; i < joined; i++) {
        bench_worker *w = &workers[i];
        successes += w->successes;
        failures += w->acquire_failures;
        round_trips += w->lock_round_trips;
        release_failures += w->release_failures;
        if (w->successes < pw_min)
            pw_min = w->successes;
        if (w->successes > pw_max)
            pw_max = w->successes;
        if (w->ended_ns > last_end)
            last_end = w->ended_ns;
        st.attempts += w->stats.attempts;
        st.retries += w->stats.retries;
        st.taken += w->stats.taken;
        st.errors += w->stats.errors;
        st.lost += w->stats.lost;
        st.script_loads += w->stats.script_loads;
        st.reconnects += w->stats.reconnects;
        hist_merge(acq, w->acq);
        hist_merge(cycle, w->cycle);
    }
    double elapsed_s = (double)(last_end - sh.start_ns) / 1e9;

    long long counter = 0;
    uint64_t violations = 0;
    if (cfg.mode == BENCH_CONTENDED) {
        if (counter_cmd(cfg.ports[0], 0, &counter) != 0)
            goto out;
        /* Lost updates and observed overlaps are two views of the same
         * violations; the larger is a lower bound on how many happened. */
        long long diff = counter - (long long)successes;
        uint64_t lost = (uint64_t)(diff < 0 ? -diff : diff);
        uint64_t overlaps = atomic_load(&sh.overlaps);
        violations = lost > overlaps ? lost : overlaps;
    }
    if (release_failures > 0)
        fprintf(stderr,
                "dlock-bench: %" PRIu64 " releases found the lock lost or without quorum "
                "(hold too close to the TTL, or nodes failing)\n",
                release_failures);
    /* Diagnostics stay on stderr so stdout remains exactly one JSON line. */
    if (st.errors > 0 || st.reconnects > 0 || st.lost > 0 || st.script_loads > 0)
        fprintf(stderr,
                "dlock-bench: libdlock stats: attempts %" PRIu64 ", retries %" PRIu64
                ", taken %" PRIu64 ", errors %" PRIu64 ", lost %" PRIu64 ", reconnects %" PRIu64
                ", script loads %" PRIu64 "\n",
                st.attempts, st.retries, st.taken, st.errors, st.lost, st.reconnects,
                st.script_loads);

    printf("{\"driver\":\"c\",\"lib\":\"libdlock\",\"mode\":\"%s\",\"retry\":\"%s\"",
           bench_mode_name(cfg.mode), bench_retry_name(&cfg));
    printf(",\"redis_nodes\":%zu,\"workers\":%d,\"hold_ms\":%" PRIu32 ",\"ttl_ms\":%" PRIu32,
           cfg.n_ports, cfg.workers, cfg.hold_ms, cfg.ttl_ms);
    printf(",\"duration_s\":%g,\"elapsed_s\":%.3f", cfg.duration_s, elapsed_s);
    printf(",\"successes\":%" PRIu64 ",\"ops_per_s\":%.1f,\"acquire_failures\":%" PRIu64, successes,
           elapsed_s > 0 ? (double)successes / elapsed_s : 0.0, failures);
    printf(",\"counter\":%lld,\"violations\":%" PRIu64, counter, violations);
    print_ms("acq_p50_ms", acq, hist_percentile_us(acq, 50.0));
    print_ms("acq_p99_ms", acq, hist_percentile_us(acq, 99.0));
    print_ms("acq_max_ms", acq, (double)acq->max_us);
    print_ms("cycle_p50_ms", cycle, hist_percentile_us(cycle, 50.0));
    print_ms("cycle_p99_ms", cycle, hist_percentile_us(cycle, 99.0));
    if (successes == 0)
        printf(",\"lock_rt_per_success\":null");
    else
        printf(",\"lock_rt_per_success\":%.3f", (double)round_trips / (double)successes);
    printf(",\"per_worker_min\":%" PRIu64 ",\"per_worker_max\":%" PRIu64 "}\n", pw_min, pw_max);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "dlock-bench: writing the result: %s\n", strerror(errno));
        goto out;
    }
    status = violations > 0 ? 1 : 0;
out:
    if (sync_init) {
        pthread_cond_destroy(&sh.cond);
        pthread_mutex_destroy(&sh.mu);
    }
    if (workers != NULL) {
        for (int i = 0; i < cfg.workers; i++) {
            free(workers[i].acq);
            free(workers[i].cycle);
        }
    }
    free(workers);
    free(acq);
    free(cycle);
    return status;
}
