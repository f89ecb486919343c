/* claimq.h - the claim queue: claims run on claim workers of their own, off
 * the HTTP threads, so that a claim waiting for the lock (a contended
 * coupon, a Redis node that stopped answering) never holds the thread that
 * serves reads, /healthz and /metrics.
 *
 * One lane per coupon: the claims of a coupon wait in its lane, oldest
 * first. A lane belongs to one claim worker, chosen by a hash of the coupon
 * id, so at most one worker leads a coupon at a time and that worker's lock
 * client may keep the coupon's lock between batches. The leader lets the
 * strategy prepare the coupon for the oldest claim (redlock: its lock; one
 * try while other lanes wait, and a held coupon goes behind them), then
 * takes up to --lock-batch waiting claims of the lane as one batch
 * (claim/batch.h) and runs it through the strategy, then the next lane.
 * While other lanes wait too, it leads up to STRATEGY_ROUND_MAX of them in
 * one round instead (strategy.claim_each: their locks in one Redis round),
 * and a coupon held elsewhere goes back to its lane, behind the others.
 * A job carries its deadline, fixed when the request arrived (arrival +
 * --lock-wait): a job still queued at its deadline is answered 1005
 * without touching Redis or the store. Knows nothing of HTTP: the caller
 * learns that a job is finished through its done callback. */
#ifndef APP_CLAIM_CLAIMQ_H
#define APP_CLAIM_CLAIMQ_H

#include <stddef.h>
#include <stdint.h>

#include "claim/strategy.h"
#include "core/config.h"
#include "core/workers.h"

#define CLAIMQ_USER_MAX 64 /* the API's longest user_id */

typedef struct claim_job claim_job;
struct claim_job {
    int64_t coupon_id;    /* the lane it waits in (a bundle: its first coupon's) */
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
     * calls run instead (a bundle, claim/bundle.h), alone, which sets
     * result and bounds its own wait by deadline_us. */
    void (*run)(claim_job *job, worker *w, const app_config *cfg);
    /* The queue's own, while the job waits: the next job of its lane, and
     * whether it came while its coupon's leader ran a batch (the wait
     * behind that leader is the local-queue stage, metrics.h). */
    claim_job *next;
    int behind_leader;
    int wait_counted; /* its lane wait was counted when it first left the lane */
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
/* Stops the queue: new jobs are refused, jobs still waiting are answered
 * CLAIM_STOPPING ("server stopping") without running, the jobs running
 * finish (each bounded by its deadline and the store's timeout: nothing
 * is left half-written), the workers are joined and their slots returned.
 * Idempotent; NULL ok. */
void claimq_stop(claimq *q);
/* claimq_stop, then frees the queue. NULL ok. */
void claimq_free(claimq *q);

#endif /* APP_CLAIM_CLAIMQ_H */
