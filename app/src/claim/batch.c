/* batch.c - a batch's assembly (batch.h): the jobs a leader takes out of
 * its lane, the late ones answered 1005, the rest run through the strategy
 * and answered one by one. */
#include "claim/batch.h"

#include <stdio.h>
#include <string.h>

#include "common.h"
#include "core/lockstate.h"
#include "core/metrics.h"

void job_fifo_push(job_fifo *f, claim_job *job)
{
    job->next = NULL;
    if (f->tail != NULL)
        f->tail->next = job;
    else
        f->head = job;
    f->tail = job;
    f->n++;
}

static claim_job *job_fifo_pop(job_fifo *f)
{
    claim_job *job = f->head;

    f->head = job->next;
    if (f->head == NULL)
        f->tail = NULL;
    f->n--;
    job->next = NULL;
    return job;
}

size_t batch_gather(lane_batch *lb, job_fifo *lane, int64_t coupon_id, size_t max, int expire_late, int64_t now)
{
    size_t moved = 0;

    lb->b.coupon_id = coupon_id;
    lb->b.n = 0;
    lb->solo = NULL;
    lb->n_late = 0;
    lb->taken_us = now;
    if (max > CONFIG_MAX_BATCH)
        max = CONFIG_MAX_BATCH;
    /* A bundle holds locks of its own: it runs alone, in its turn. */
    if (lane->head != NULL && lane->head->run != NULL) {
        lb->solo = job_fifo_pop(lane);
        return 1;
    }
    while (lane->head != NULL && lane->head->run == NULL && moved < max) {
        claim_job *job = job_fifo_pop(lane);
        moved++;
        if (expire_late && now >= job->deadline_us) {
            lb->late[lb->n_late++] = job;
            continue;
        }
        claim_item *it = &lb->b.item[lb->b.n];
        /* The oldest claim's deadline bounds the batch: it is the earliest. */
        if (lb->b.n == 0)
            lb->b.deadline_us = job->deadline_us;
        it->user_id = job->user_id;
        it->queued_us = job->queued_us;
        it->result = CLAIM_ERROR;
        it->out = &job->out;
        lb->job[lb->b.n++] = job;
    }
    return moved;
}

/* The job's answer once its deadline passed while it waited, without a
 * round trip to Redis or the store. It is its own 1005 row (queue_timeout)
 * and the lock error "timeout" (outcome.h: "or queued past it"). Or 1006,
 * when the lock service had no quorum as its wait ended (core/lockstate.h). */
static void expire(claim_job *job, const app_config *cfg, int64_t now_us)
{
    lock_error_kind kind;
    dlock_err seen = lockstate_last();

    metrics_lock_wait_us(now_us - (job->deadline_us - (int64_t)cfg->lock_wait_ms * 1000));
    job->result = claim_from_wait(CLAIM_QUEUE_TIMEOUT, seen, &kind);
    metrics_lock_error(kind);
    if (job->result == CLAIM_QUEUE_TIMEOUT)
        snprintf(job->out.detail, sizeof job->out.detail, "its whole wait passed in the claim queue");
    else
        snprintf(job->out.detail, sizeof job->out.detail,
                 "its whole wait passed in the claim queue while the lock service failed: %s", dlock_strerror(seen));
}

/* The job's time in its lane: behind its coupon's leader (the local queue)
 * if it came while that leader ran a batch, else waiting for its worker. */
static void note_wait(const claim_job *job, int64_t taken_us, int with_lock)
{
    int64_t waited = job->queued_us > 0 ? taken_us - job->queued_us : 0;
    int behind = job->behind_leader && with_lock;

    if (job->queued_us > 0)
        metrics_stage_us(STAGE_CLAIM_QUEUE, behind ? 0 : waited);
    /* Only lock strategies have a leader worth telling apart (metrics.h). */
    if (with_lock)
        metrics_stage_us(STAGE_LOCAL_QUEUE, behind ? waited : 0);
}

void batch_run(lane_batch *lb, const strategy *strat, worker *w, const app_config *cfg)
{
    /* Every job's done runs outside the queue's mutex: it may take the
     * HTTP server's locks. */
    for (size_t i = 0; i < lb->n_late; i++) {
        claim_job *job = lb->late[i];
        memset(&job->out, 0, sizeof job->out);
        note_wait(job, lb->taken_us, strat->uses_lock);
        expire(job, cfg, lb->taken_us);
        job->done(job);
    }
    if (lb->solo != NULL) {
        claim_job *job = lb->solo;
        memset(&job->out, 0, sizeof job->out);
        note_wait(job, lb->taken_us, 0);
        job->run(job, w, cfg);
        job->done(job); /* the last touch: the owner may free the job from here on */
        return;
    }
    if (lb->b.n == 0)
        return;
    for (size_t i = 0; i < lb->b.n; i++) {
        memset(&lb->job[i]->out, 0, sizeof lb->job[i]->out);
        note_wait(lb->job[i], lb->taken_us, strat->uses_lock);
    }
    strat->claim(strat, w, cfg, &lb->b);
    for (size_t i = 0; i < lb->b.n; i++) {
        lb->job[i]->result = lb->b.item[i].result;
        lb->job[i]->done(lb->job[i]);
    }
}

void batch_answer_stopping(claim_job *job)
{
    memset(&job->out, 0, sizeof job->out);
    snprintf(job->out.detail, sizeof job->out.detail, "server stopping");
    job->result = CLAIM_STOPPING;
    job->done(job);
}
