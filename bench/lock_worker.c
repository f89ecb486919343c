/* lock_worker.c - dlock-bench workers on libdlock: uncontended and contended acquire/release loops. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Reads bench:counter (nil = 0). Returns 0 and *out, or -1 with w->err set. */
static int counter_get(bench_worker *w, redisContext *rc, long long *out)
{
    char err[BENCH_ERR_LEN];
    const char *argv[] = {"GET", BENCH_COUNTER_KEY};
    int result = -1;
    redisReply *r = bench_redis_cmd(rc, err, sizeof err, 2, argv);
    if (r == NULL) {
        bench_fail(w, "counter: %s", err);
        goto out;
    }
    if (r->type == REDIS_REPLY_NIL) {
        *out = 0;
    } else if (r->type == REDIS_REPLY_STRING) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(r->str, &end, 10);
        if (end == r->str || *end != '\0' || errno == ERANGE) {
            bench_fail(w, "counter: not an integer: '%.40s'", r->str);
            goto out;
        }
        *out = v;
    } else {
        bench_fail(w, "counter: unexpected GET reply type %d", r->type);
        goto out;
    }
    result = 0;
out:
    /* Guarded: freeReplyObject(NULL) only became a no-op in later hiredis releases. */
    if (r != NULL)
        freeReplyObject(r);
    return result;
}

static int counter_set(bench_worker *w, redisContext *rc, long long v)
{
    char err[BENCH_ERR_LEN];
    char num[32];
    snprintf(num, sizeof num, "%lld", v);
    const char *argv[] = {"SET", BENCH_COUNTER_KEY, num};
    redisReply *r = bench_redis_cmd(rc, err, sizeof err, 3, argv);
    if (r == NULL) {
        bench_fail(w, "counter: %s", err);
        return -1;
    }
    freeReplyObject(r);
    return 0;
}

/* The contended critical section. GET, sleep, SET is deliberately not
 * atomic: only the lock keeps two workers from reading the same value, so
 * every overlap shows up as a lost increment (counter < successes). The
 * in-process `inside` gauge catches overlaps even when the increments
 * happen to interleave harmlessly. */
static int critical_section(bench_worker *w, redisContext *rc)
{
    bench_shared *sh = w->sh;
    long long v = 0;
    int result = -1;
    if (atomic_fetch_add(&sh->inside, 1) != 0)
        atomic_fetch_add(&sh->overlaps, 1);
    if (counter_get(w, rc, &v) != 0)
        goto out;
    if (bench_sleep(w, sh->cfg->hold_ms) != 0)
        goto out;
    if (counter_set(w, rc, v + 1) != 0)
        goto out;
    result = 0;
out:
    /* Leave before release: the next holder can only enter after our release. */
    atomic_fetch_sub(&sh->inside, 1);
    return result;
}

/* One acquisition + release of the warm-up key: connects every node and
 * loads the scripts, so the measured rounds are steady-state ones (the first
 * EVALSHA on a fresh node costs an extra NOSCRIPT round). */
#define WARM_UP_TRIES 5
static int warm_up(bench_worker *w, dlock_client *c, const char *key)
{
    dlock_err e = DLOCK_OK;
    for (int i = 0; i < WARM_UP_TRIES; i++) {
        dlock_lock *l = NULL;
        e = dlock_try_acquire(c, key, w->sh->cfg->ttl_ms, &l);
        if (e == DLOCK_OK) {
            e = dlock_release(c, l);
            dlock_lock_free(l);
        }
        /* Only a node that stays unreachable or a bad argument stops the
         * run. TAKEN and LOST mean a leftover key from an earlier run, and
         * EXPIRED means a TTL too short for this machine: the measured
         * loop counts those. A single timeout is retried, because 64
         * workers connecting at once on a loaded machine can miss the
         * 100 ms command timeout once. */
        if (e == DLOCK_ERR_ARG || e == DLOCK_ERR_NOMEM)
            break;
        if (!dlock_err_is_unavailable(e))
            return 0;
        if (bench_sleep(w, 20) != 0)
            return -1;
    }
    char why[DLOCK_ERRSTR_LEN];
    bench_fail(w, "worker %d: warm-up: %s (%s)", w->id, dlock_strerror(e),
               dlock_client_errstr(c, why, sizeof why));
    return -1;
}

void *bench_lock_worker(void *arg)
{
    bench_worker *w = arg;
    bench_shared *sh = w->sh;
    const bench_config *cfg = sh->cfg;
    dlock_client *c = NULL;
    redisContext *rc = NULL;
    char addr_buf[DLOCK_MAX_NODES][BENCH_ADDR_LEN];
    const char *addrs[DLOCK_MAX_NODES];
    char own_key[64];
    char errbuf[BENCH_ERR_LEN];
    dlock_stats st0 = {0};
    dlock_stats st1 = {0};
    int set_up = 0;

    dlock_options o;
    bench_lock_options(cfg, &o, addr_buf, addrs);
    errbuf[0] = '\0';
    dlock_err e = dlock_client_new(&o, &c, errbuf, sizeof errbuf);
    if (e != DLOCK_OK) {
        bench_fail(w, "worker %d: dlock_client_new: %s (%s)", w->id, dlock_strerror(e), errbuf);
        goto ready;
    }
    snprintf(own_key, sizeof own_key, BENCH_KEY_FMT, w->id);
    if (warm_up(w, c, own_key) != 0)
        goto ready;
    if (cfg->mode == BENCH_CONTENDED) {
        rc = bench_redis_connect(cfg->counter_port, errbuf, sizeof errbuf);
        if (rc == NULL) {
            bench_fail(w, "worker %d: counter connection: %s", w->id, errbuf);
            goto ready;
        }
    }
    /* Baseline after the warm-up: only the measured cycles count as round trips. */
    dlock_client_stats(c, &st0);
    set_up = 1;
ready:
    if (!bench_wait_start(w) || !set_up)
        goto out;

    const char *key = cfg->mode == BENCH_CONTENDED ? BENCH_SHARED_KEY : own_key;
    const int64_t end_ms = sh->end_ns / 1000000;
    for (;;) {
        int64_t t0 = cm_now_ns();
        if (t0 >= sh->end_ns)
            break;
        int64_t deadline_ms = dlock_now_ms() + (int64_t)cfg->ttl_ms;
        int capped = 0;
        /* Wait at most one TTL, but not past the end of the run: a waiter
         * cut off by the end is not an acquisition failure. */
        if (deadline_ms >= end_ms) {
            deadline_ms = end_ms;
            capped = 1;
        }
        dlock_lock *l = NULL;
        e = dlock_acquire(c, key, cfg->ttl_ms, deadline_ms, &l);
        int64_t t1 = cm_now_ns();
        if (e != DLOCK_OK) {
            if (e == DLOCK_ERR_ARG || e == DLOCK_ERR_NOMEM) {
                char why[DLOCK_ERRSTR_LEN];
                bench_fail(w, "worker %d: acquire: %s (%s)", w->id, dlock_strerror(e),
                           dlock_client_errstr(c, why, sizeof why));
                break;
            }
            int cut_off = capped && (e == DLOCK_ERR_TAKEN || e == DLOCK_ERR_EXPIRED) &&
                          dlock_now_ms() >= end_ms;
            if (!cut_off)
                w->acquire_failures++;
            continue;
        }
        int cs = 0;
        if (cfg->mode == BENCH_CONTENDED)
            cs = critical_section(w, rc);
        else
            cs = bench_sleep(w, cfg->hold_ms);
        e = dlock_release(c, l);
        int64_t t2 = cm_now_ns();
        dlock_lock_free(l);
        if (e != DLOCK_OK)
            w->release_failures++;
        if (cs != 0)
            break;
        w->successes++;
        cm_hist_record(w->acq, (uint64_t)(t1 - t0) / 1000);
        cm_hist_record(w->cycle, (uint64_t)(t2 - t0) / 1000);
    }
    dlock_client_stats(c, &st1);
    w->lock_round_trips = st1.round_trips - st0.round_trips;
    w->stats.round_trips = w->lock_round_trips;
    w->stats.acquires = st1.acquires - st0.acquires;
    w->stats.attempts = st1.attempts - st0.attempts;
    w->stats.retries = st1.retries - st0.retries;
    w->stats.taken = st1.taken - st0.taken;
    w->stats.errors = st1.errors - st0.errors;
    w->stats.releases = st1.releases - st0.releases;
    w->stats.lost = st1.lost - st0.lost;
    w->stats.extends = st1.extends - st0.extends;
    w->stats.script_loads = st1.script_loads - st0.script_loads;
    w->stats.reconnects = st1.reconnects - st0.reconnects;
out:
    w->ended_ns = cm_now_ns();
    if (rc != NULL)
        redisFree(rc);
    dlock_client_free(c);
    return NULL;
}
