/* async_rqueue.c - the event-loop client's acquire over several masters
 * with wake on release: rqueue.c's steps (protocol.h) driven on the loop.
 * enter.lua, leave.lua and the grant's fence sync go out as rounds
 * (async_round.c); the wait listens on a waker per node (async_wake.c),
 * bounded by a loop timer. What the steps send without waiting goes out
 * on the round connections (async_round.c's send-only).
 *
 * A BLPOP left out at the end of a wait stays out, as the blocking
 * client's does: a message it pops later is judged by its fence
 * (dlock__rq_heard drops one no larger than the last seen there). */
#include "async_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum rq_state { RQ_ENTER, RQ_SYNC, RQ_WAIT, RQ_BACKOFF, RQ_LEAVE } rq_state;

struct dlock__arqueue {
    dlock__rqueue q;
    dlock_async_op *op;
    rq_state state;
    rq_state grant_from;   /* RQ_SYNC: the step whose grant is syncing */
    int started;           /* the first enter.lua went out */
    dlock__awaker *w[DLOCK_MAX_NODES];
    int64_t t0;            /* the round in flight's send time */
    dlock_err rc;          /* the last enter.lua round's verdict */
    int64_t pttl;          /* and the longest other holder's key it saw */
    int64_t wait_end;      /* this wait, until then */
    int waited, recheck;   /* this wait listened at least once; it ended in a recheck */
    int check_deadline;    /* RQ_BACKOFF: the deadline ends the call after it */
    uint32_t heard;        /* nodes with a message not yet read */
    char msgs[DLOCK_MAX_NODES][DLOCK__RQ_MSG_LEN];
    dlock_err give_rc;     /* RQ_LEAVE: the outcome the give-up reports */
    char why[DLOCK_ERRSTR_LEN]; /* and its detail */
};

static void enter(dlock__arqueue *aq);
static void wait_turn(dlock__arqueue *aq);

/* ---- io: what the steps send without waiting ---- */

static void io_script(void *arg, uint32_t mask, dlock__script_id id, const char *const *keys,
                      int nkeys, const char *const *args, int nargs)
{
    dlock__async_send_only(arg, mask, id, keys, nkeys, args, nargs);
}

static void io_cmd(void *arg, uint32_t mask, int argc, const char **argv, const size_t *argvlen)
{
    dlock__async_cmd_send_only(arg, mask, argc, argv, argvlen);
}

static const dlock__rq_io async_io = {io_script, io_cmd};

/* A waker's news (inside hiredis): a message is kept for the next wait
 * turn; a waiting acquire is woken for it, and for a nil (its BLPOP is
 * sent again). A lost connection waits for the wait's own timer, so a
 * node that refuses at once cannot spin the loop. */
static void news(void *owner, size_t node, int heard, const char *msg)
{
    dlock__arqueue *aq = owner;

    if (heard == DLOCK__HEARD_MESSAGE) {
        snprintf(aq->msgs[node], sizeof(aq->msgs[node]), "%s", msg);
        aq->heard |= 1u << node;
    }
    if (aq->state == RQ_WAIT && heard != DLOCK__HEARD_LOST)
        aq->op->a->loop.timer_set(aq->op->timer, 0);
}

/* ---- the call's end ---- */

static void finish(dlock__arqueue *aq, dlock_err rc, dlock_lock *lock)
{
    dlock_async_op *op = aq->op;

    /* Granted while cancelling: handed on at once, never left. */
    if (op->cancelled && rc == DLOCK_OK)
        dlock__rq_pass_on(&aq->q, dlock__all_nodes(op->a->c));
    dlock__aop_end_acquire(op, rc, lock);
}

/* ---- the grant: its fence sync round between the two steps ---- */

static void after_grant(dlock__arqueue *aq);

static void grant_end(dlock__arqueue *aq, uint32_t ones)
{
    dlock_lock *lock = NULL;
    dlock_err rc;

    if (dlock__rq_grant_end(&aq->q, ones, &rc, &lock, aq->op->detail)) {
        finish(aq, rc, lock);
        return;
    }
    after_grant(aq);
}

static void on_synced(dlock__around *r, void *arg)
{
    dlock__arqueue *aq = arg;
    uint32_t ones = 0;

    aq->op->round = NULL;
    dlock__count_int(r->res, aq->op->a->c->n, 1, &ones);
    dlock__around_free(r);
    aq->state = aq->grant_from;
    grant_end(aq, ones);
}

/* Whether a quorum of keys is ours; the outcome continues where from. */
static void try_grant(dlock__arqueue *aq, rq_state from)
{
    dlock_async_op *op = aq->op;

    aq->state = from;
    if (!dlock__rq_grant_begin(&aq->q)) {
        after_grant(aq);
        return;
    }
    if (aq->q.g_lagging == 0) {
        grant_end(aq, 0);
        return;
    }
    aq->grant_from = from;
    aq->state = RQ_SYNC;
    op->round = dlock__around_start(op->a, aq->q.g_lagging, 0, DLOCK__SCRIPT_FENCE_SYNC,
                                    aq->q.g_sync_keys, 1, aq->q.g_sync_args, 1, NULL, NULL,
                                    op->call_deadline_ms, on_synced, aq);
    if (op->round == NULL) {
        aq->state = from;
        grant_end(aq, 0); /* no memory for the sync: the lagging nodes count as not raised */
    }
}

/* ---- giving up ---- */

static void on_left(dlock__around *r, void *arg)
{
    dlock__arqueue *aq = arg;
    int64_t pttl;

    aq->op->round = NULL;
    (void)dlock__rq_answer(&aq->q, DLOCK__SCRIPT_LEAVE, r->res, aq->t0, &pttl, aq->op->detail);
    dlock__around_free(r);
    try_grant(aq, RQ_LEAVE); /* keys handed to us meanwhile may make a quorum */
}

/* Off every queue (leave.lua to every node, also those whose breaker is
 * open: our enter.lua may run there late); keys handed to us meanwhile
 * are counted, and unless they make a quorum, passed on. */
static void give_up(dlock__arqueue *aq, dlock_err rc)
{
    dlock_async_op *op = aq->op;
    dlock_client *c = op->a->c;

    aq->give_rc = rc;
    memcpy(aq->why, op->detail, sizeof(aq->why));
    aq->state = RQ_LEAVE;
    aq->t0 = dlock_now_ms();
    op->round = dlock__around_start(op->a, dlock__all_nodes(c), dlock__all_nodes(c),
                                    DLOCK__SCRIPT_LEAVE, aq->q.b.keys, 4, aq->q.b.leave_args, 2,
                                    dlock__rq_decided, &c->quorum, op->call_deadline_ms,
                                    on_left, aq);
    if (op->round == NULL) {
        dlock__rq_pass_on(&aq->q, dlock__all_nodes(c));
        finish(aq, rc, NULL);
    }
}

/* ---- entering and waiting ---- */

static void back_off(dlock__arqueue *aq, int check_deadline)
{
    aq->state = RQ_BACKOFF;
    aq->check_deadline = check_deadline;
    dlock__aop_back_off(aq->op, aq->op->attempt);
}

/* The wait ended (its end, a recheck, a yield, nowhere to listen). */
static void wait_over(dlock__arqueue *aq)
{
    if (!aq->waited && !aq->recheck) {
        back_off(aq, 1);
        return;
    }
    if (dlock_now_ms() >= aq->op->deadline_ms)
        give_up(aq, DLOCK_ERR_TAKEN);
    else
        enter(aq);
}

/* After a grant that was not decided: what comes next where it began. */
static void after_grant(dlock__arqueue *aq)
{
    dlock_async_op *op = aq->op;
    dlock_client *c = op->a->c;
    int64_t now;

    if (aq->state == RQ_LEAVE) {
        dlock__rq_pass_on(&aq->q, dlock__all_nodes(c));
        memcpy(op->detail, aq->why, sizeof(aq->why));
        finish(aq, aq->give_rc, NULL);
        return;
    }
    if (op->cancelled) {
        give_up(aq, DLOCK_ERR_CANCELLED);
        return;
    }
    if (aq->state == RQ_WAIT) {
        wait_turn(aq);
        return;
    }
    /* After enter.lua: rc is TAKEN or the round's unavailability, never
     * EXPIRED (a grant spent in its fence sync goes back in line). */
    if (aq->rc == DLOCK_ERR_TAKEN)
        c->stats.taken++;
    now = dlock_now_ms();
    if (now >= op->deadline_ms || !dlock__should_retry(c, aq->rc)) {
        give_up(aq, aq->rc);
        return;
    }
    op->attempt++;
    if (aq->rc != DLOCK_ERR_TAKEN) {
        back_off(aq, 0);
        return;
    }
    aq->wait_end = dlock__rq_wait_end(&aq->q, aq->pttl, now);
    aq->waited = aq->recheck = 0;
    aq->state = RQ_WAIT;
    wait_turn(aq);
}

/* One turn of the wait: read what the wakers heard, or listen on. */
static void wait_turn(dlock__arqueue *aq)
{
    dlock_async_op *op = aq->op;
    dlock_client *c = op->a->c;
    int64_t now = dlock_now_ms(), block;
    uint32_t conn = 0, mask;
    int next;

    if (aq->heard != 0) {
        uint32_t heard = aq->heard;

        aq->heard = 0;
        for (size_t i = 0; i < c->n; i++)
            if (heard & (1u << i))
                dlock__rq_heard(&aq->q, i, aq->msgs[i], now);
        aq->waited = 1;
        try_grant(aq, RQ_WAIT);
        return;
    }
    if (now >= aq->wait_end) {
        wait_over(aq);
        return;
    }
    for (size_t i = 0; i < c->n; i++)
        if (dlock__awaker_up(aq->w[i]))
            conn |= 1u << i;
    next = dlock__rq_wait_next(&aq->q, now, aq->wait_end, conn, &block, &mask);
    if (next == DLOCK__RQ_RECHECK)
        aq->recheck = 1;
    if (next != DLOCK__RQ_WAIT) {
        wait_over(aq);
        return;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        if (aq->w[i] == NULL)
            aq->w[i] = dlock__awaker_take(op->a, i, news, aq);
        /* A node we cannot listen on now is looked at again next turn. */
        if (aq->w[i] != NULL)
            (void)dlock__awaker_pop(aq->w[i], aq->q.b.list, now + block);
    }
    aq->state = RQ_WAIT;
    op->a->loop.timer_set(op->timer, block);
}

static void on_entered(dlock__around *r, void *arg)
{
    dlock__arqueue *aq = arg;

    aq->op->round = NULL;
    aq->rc = dlock__rq_answer(&aq->q, DLOCK__SCRIPT_ENTER, r->res, aq->t0, &aq->pttl,
                              aq->op->detail);
    dlock__around_free(r);
    try_grant(aq, RQ_ENTER);
}

/* One enter.lua round to every node, decided once a quorum answered. */
static void enter(dlock__arqueue *aq)
{
    dlock_async_op *op = aq->op;
    dlock_client *c = op->a->c;

    dlock__count_try(c, op->attempt);
    dlock__rq_entering(&aq->q, op->attempt);
    aq->started = 1;
    aq->state = RQ_ENTER;
    aq->t0 = dlock_now_ms();
    op->round = dlock__around_start(op->a, dlock__all_nodes(c), 0, DLOCK__SCRIPT_ENTER,
                                    aq->q.b.keys, 4, aq->q.args, 9, dlock__rq_decided, &c->quorum,
                                    op->call_deadline_ms, on_entered, aq);
    if (op->round == NULL) {
        dlock__errf(op->detail, "out of memory for the acquire round");
        finish(aq, DLOCK_ERR_NOMEM, NULL);
    }
}

/* ---- the op's hooks (async_queue.c dispatches here for several nodes) ---- */

void dlock__arqueue_step(dlock_async_op *op)
{
    dlock__arqueue *aq = op->rq;

    if (aq == NULL) {
        dlock_err rc;

        aq = op->rq = calloc(1, sizeof(*aq));
        if (aq == NULL) {
            dlock__errf(op->detail, "acquire: out of memory");
            dlock__aop_complete(op, DLOCK_ERR_NOMEM, NULL);
            return;
        }
        aq->op = op;
        rc = dlock__rq_prepare(op->a->c, &aq->q, &async_io, op->a, op->resource, op->ttl_ms,
                               op->deadline_ms, op->detail);
        if (rc != DLOCK_OK) {
            dlock__aop_complete(op, rc, NULL);
            return;
        }
        enter(aq);
        return;
    }
    if (aq->state == RQ_WAIT) {
        /* The wait's timer, or news: a turn with what was heard. */
        if (aq->heard == 0)
            aq->waited = 1;
        wait_turn(aq);
    } else if (aq->check_deadline && dlock_now_ms() >= op->deadline_ms) {
        give_up(aq, DLOCK_ERR_TAKEN);
    } else {
        enter(aq); /* after a back-off */
    }
}

int dlock__arqueue_cancel(dlock_async_op *op)
{
    op->cancelled = 1;
    if (op->round != NULL)
        return 1; /* a round is out: its end ends the call */
    op->a->loop.timer_stop(op->timer);
    give_up(op->rq, DLOCK_ERR_CANCELLED);
    return 1;
}

void dlock__arqueue_abandon(dlock_async_op *op)
{
    dlock__arqueue *aq = op->rq;
    dlock_client *c = op->a->c;

    if (!aq->started)
        return;
    /* Freed mid-call: off every queue, and every key handed to us
     * meanwhile handed on, without waiting, in order on each connection. */
    dlock__async_send_only(op->a, dlock__all_nodes(c), DLOCK__SCRIPT_LEAVE, aq->q.b.keys, 4,
                           aq->q.b.leave_args, 2);
    dlock__rq_pass_on(&aq->q, dlock__all_nodes(c));
}

void dlock__arqueue_free(dlock_async_op *op)
{
    dlock__arqueue *aq = op->rq;

    if (aq == NULL)
        return;
    for (size_t i = 0; i < DLOCK_MAX_NODES; i++)
        dlock__awaker_put(aq->w[i]);
    free(aq);
    op->rq = NULL;
}
