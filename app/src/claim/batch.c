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

void batch_begin(lane_batch *lb, int64_t coupon_id)
{
    lb->b.coupon_id = coupon_id;
    lb->b.deadline_us = 0;
    lb->b.n = 0;
    lb->b.prepared = NULL;
    lb->b.prepare_err = 0;
    lb->b.prepare_busy = 0;
    lb->solo = NULL;
    lb->n_late = 0;
}

/* The job's time in its lane: behind its coupon's leader (the local queue)
 * if it came while that leader was busy with the coupon, else waiting for
 * its worker. */
static void note_wait(claim_job *job, int64_t taken_us, int with_lock)
{
    /* A claim put back after a busy prepare is counted once, at its first leave. */
    if (job->wait_counted)
        return;
    job->wait_counted = 1;
    int64_t waited = job->queued_us > 0 ? taken_us - job->queued_us : 0;
    int behind = job->behind_leader && with_lock;

    if (job->queued_us > 0)
        metrics_stage_us(STAGE_CLAIM_QUEUE, behind ? 0 : waited);
    /* Only lock strategies have a leader worth telling apart (metrics.h). */
    if (with_lock)
        metrics_stage_us(STAGE_LOCAL_QUEUE, behind ? waited : 0);
}

size_t batch_gather(lane_batch *lb, job_fifo *lane, size_t max, gather_rule rule, int with_lock, int64_t now)
{
    size_t moved = 0;

    if (max > CONFIG_MAX_BATCH)
        max = CONFIG_MAX_BATCH;
    /* A bundle holds locks of its own: it runs alone, in its turn. */
    if (lb->b.n == 0 && lb->n_late == 0 && lane->head != NULL && lane->head->run != NULL) {
        lb->solo = job_fifo_pop(lane);
        note_wait(lb->solo, now, 0);
        return 1;
    }
    while (lane->head != NULL && lane->head->run == NULL && lb->b.n + lb->n_late < max) {
        /* After a failed prepare, claims with time left wait for the next try. */
        if (rule == GATHER_DUE && lb->b.n > 0 && now < lane->head->deadline_us)
            break;
        claim_job *job = job_fifo_pop(lane);
        moved++;
        note_wait(job, now, with_lock);
        if (rule == GATHER_EXPIRE_LATE && now >= job->deadline_us) {
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

void batch_put_back(lane_batch *lb, job_fifo *lane)
{
    for (size_t i = lb->b.n; i-- > 0;) {
        claim_job *job = lb->job[i];
        job->next = lane->head;
        lane->head = job;
        if (lane->tail == NULL)
            lane->tail = job;
        lane->n++;
    }
    lb->b.n = 0;
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

static void answer_late(lane_batch *lb, const app_config *cfg)
{
    /* Every job's done runs outside the queue's mutex: it may take the
     * HTTP server's locks. */
    for (size_t i = 0; i < lb->n_late; i++) {
        claim_job *job = lb->late[i];
        memset(&job->out, 0, sizeof job->out);
        expire(job, cfg, cm_now_us());
        job->done(job);
    }
    lb->n_late = 0;
}

/* The strategy's answers to the batch's jobs, each done exactly once. */
static void answer_batch(lane_batch *lb)
{
    for (size_t i = 0; i < lb->b.n; i++) {
        lb->job[i]->result = lb->b.item[i].result;
        lb->job[i]->done(lb->job[i]);
    }
}

void batch_run(lane_batch *lb, const strategy *strat, worker *w, const app_config *cfg)
{
    answer_late(lb, cfg);
    if (lb->solo != NULL) {
        claim_job *job = lb->solo;
        memset(&job->out, 0, sizeof job->out);
        job->run(job, w, cfg);
        job->done(job); /* the last touch: the owner may free the job from here on */
        return;
    }
    if (lb->b.n == 0 && lb->b.prepared == NULL)
        return;
    for (size_t i = 0; i < lb->b.n; i++)
        memset(&lb->job[i]->out, 0, sizeof lb->job[i]->out);
    strat->claim(strat, w, cfg, &lb->b);
    answer_batch(lb);
}

void batch_run_each(lane_batch *const *lbs, size_t n, const strategy *strat, worker *w, const app_config *cfg)
{
    claim_batch *bs[STRATEGY_ROUND_MAX];
    size_t k = 0;

    for (size_t i = 0; i < n; i++) {
        answer_late(lbs[i], cfg);
        for (size_t j = 0; j < lbs[i]->b.n; j++)
            memset(&lbs[i]->job[j]->out, 0, sizeof lbs[i]->job[j]->out);
        if (lbs[i]->b.n > 0)
            bs[k++] = &lbs[i]->b;
    }
    /* One batch left (the others' claims were all late): the round still
     * serves it, so nothing here takes a second path. */
    if (k > 0)
        strat->claim_each(strat, w, cfg, bs, k);
    for (size_t i = 0; i < n; i++)
        if (!lbs[i]->b.prepare_busy)
            answer_batch(lbs[i]);
}

void batch_answer_stopping(claim_job *job)
{
    memset(&job->out, 0, sizeof job->out);
    snprintf(job->out.detail, sizeof job->out.detail, "server stopping");
    job->result = CLAIM_STOPPING;
    job->done(job);
}
