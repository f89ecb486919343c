/* prober.c - the health prober (prober.h). */
#include "core/prober.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "common.h"
#include "core/log.h"

static struct {
    pthread_mutex_t mu; /* guards last and stop */
    pthread_cond_t cv;  /* wakes the thread early for prober_stop */
    pthread_t thread;
    app *app;
    worker_pool *pool;
    worker *w;
    health_state last;
    int stop, started;
} prober = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* One probe: the store first (its busy timeout bounds it), then the lock
 * nodes (the Redis timeouts bound it); the result replaces the last. */
static void probe_once(void)
{
    health_state st = {0};
    const strategy *strat = prober.app->strat;
    db_status wst = db_write_probe(prober.w->db);
    st.db_ok = wst == DB_OK;
    if (!st.db_ok) {
        st.db_fault = db_last_fault(prober.w->db);
        log_event_line(LOG_ERROR, LOG_EV_DB_ERROR, "health: the store refuses writes: %s", db_errmsg(prober.w->db));
    }
    st.lock = strat->health(strat, prober.w, &st.nodes_up, &st.nodes, &st.up_mask);
    st.at_ms = cm_now_ms();
    pthread_mutex_lock(&prober.mu);
    prober.last = st;
    pthread_mutex_unlock(&prober.mu);
}

static void *prober_main(void *arg)
{
    (void)arg;
    unsigned every = prober.app->cfg->health_interval_ms;
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
        probe_once();
        pthread_mutex_lock(&prober.mu);
    }
    pthread_mutex_unlock(&prober.mu);
    return NULL;
}

int prober_start(app *a, char *errbuf, size_t errlen)
{
    pthread_condattr_t ca;

    prober.app = a;
    if (pool_new(a->cfg, 1, a->strat->uses_lock, &prober.pool, errbuf, errlen) != POOL_OK)
        return -1;
    prober.w = pool_checkout(prober.pool);
    probe_once();
    /* Monotonic: a wall-clock step must not stall the prober. */
    if (pthread_condattr_init(&ca) != 0)
        goto fail;
    if (pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 || pthread_cond_init(&prober.cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        goto fail;
    }
    pthread_condattr_destroy(&ca);
    prober.stop = 0;
    if (pthread_create(&prober.thread, NULL, prober_main, NULL) != 0) {
        pthread_cond_destroy(&prober.cv);
        goto fail;
    }
    prober.started = 1;
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
    pthread_mutex_unlock(&prober.mu);
}

void prober_stop(void)
{
    if (!prober.started)
        return;
    pthread_mutex_lock(&prober.mu);
    prober.stop = 1;
    pthread_cond_signal(&prober.cv);
    pthread_mutex_unlock(&prober.mu);
    pthread_join(prober.thread, NULL);
    pthread_cond_destroy(&prober.cv);
    pool_return(prober.pool, prober.w);
    pool_free(prober.pool);
    prober.pool = NULL;
    prober.started = 0;
}
