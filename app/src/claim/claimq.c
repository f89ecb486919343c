/* claimq.c - the claim queue (claimq.h): one lane per coupon, the lanes
 * of a shard under one mutex, and the claim workers that lead them. */
#include "claim/claimq.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "claim/batch.h"
#include "common.h"
#include "core/metrics.h"

/* Lanes of one shard found by coupon; a handful of coupons per shard is
 * the usual sale, so 64 chains stay short. */
#define LANE_BUCKETS 64

/* One coupon's waiting claims. It exists while claims wait in it or a
 * worker leads it; then it goes back to its shard's spares. */
typedef struct lane {
    int64_t coupon_id;
    job_fifo jobs;
    int led;                 /* a worker runs a batch of it now */
    int ready;               /* in the shard's ready list */
    struct lane *next_ready;
    struct lane *next;       /* its bucket's chain, or the spares */
} lane;

/* The lanes one claim worker leads, so a coupon always meets the same
 * worker and its lock client. */
typedef struct shard {
    pthread_mutex_t mu;
    pthread_cond_t cv;       /* a lane became ready, or the queue is stopping */
    lane *bucket[LANE_BUCKETS];
    lane *ready_head;        /* lanes with claims and no leader, in the order they became so */
    lane *ready_tail;
    lane *spare;             /* retired lanes, reused before any malloc */
    int stopping;
} shard;

typedef struct claim_worker {
    pthread_t th;
    struct claimq *q;
    shard *sh;
    lane_batch lb;           /* the batch it leads now */
    lane_batch *round;       /* STRATEGY_ROUND_MAX of them, under a strategy with claim_each */
    int all_busy;            /* its last round found every coupon held elsewhere */
} claim_worker;

struct claimq {
    const app_config *cfg;
    const strategy *strat;
    worker_pool *pool;
    shard *shards;
    size_t n_shards;
    size_t shards_ready;     /* whose mutex and cv were made (to destroy) */
    atomic_size_t waiting;   /* jobs in every lane, against capacity */
    size_t capacity;
    claim_worker *workers;
    size_t n_workers;        /* started (and so to join) */
    size_t n_alloc_workers;  /* allocated (their rounds to free) */
    int stopped;             /* claimq_stop has joined the workers */
};

/* The longest a worker waits for one coupon's lock before it looks at its
 * other lanes again: a coupon held elsewhere (a paused holder) delays the
 * claims of the worker's other coupons that arrive meanwhile by at most
 * this, at the cost of leaving the lock's queue and listing again. */
#define WAIT_SLICE_US 50000

/* Fibonacci hashing spreads consecutive coupon ids. */
static uint64_t coupon_hash(int64_t coupon_id)
{
    return (uint64_t)coupon_id * UINT64_C(0x9E3779B97F4A7C15);
}

static shard *shard_of(claimq *q, int64_t coupon_id)
{
    return &q->shards[(coupon_hash(coupon_id) >> 32) % q->n_shards];
}

static lane **bucket_of(shard *sh, int64_t coupon_id)
{
    return &sh->bucket[coupon_hash(coupon_id) >> 58];
}

/* Under sh->mu: coupon_id's lane, made if absent; NULL when out of memory. */
static lane *lane_get(shard *sh, int64_t coupon_id)
{
    lane **b = bucket_of(sh, coupon_id);

    for (lane *l = *b; l != NULL; l = l->next)
        if (l->coupon_id == coupon_id)
            return l;
    lane *l = sh->spare;
    if (l != NULL)
        sh->spare = l->next;
    else if ((l = malloc(sizeof *l)) == NULL)
        return NULL;
    memset(l, 0, sizeof *l);
    l->coupon_id = coupon_id;
    l->next = *b;
    *b = l;
    return l;
}

/* Under sh->mu: an empty, unled lane leaves its bucket for the spares. */
static void lane_retire(shard *sh, lane *l)
{
    for (lane **p = bucket_of(sh, l->coupon_id); *p != NULL; p = &(*p)->next) {
        if (*p != l)
            continue;
        *p = l->next;
        l->next = sh->spare;
        sh->spare = l;
        return;
    }
}

static void ready_push(shard *sh, lane *l)
{
    l->ready = 1;
    l->next_ready = NULL;
    if (sh->ready_tail != NULL)
        sh->ready_tail->next_ready = l;
    else
        sh->ready_head = l;
    sh->ready_tail = l;
    pthread_cond_signal(&sh->cv);
}

static lane *ready_pop(shard *sh)
{
    lane *l = sh->ready_head;

    sh->ready_head = l->next_ready;
    if (sh->ready_head == NULL)
        sh->ready_tail = NULL;
    l->ready = 0;
    l->next_ready = NULL;
    return l;
}

static void waiting_sub(claimq *q, size_t n)
{
    size_t before = atomic_fetch_sub(&q->waiting, n);
    metrics_claims_waiting(before - n);
}

/* Under sh->mu: after first, up to max - 1 more ready lanes whose oldest
 * job is a single claim (a bundle holds locks of its own and runs alone),
 * in the order they became ready. Returns how many lanes ls holds. */
static size_t ready_take_claims(shard *sh, lane *first, lane **ls, size_t max)
{
    size_t n = 0;
    lane *prev = NULL;

    ls[n++] = first;
    for (lane *l = sh->ready_head, *next; l != NULL && n < max; l = next) {
        next = l->next_ready;
        if (l->jobs.head->run != NULL) {
            prev = l;
            continue;
        }
        if (prev != NULL)
            prev->next_ready = next;
        else
            sh->ready_head = next;
        if (sh->ready_tail == l)
            sh->ready_tail = prev;
        l->ready = 0;
        l->next_ready = NULL;
        ls[n++] = l;
    }
    return n;
}

/* Several coupons in one round. With claims spread over many coupons a
 * batch carries about one claim, so its lock's acquire and release rounds
 * on the masters, not the store, were what each claim paid (benchmarks.md,
 * "Many coupons"). When other lanes of this worker are ready too, it leads
 * up to STRATEGY_ROUND_MAX of them at once: the strategy takes all their
 * locks in one round and lets go of them in one. A coupon held elsewhere is
 * not waited for here: its claims go back to its lane, behind the others,
 * for the single path's wait. Entered under sh->mu with first popped;
 * returns with it released. */
static void lead_round(claim_worker *cw, worker *w, lane *first)
{
    claimq *q = cw->q;
    shard *sh = cw->sh;
    lane *ls[STRATEGY_ROUND_MAX];
    lane_batch *lbs[STRATEGY_ROUND_MAX];
    size_t n = ready_take_claims(sh, first, ls, STRATEGY_ROUND_MAX), moved = 0;
    int64_t now = cm_now_us();

    for (size_t i = 0; i < n; i++) {
        lbs[i] = &cw->round[i];
        ls[i]->led = 1;
        batch_begin(lbs[i], ls[i]->coupon_id);
        moved += batch_gather(lbs[i], &ls[i]->jobs, (size_t)q->cfg->lock_batch, GATHER_EXPIRE_LATE, 1, now);
    }
    pthread_mutex_unlock(&sh->mu);
    waiting_sub(q, moved);
    batch_run_each(lbs, n, q->strat, w, q->cfg);
    size_t busy = 0, ran = 0;
    pthread_mutex_lock(&sh->mu);
    for (size_t i = 0; i < n; i++) {
        lane *l = ls[i];
        ran += lbs[i]->b.n > 0;
        if (lbs[i]->b.prepare_busy) {
            busy++;
            atomic_fetch_add(&q->waiting, lbs[i]->b.n);
            batch_put_back(lbs[i], &l->jobs);
        }
        l->led = 0;
        if (l->jobs.n > 0)
            ready_push(sh, l);
        else
            lane_retire(sh, l);
    }
    /* Nothing granted: another try at once would only spin on the masters
     * (a kept lock elsewhere is given up to a waiter that lists itself, not
     * to a try). The next lane waits for its lock instead. */
    cw->all_busy = ran > 0 && busy == ran;
    pthread_mutex_unlock(&sh->mu);
}

static void *worker_main(void *arg)
{
    claim_worker *cw = arg;
    claimq *q = cw->q;
    shard *sh = cw->sh;
    lane_batch *lb = &cw->lb;
    /* The slot is this thread's until it leaves: its lock client (and the
     * locks it keeps) and its store connection are never shared (workers.h). */
    worker *w = pool_checkout(q->pool);
    /* Lock-free strategies have no wait to bound: their claims run
     * whatever the queue cost. */
    int with_lock = q->strat->uses_lock;
    gather_rule rule = with_lock ? GATHER_EXPIRE_LATE : GATHER_ALL;

    for (;;) {
        pthread_mutex_lock(&sh->mu);
        while (sh->ready_head == NULL && !sh->stopping)
            pthread_cond_wait(&sh->cv, &sh->mu);
        if (sh->ready_head == NULL) { /* stopping, and nothing left to lead */
            pthread_mutex_unlock(&sh->mu);
            break;
        }
        lane *l = ready_pop(sh);
        int others_ready = sh->ready_head != NULL;
        /* --lock-batch 1 asks for a lock per claim: no round then. */
        if (others_ready && !cw->all_busy && cw->round != NULL && q->cfg->lock_batch > 1 &&
            l->jobs.head->run == NULL) {
            lead_round(cw, w, l);
            continue;
        }
        l->led = 1;
        batch_begin(lb, l->coupon_id);
        size_t max = (size_t)q->cfg->lock_batch, moved = 0;
        claim_job *oldest = l->jobs.head;
        int64_t now = cm_now_us();
        /* The oldest claim leaves the lane first, as the one the lock is
         * waited for; the rest are gathered after the prepare, so claims
         * that came during its wait join this batch. */
        if (q->strat->prepare != NULL && oldest->run == NULL && now < oldest->deadline_us) {
            /* While other lanes wait, one try: a coupon held elsewhere must
             * not stall this worker's other coupons behind it (unless they
             * were all held elsewhere too); else a wait of one slice. */
            int64_t until = others_ready && !cw->all_busy ? now : oldest->deadline_us;
            if (until > now + WAIT_SLICE_US)
                until = now + WAIT_SLICE_US;
            cw->all_busy = 0;
            moved = batch_gather(lb, &l->jobs, 1, rule, with_lock, now);
            pthread_mutex_unlock(&sh->mu);
            waiting_sub(q, moved);
            q->strat->prepare(q->strat, w, q->cfg, l->coupon_id, until, &lb->b);
            pthread_mutex_lock(&sh->mu);
            now = cm_now_us();
            if (lb->b.prepare_busy && until < oldest->deadline_us && now < oldest->deadline_us && !sh->stopping) {
                batch_put_back(lb, &l->jobs);
                atomic_fetch_add(&q->waiting, moved);
                l->led = 0;
                ready_push(sh, l); /* behind the lanes that waited */
                pthread_mutex_unlock(&sh->mu);
                continue;
            }
        }
        moved = batch_gather(lb, &l->jobs, max, lb->b.prepare_err != 0 ? GATHER_DUE : rule, with_lock, now);
        pthread_mutex_unlock(&sh->mu);
        waiting_sub(q, moved);
        batch_run(lb, q->strat, w, q->cfg);
        pthread_mutex_lock(&sh->mu);
        l->led = 0;
        /* To the back of the ready list: the coupons of a worker take turns. */
        if (l->jobs.n > 0)
            ready_push(sh, l);
        else
            lane_retire(sh, l);
        pthread_mutex_unlock(&sh->mu);
    }
    pool_return(q->pool, w);
    return NULL;
}

claimq_submit_result claimq_submit(claimq *q, claim_job *job)
{
    shard *sh = shard_of(q, job->coupon_id);
    claimq_submit_result r = CLAIMQ_QUEUED;

    /* Counted before it is visible, so the gauge never goes below zero. */
    size_t before = atomic_fetch_add(&q->waiting, 1);
    if (before >= q->capacity) {
        atomic_fetch_sub(&q->waiting, 1);
        return CLAIMQ_FULL;
    }
    pthread_mutex_lock(&sh->mu);
    lane *l = sh->stopping ? NULL : lane_get(sh, job->coupon_id);
    if (l == NULL) {
        r = sh->stopping ? CLAIMQ_STOPPING : CLAIMQ_FULL;
    } else {
        job->behind_leader = l->led;
        job_fifo_push(&l->jobs, job);
        if (!l->led && !l->ready)
            ready_push(sh, l);
    }
    pthread_mutex_unlock(&sh->mu);
    if (r != CLAIMQ_QUEUED)
        atomic_fetch_sub(&q->waiting, 1);
    else
        metrics_claims_waiting(before + 1);
    return r;
}

/* Under sh->mu: every waiting job of the shard onto *out (linked through
 * next), the lanes emptied; the led ones retire when their batch ends. */
static void shard_drain(shard *sh, job_fifo *out)
{
    while (sh->ready_head != NULL)
        (void)ready_pop(sh);
    for (size_t i = 0; i < LANE_BUCKETS; i++) {
        for (lane *l = sh->bucket[i], *next; l != NULL; l = next) {
            next = l->next;
            for (claim_job *job = l->jobs.head, *nj; job != NULL; job = nj) {
                nj = job->next;
                job_fifo_push(out, job);
            }
            l->jobs = (job_fifo){0};
            if (!l->led)
                lane_retire(sh, l);
        }
    }
}

void claimq_stop(claimq *q)
{
    job_fifo left = {0};

    if (q == NULL || q->stopped)
        return;
    for (size_t s = 0; s < q->shards_ready; s++) {
        shard *sh = &q->shards[s];
        pthread_mutex_lock(&sh->mu);
        sh->stopping = 1;
        shard_drain(sh, &left);
        pthread_cond_broadcast(&sh->cv);
        pthread_mutex_unlock(&sh->mu);
    }
    if (left.n > 0)
        waiting_sub(q, left.n);
    /* Answered outside every mutex: done may take the HTTP server's locks. */
    for (claim_job *job = left.head, *next; job != NULL; job = next) {
        next = job->next;
        batch_answer_stopping(job);
    }
    /* The running batches finish first: a claim is never cut off between
     * its lock and its write. */
    for (size_t i = 0; i < q->n_workers; i++)
        pthread_join(q->workers[i].th, NULL);
    q->stopped = 1;
}

static void shard_free(shard *sh)
{
    for (size_t i = 0; i < LANE_BUCKETS; i++) {
        for (lane *l = sh->bucket[i], *next; l != NULL; l = next) {
            next = l->next;
            free(l);
        }
    }
    for (lane *l = sh->spare, *next; l != NULL; l = next) {
        next = l->next;
        free(l);
    }
    pthread_cond_destroy(&sh->cv);
    pthread_mutex_destroy(&sh->mu);
}

void claimq_free(claimq *q)
{
    if (q == NULL)
        return;
    claimq_stop(q);
    for (size_t s = 0; s < q->shards_ready; s++)
        shard_free(&q->shards[s]);
    free(q->shards);
    for (size_t i = 0; q->workers != NULL && i < q->n_alloc_workers; i++)
        free(q->workers[i].round);
    free(q->workers);
    free(q);
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
    atomic_init(&q->waiting, 0);
    /* A shard per worker for every strategy: lock-free ones lose nothing by
     * it (hot coupon, atomic-sql: 1.30x the shared FIFO, benchmarks.md). */
    q->n_shards = n_workers;
    q->shards = calloc(q->n_shards, sizeof *q->shards);
    q->workers = calloc(n_workers, sizeof *q->workers);
    if (q->shards == NULL || q->workers == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        claimq_free(q);
        return -1;
    }
    q->n_alloc_workers = n_workers;
    for (size_t i = 0; strat->claim_each != NULL && i < n_workers; i++) {
        if ((q->workers[i].round = calloc(STRATEGY_ROUND_MAX, sizeof(lane_batch))) == NULL) {
            snprintf(errbuf, errlen, "out of memory");
            claimq_free(q);
            return -1;
        }
    }
    for (size_t s = 0; s < q->n_shards; s++) {
        shard *sh = &q->shards[s];
        if (pthread_mutex_init(&sh->mu, NULL) != 0) {
            snprintf(errbuf, errlen, "claim queue: cannot create its mutex");
            claimq_free(q);
            return -1;
        }
        if (pthread_cond_init(&sh->cv, NULL) != 0) {
            pthread_mutex_destroy(&sh->mu);
            snprintf(errbuf, errlen, "claim queue: cannot create its condition variable");
            claimq_free(q);
            return -1;
        }
        q->shards_ready = s + 1;
    }
    for (size_t i = 0; i < n_workers; i++) {
        claim_worker *cw = &q->workers[i];
        cw->q = q;
        cw->sh = &q->shards[i % q->n_shards];
        int e = pthread_create(&cw->th, NULL, worker_main, cw);
        if (e != 0) {
            snprintf(errbuf, errlen, "claim queue: cannot start claim worker %zu of %zu: %s", i + 1, n_workers,
                     strerror(e));
            claimq_free(q); /* joins the ones that started */
            return -1;
        }
        q->n_workers = i + 1;
    }
    *out = q;
    return 0;
}
