/* claimq.c - the claim queue (claimq.h): a ring of waiting jobs under one
 * mutex, and the claim workers that take them in arrival order. */
#include "claim/claimq.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "core/lockstate.h"
#include "core/metrics.h"

struct claimq {
    const app_config *cfg;
    const strategy *strat;
    worker_pool *pool;
    pthread_mutex_t mu;
    pthread_cond_t cv;    /* a job was queued, or the queue is stopping */
    claim_job **ring;     /* capacity entries; the waiting jobs are [head, head + n) mod capacity */
    size_t capacity;
    size_t head;
    size_t n;
    int stopping;         /* under mu: refuse new jobs, workers leave */
    int stopped;          /* claimq_stop has joined the workers */
    pthread_t *threads;
    size_t n_threads;     /* started (and so to join) */
};

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

/* The queue of the claim worker running on this thread (NULL elsewhere),
 * for claimq_take_coupon. */
static _Thread_local claimq *this_workers_queue;

/* Which waiting job a take wants: the caller's rule, asked under the queue
 * mutex for each waiting single claim in arrival order (it must not block). */
typedef int (*take_fn)(const claim_job *job, void *arg);

/* Takes out of this worker's queue, in arrival order, up to max waiting
 * single claims that want() accepts: the late ones are answered 1005 here,
 * the others returned in out with their out zeroed and the claim-queue
 * stage counted (claimq.h). */
static size_t take_matching(take_fn want, void *arg, claim_job **out, size_t max)
{
    claimq *q = this_workers_queue;
    claim_job *late[CLAIMQ_TAKE_MAX];
    size_t taken = 0, kept = 0, n_late = 0;

    if (q == NULL || max == 0)
        return 0;
    int64_t now = cm_now_us();
    pthread_mutex_lock(&q->mu);
    /* One pass in arrival order: the jobs taken leave the ring, the others
     * close up in place (kept <= i, so no entry is read after it is overwritten). */
    for (size_t i = 0; i < q->n; i++) {
        claim_job *job = q->ring[(q->head + i) % q->capacity];
        if (job->run == NULL && taken + n_late < max && n_late < CLAIMQ_TAKE_MAX && want(job, arg)) {
            if (now >= job->deadline_us)
                late[n_late++] = job;
            else
                out[taken++] = job;
        } else {
            q->ring[(q->head + kept++) % q->capacity] = job;
        }
    }
    q->n = kept;
    metrics_claims_waiting(q->n);
    pthread_mutex_unlock(&q->mu);
    /* Outside the mutex, as claimq_stop does: done may take the HTTP server's locks. */
    for (size_t i = 0; i < n_late; i++) {
        memset(&late[i]->out, 0, sizeof late[i]->out);
        if (late[i]->queued_us > 0)
            metrics_stage_us(STAGE_CLAIM_QUEUE, now - late[i]->queued_us);
        expire(late[i], q->cfg, now);
        late[i]->done(late[i]);
    }
    for (size_t i = 0; i < taken; i++) {
        memset(&out[i]->out, 0, sizeof out[i]->out);
        if (out[i]->queued_us > 0)
            metrics_stage_us(STAGE_CLAIM_QUEUE, now - out[i]->queued_us);
    }
    return taken;
}

static int of_coupon(const claim_job *job, void *arg)
{
    return job->coupon_id == *(const int64_t *)arg;
}

size_t claimq_take_coupon(int64_t coupon_id, claim_job **out, size_t max)
{
    return take_matching(of_coupon, &coupon_id, out, max);
}

/* claimq_take_spread's choice, made once per coupon id met. */
typedef struct spread_pick {
    int64_t except;
    claimq_want_fn want;
    void *want_arg;
    size_t per_coupon;
    int64_t coupons[CLAIMQ_SPREAD_MAX];  /* met, accepted or not */
    int accepted[CLAIMQ_SPREAD_MAX];
    size_t taken[CLAIMQ_SPREAD_MAX];     /* jobs of that coupon taken so far */
    size_t n;
    size_t n_accepted;
    size_t max_coupons;
} spread_pick;

static int of_spread(const claim_job *job, void *arg)
{
    spread_pick *p = arg;
    size_t i;

    /* A job a batch found taken goes the single path (claim_job.spread_refused). */
    if (job->coupon_id == p->except || job->spread_refused)
        return 0;
    for (i = 0; i < p->n; i++)
        if (p->coupons[i] == job->coupon_id)
            break;
    if (i == p->n) {
        /* A coupon met for the first time: asked once, while room is left. */
        if (p->n == CLAIMQ_SPREAD_MAX || p->n_accepted == p->max_coupons)
            return 0;
        p->coupons[i] = job->coupon_id;
        p->taken[i] = 0;
        p->accepted[i] = p->want(job->coupon_id, p->want_arg);
        p->n_accepted += (size_t)p->accepted[i];
        p->n++;
    }
    if (!p->accepted[i] || p->taken[i] == p->per_coupon)
        return 0;
    p->taken[i]++;
    return 1;
}

size_t claimq_take_spread(int64_t except, claimq_want_fn want, void *want_arg, size_t max_coupons,
                          size_t per_coupon, claim_job **out, size_t max)
{
    spread_pick p = {.except = except, .want = want, .want_arg = want_arg,
                     .per_coupon = per_coupon, .max_coupons = max_coupons};

    return take_matching(of_spread, &p, out, max);
}

void claimq_give_back(claim_job **jobs, size_t n)
{
    claimq *q = this_workers_queue;
    claim_job *refused[CLAIMQ_TAKE_MAX];
    size_t n_refused = 0;
    int stopping = 0;

    if (q == NULL || n == 0)
        return;
    int64_t now = cm_now_us();

    pthread_mutex_lock(&q->mu);
    stopping = q->stopping;
    /* At the head, in their order: they are the oldest claims waiting. */
    for (size_t i = n; i-- > 0;) {
        jobs[i]->spread_refused = 1;
        /* Its claim-queue stage was counted when it was taken: the second
         * stint counts from now. */
        jobs[i]->queued_us = now;
        if (stopping || q->n == q->capacity) {
            if (n_refused < CLAIMQ_TAKE_MAX)
                refused[n_refused++] = jobs[i];
            continue;
        }
        q->head = (q->head + q->capacity - 1) % q->capacity;
        q->ring[q->head] = jobs[i];
        q->n++;
    }
    metrics_claims_waiting(q->n);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    /* No room (new claims filled it meanwhile) or stopping: answered as a
     * queued claim would be then, outside the mutex (done may take the
     * HTTP server's locks). */
    for (size_t i = 0; i < n_refused; i++) {
        claim_job *job = refused[i];
        if (stopping) {
            snprintf(job->out.detail, sizeof job->out.detail, "server stopping");
            job->result = CLAIM_STOPPING;
        } else {
            expire(job, q->cfg, cm_now_us());
            snprintf(job->out.detail, sizeof job->out.detail,
                     "its coupon's lock was held elsewhere and the claim queue was full");
        }
        job->done(job);
    }
}

static void run(claimq *q, worker *w, claim_job *job)
{
    int64_t now = cm_now_us();

    memset(&job->out, 0, sizeof job->out);
    if (job->queued_us > 0)
        metrics_stage_us(STAGE_CLAIM_QUEUE, now - job->queued_us);
    if (job->run != NULL) {
        job->run(job, w, q->cfg);
        return;
    }
    /* Strategies without a lock have no wait to bound: their claim is one
     * store transaction, run whatever the queue cost. */
    if (q->strat->uses_lock && now >= job->deadline_us) {
        expire(job, q->cfg, now);
        return;
    }
    job->result = q->strat->claim(q->strat, w, q->cfg, job->coupon_id, job->user_id, job->deadline_us, &job->out);
}

static void *worker_main(void *arg)
{
    claimq *q = arg;
    /* The slot is this thread's until it leaves: its lock client's stats
     * and its SQLite connection are never shared (workers.h). */
    worker *w = pool_checkout(q->pool);

    this_workers_queue = q;

    for (;;) {
        pthread_mutex_lock(&q->mu);
        while (q->n == 0 && !q->stopping)
            pthread_cond_wait(&q->cv, &q->mu);
        if (q->n == 0) { /* stopping, and nothing left to take */
            pthread_mutex_unlock(&q->mu);
            break;
        }
        claim_job *job = q->ring[q->head];
        q->head = (q->head + 1) % q->capacity;
        q->n--;
        metrics_claims_waiting(q->n);
        pthread_mutex_unlock(&q->mu);
        run(q, w, job);
        job->done(job); /* the last touch: the owner may free the job from here on */
    }
    pool_return(q->pool, w);
    return NULL;
}

int claimq_start(const app_config *cfg, const strategy *strat, worker_pool *pool, size_t n_workers,
                 size_t capacity, claimq **out, char *errbuf, size_t errlen)
{
    claimq *q = calloc(1, sizeof *q);

    *out = NULL;
    if (q == NULL || capacity == 0 || n_workers == 0) {
        snprintf(errbuf, errlen, q == NULL ? "out of memory" : "claim queue: no workers or no room");
        free(q);
        return -1;
    }
    q->cfg = cfg;
    q->strat = strat;
    q->pool = pool;
    q->capacity = capacity;
    q->ring = calloc(capacity, sizeof *q->ring);
    q->threads = calloc(n_workers, sizeof *q->threads);
    if (q->ring == NULL || q->threads == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        goto fail_alloc;
    }
    if (pthread_mutex_init(&q->mu, NULL) != 0) {
        snprintf(errbuf, errlen, "claim queue: cannot create its mutex");
        goto fail_alloc;
    }
    if (pthread_cond_init(&q->cv, NULL) != 0) {
        snprintf(errbuf, errlen, "claim queue: cannot create its condition variable");
        pthread_mutex_destroy(&q->mu);
        goto fail_alloc;
    }
    for (size_t i = 0; i < n_workers; i++) {
        int e = pthread_create(&q->threads[i], NULL, worker_main, q);
        if (e != 0) {
            snprintf(errbuf, errlen, "claim queue: cannot start claim worker %zu of %zu: %s", i + 1, n_workers,
                     strerror(e));
            claimq_free(q); /* joins the ones that started */
            return -1;
        }
        q->n_threads = i + 1;
    }
    *out = q;
    return 0;
fail_alloc:
    free(q->threads);
    free(q->ring);
    free(q);
    return -1;
}

claimq_submit_result claimq_submit(claimq *q, claim_job *job)
{
    claimq_submit_result r = CLAIMQ_QUEUED;

    pthread_mutex_lock(&q->mu);
    if (q->stopping) {
        r = CLAIMQ_STOPPING;
    } else if (q->n == q->capacity) {
        r = CLAIMQ_FULL;
    } else {
        q->ring[(q->head + q->n) % q->capacity] = job;
        q->n++;
        metrics_claims_waiting(q->n);
        pthread_cond_signal(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

void claimq_stop(claimq *q)
{
    if (q == NULL || q->stopped)
        return;
    pthread_mutex_lock(&q->mu);
    q->stopping = 1;
    /* Taken out under the mutex, answered outside it: done may take the
     * HTTP server's locks, which must never nest inside ours. */
    size_t n = q->n, head = q->head;
    q->n = 0;
    metrics_claims_waiting(0);
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (size_t i = 0; i < n; i++) {
        claim_job *job = q->ring[(head + i) % q->capacity];
        memset(&job->out, 0, sizeof job->out);
        snprintf(job->out.detail, sizeof job->out.detail, "server stopping");
        job->result = CLAIM_STOPPING;
        job->done(job);
    }
    /* The running claims finish first: a claim is never cut off between
     * its lock and its write. */
    for (size_t i = 0; i < q->n_threads; i++)
        pthread_join(q->threads[i], NULL);
    q->stopped = 1;
}

void claimq_free(claimq *q)
{
    if (q == NULL)
        return;
    claimq_stop(q);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q->threads);
    free(q->ring);
    free(q);
}
