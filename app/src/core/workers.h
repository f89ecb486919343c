/* workers.h - per-thread resources: one SQLite connection and one libdlock
 * client per slot, checked out by a request thread for one request. */
#ifndef APP_WORKERS_H
#define APP_WORKERS_H

#include <stddef.h>

#include "coupon_db.h"
#include "dlock.h"

#include "core/config.h"

typedef struct worker {
    db_store *db;       /* one SQLite connection: a db_store is single-threaded */
    dlock_client *lock; /* NULL for strategies without a lock */
    /* A strategy's own per-slot state (the seeds' recipes keep their own
     * Redis connection here): opened by the strategy on the slot's first
     * claim, closed by pool_free through conn_free, so the pool need not
     * know what it is. */
    void *conn;
    void (*conn_free)(void *conn);
    const app_config *cfg; /* the server's, for code that gets only the slot */
    size_t index;
} worker;

typedef struct worker_pool worker_pool;

typedef enum pool_error {
    POOL_OK = 0,
    POOL_ERR_DB = 1,     /* the database could not be opened (bad path, ...) */
    POOL_ERR_LOCK = 2,   /* libdlock refused the options (bad address) */
    POOL_ERR_SYSTEM = 3  /* out of memory, thread primitives */
} pool_error;

/* What lock client each slot of a pool gets. */
typedef enum pool_locks {
    POOL_NO_LOCK = 0,
    POOL_LOCK = 1,        /* one dlock_client per slot, built from the config */
    POOL_LOCK_CACHED = 2  /* the same, with cache_locks: for the claim workers under --lock-cache-ms */
} pool_locks;

/* Opens n slots, each with the lock client locks says. On failure *out is
 * NULL and errbuf says why. */
pool_error pool_new(const app_config *cfg, size_t n, pool_locks locks, worker_pool **out, char *errbuf,
                    size_t errlen);
/* A lock client with the server's options (the slots' kind), for code that
 * needs its own (the health probe). dlock_client_new's contract. */
dlock_err worker_lock_client_new(const app_config *cfg, dlock_client **out, char *errbuf, size_t errlen);
/* Blocks until a slot is free (never, when the pool has one slot per
 * request thread). The caller owns the slot until pool_return. */
worker *pool_checkout(worker_pool *p);
void pool_return(worker_pool *p, worker *w);
/* Closes every DB connection and lock client. All slots must be returned. NULL ok. */
void pool_free(worker_pool *p);

#endif /* APP_WORKERS_H */
