/* async_queue.c - the event-loop client's acquire on one node with wake on
 * release: queue.c's steps (protocol.h) driven on the loop. enter.lua and
 * leave.lua go out as rounds (async_round.c). The wait for a hand-off is a
 * BLPOP on a connection of its own, a waker (async_wake.c), because a
 * BLPOP blocks the connection it runs on; a loop timer bounds the wait.
 *
 * A BLPOP's answer counts only for the wait that sent it. A wait that ends
 * without one (its bound, a cancel) closes its waker: a message popped
 * later may be older than the next enter.lua, which dropped older ones.
 * Read then, it would bound a key that is no longer ours. (The blocking
 * client's waker settles such a reply for the same reason, wake.c.) */
#include "async_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum aq_state { AQ_START, AQ_ENTER, AQ_WAIT, AQ_BACKOFF, AQ_LEAVE } aq_state;

struct dlock__aqueue {
    dlock__queue q;
    dlock_async_op *op;
    aq_state state;
    dlock__awaker *w;
    int64_t t0;        /* the round in flight's send time */
    int64_t wait_end;  /* AQ_WAIT: until then */
    int heard;         /* DLOCK__HEARD_*: the waker's news, handled from the op's timer */
    char msg[DLOCK__RQ_MSG_LEN];
    dlock_err give_rc; /* AQ_LEAVE: the outcome the give-up reports */
};

static void enter(dlock__aqueue *aq);

/* The waker's news (inside hiredis): recorded, acted on from the op's
 * timer. Only a waiting acquire hears anything. */
static void news(void *owner, size_t node, int heard, const char *msg)
{
    dlock__aqueue *aq = owner;

    (void)node;
    if (aq->state != AQ_WAIT || aq->heard != DLOCK__HEARD_NOTHING)
        return;
    aq->heard = heard;
    if (msg != NULL)
        snprintf(aq->msg, sizeof(aq->msg), "%s", msg);
    aq->op->a->loop.timer_set(aq->op->timer, 0);
}

/* The wait is over: a BLPOP still out (or due after AUTH) is not the next
 * wait's to read. */
static void wait_done(dlock__aqueue *aq)
{
    if (!dlock__awaker_quiet(aq->w))
        dlock__awaker_close(aq->w);
}

/* ---- the acquire ---- */

/* A key of ours that will not be used: pass.lua, nobody waits for it. */
static void pass_if_asked(dlock__aqueue *aq)
{
    if (aq->q.pass_on)
        dlock__async_send_only(aq->op->a, 1, DLOCK__SCRIPT_PASS, aq->q.pb.keys, 3,
                               aq->q.pb.args, 4);
    aq->q.pass_on = 0;
}

/* The call ends: a key we hold after a cancel is handed on at once. */
static void finish(dlock__aqueue *aq, dlock_err rc, dlock_lock *lock)
{
    dlock_async_op *op = aq->op;

    if (op->cancelled && rc == DLOCK_OK) {
        aq->q.pass_on = 1;
        pass_if_asked(aq);
    }
    dlock__aop_end_acquire(op, rc, lock);
}

static void on_left(dlock__around *r, void *arg)
{
    dlock__aqueue *aq = arg;
    dlock_async_op *op = aq->op;
    dlock_lock *lock = NULL;
    dlock_err rc;

    op->round = NULL;
    rc = dlock__queue_left(op->a->c, &aq->q, &r->res[0], aq->t0, aq->give_rc, &lock, op->detail);
    dlock__around_free(r);
    pass_if_asked(aq);
    finish(aq, rc, lock);
}

/* Giving up with rc: leave.lua, whose answer says whether a key was
 * handed to us meanwhile (queue.c, dlock__queue_left). */
static void give_up(dlock__aqueue *aq, dlock_err rc)
{
    dlock_async_op *op = aq->op;

    aq->state = AQ_LEAVE;
    aq->give_rc = rc;
    aq->t0 = dlock_now_ms();
    op->round = dlock__around_start(op->a, 1, 0, DLOCK__SCRIPT_LEAVE, aq->q.keys, 4,
                                    aq->q.leave_args, 2, NULL, NULL, op->call_deadline_ms,
                                    on_left, aq);
    if (op->round == NULL) {
        /* Unsent: pass.lua alone still hands on a key handed to us. */
        aq->q.pass_on = 1;
        pass_if_asked(aq);
        finish(aq, rc, NULL);
    }
}

static void back_off(dlock__aqueue *aq)
{
    aq->state = AQ_BACKOFF;
    dlock__aop_back_off(aq->op, aq->op->attempt);
}

static void wait_handoff(dlock__aqueue *aq, int64_t pttl)
{
    dlock_async_op *op = aq->op;
    int64_t now = dlock_now_ms();

    if (aq->w == NULL && (aq->w = dlock__awaker_take(op->a, 0, news, aq)) == NULL) {
        back_off(aq); /* no memory for a wait: poll */
        return;
    }
    aq->state = AQ_WAIT;
    aq->heard = DLOCK__HEARD_NOTHING;
    aq->wait_end = now + dlock__queue_block_ms(&aq->q, pttl, now);
    if (dlock__awaker_pop(aq->w, aq->q.list, aq->wait_end) != 0) {
        back_off(aq); /* no connection to block on: poll */
        return;
    }
    if (aq->state == AQ_WAIT && aq->heard == DLOCK__HEARD_NOTHING)
        op->a->loop.timer_set(op->timer, aq->wait_end - now);
}

static void on_entered(dlock__around *r, void *arg)
{
    dlock__aqueue *aq = arg;
    dlock_async_op *op = aq->op;
    dlock_client *c = op->a->c;
    dlock_lock *lock = NULL;
    int64_t pttl = 0, now;
    dlock_err rc;

    op->round = NULL;
    rc = dlock__queue_answer(c, &aq->q, DLOCK__SCRIPT_ENTER, &r->res[0], aq->t0, &pttl, &lock,
                             op->detail);
    dlock__around_free(r);
    pass_if_asked(aq);
    if (rc == DLOCK_ERR_TAKEN)
        c->stats.taken++;
    if (rc == DLOCK_OK || rc == DLOCK_ERR_NOMEM) {
        finish(aq, rc, lock);
        return;
    }
    now = dlock_now_ms();
    if (op->cancelled || now >= op->deadline_ms || !dlock__should_retry(c, rc)) {
        give_up(aq, rc);
        return;
    }
    op->attempt++;
    if (rc == DLOCK_ERR_TAKEN)
        wait_handoff(aq, pttl);
    else
        back_off(aq);
}

/* One enter.lua round: take the key, or be listed behind its holder. */
static void enter(dlock__aqueue *aq)
{
    dlock_async_op *op = aq->op;
    dlock_client *c = op->a->c;

    dlock__count_try(c, op->attempt);
    dlock__queue_entering(&aq->q, op->attempt);
    aq->state = AQ_ENTER;
    aq->t0 = dlock_now_ms();
    op->round = dlock__around_start(op->a, 1, 0, DLOCK__SCRIPT_ENTER, aq->q.keys, 4, aq->q.args,
                                    5, NULL, NULL, op->call_deadline_ms, on_entered, aq);
    if (op->round == NULL) {
        dlock__errf(op->detail, "out of memory for the acquire round");
        finish(aq, DLOCK_ERR_NOMEM, NULL);
    }
}

/* The wait ended (news from the waker, or its bound). */
static void woken(dlock__aqueue *aq)
{
    dlock_async_op *op = aq->op;
    dlock_lock *lock = NULL;
    dlock_err rc = DLOCK_ERR_TAKEN;
    int heard = aq->heard, took;

    aq->heard = DLOCK__HEARD_NOTHING;
    wait_done(aq);
    if (heard == DLOCK__HEARD_LOST) {
        back_off(aq);
        return;
    }
    if (heard == DLOCK__HEARD_MESSAGE) {
        took = dlock__queue_woken(op->a->c, &aq->q, aq->msg, &rc, &lock, op->detail);
        pass_if_asked(aq);
        if (took == 1 && (rc == DLOCK_OK || rc == DLOCK_ERR_NOMEM)) {
            finish(aq, rc, lock);
            return;
        }
        if (took < 0) {
            back_off(aq);
            return;
        }
    }
    /* Too late for our bound, or the wait ran out: ask again. */
    enter(aq);
}

int dlock__aqueue_wanted(const dlock_async_op *op)
{
    const dlock_client *c = op->a->c;

    /* As the blocking acquire: waking, with time to wait. A try is one
     * plain attempt and never lists itself. */
    return op->q != NULL || op->rq != NULL ||
           (c->wake_on_release && op->n == 0 && op->deadline_ms > dlock_now_ms());
}

void dlock__aqueue_step(dlock_async_op *op)
{
    dlock__aqueue *aq = op->q;

    if (op->a->c->n > 1) {
        dlock__arqueue_step(op);
        return;
    }
    if (aq == NULL) {
        dlock_err rc;

        aq = op->q = calloc(1, sizeof(*aq));
        if (aq == NULL) {
            dlock__errf(op->detail, "acquire: out of memory");
            dlock__aop_complete(op, DLOCK_ERR_NOMEM, NULL);
            return;
        }
        aq->op = op;
        rc = dlock__queue_prepare(op->a->c, &aq->q, op->resource, op->ttl_ms, op->deadline_ms,
                                  op->detail);
        if (rc != DLOCK_OK) {
            dlock__aop_complete(op, rc, NULL);
            return;
        }
    }
    if (aq->state == AQ_WAIT)
        woken(aq);
    else
        enter(aq); /* the first attempt, or after a back-off */
}

int dlock__aqueue_cancel(dlock_async_op *op)
{
    dlock__aqueue *aq = op->q;

    if (op->rq != NULL)
        return dlock__arqueue_cancel(op);
    op->cancelled = 1;
    if (op->round != NULL)
        return 1; /* enter.lua or leave.lua out: its answer ends the call */
    op->a->loop.timer_stop(op->timer);
    if (aq->state == AQ_WAIT)
        wait_done(aq);
    give_up(aq, DLOCK_ERR_CANCELLED);
    return 1;
}

void dlock__aqueue_abandon(dlock_async_op *op)
{
    dlock__aqueue *aq = op->q;

    if (op->rq != NULL) {
        dlock__arqueue_abandon(op);
        return;
    }
    if (aq->state == AQ_START)
        return;
    /* Freed mid-call: off the queue, and a key handed to us meanwhile is
     * handed on, both without waiting, in order on the one connection. */
    dlock__async_send_only(op->a, 1, DLOCK__SCRIPT_LEAVE, aq->q.keys, 4, aq->q.leave_args, 2);
    aq->q.pass_on = 1;
    pass_if_asked(aq);
}

void dlock__aqueue_free(dlock_async_op *op)
{
    dlock__aqueue *aq = op->q;

    dlock__arqueue_free(op);
    if (aq == NULL)
        return;
    dlock__awaker_put(aq->w);
    free(aq);
    op->q = NULL;
}
