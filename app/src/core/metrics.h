/* metrics.h - process-wide counters (lock-free atomics) and their Prometheus text. */
#ifndef APP_METRICS_H
#define APP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "claim/outcome.h"

/* Routes are counted by their index in the caller's route table (below
 * this bound) and shown with the label the caller passes. */
#define METRICS_MAX_ROUTES 16

/* One answered request. route_label must be a static string. */
void metrics_request(unsigned route, const char *route_label, unsigned status);
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
/* The Prometheus text exposition; malloc'd (free()), NULL on out-of-memory. */
char *metrics_render(size_t *len);

#endif /* APP_METRICS_H */
