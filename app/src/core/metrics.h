/* metrics.h - process-wide counters (lock-free atomics) and their Prometheus text. */
#ifndef APP_METRICS_H
#define APP_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "outcome.h"

/* Routes are counted by their index in the caller's route table (below
 * this bound) and shown with the label the caller passes. */
#define METRICS_MAX_ROUTES 16

/* Once at start, before any thread: the process start time and the version
 * (a static string) for process_start_time_seconds and coupon_build_info. */
void metrics_init(const char *version);
/* One answered request and how long it took from its first byte to its
 * queued reply. route_label must be a static string. */
void metrics_request(unsigned route, const char *route_label, unsigned status, int64_t duration_us);
void metrics_claim(claim_result r);
/* fast: answered by the peek before the lock; else by the store under it. */
void metrics_sold_out(int fast);
/* How the sold-out fast path's question was answered (claim/stock_view.h):
 * coupon_stock_peeks_total{result=...}. */
typedef enum {
    STOCK_PEEK_ISSUED,    /* a store round trip (db_peek_stock) was made */
    STOCK_PEEK_SAVED,     /* answered from what the view knew: no round trip */
    STOCK_PEEK_COALESCED, /* waited for another request's round trip of the same coupon */
    STOCK_PEEK__COUNT
} stock_peek_kind;
void metrics_stock_peek(stock_peek_kind k);
/* One bundle claim answered (POST /api/v1/coupon/bundle), by its row:
 * coupon_bundles_total{result=...}. */
void metrics_bundle(claim_result r);
/* One observation per claim that went to the lock: run under its batch's
 * lock, or gave up (queue or lock timeout). */
void metrics_lock_wait_us(int64_t us);
void metrics_lock_acquired(void);
/* A claim run under the lock its batch took for an older claim (combined). */
void metrics_lock_combined(void);
/* A batch run under a lock kept from an earlier batch. */
void metrics_lock_held_batch(void);
void metrics_lock_retries(uint64_t n);
/* One claim that gave up on the lock, by kind (outcome.h). */
void metrics_lock_error(lock_error_kind k);
/* A release that could not reach a quorum (the TTL frees the key). */
void metrics_lock_release_error(void);
void metrics_lock_lost(void);
/* The store refused a fresh holder, the fence counters were raised to the
 * store's and the section ran again (strategy_redlock.c). */
void metrics_fence_healed(void);
/* The last observation of the lock service: nodes answering, nodes, quorum. */
void metrics_lock_nodes(size_t up, size_t nodes, size_t quorum);
/* Where a claim's time goes, stage by stage (coupon_claim_stage_seconds_total
 * and coupon_claim_stage_observations_total): each stage adds its duration
 * once per pass (a batch's lock, section and release once per batch, so the
 * per-claim cost is the stage's seconds over the claims answered). */
typedef enum {
    STAGE_HTTP_IN,     /* request arrival to the claim queue (parse, validate, sold-out peek) */
    STAGE_CLAIM_QUEUE, /* in its lane until its worker takes it into a batch (0 when it counts as local_queue) */
    STAGE_LOCAL_QUEUE, /* redlock: in its lane behind a batch its coupon's leader was running (claim/batch.c) */
    STAGE_LOCK,        /* redlock: dlock_acquire (its rounds, and the wait for the other servers' holds) */
    STAGE_READ,        /* the section's BEGIN and fenced read */
    STAGE_WORK,        /* the business step (--work-us) */
    STAGE_COMMIT,      /* the section's writes and COMMIT (atomic-sql: its whole one-statement transaction) */
    STAGE_RELEASE,     /* redlock: dlock_release */
    STAGE_RESUME,      /* the claim worker's wake-up of the connection until its HTTP thread answers */
    STAGE_REPLY,       /* building and queueing the answer on the HTTP thread */
    STAGE__COUNT
} claim_stage;
void metrics_stage_us(claim_stage s, int64_t us);
/* Claims waiting in the claim queue right now (claim/claimq.c). */
void metrics_claims_waiting(size_t n);
/* The Prometheus text exposition; malloc'd (free()), NULL on out-of-memory. */
char *metrics_render(size_t *len);

#endif /* APP_METRICS_H */
