/* claimq.h - the claim queue: claims run on claim workers of their own, off
 * the HTTP threads, so that a claim waiting for the lock (a contended
 * coupon, a Redis node that stopped answering) never holds the thread that
 * serves reads, /healthz and /metrics.
 *
 * A bounded FIFO of jobs and a fixed set of worker threads. Each worker
 * owns one slot of the worker pool (its SQLite connection and lock client)
 * for its whole life, so a slot is never shared between threads. A job
 * carries its deadline, fixed when the request arrived (arrival +
 * --lock-wait): a job still queued at its deadline is answered 1005 without
 * touching Redis or the store, and a job that starts gives the strategy
 * only the time that is left. Knows nothing of HTTP: the caller learns that
 * a job is finished through its done callback. */
#ifndef APP_CLAIM_CLAIMQ_H
#define APP_CLAIM_CLAIMQ_H

#include <stddef.h>
#include <stdint.h>

#include "claim/strategy.h"
#include "core/config.h"
#include "core/workers.h"

#define CLAIMQ_USER_MAX 64 /* the API's longest user_id */
#define CLAIMQ_TAKE_MAX 64 /* most jobs one claimq_take_coupon looks at (== CONFIG_MAX_BATCH) */
#define CLAIMQ_SPREAD_MAX 16 /* most coupons one claimq_take_spread takes claims of */

typedef struct claim_job claim_job;
struct claim_job {
    int64_t coupon_id;
    char user_id[CLAIMQ_USER_MAX + 1];
    int64_t deadline_us;  /* CLOCK_MONOTONIC (cm_now_us): the lock is not waited for past it */
    claim_result result;  /* set before done is called */
    claim_out out;        /* likewise: the record on CLAIM_OK, else the detail */
    /* Called exactly once per accepted job, on a worker thread (or on the
     * thread that stops the queue, for a job refused then). The job's
     * owner may free it as soon as done starts, so done must be the last
     * thing that touches it, and nothing touches it after done. */
    void (*done)(claim_job *job);
    void *ctx;            /* the owner's, for done */
    /* Stage timing (metrics_stage_us), cm_now_us; 0 = not taken: when the
     * owner queued the job, and when done was called. */
    int64_t queued_us;
    int64_t done_us;
    /* NULL: the job is one claim through the strategy. Else the worker
     * calls run instead (a bundle, claim/bundle.h), which sets result and
     * bounds its own wait by deadline_us. */
    void (*run)(claim_job *job, worker *w, const app_config *cfg);
    /* Set by claimq_give_back: a batch of several coupons found this
     * coupon's lock taken. So the job waits for it on the single path (a
     * worker of its own), and no other batch takes it again. Without that,
     * batches could keep trying a busy lock for it, a round each. */
    int spread_refused;
};

typedef struct claimq claimq;

typedef enum claimq_submit_result {
    CLAIMQ_QUEUED = 0,   /* done will be called */
    CLAIMQ_FULL = 1,     /* --claim-queue jobs are waiting already: not taken, done is not called */
    CLAIMQ_STOPPING = 2  /* the queue is stopping: not taken, done is not called */
} claimq_submit_result;

/* Starts n_workers threads, each holding one slot of pool until the queue
 * stops (the pool must have n_workers slots to spare), with room for
 * capacity waiting jobs. 0, or -1 with errbuf saying why (nothing left
 * running, every slot returned). */
int claimq_start(const app_config *cfg, const strategy *strat, worker_pool *pool, size_t n_workers,
                 size_t capacity, claimq **out, char *errbuf, size_t errlen);
/* Queues job (its coupon_id, user_id, deadline_us, done and ctx filled in).
 * Never blocks on a claim: a full queue is refused at once. */
claimq_submit_result claimq_submit(claimq *q, claim_job *job);
/* For a strategy running on a claim worker, holding the lock of coupon_id:
 * takes out of that worker's queue up to max waiting single claims (not
 * bundles) of coupon_id, oldest first. They run in its batch without a
 * claim worker of their own (no wake-up and no second hand-off per
 * claim). Those whose deadline has passed are answered 1005 here (as a
 * worker would) and not returned. The caller owns the jobs returned (their
 * out zeroed, the claim-queue stage counted): it sets result and out and
 * calls done on each, exactly once. 0 when called off a claim worker. */
size_t claimq_take_coupon(int64_t coupon_id, claim_job **out, size_t max);
/* For a claim worker about to lock coupon `except`: takes out of its queue
 * the waiting single claims of OTHER coupons, oldest first. It takes up to
 * per_coupon of each, of at most max_coupons coupons (<= CLAIMQ_SPREAD_MAX),
 * and at most max jobs in all. Jobs given back earlier (spread_refused)
 * are skipped. want(coupon, want_arg) is asked once per coupon met,
 * under the queue's mutex (it must not block, nor take this queue); a
 * coupon it refuses is left waiting. Late jobs are answered 1005 as by
 * claimq_take_coupon; the caller owns the jobs returned (in arrival order)
 * as it owns claimq_take_coupon's. 0 when called off a claim worker. */
typedef int (*claimq_want_fn)(int64_t coupon_id, void *want_arg);
size_t claimq_take_spread(int64_t except, claimq_want_fn want, void *want_arg, size_t max_coupons,
                          size_t per_coupon, claim_job **out, size_t max);
/* Puts jobs taken by claimq_take_spread back at the head of this worker's
 * queue, in their order, marked spread_refused, for a worker to run on the
 * single path. A job with no room left (or with the queue stopping) is
 * answered there instead (1005, or "server stopping"). */
void claimq_give_back(claim_job **jobs, size_t n);
/* Stops the queue: new jobs are refused, jobs still waiting are answered
 * CLAIM_STOPPING ("server stopping") without running, the jobs running
 * finish (each bounded by its deadline and the store's timeout: nothing
 * is left half-written), the workers are joined and their slots returned.
 * Idempotent; NULL ok. */
void claimq_stop(claimq *q);
/* claimq_stop, then frees the queue. NULL ok. */
void claimq_free(claimq *q);

#endif /* APP_CLAIM_CLAIMQ_H */
