/* combiner.c - striped queues (mutex + per-request condition variable with
 * CLOCK_MONOTONIC deadlines) behind which a server's claims for one coupon
 * line up in front of the distributed lock.
 *
 * Why: on a hot coupon, threads that each poll Redis leave the lock idle
 * after a release until some poller's retry pause ends, and load Redis with
 * one poller per thread. Queued here, the next waiter is handed leadership
 * the moment the holder has released and tries Redis at once, so the lock
 * changes hands in about one round trip and Redis sees one poller per
 * server. With --lock-batch > 1 a leader also runs queued claims under its
 * own acquisition, paying the two round trips once per batch. Mutual
 * exclusion still comes only from the distributed lock (other servers never
 * see these queues): every claim runs while its leader holds the lock, with
 * the fence checked by the store. */
#include "claim/combiner.h"

#include <time.h>

/* Coupons sharing a stripe merely queue behind one leader; 256 stripes make
 * that rare for the handful of coupons a sale has. */
#define N_STRIPES 256

typedef struct stripe {
    pthread_mutex_t mu;
    int leader;        /* a leader exists for this stripe */
    int leader_waits;  /* the leader sleeps on leader_cv for a request to be queued */
    pthread_cond_t leader_cv;
    combine_req *head; /* queued requests, oldest first */
    combine_req *tail;
} stripe;

static stripe stripes[N_STRIPES];
static pthread_condattr_t cond_attr;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_ok;

static void combiner_init(void)
{
    if (pthread_condattr_init(&cond_attr) != 0)
        return;
    /* Monotonic waits: a wall-clock step (NTP) must not stretch or cut the lock wait. */
    if (pthread_condattr_setclock(&cond_attr, CLOCK_MONOTONIC) != 0)
        return;
    for (int i = 0; i < N_STRIPES; i++)
        if (pthread_mutex_init(&stripes[i].mu, NULL) != 0 ||
            pthread_cond_init(&stripes[i].leader_cv, &cond_attr) != 0)
            return;
    init_ok = 1;
}

static stripe *stripe_of(int64_t key)
{
    /* Fibonacci hashing spreads consecutive coupon ids over the stripes. */
    uint64_t h = (uint64_t)key * UINT64_C(0x9E3779B97F4A7C15);
    return &stripes[h >> 56];
}

int combine_req_init(combine_req *r, int64_t coupon_id, const char *user_id, claim_out *out, int64_t t0_us)
{
    pthread_once(&init_once, combiner_init);
    if (!init_ok)
        return -1;
    r->coupon_id = coupon_id;
    r->user_id = user_id;
    r->out = out;
    r->result = CLAIM_ERROR;
    r->t0_us = t0_us;
    r->state = COMBINE_QUEUED;
    r->next = NULL;
    return pthread_cond_init(&r->cv, &cond_attr) == 0 ? 0 : -1;
}

void combine_req_destroy(combine_req *r)
{
    pthread_cond_destroy(&r->cv);
}

static void unlink_req(stripe *s, combine_req *r)
{
    combine_req *prev = NULL;
    for (combine_req *p = s->head; p != NULL; prev = p, p = p->next) {
        if (p != r)
            continue;
        if (prev == NULL)
            s->head = p->next;
        else
            prev->next = p->next;
        if (s->tail == p)
            s->tail = prev;
        p->next = NULL;
        return;
    }
}

/* deadline_ms is on dlock_now_ms()'s clock (CLOCK_BOOTTIME where there
 * is one), the condvars wait on CLOCK_MONOTONIC: carry the instant over as
 * "this long from now", since the two differ by any time suspended. */
static struct timespec monotonic_deadline(int64_t deadline_ms)
{
    struct timespec ts;
    int64_t wait_ms = deadline_ms - dlock_now_ms();

    if (wait_ms < 0)
        wait_ms = 0;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        ts = (struct timespec){0, 0}; /* cannot fail for MONOTONIC; times out at once */
    ts.tv_sec += (time_t)(wait_ms / 1000);
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

join_result combiner_join(combine_req *me, int64_t deadline_ms)
{
    stripe *s = stripe_of(me->coupon_id);
    struct timespec ts = monotonic_deadline(deadline_ms);
    join_result result;

    pthread_mutex_lock(&s->mu);
    if (!s->leader) {
        s->leader = 1;
        pthread_mutex_unlock(&s->mu);
        return JOIN_LEAD;
    }
    if (s->tail != NULL)
        s->tail->next = me;
    else
        s->head = me;
    s->tail = me;
    /* A leader holding the lock across batches sleeps until a claim comes. */
    if (s->leader_waits)
        pthread_cond_signal(&s->leader_cv);
    for (;;) {
        if (me->state == COMBINE_DONE) {
            result = JOIN_DONE;
            break;
        }
        if (me->state == COMBINE_LEAD) {
            result = JOIN_LEAD;
            break;
        }
        if (me->state == COMBINE_TAKEN) {
            /* A leader is running our claim right now: its outcome is
             * decided within one transaction, and walking away would lose
             * a committed claim's answer. */
            pthread_cond_wait(&me->cv, &s->mu);
            continue;
        }
        if (pthread_cond_timedwait(&me->cv, &s->mu, &ts) != 0 && me->state == COMBINE_QUEUED) {
            unlink_req(s, me);
            result = JOIN_TIMEOUT;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return result;
}

int combiner_try_lead(int64_t coupon_id)
{
    stripe *s;
    int lead = 0;

    pthread_once(&init_once, combiner_init);
    if (!init_ok)
        return 0;
    s = stripe_of(coupon_id);
    pthread_mutex_lock(&s->mu);
    if (!s->leader) {
        s->leader = 1;
        lead = 1;
    }
    pthread_mutex_unlock(&s->mu);
    return lead;
}

/* Stripe mutex held: unlinks and marks TAKEN the oldest request for coupon_id. */
static combine_req *take_locked(stripe *s, int64_t coupon_id)
{
    for (combine_req *p = s->head; p != NULL; p = p->next) {
        if (p->coupon_id == coupon_id) {
            unlink_req(s, p);
            p->state = COMBINE_TAKEN;
            return p;
        }
    }
    return NULL;
}

combine_req *combiner_take(int64_t coupon_id)
{
    stripe *s = stripe_of(coupon_id);

    pthread_mutex_lock(&s->mu);
    combine_req *found = take_locked(s, coupon_id);
    pthread_mutex_unlock(&s->mu);
    return found;
}

combine_req *combiner_take_wait(int64_t coupon_id, int64_t until_ms)
{
    stripe *s = stripe_of(coupon_id);
    struct timespec ts = monotonic_deadline(until_ms);
    combine_req *found;
    int timed_out = 0;

    pthread_mutex_lock(&s->mu);
    /* One leader per stripe, so at most one thread waits on leader_cv. */
    while ((found = take_locked(s, coupon_id)) == NULL && !timed_out) {
        s->leader_waits = 1;
        timed_out = pthread_cond_timedwait(&s->leader_cv, &s->mu, &ts) != 0;
        s->leader_waits = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

void combiner_complete(combine_req *r, claim_result result)
{
    stripe *s = stripe_of(r->coupon_id);

    pthread_mutex_lock(&s->mu);
    r->result = result;
    r->state = COMBINE_DONE;
    /* Signalled with the mutex held: the waiter can only see DONE (and
     * destroy its cv) after we unlock, so the cv outlives this call. */
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&s->mu);
}

void combiner_leave(int64_t coupon_id)
{
    stripe *s = stripe_of(coupon_id);

    pthread_mutex_lock(&s->mu);
    combine_req *next = s->head;
    if (next != NULL) {
        /* Hand over rather than clear the flag, so a newcomer cannot jump
         * ahead of requests that have been waiting. */
        unlink_req(s, next);
        next->state = COMBINE_LEAD;
        pthread_cond_signal(&next->cv);
    } else {
        s->leader = 0;
    }
    pthread_mutex_unlock(&s->mu);
}
