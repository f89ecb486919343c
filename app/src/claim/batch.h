/* batch.h - a batch's assembly: the claims a lane's leader takes out of
 * its lane (oldest first, up to --lock-batch), the late ones answered
 * 1005 instead, and the run that answers every claim taken. The lane's
 * list and its mutex are the claim queue's (claimq.c); this file only
 * moves jobs off a list it is handed and answers them. */
#ifndef APP_CLAIM_BATCH_H
#define APP_CLAIM_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "claim/claimq.h"
#include "claim/strategy.h"
#include "core/config.h"
#include "core/workers.h"

/* A lane's waiting jobs, oldest first, linked through claim_job.next. */
typedef struct job_fifo {
    claim_job *head;
    claim_job *tail;
    size_t n;
} job_fifo;

/* One pass of a leader: the claims it runs together (b, and job[i] the
 * job of b.item[i]), or a bundle run alone (solo), and the late claims it
 * answers without running them. */
typedef struct lane_batch {
    claim_batch b;
    claim_job *job[CONFIG_MAX_BATCH];
    claim_job *solo;
    claim_job *late[CONFIG_MAX_BATCH];
    size_t n_late;
} lane_batch;

void job_fifo_push(job_fifo *f, claim_job *job);

/* Which of a lane's claims a batch takes. */
typedef enum gather_rule {
    GATHER_ALL,         /* every claim, late or not: a lock-free strategy has no wait to bound */
    GATHER_EXPIRE_LATE, /* a claim past its deadline goes to lb->late, answered 1005 unrun */
    GATHER_DUE          /* prepare failed: the claims past their deadline, and at least the oldest, to get its failure */
} gather_rule;

/* Empties lb for a new batch of coupon_id's lane. */
void batch_begin(lane_batch *lb, int64_t coupon_id);

/* Under the lane's mutex: moves the jobs at the head of lane into lb, by
 * rule, until lb holds max (<= CONFIG_MAX_BATCH): a bundle at the head of
 * an empty batch alone, else the single claims before the next bundle.
 * Counts each job's wait (with_lock: a lock strategy's stages). Returns
 * the jobs moved. */
size_t batch_gather(lane_batch *lb, job_fifo *lane, size_t max, gather_rule rule, int with_lock, int64_t now);

/* Under the lane's mutex: the batch's claims (none of them late) back at
 * the head of lane, in their order, for the lane's next turn. */
void batch_put_back(lane_batch *lb, job_fifo *lane);

/* Outside the mutex: answers the late claims, runs the rest (through
 * strat, or the bundle's own run; strat also with no claim when it has a
 * prepared lock to let go of) and calls every job's done, exactly once each. */
void batch_run(lane_batch *lb, const strategy *strat, worker *w, const app_config *cfg);

/* Outside the mutex: the batches of several lanes (2..STRATEGY_ROUND_MAX,
 * gathered without a prepare and holding no bundle) through
 * strat->claim_each at once. Each is answered as batch_run answers, except
 * one the strategy found busy (b.prepare_busy): its claims stay in it,
 * unanswered, for batch_put_back. */
void batch_run_each(lane_batch *const *lbs, size_t n, const strategy *strat, worker *w, const app_config *cfg);

/* Answers a job that never ran with "server stopping". */
void batch_answer_stopping(claim_job *job);

#endif /* APP_CLAIM_BATCH_H */
