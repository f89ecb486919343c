/* prober.h - the health prober: a background thread that checks, every
 * --health-interval-ms, the lock service (the strategy's health: a PING
 * round over the Redis nodes through its own lock client) and the store
 * (db_write_probe on its own connection), and keeps the last result.
 * /healthz answers from that result and its age, so no HTTP thread ever
 * waits on a Redis round or on the store's write lock.
 *
 * Process-wide, like lockwatch.h: one prober per server. */
#ifndef APP_PROBER_H
#define APP_PROBER_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#include "app.h"

typedef struct health_state {
    int64_t at_ms;       /* when the probe finished (CLOCK_MONOTONIC ms) */
    int db_ok;           /* the store took the write probe */
    db_fault db_fault;   /* its failure's class when not */
    lock_health lock;    /* the strategy's answer */
    size_t nodes_up, nodes;
    uint32_t up_mask;    /* bit i: the --redis address i answered */
} health_state;

/* Probes once (so that /healthz has a result from the first request on:
 * bounded by the Redis timeouts and --db-busy-ms), then starts the thread
 * with a one-slot worker pool of its own. 0, or -1 with errbuf set. */
int prober_start(app *a, char *errbuf, size_t errlen);
/* The last result (a copy). Never blocks on anything but a short mutex. */
void prober_last(health_state *out);
/* Stops and joins the thread, frees its slot; no-op when not started. */
void prober_stop(void);

#endif /* APP_PROBER_H */
