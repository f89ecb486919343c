/* async_worker.c - dlock-bench --api async: every worker on one libuv loop in
 * one thread, sharing one dlock_async client (dlock_uv.h's hooks), with the
 * same cycle as lock_worker.c: acquire (wait at most one TTL, not past the
 * end), in contended mode GET bench:counter, hold, SET it + 1, then release.
 * The counter goes through the system hiredis's async API on the same loop
 * (hiredis/adapters/libuv.h): a plaintext connection, as the threads' own.
 *
 * One uv_run: warm-up (connects every node, loads the scripts, checks the
 * counter connection), then the measured loop, then the teardown. A guard
 * timer bounds each phase: if a callback never came (a server that stops
 * answering the counter connection, which hiredis 0.14 cannot time out),
 * the guard tears everything down and the run is reported as broken. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <uv.h>

#include "bench.h"
#include "dlock_uv.h"

/* Warm-up tries, and the pause between them, as the threads' warm_up. */
#define WARM_UP_TRIES 5
#define WARM_UP_PAUSE_MS 20
/* Bounds on the phases: the warm-up (connect and command timeouts are
 * 200 and 100 ms per try, the counter's 1 s), and what the last cycle may
 * take after the end (a wait capped at the end, the hold, three commands). */
#define WARM_UP_GUARD_MS 15000
#define END_GUARD_MS 10000

typedef struct async_run async_run;

typedef struct async_worker {
    async_run *run;
    bench_worker *w;
    char key[64];
    dlock_lock *lock;   /* held from the acquire's callback to the release's */
    int64_t t0, t1;     /* this cycle's start and its acquisition, cm_now_ns */
    int capped;         /* this cycle's wait was cut to the end of the run */
    int cs_failed;      /* the critical section failed: stop after the release */
    int inside;         /* counted in sh->inside, not yet left */
    long long value;    /* contended: what GET read */
    uv_timer_t hold;    /* the hold inside the lock */
    int done;
} async_worker;

typedef enum async_phase { PHASE_WARM, PHASE_RUN, PHASE_DOWN } async_phase;

struct async_run {
    bench_shared *sh;
    const bench_config *cfg;
    uv_loop_t loop;
    dlock_async *client;
    redisAsyncContext *counter; /* contended only; NULL once hiredis freed it */
    async_worker *aw;
    int n;
    int running;          /* workers not done */
    async_phase phase;
    int warm_tries;
    dlock_lock *warm_lock; /* the warm-up's lock, until its release's callback */
    uv_timer_t step;      /* warm-up retry pause, then the start of the measured loop */
    uv_timer_t guard;     /* the bound on the current phase */
    uv_timer_t finish;    /* the teardown, from a clean stack */
    int timers_init;      /* step, guard and finish exist */
    int holds_init;       /* aw[0..holds_init) have their hold timer */
    int failed;           /* set-up or run broken: err says why */
    char err[BENCH_ERR_LEN];
    dlock_stats st0;
    dlock_stats *st_out;
};

static void run_fail(async_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_fail(async_run *run, const char *fmt, ...)
{
    if (run->failed)
        return;
    run->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(run->err, sizeof run->err, fmt, ap);
    va_end(ap);
}

static void start_cycle(async_worker *aw);
static void release_lock(async_worker *aw);
static void on_finish(uv_timer_t *t);

/* Tears down on the next loop turn: never from inside a hiredis or libdlock
 * callback. From here on no worker starts another cycle. */
static void schedule_finish(async_run *run)
{
    if (run->phase == PHASE_DOWN)
        return;
    run->phase = PHASE_DOWN;
    int rc = uv_timer_start(&run->finish, on_finish, 0, 0);
    if (rc != 0) {
        /* Cannot happen with a valid timer and callback; a loop left
         * running would never return, so stop here with the reason. */
        fprintf(stderr, "dlock-bench: teardown timer: %s\n", uv_strerror(rc));
        abort();
    }
}

static void worker_done(async_worker *aw)
{
    if (aw->done)
        return;
    aw->done = 1;
    aw->w->ended_ns = cm_now_ns();
    if (--aw->run->running == 0)
        schedule_finish(aw->run);
}

/* ---- the counter, through hiredis async ---- */

static int parse_counter(const redisReply *r, long long *out, char *err, size_t errlen)
{
    if (r->type == REDIS_REPLY_NIL) {
        *out = 0;
        return 0;
    }
    if (r->type != REDIS_REPLY_STRING) {
        snprintf(err, errlen, "unexpected GET reply type %d", r->type);
        return -1;
    }
    char *end = NULL;
    errno = 0;
    long long v = strtoll(r->str, &end, 10);
    if (end == r->str || *end != '\0' || errno == ERANGE) {
        snprintf(err, errlen, "not an integer: '%.40s'", r->str);
        return -1;
    }
    *out = v;
    return 0;
}

/* The reason a counter command failed: NULL reply (connection gone) or an error reply. */
static void counter_fail(async_worker *aw, redisAsyncContext *c, const redisReply *r, const char *cmd)
{
    /* A teardown frees the connection with commands pending: not the worker's fault. */
    if (aw->run->phase == PHASE_DOWN)
        return;
    if (r == NULL)
        bench_fail(aw->w, "worker %d: counter: %s: %s", aw->w->id, cmd,
                   c != NULL && c->err ? c->errstr : "connection lost");
    else
        bench_fail(aw->w, "worker %d: counter: %s: %s", aw->w->id, cmd,
                   r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
}

static void leave(async_worker *aw)
{
    /* Leave before release: the next holder can only enter after our release. */
    if (aw->inside) {
        atomic_fetch_sub(&aw->run->sh->inside, 1);
        aw->inside = 0;
    }
}

static void on_set(redisAsyncContext *c, void *reply, void *priv)
{
    async_worker *aw = priv;
    redisReply *r = reply;

    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        counter_fail(aw, c, r, "SET");
        aw->cs_failed = 1;
    }
    leave(aw);
    release_lock(aw);
}

static void send_set(async_worker *aw)
{
    async_run *run = aw->run;

    if (run->counter == NULL ||
        redisAsyncCommand(run->counter, on_set, aw, "SET %s %lld", BENCH_COUNTER_KEY,
                          aw->value + 1) != REDIS_OK) {
        counter_fail(aw, run->counter, NULL, "SET");
        aw->cs_failed = 1;
        leave(aw);
        release_lock(aw);
    }
}

static void on_hold(uv_timer_t *t)
{
    async_worker *aw = t->data;

    if (aw->run->cfg->mode == BENCH_CONTENDED)
        send_set(aw);
    else
        release_lock(aw);
}

/* The hold: a timer when there is one, else straight on (no loop turn). */
static void hold_then(async_worker *aw)
{
    uint32_t ms = aw->run->cfg->hold_ms;

    if (ms == 0) {
        on_hold(&aw->hold);
        return;
    }
    int rc = uv_timer_start(&aw->hold, on_hold, ms, 0);
    if (rc != 0) {
        bench_fail(aw->w, "worker %d: hold timer: %s", aw->w->id, uv_strerror(rc));
        aw->cs_failed = 1;
        leave(aw);
        release_lock(aw);
    }
}

static void on_get(redisAsyncContext *c, void *reply, void *priv)
{
    async_worker *aw = priv;
    redisReply *r = reply;
    char why[BENCH_ERR_LEN];

    if (r == NULL || r->type == REDIS_REPLY_ERROR) {
        counter_fail(aw, c, r, "GET");
    } else if (parse_counter(r, &aw->value, why, sizeof why) != 0) {
        bench_fail(aw->w, "worker %d: counter: %s", aw->w->id, why);
    } else {
        hold_then(aw);
        return;
    }
    aw->cs_failed = 1;
    leave(aw);
    release_lock(aw);
}

/* ---- the lock cycle ---- */

static void on_released(dlock_async *a, dlock_err rc, const char *detail, void *arg)
{
    async_worker *aw = arg;
    int64_t t2 = cm_now_ns();

    (void)a;
    (void)detail;
    dlock_lock_free(aw->lock);
    aw->lock = NULL;
    /* CANCELLED: the teardown freed the client; the key expires with its TTL. */
    if (rc != DLOCK_OK && rc != DLOCK_ERR_CANCELLED)
        aw->w->release_failures++;
    if (aw->cs_failed || rc == DLOCK_ERR_CANCELLED) {
        worker_done(aw);
        return;
    }
    aw->w->successes++;
    cm_hist_record(aw->w->acq, (uint64_t)(aw->t1 - aw->t0) / 1000);
    cm_hist_record(aw->w->cycle, (uint64_t)(t2 - aw->t0) / 1000);
    start_cycle(aw);
}

static void release_lock(async_worker *aw)
{
    dlock_err e = dlock_async_release(aw->run->client, aw->lock, on_released, aw);

    if (e != DLOCK_OK) {
        /* Only a bug gives ARG here (the lock is this client's, held once). */
        bench_fail(aw->w, "worker %d: release: %s", aw->w->id, dlock_strerror(e));
        dlock_lock_free(aw->lock);
        aw->lock = NULL;
        worker_done(aw);
    }
}

static void on_acquired(dlock_async *a, dlock_err rc, dlock_lock *lock, const char *detail,
                        void *arg)
{
    async_worker *aw = arg;
    async_run *run = aw->run;

    (void)a;
    aw->t1 = cm_now_ns();
    if (rc != DLOCK_OK) {
        if (rc == DLOCK_ERR_CANCELLED) {
            worker_done(aw);
            return;
        }
        if (rc == DLOCK_ERR_ARG || rc == DLOCK_ERR_NOMEM) {
            bench_fail(aw->w, "worker %d: acquire: %s (%s)", aw->w->id, dlock_strerror(rc), detail);
            worker_done(aw);
            return;
        }
        /* A waiter cut off by the end of the run is not an acquisition failure. */
        int cut_off = aw->capped && (rc == DLOCK_ERR_TAKEN || rc == DLOCK_ERR_EXPIRED) &&
                      dlock_now_ms() >= run->sh->end_ns / 1000000;
        if (!cut_off)
            aw->w->acquire_failures++;
        start_cycle(aw);
        return;
    }
    aw->lock = lock;
    aw->cs_failed = 0;
    if (run->cfg->mode != BENCH_CONTENDED) {
        hold_then(aw);
        return;
    }
    /* With a correct lock nobody else is inside: one thread, but the same gauge. */
    if (atomic_fetch_add(&run->sh->inside, 1) != 0)
        atomic_fetch_add(&run->sh->overlaps, 1);
    aw->inside = 1;
    if (run->counter == NULL ||
        redisAsyncCommand(run->counter, on_get, aw, "GET %s", BENCH_COUNTER_KEY) != REDIS_OK) {
        counter_fail(aw, run->counter, NULL, "GET");
        aw->cs_failed = 1;
        leave(aw);
        release_lock(aw);
    }
}

static void start_cycle(async_worker *aw)
{
    async_run *run = aw->run;
    const int64_t end_ms = run->sh->end_ns / 1000000;

    if (run->phase != PHASE_RUN || aw->w->failed) {
        worker_done(aw);
        return;
    }
    aw->t0 = cm_now_ns();
    if (aw->t0 >= run->sh->end_ns) {
        worker_done(aw);
        return;
    }
    int64_t deadline_ms = dlock_now_ms() + (int64_t)run->cfg->ttl_ms;
    aw->capped = 0;
    /* Wait at most one TTL, but not past the end of the run. */
    if (deadline_ms >= end_ms) {
        deadline_ms = end_ms;
        aw->capped = 1;
    }
    dlock_err e = dlock_async_acquire(run->client, aw->key, run->cfg->ttl_ms, deadline_ms,
                                      on_acquired, aw, NULL);
    if (e != DLOCK_OK) {
        bench_fail(aw->w, "worker %d: acquire: %s", aw->w->id, dlock_strerror(e));
        worker_done(aw);
    }
}

/* ---- phases ---- */

static void on_guard(uv_timer_t *t)
{
    async_run *run = t->data;

    if (run->phase == PHASE_WARM)
        run_fail(run, "the warm-up did not finish within %d ms: tearing down", WARM_UP_GUARD_MS);
    else
        run_fail(run, "the last cycles did not finish within %" PRIu32 " ms after the end "
                      "(TTL + hold + %d ms): tearing down",
                 run->cfg->ttl_ms + run->cfg->hold_ms + END_GUARD_MS, END_GUARD_MS);
    schedule_finish(run);
}

static void arm_guard(async_run *run, uint64_t ms)
{
    int rc = uv_timer_start(&run->guard, on_guard, ms, 0);
    if (rc != 0) {
        run_fail(run, "guard timer: %s", uv_strerror(rc));
        schedule_finish(run);
    }
}

static void start_measured(uv_timer_t *t)
{
    async_run *run = t->data;
    bench_shared *sh = run->sh;

    /* The client's counters from here on: only the measured cycles count. */
    dlock_async_stats(run->client, &run->st0);
    sh->start_ns = cm_now_ns();
    sh->end_ns = sh->start_ns + (int64_t)llround(run->cfg->duration_s * 1e9);
    run->phase = PHASE_RUN;
    arm_guard(run, (uint64_t)(run->cfg->duration_s * 1000.0) + run->cfg->ttl_ms +
                       run->cfg->hold_ms + END_GUARD_MS);
    run->running = run->n;
    for (int i = 0; i < run->n && run->phase == PHASE_RUN; i++)
        start_cycle(&run->aw[i]);
}

/* Warm-up done: the measured loop starts on the next turn. */
static void warm_done(async_run *run)
{
    int rc = uv_timer_start(&run->step, start_measured, 0, 0);
    if (rc != 0) {
        run_fail(run, "start timer: %s", uv_strerror(rc));
        schedule_finish(run);
    }
}

static void on_warm_ping(redisAsyncContext *c, void *reply, void *priv)
{
    async_run *run = priv;
    redisReply *r = reply;

    if (run->phase != PHASE_WARM)
        return;
    if (r == NULL || r->type != REDIS_REPLY_STATUS) {
        run_fail(run, "counter connection %s:%d: %s", BENCH_HOST, run->cfg->counter_port,
                 r == NULL ? (c->err ? c->errstr : "connection lost")
                           : (r->type == REDIS_REPLY_ERROR ? r->str : "unexpected PING reply"));
        schedule_finish(run);
        return;
    }
    warm_done(run);
}

static void warm_try(uv_timer_t *t);

/* The acquire's or the release's verdict on one warm-up try. */
static void warm_verdict(async_run *run, dlock_err rc, const char *detail)
{
    if (run->phase != PHASE_WARM)
        return;
    /* As the threads' warm_up: only a node that stays unavailable or a bad
     * argument stops the run; TAKEN, LOST and EXPIRED (a leftover key, a
     * TTL too short for this machine) are the measured loop's to count. */
    if (rc != DLOCK_ERR_ARG && rc != DLOCK_ERR_NOMEM && rc != DLOCK_ERR_CANCELLED &&
        !dlock_err_is_unavailable(rc)) {
        if (run->cfg->mode != BENCH_CONTENDED) {
            warm_done(run);
            return;
        }
        /* The counter connection answers too, before the clock starts. */
        if (run->counter == NULL ||
            redisAsyncCommand(run->counter, on_warm_ping, run, "PING") != REDIS_OK) {
            run_fail(run, "counter connection %s:%d: %s", BENCH_HOST, run->cfg->counter_port,
                     run->counter != NULL && run->counter->err ? run->counter->errstr
                                                                : "connection lost");
            schedule_finish(run);
        }
        return;
    }
    if (rc == DLOCK_ERR_ARG || rc == DLOCK_ERR_NOMEM || rc == DLOCK_ERR_CANCELLED ||
        run->warm_tries >= WARM_UP_TRIES) {
        run_fail(run, "warm-up: %s (%s)", dlock_strerror(rc), detail);
        schedule_finish(run);
        return;
    }
    int e = uv_timer_start(&run->step, warm_try, WARM_UP_PAUSE_MS, 0);
    if (e != 0) {
        run_fail(run, "warm-up timer: %s", uv_strerror(e));
        schedule_finish(run);
    }
}

static void on_warm_released(dlock_async *a, dlock_err rc, const char *detail, void *arg)
{
    async_run *run = arg;

    (void)a;
    dlock_lock_free(run->warm_lock);
    run->warm_lock = NULL;
    warm_verdict(run, rc, detail);
}

static void on_warm_acquired(dlock_async *a, dlock_err rc, dlock_lock *lock, const char *detail,
                             void *arg)
{
    async_run *run = arg;

    if (rc != DLOCK_OK) {
        warm_verdict(run, rc, detail);
        return;
    }
    run->warm_lock = lock;
    /* Released even during a teardown: the free then cancels it at once. */
    dlock_err e = dlock_async_release(a, lock, on_warm_released, run);
    if (e != DLOCK_OK)
        on_warm_released(a, e, "release refused", run);
}

/* One warm-up try: one acquisition + release of worker 0's key connects
 * every node and loads both scripts, so the measured rounds are
 * steady-state ones (one client: one warm-up for every worker). */
static void warm_try(uv_timer_t *t)
{
    async_run *run = t->data;

    if (run->phase != PHASE_WARM)
        return;
    run->warm_tries++;
    dlock_err e = dlock_async_try_acquire(run->client, run->aw[0].key, run->cfg->ttl_ms,
                                          on_warm_acquired, run, NULL);
    if (e != DLOCK_OK) {
        run_fail(run, "warm-up: acquire: %s", dlock_strerror(e));
        schedule_finish(run);
    }
}

/* ---- teardown ---- */

static void on_finish(uv_timer_t *t)
{
    async_run *run = t->data;
    dlock_stats st1 = {0};

    /* The counter first: its pending callbacks (NULL replies) send their
     * releases on the client, which the client's free then cancels. */
    if (run->counter != NULL) {
        redisAsyncContext *c = run->counter;
        run->counter = NULL;
        redisAsyncFree(c);
    }
    if (run->client != NULL) {
        dlock_async_stats(run->client, &st1);
        run->st_out->round_trips = st1.round_trips - run->st0.round_trips;
        run->st_out->acquires = st1.acquires - run->st0.acquires;
        run->st_out->attempts = st1.attempts - run->st0.attempts;
        run->st_out->retries = st1.retries - run->st0.retries;
        run->st_out->taken = st1.taken - run->st0.taken;
        run->st_out->errors = st1.errors - run->st0.errors;
        run->st_out->releases = st1.releases - run->st0.releases;
        run->st_out->lost = st1.lost - run->st0.lost;
        run->st_out->extends = st1.extends - run->st0.extends;
        run->st_out->script_loads = st1.script_loads - run->st0.script_loads;
        run->st_out->reconnects = st1.reconnects - run->st0.reconnects;
        dlock_async *a = run->client;
        run->client = NULL;
        dlock_async_free(a); /* every call in flight completes, CANCELLED */
    }
    /* Cut off inside a hold (the guard fired): nothing left to release
     * with; the key expires with its TTL. */
    for (int i = 0; i < run->n; i++) {
        async_worker *aw = &run->aw[i];
        if (aw->lock != NULL) {
            dlock_lock_free(aw->lock);
            aw->lock = NULL;
            leave(aw);
        }
        if (run->running > 0 && !aw->done)
            worker_done(aw);
    }
    /* What is left is handles: closed here, freed as the loop runs on. */
    for (int i = 0; i < run->holds_init; i++) {
        (void)uv_timer_stop(&run->aw[i].hold);
        uv_close((uv_handle_t *)&run->aw[i].hold, NULL);
    }
    run->holds_init = 0;
    (void)uv_timer_stop(&run->step);
    (void)uv_timer_stop(&run->guard);
    uv_close((uv_handle_t *)&run->step, NULL);
    uv_close((uv_handle_t *)&run->guard, NULL);
    uv_close((uv_handle_t *)&run->finish, NULL);
    run->timers_init = 0;
}

/* ---- set-up ---- */

static void on_counter_connect(const redisAsyncContext *c, int status)
{
    async_run *run = c->data;

    if (status == REDIS_OK)
        return;
    /* hiredis frees the context after this returns; the PING's callback
     * (a NULL reply) names the failure. */
    run->counter = NULL;
}

static void on_counter_disconnect(const redisAsyncContext *c, int status)
{
    async_run *run = c->data;

    (void)status;
    run->counter = NULL;
}

static int counter_connect(async_run *run)
{
    redisAsyncContext *c = redisAsyncConnect(BENCH_HOST, run->cfg->counter_port);

    if (c == NULL) {
        run_fail(run, "counter connection %s:%d: out of memory", BENCH_HOST, run->cfg->counter_port);
        return -1;
    }
    if (c->err) {
        run_fail(run, "counter connection %s:%d: %s", BENCH_HOST, run->cfg->counter_port, c->errstr);
        redisAsyncFree(c);
        return -1;
    }
    c->data = run;
    if (redisLibuvAttach(c, &run->loop) != REDIS_OK) {
        run_fail(run, "counter connection: cannot attach to the loop");
        redisAsyncFree(c);
        return -1;
    }
    if (redisAsyncSetConnectCallback(c, on_counter_connect) != REDIS_OK ||
        redisAsyncSetDisconnectCallback(c, on_counter_disconnect) != REDIS_OK) {
        run_fail(run, "counter connection: cannot set its callbacks");
        redisAsyncFree(c);
        return -1;
    }
    run->counter = c;
    return 0;
}

static int init_timer(async_run *run, uv_timer_t *t, void *data)
{
    int rc = uv_timer_init(&run->loop, t);
    if (rc != 0) {
        run_fail(run, "uv_timer_init: %s", uv_strerror(rc));
        return -1;
    }
    t->data = data;
    return 0;
}

/* The loop, the client, the timers, the counter connection. -1 with
 * run->err set; what was made is undone by the teardown (run->timers_init
 * says whether it can run). */
static int set_up(async_run *run, bench_worker *workers)
{
    dlock_loop hooks;
    dlock_options o;
    char addr_buf[DLOCK_MAX_NODES][BENCH_ADDR_LEN];
    const char *addrs[DLOCK_MAX_NODES];
    char errbuf[BENCH_ERR_LEN];

    for (int i = 0; i < run->n; i++) {
        async_worker *aw = &run->aw[i];
        aw->run = run;
        aw->w = &workers[i];
        snprintf(aw->key, sizeof aw->key, "%s",
                 run->cfg->mode == BENCH_CONTENDED ? BENCH_SHARED_KEY : "");
        if (run->cfg->mode != BENCH_CONTENDED)
            snprintf(aw->key, sizeof aw->key, BENCH_KEY_FMT, i);
    }
    if (init_timer(run, &run->step, run) != 0)
        return -1;
    if (init_timer(run, &run->guard, run) != 0) {
        uv_close((uv_handle_t *)&run->step, NULL);
        return -1;
    }
    if (init_timer(run, &run->finish, run) != 0) {
        uv_close((uv_handle_t *)&run->step, NULL);
        uv_close((uv_handle_t *)&run->guard, NULL);
        return -1;
    }
    run->timers_init = 1;
    for (; run->holds_init < run->n; run->holds_init++) {
        if (init_timer(run, &run->aw[run->holds_init].hold, &run->aw[run->holds_init]) != 0)
            return -1;
    }
    bench_lock_options(run->cfg, &o, addr_buf, addrs);
    if (dlock_loop_uv(&hooks, &run->loop) != 0) {
        run_fail(run, "dlock_loop_uv refused the loop");
        return -1;
    }
    errbuf[0] = '\0';
    dlock_err e = dlock_async_new(&o, &hooks, &run->client, errbuf, sizeof errbuf);
    if (e != DLOCK_OK) {
        run_fail(run, "dlock_async_new: %s (%s)", dlock_strerror(e), errbuf);
        return -1;
    }
    if (run->cfg->mode == BENCH_CONTENDED && counter_connect(run) != 0)
        return -1;
    return 0;
}

int bench_async_run(bench_shared *sh, bench_worker *workers, dlock_stats *stats)
{
    async_run *run = calloc(1, sizeof *run);
    int result = -1;

    memset(stats, 0, sizeof *stats);
    if (run == NULL) {
        fprintf(stderr, "dlock-bench: out of memory\n");
        return -1;
    }
    run->sh = sh;
    run->cfg = sh->cfg;
    run->n = sh->cfg->workers;
    run->st_out = stats;
    run->phase = PHASE_WARM;
    run->aw = calloc((size_t)run->n, sizeof *run->aw);
    int rc = uv_loop_init(&run->loop);
    if (run->aw == NULL || rc != 0) {
        fprintf(stderr, "dlock-bench: %s\n", rc != 0 ? uv_strerror(rc) : "out of memory");
        if (rc == 0)
            (void)uv_loop_close(&run->loop);
        free(run->aw);
        free(run);
        return -1;
    }
    /* A worker that never started has ended at the start, as a thread would. */
    for (int i = 0; i < run->n; i++)
        workers[i].ended_ns = 0;

    if (set_up(run, workers) == 0) {
        arm_guard(run, WARM_UP_GUARD_MS);
        int e = uv_timer_start(&run->step, warm_try, 0, 0);
        if (e != 0) {
            run_fail(run, "warm-up timer: %s", uv_strerror(e));
            schedule_finish(run);
        }
    } else if (run->timers_init) {
        schedule_finish(run);
    } else {
        /* No teardown timer: undo by hand (only the client can exist). */
        dlock_async_free(run->client);
        run->client = NULL;
    }
    /* Returns once every handle is closed: the teardown closes them all. */
    rc = uv_run(&run->loop, UV_RUN_DEFAULT);
    (void)rc;
    /* Closes requested outside the teardown (a set-up undone by hand). */
    for (int i = 0; i < 10 && uv_loop_alive(&run->loop); i++)
        (void)uv_run(&run->loop, UV_RUN_NOWAIT);
    rc = uv_loop_close(&run->loop);
    if (rc != 0)
        fprintf(stderr, "dlock-bench: the loop still has handles at the end: %s\n", uv_strerror(rc));

    for (int i = 0; i < run->n; i++) {
        if (workers[i].ended_ns == 0)
            workers[i].ended_ns = sh->start_ns;
        /* Still inside at the end means a teardown cut it off: not an overlap. */
    }
    if (run->failed)
        fprintf(stderr, "dlock-bench: async: %s\n", run->err);
    int broken = run->failed || rc != 0;
    for (int i = 0; i < run->n; i++) {
        if (workers[i].failed) {
            fprintf(stderr, "dlock-bench: %s\n", workers[i].err);
            broken = 1;
        }
    }
    if (!broken && run->phase == PHASE_DOWN)
        result = 0;
    free(run->aw);
    free(run);
    return result;
}
