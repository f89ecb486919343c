/* workers.c - the pool of per-thread resources (db_store + dlock_client). */
#include "core/workers.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct worker_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    worker *slots;   /* n entries */
    worker **free_;  /* stack of free slots */
    size_t n;
    size_t n_free;
    int sync_ready;  /* mu and cv initialised */
};

static dlock_err lock_client_new(const app_config *cfg, int cached, dlock_client **out, char *errbuf,
                                 size_t errlen)
{
    dlock_options o;
    dlock_options_init(&o);
    o.addrs = (const char *const *)cfg->redis;
    o.n_addrs = cfg->n_redis;
    o.connect_timeout_ms = cfg->redis_connect_ms;
    o.command_timeout_ms = cfg->redis_timeout_ms;
    /* A CA file means TLS to every node; certificate and key go along. */
    o.tls = cfg->redis_tls_ca != NULL;
    o.tls_ca_file = cfg->redis_tls_ca;
    o.tls_cert_file = cfg->redis_tls_cert;
    o.tls_key_file = cfg->redis_tls_key;
    /* Hot-coupon handoff: a claim holds the lock for well under a
     * millisecond, so the library's exponential backoff (up to 50 ms) would
     * leave the lock idle most of the time. A short fixed pause with equal
     * jitter keeps waiters polling often but out of step, so the next holder
     * arrives soon after a release without a thundering herd. */
    o.retry_fixed_ms = cfg->lock_retry_ms;
    o.retry_jitter_ms = cfg->lock_retry_ms;
    /* Unavailable nodes answer at once (1006) instead of holding a worker
     * thread until the deadline: the client retries with Retry-After. */
    o.retry_unavailable = 0;
    /* Only a claim worker's client keeps locks: it costs a listener thread
     * and a subscriber connection per node. */
    o.cache_locks = cached;
    return dlock_client_new(&o, out, errbuf, errlen);
}

dlock_err worker_lock_client_new(const app_config *cfg, dlock_client **out, char *errbuf, size_t errlen)
{
    return lock_client_new(cfg, 0, out, errbuf, errlen);
}

pool_error pool_new(const app_config *cfg, size_t n, pool_locks locks, worker_pool **out, char *errbuf,
                    size_t errlen)
{
    pool_error result = POOL_ERR_SYSTEM;
    worker_pool *p = NULL;

    *out = NULL;
    snprintf(errbuf, errlen, "out of memory");
    p = calloc(1, sizeof *p);
    if (p == NULL)
        goto out;
    p->slots = calloc(n, sizeof *p->slots);
    p->free_ = calloc(n, sizeof *p->free_);
    if (p->slots == NULL || p->free_ == NULL)
        goto out;
    if (pthread_mutex_init(&p->mu, NULL) != 0)
        goto out;
    if (pthread_cond_init(&p->cv, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        goto out;
    }
    p->sync_ready = 1;
    for (size_t i = 0; i < n; i++) {
        worker *w = &p->slots[i];
        w->index = i;
        w->cfg = cfg;
        p->n = i + 1; /* slots [0, n) are freed by pool_free on failure */
        if (db_open(cfg->db_path, cfg->db_busy_ms, &w->db, errbuf, errlen) != DB_OK) {
            result = POOL_ERR_DB;
            goto out;
        }
        if (locks != POOL_NO_LOCK) {
            dlock_err e = lock_client_new(cfg, locks == POOL_LOCK_CACHED, &w->lock, errbuf, errlen);
            if (e != DLOCK_OK) {
                result = e == DLOCK_ERR_ARG ? POOL_ERR_LOCK : POOL_ERR_SYSTEM;
                if (e != DLOCK_ERR_ARG)
                    snprintf(errbuf, errlen, "lock client: %s", dlock_strerror(e));
                goto out;
            }
        }
        p->free_[p->n_free++] = w;
    }
    *out = p;
    p = NULL;
    result = POOL_OK;
    errbuf[0] = '\0';
out:
    pool_free(p);
    return result;
}

worker *pool_checkout(worker_pool *p)
{
    pthread_mutex_lock(&p->mu);
    while (p->n_free == 0)
        pthread_cond_wait(&p->cv, &p->mu);
    worker *w = p->free_[--p->n_free];
    pthread_mutex_unlock(&p->mu);
    return w;
}

void pool_return(worker_pool *p, worker *w)
{
    if (w == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->free_[p->n_free++] = w;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void pool_free(worker_pool *p)
{
    if (p == NULL)
        return;
    for (size_t i = 0; p->slots != NULL && i < p->n; i++) {
        dlock_client_free(p->slots[i].lock);
        if (p->slots[i].conn_free != NULL)
            p->slots[i].conn_free(p->slots[i].conn);
        db_close(p->slots[i].db);
    }
    if (p->sync_ready) {
        pthread_cond_destroy(&p->cv);
        pthread_mutex_destroy(&p->mu);
    }
    free(p->free_);
    free(p->slots);
    free(p);
}
