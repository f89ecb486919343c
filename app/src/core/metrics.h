/* metrics.h - process-wide counters (lock-free atomics) and their Prometheus text. */
#ifndef APP_METRICS_H
#define APP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "http/router.h"
#include "claim/strategy.h"

typedef enum lock_error_kind {
    LOCK_ERROR_TIMEOUT = 0,   /* still taken at the deadline */
    LOCK_ERROR_EXPIRED,       /* quorum reached but validity used up */
    LOCK_ERROR_UNAVAILABLE,   /* no quorum / unreachable / timeout */
    LOCK_ERROR_STALE_FENCE,   /* the store refused our fence */
    LOCK_ERROR_RELEASE,       /* release could not reach a quorum (the TTL frees the key) */
    LOCK_ERROR_OTHER,
    LOCK_ERROR__COUNT
} lock_error_kind;

void metrics_request(route_id route, unsigned status);
void metrics_claim(claim_result r);
/* fast: answered by the peek before the lock; else by the store under it. */
void metrics_sold_out(int fast);
/* One observation per claim that went to the lock: acquired, run under a
 * leader's acquisition (combined), or gave up (queue or lock timeout). */
void metrics_lock_wait_us(int64_t us);
void metrics_lock_acquired(void);
/* A claim run under another request's acquisition (combined). */
void metrics_lock_combined(void);
void metrics_lock_retries(uint64_t n);
void metrics_lock_error(lock_error_kind k);
void metrics_lock_lost(void);
/* CLOCK_MONOTONIC in microseconds. */
int64_t metrics_now_us(void);
/* The Prometheus text exposition; malloc'd (free()), NULL on out-of-memory. */
char *metrics_render(size_t *len);

#endif /* APP_METRICS_H */
