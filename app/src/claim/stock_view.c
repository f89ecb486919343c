/* stock_view.c - the in-process stock view of the sold-out fast path
 * (stock_view.h): a fixed set-associative table, striped mutexes, and one
 * peek in flight per coupon. */
#include "claim/stock_view.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <time.h>

#include "common.h"
#include "core/metrics.h"

#define STRIPES 64 /* sets i, i + 64, ... share a mutex and a condition variable */

typedef struct entry {
    int64_t id;              /* 0: empty (coupon ids are positive) */
    int64_t stock;           /* last known; -1: nothing known */
    int64_t learned_us;      /* when it was known (a peek's: its start) */
    int64_t used_us;         /* last asked or learned: the set's replacement order */
    int in_flight;           /* a request is peeking this coupon now */
    uint64_t flights;        /* peeks finished: a waiter's wake-up condition */
    int64_t flight_start_us; /* the running (or last) peek's start */
    db_status last;          /* the last finished peek's status ... */
    int64_t last_start_us;   /* ... and its start: a new peek may be running already */
} entry;

typedef struct stripe {
    pthread_mutex_t mu;
    pthread_cond_t done; /* a peek of one of the stripe's coupons finished */
} stripe;

static entry table[STOCK_VIEW_SETS][STOCK_VIEW_WAYS];
static stripe stripes[STRIPES];
/* Written by stock_view_setup before any thread, read-only after. */
static int64_t fresh_us;
static int stock_monotone;
static int64_t wait_us;

int stock_view_setup(int fresh_ms, int monotone, int peek_ms)
{
    pthread_condattr_t attr;

    fresh_us = fresh_ms > 0 ? (int64_t)fresh_ms * 1000 : 0;
    stock_monotone = monotone != 0;
    /* The leader's peek is bounded by the store's own deadline; a second
     * more covers a reconnect's. Past it a waiter goes on as after a
     * failed peek. */
    wait_us = ((int64_t)(peek_ms > 0 ? peek_ms : 0) + 1000) * 1000;
    if (pthread_condattr_init(&attr) != 0)
        return -1;
    /* cm_now_us is CLOCK_MONOTONIC: the timed wait must count on it too. */
    int rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    for (size_t i = 0; rc == 0 && i < STRIPES; i++) {
        rc = pthread_mutex_init(&stripes[i].mu, NULL);
        if (rc == 0)
            rc = pthread_cond_init(&stripes[i].done, &attr);
    }
    (void)pthread_condattr_destroy(&attr);
    return rc == 0 ? 0 : -1;
}

static size_t set_of(int64_t id)
{
    /* splitmix64's finaliser: consecutive ids (the usual case) spread over
     * the sets instead of filling neighbours. */
    uint64_t x = (uint64_t)id;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return (size_t)((x ^ (x >> 31)) % STOCK_VIEW_SETS);
}

static entry *find(size_t set, int64_t id)
{
    for (size_t w = 0; w < STOCK_VIEW_WAYS; w++)
        if (table[set][w].id == id)
            return &table[set][w];
    return NULL;
}

/* An entry for id in set: an empty one, else the least recently used one
 * that knows nothing (ids asked that do not exist), else the least recently
 * used. Never one with a peek in flight (its waiters read it): NULL when
 * every way has one. */
static entry *take(size_t set, int64_t id, int64_t now)
{
    entry *victim = NULL;

    for (size_t w = 0; w < STOCK_VIEW_WAYS; w++) {
        entry *e = &table[set][w];
        if (e->in_flight)
            continue;
        if (e->id == 0) {
            victim = e;
            break;
        }
        if (victim == NULL || (e->stock < 0 && victim->stock >= 0) ||
            ((e->stock < 0) == (victim->stock < 0) && e->used_us < victim->used_us))
            victim = e;
    }
    if (victim != NULL)
        *victim = (entry){.id = id, .stock = -1, .used_us = now, .last = DB_OK};
    return victim;
}

/* What is known of e answers the question: *a set, 1; else 0 (peek). */
static int known(entry *e, int64_t now, stock_answer *a)
{
    int fresh = now - e->learned_us < fresh_us;

    if (e->stock == 0 && (stock_monotone || fresh)) {
        *a = STOCK_SOLD_OUT;
        return 1;
    }
    if (e->stock > 0 && fresh) {
        *a = STOCK_GO_ON;
        return 1;
    }
    return 0;
}

/* Called with the stripe's mutex held. Where the stock only falls, the
 * lowest value heard is the newest (learns race each other from several
 * threads, and a late one may carry an older, higher stock); elsewhere the
 * last one heard wins, a rise included. */
static void learn_locked(entry *e, int64_t stock, int64_t at_us)
{
    if (stock < 0)
        stock = 0;
    if (!stock_monotone || e->stock < 0 || stock < e->stock)
        e->stock = stock;
    if (at_us > e->learned_us)
        e->learned_us = at_us;
    e->used_us = at_us > e->used_us ? at_us : e->used_us;
}

static stock_answer answer_of(db_status st, int64_t stock)
{
    if (st == DB_NOT_FOUND)
        return STOCK_NOT_FOUND;
    /* A failed peek falls through: the strategy meets the store itself. */
    return st == DB_OK && stock <= 0 ? STOCK_SOLD_OUT : STOCK_GO_ON;
}

/* A peek of our own, outside the table (no view, or no room in the set). */
static stock_answer peek_alone(db_store *db, int64_t id)
{
    int64_t stock = 0;

    metrics_stock_peek(STOCK_PEEK_ISSUED);
    db_status st = db_peek_stock(db, id, &stock);
    return answer_of(st, stock);
}

/* Leads the peek of e (the caller holds s->mu and set e->in_flight); the
 * mutex is released for the round trip and held again on return. */
static stock_answer lead(stripe *s, entry *e, db_store *db, int64_t id)
{
    int64_t stock = 0;
    int64_t start = e->flight_start_us;

    pthread_mutex_unlock(&s->mu);
    metrics_stock_peek(STOCK_PEEK_ISSUED);
    db_status st = db_peek_stock(db, id, &stock);
    pthread_mutex_lock(&s->mu);
    /* Known as of the peek's start: the store answered at some instant
     * after it. */
    if (st == DB_OK)
        learn_locked(e, stock, start);
    e->last = st;
    e->last_start_us = start;
    e->in_flight = 0;
    e->flights++;
    pthread_cond_broadcast(&s->done);
    return answer_of(st, stock);
}

/* Waits (s->mu held) until e's peek in flight finishes; 0, or -1 when it
 * outlived wait_us or e was given to another coupon meanwhile. */
static int wait_flight(stripe *s, entry *e, int64_t id, int64_t arrival)
{
    uint64_t seen = e->flights;
    int64_t until = arrival + wait_us;
    struct timespec ts = {(time_t)(until / 1000000), (long)(until % 1000000) * 1000};

    while (e->id == id && e->flights == seen) {
        int rc = pthread_cond_timedwait(&s->done, &s->mu, &ts);
        if (rc != 0 && rc != EINTR)
            return -1; /* ETIMEDOUT (or a failure, which must not spin) */
    }
    return e->id == id ? 0 : -1;
}

stock_answer stock_view_ask(db_store *db, int64_t coupon_id)
{
    if (fresh_us == 0)
        return peek_alone(db, coupon_id);

    int64_t arrival = cm_now_us();
    size_t set = set_of(coupon_id);
    stripe *s = &stripes[set % STRIPES];
    stock_answer a = STOCK_GO_ON;
    int joined = 0;

    pthread_mutex_lock(&s->mu);
    /* At most three passes: a flight joined, then one that started after we
     * arrived (joined or led), whose answer is always ours to use. */
    for (int pass = 0; pass < 3; pass++) {
        int64_t now = cm_now_us();
        entry *e = find(set, coupon_id);
        if (e != NULL && known(e, now, &a)) {
            e->used_us = now;
            if (!joined)
                metrics_stock_peek(STOCK_PEEK_SAVED);
            goto out;
        }
        if (e != NULL && e->in_flight) {
            if (!joined)
                metrics_stock_peek(STOCK_PEEK_COALESCED);
            joined = 1;
            if (wait_flight(s, e, coupon_id, arrival) != 0) {
                a = STOCK_GO_ON; /* as after a failed peek */
                goto out;
            }
            /* "Not found" holds only for a peek that started after we
             * arrived: one sent before may have missed a coupon created
             * since (on this server or another) that our client knows of.
             * last_start_us, not flight_start_us: another request may have
             * started the next peek before we woke. */
            if (e->last == DB_NOT_FOUND && e->last_start_us <= arrival)
                continue;
            if (e->last == DB_NOT_FOUND) {
                a = STOCK_NOT_FOUND;
                goto out;
            }
            if (e->last != DB_OK || !known(e, cm_now_us(), &a))
                a = STOCK_GO_ON;
            goto out;
        }
        if (e == NULL)
            e = take(set, coupon_id, now);
        if (e == NULL)
            break; /* every way of the set is peeking: peek alone */
        e->in_flight = 1;
        e->flight_start_us = now;
        a = lead(s, e, db, coupon_id);
        goto out;
    }
    pthread_mutex_unlock(&s->mu);
    return peek_alone(db, coupon_id);
out:
    pthread_mutex_unlock(&s->mu);
    return a;
}

void stock_view_learn(int64_t coupon_id, int64_t stock)
{
    if (fresh_us == 0 || coupon_id <= 0)
        return;
    int64_t now = cm_now_us();
    size_t set = set_of(coupon_id);
    stripe *s = &stripes[set % STRIPES];

    pthread_mutex_lock(&s->mu);
    entry *e = find(set, coupon_id);
    if (e == NULL)
        e = take(set, coupon_id, now);
    if (e != NULL)
        learn_locked(e, stock, now);
    pthread_mutex_unlock(&s->mu);
}
