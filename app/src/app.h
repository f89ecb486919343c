/* app.h - the process-wide state of coupon-server: the configuration, the
 * chosen strategy, the worker slots, the claim queue, and the counters the graceful stop
 * reads. Built by main.c, shared read-only (but for the atomics) by every
 * request thread. */
#ifndef APP_APP_H
#define APP_APP_H

#include <stdatomic.h>

#include "claim/strategy.h"
#include "core/config.h"
#include "core/workers.h"

typedef struct app {
    const app_config *cfg;
    const strategy *strat;
    worker_pool *pool;
    struct claimq *claims; /* the claim queue and its workers (claim/claimq.h) */
    atomic_int in_flight; /* requests between their first handler call and completion */
    atomic_int stopping;  /* set on SIGINT/SIGTERM: replies ask clients to close keep-alive */
} app;

#endif /* APP_APP_H */
