/* prober.h - the health prober: two background threads that check, every
 * --health-interval-ms, one the lock service (the strategy's health: a PING
 * round over the Redis nodes through its own lock client), the other the
 * store (db_write_probe on its own connection). Each publishes its part as
 * soon as it has it, so a lost quorum shows within one interval even while
 * the store probe waits out a held write lock (--db-busy-ms), and the
 * other way round. /healthz answers from the parts and their age, so no
 * HTTP thread ever waits on a Redis round or on the store's write lock.
 *
 * Process-wide, like lockwatch.h: one prober per server. */
#ifndef APP_PROBER_H
#define APP_PROBER_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#include "core/config.h"
#include "core/workers.h"

/* The lock service's part of the health, as the claim layer answers it. */
typedef enum lock_health {
    LOCK_HEALTH_OK = 0,
    LOCK_HEALTH_DOWN = 1,
    LOCK_HEALTH_UNUSED = 2
} lock_health;

/* The lock probe the layer above supplies (the strategy's health), bounded
 * by the Redis timeouts; w is the prober's own worker. The prober knows no
 * strategy: it is handed this, so core/ includes nothing above it. */
typedef lock_health (*prober_lock_fn)(const void *ctx, worker *w, size_t *nodes_up, size_t *nodes,
                                      uint32_t *up_mask);

typedef struct health_state {
    int64_t at_ms;       /* when the older of the two parts was probed (CLOCK_MONOTONIC ms) */
    int db_ok;           /* the store took the write probe */
    db_fault db_fault;   /* its failure's class when not */
    lock_health lock;    /* the lock probe's answer */
    size_t nodes_up, nodes;
    uint32_t up_mask;    /* bit i: the --redis address i answered */
} health_state;

/* Probes once (so that /healthz has a result from the first request on:
 * bounded by the Redis timeouts and --db-busy-ms). Then starts the two
 * threads on a one-slot worker pool of their own. The store thread uses
 * the slot's store connection, the lock thread its lock client, never the
 * other's (uses_lock: the slot gets a lock client). lock_probe(ctx, ...)
 * is the lock's part. 0, or -1 with errbuf set. */
int prober_start(const app_config *cfg, int uses_lock, prober_lock_fn lock_probe, const void *ctx,
                 char *errbuf, size_t errlen);
/* The last result (a copy). Never blocks on anything but a short mutex. */
void prober_last(health_state *out);
/* Stops and joins the threads, frees their slot; no-op when not started. */
void prober_stop(void);

#endif /* APP_PROBER_H */
