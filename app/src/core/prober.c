/* prober.c - the health prober (prober.h). */
#include "core/prober.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "common.h"
#include "core/log.h"

static struct {
    pthread_mutex_t mu; /* guards last, db_at_ms, lock_at_ms and stop */
    pthread_cond_t cv;  /* wakes the threads early for prober_stop */
    pthread_t threads[2];
    int n_threads;
    const app_config *cfg;
    prober_lock_fn lock_probe;
    const void *lock_ctx;
    worker_pool *pool;
    worker *w;
    health_state last;
    int64_t db_at_ms, lock_at_ms; /* when each part was last published */
    int stop, started;
} prober = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The store's part: a write probe, bounded by its busy timeout. */
static void probe_store(void)
{
    db_status wst = db_write_probe(prober.w->db);
    db_fault fault = wst == DB_OK ? 0 : db_last_fault(prober.w->db);
    if (wst != DB_OK)
        log_event_line(LOG_ERROR, LOG_EV_DB_ERROR, "health: the store refuses writes: %s", db_errmsg(prober.w->db));
    pthread_mutex_lock(&prober.mu);
    prober.last.db_ok = wst == DB_OK;
    prober.last.db_fault = fault;
    prober.db_at_ms = cm_now_ms();
    pthread_mutex_unlock(&prober.mu);
}

/* The lock's part: the probe handed to prober_start, bounded by the Redis
 * timeouts. */
static void probe_lock(void)
{
    size_t up = 0, nodes = 0;
    uint32_t mask = 0;
    lock_health lh = prober.lock_probe(prober.lock_ctx, prober.w, &up, &nodes, &mask);
    pthread_mutex_lock(&prober.mu);
    prober.last.lock = lh;
    prober.last.nodes_up = up;
    prober.last.nodes = nodes;
    prober.last.up_mask = mask;
    prober.lock_at_ms = cm_now_ms();
    pthread_mutex_unlock(&prober.mu);
}

/* One thread per part: arg is its probe. */
static void *prober_main(void *arg)
{
    void (*probe)(void) = *(void (**)(void))arg;
    unsigned every = prober.cfg->health_interval_ms;
    pthread_mutex_lock(&prober.mu);
    while (!prober.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += every / 1000;
        ts.tv_nsec += (long)(every % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        /* Woken early only by prober_stop; a spurious wake probes sooner, harmlessly. */
        (void)pthread_cond_timedwait(&prober.cv, &prober.mu, &ts);
        if (prober.stop)
            break;
        pthread_mutex_unlock(&prober.mu);
        probe();
        pthread_mutex_lock(&prober.mu);
    }
    pthread_mutex_unlock(&prober.mu);
    return NULL;
}

static void (*const PROBES[2])(void) = {probe_store, probe_lock};

int prober_start(const app_config *cfg, int uses_lock, prober_lock_fn lock_probe, const void *ctx,
                 char *errbuf, size_t errlen)
{
    pthread_condattr_t ca;

    prober.cfg = cfg;
    prober.lock_probe = lock_probe;
    prober.lock_ctx = ctx;
    if (pool_new(cfg, 1, uses_lock ? POOL_LOCK : POOL_NO_LOCK, &prober.pool, errbuf, errlen) != POOL_OK)
        return -1;
    prober.w = pool_checkout(prober.pool);
    probe_store();
    probe_lock();
    /* Monotonic: a wall-clock step must not stall the prober. */
    if (pthread_condattr_init(&ca) != 0)
        goto fail;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&prober.cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        goto fail;
    }
    pthread_condattr_destroy(&ca);
    prober.stop = 0;
    prober.started = 1; /* from here prober_stop joins what was started */
    for (prober.n_threads = 0; prober.n_threads < 2; prober.n_threads++)
        if (pthread_create(&prober.threads[prober.n_threads], NULL, prober_main,
                           (void *)(uintptr_t)&PROBES[prober.n_threads]) != 0) {
            prober_stop();
            snprintf(errbuf, errlen, "cannot start the health prober");
            return -1;
        }
    return 0;
fail:
    snprintf(errbuf, errlen, "cannot start the health prober");
    pool_return(prober.pool, prober.w);
    pool_free(prober.pool);
    prober.pool = NULL;
    return -1;
}

void prober_last(health_state *out)
{
    pthread_mutex_lock(&prober.mu);
    *out = prober.last;
    out->at_ms = prober.db_at_ms < prober.lock_at_ms ? prober.db_at_ms : prober.lock_at_ms;
    pthread_mutex_unlock(&prober.mu);
}

void prober_stop(void)
{
    if (!prober.started)
        return;
    pthread_mutex_lock(&prober.mu);
    prober.stop = 1;
    pthread_cond_broadcast(&prober.cv);
    pthread_mutex_unlock(&prober.mu);
    for (int i = 0; i < prober.n_threads; i++)
        pthread_join(prober.threads[i], NULL);
    pthread_cond_destroy(&prober.cv);
    pool_return(prober.pool, prober.w);
    pool_free(prober.pool);
    prober.pool = NULL;
    prober.started = 0;
}
