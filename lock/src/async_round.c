/* async_round.c - the event-loop driver of a round: the core's rules
 * (round_core.c), hiredis's async contexts for the bytes, a loop timer for
 * the deadline. Replies are recorded in their callbacks and the round is
 * settled when hiredis has returned (async_internal.h says why). */
#include "async_internal.h"

#include <stdlib.h>
#include <string.h>

static void on_round_timer(void *arg)
{
    dlock__around *r = arg;
    dlock_async *a = r->a;

    dlock__async_enter(a);
    dlock__around_mark(r);
    dlock__async_leave(a);
}

void dlock__around_mark(dlock__around *r)
{
    dlock_async *a = r->a;

    if (r->dirty || r->done)
        return;
    r->dirty = 1;
    r->next_dirty = a->dirty;
    a->dirty = r;
    dlock__async_wake(a);
}

/* Sends the round's call to the nodes of mask; 1 when a waited one of them
 * is still connecting (the round then allows its connect time). */
static int send_slots(dlock__around *r, uint32_t mask)
{
    dlock_async *a = r->a;
    dlock_client *c = a->c;
    int connecting = 0;

    for (size_t i = 0; i < c->n; i++) {
        dlock__ticket *t;
        int queued = 0;

        if (!(mask & (1u << i)))
            continue;
        t = calloc(1, sizeof(*t));
        if (t == NULL) {
            r->res[i].status = DLOCK__R_IOERR;
            dlock__detailf(r->res[i].detail, "out of memory sending the command");
        } else {
            t->round = r;
            t->node = i;
            if (dlock__anode_send(a, i, t, r->call.argc, r->call.argv, r->call.argvlen,
                                  r->res[i].detail) == 0) {
                r->ticket[i] = t;
                queued = 1;
            } else {
                free(t);
                r->res[i].status = DLOCK__R_DOWN;
            }
        }
        dlock__rc_sent(&r->core, i, queued);
        connecting |= queued && r->core.role[i] == DLOCK__SLOT_WAITED &&
                      c->nodes[i].state == DLOCK__CONNECTING;
    }
    return connecting;
}

/* The core's second chance, sent by this driver. */
static int send_again(void *driver, uint32_t mask)
{
    return send_slots(driver, mask);
}

static void send_round(dlock__around *r, dlock__stop_fn stop, void *stop_arg, int64_t call_dl)
{
    dlock_async *a = r->a;
    uint32_t send = dlock__rc_open(&r->core, a->c, r->mask, r->reach, r->res, stop, stop_arg,
                                   call_dl);

    dlock__rc_start(&r->core, send_slots(r, send));
    dlock__around_mark(r);
}

dlock__around *dlock__around_start(dlock_async *a, uint32_t mask, uint32_t reach,
                                   dlock__script_id id, const char *const *keys, int nkeys,
                                   const char *const *args, int nargs, dlock__stop_fn stop,
                                   void *stop_arg, int64_t call_deadline_ms,
                                   void (*on_done)(dlock__around *r, void *arg), void *arg)
{
    dlock__around *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    r->timer = a->loop.timer_new(a->loop.loop, on_round_timer, r);
    if (r->timer == NULL) {
        free(r);
        return NULL;
    }
    r->a = a;
    r->mask = mask;
    r->reach = reach;
    r->keys = keys;
    r->nkeys = nkeys;
    r->args = args;
    r->nargs = nargs;
    r->on_done = on_done;
    r->on_done_arg = arg;
    dlock__script_call_build(a->c, &r->call, id, mask, 1, keys, nkeys, args, nargs);
    send_round(r, stop, stop_arg, call_deadline_ms);
    return r;
}

/* A reply for a ticket whose round is over: owed and discarded, as the
 * blocking client's stale replies; a node that has drained what it owed
 * answers again (its breaker closes, as conn.c's dlock__conn_service). */
static void owed_reply(redisAsyncContext *ac, const redisReply *reply, dlock__ticket *t,
                       dlock_async *a)
{
    dlock__node *node;

    if (reply == NULL || a == NULL)
        return;
    node = &a->c->nodes[t->node];
    if (a->an[t->node].ac != ac)
        return; /* a connection since closed: its count was reset */
    node->heard_ms = dlock_now_ms();
    if (node->stale > 0)
        node->stale--;
    if (node->breaker.open && node->stale == 0 && !node->auth_pending && !node->runid_pending)
        dlock__breaker_heard(node);
}

void dlock__around_reply(redisAsyncContext *ac, void *reply_, void *privdata)
{
    dlock__ticket *t = privdata;
    dlock__around *r = t->round;
    const redisReply *reply = reply_;
    dlock__node *node;
    dlock__result *res;
    size_t i = t->node;

    if (r == NULL) {
        owed_reply(ac, reply, t, ac != NULL && ac->data != NULL
                                     ? ((dlock__anode *)ac->data)->a : NULL);
        free(t);
        return;
    }
    node = &r->a->c->nodes[i];
    res = &r->res[i];
    r->ticket[i] = NULL;
    free(t);
    if (reply == NULL) {
        /* The connection went before the answer: with our own refusal or
         * its reason when we closed it, a lost connection otherwise. */
        if (node->same_as != 0) {
            res->status = DLOCK__R_DOWN;
            dlock__detailf(res->detail, "%s", node->same_detail);
        } else if (node->auth_failed) {
            res->status = DLOCK__R_AUTH;
            dlock__detailf(res->detail, "%s", node->auth_detail);
        } else if (ac == NULL) {
            res->status = DLOCK__R_DOWN; /* held back, never sent */
            dlock__detailf(res->detail, "not connected: %s",
                           node->breaker.open ? node->breaker.detail : "closed");
        } else {
            res->status = DLOCK__R_IOERR;
            dlock__detailf(res->detail, "connection lost: %s",
                           ac->errstr[0] != '\0' ? ac->errstr : "closed");
        }
        dlock__rc_failed(&r->core, i);
        dlock__around_mark(r);
        return;
    }
    node->heard_ms = dlock_now_ms();
    {
        const char *refused = dlock__conn_auth_refusal(node, reply);

        if (refused != NULL) {
            res->status = DLOCK__R_AUTH;
            dlock__detailf(res->detail, "%s", refused);
            dlock__rc_replied(&r->core, i);
            /* Closed so the next call authenticates afresh (the password
             * may have been fixed on the server meanwhile). */
            dlock__node_close(node);
            dlock__around_mark(r);
            return;
        }
    }
    res->reply = dlock__async_reply_dup(reply);
    if (res->reply == NULL) {
        res->status = DLOCK__R_IOERR;
        dlock__detailf(res->detail, "out of memory reading the reply");
        dlock__rc_failed(&r->core, i);
    } else {
        res->status = DLOCK__R_REPLY;
        dlock__rc_replied(&r->core, i);
    }
    dlock__around_mark(r);
}


static void detach_tickets(dlock__around *r)
{
    for (size_t i = 0; i < DLOCK_MAX_NODES; i++) {
        if (r->ticket[i] != NULL)
            r->ticket[i]->round = NULL;
        r->ticket[i] = NULL;
    }
}

static void finish(dlock__around *r)
{
    dlock_async *a = r->a;
    dlock_client *c = a->c;
    uint32_t close, again;

    a->loop.timer_stop(r->timer);
    close = dlock__rc_finish(&r->core);
    detach_tickets(r);
    for (size_t i = 0; i < c->n; i++)
        if (close & (1u << i))
            dlock__node_close(&c->nodes[i]);
    again = dlock__script_settle(c, r->call.id, r->mask, r->res);
    if (again != 0 && !r->evals) {
        dlock__script_call_build(c, &r->call, r->call.id, again, 0, r->keys, r->nkeys, r->args,
                                 r->nargs);
        if (r->core.stopped) {
            /* Decided without them: re-cache the script there without
             * waiting, as dlock__script_round. */
            dlock__async_send_only(a, again, r->call.id, r->keys, r->nkeys, r->args, r->nargs);
        } else {
            r->evals = 1;
            r->mask = again;
            r->reach = 0;
            send_round(r, r->core.stop, r->core.stop_arg, r->core.call_deadline_ms);
            return;
        }
    }
    r->done = 1;
    r->on_done(r, r->on_done_arg);
}

void dlock__around_settle(dlock__around *r)
{
    int64_t now;

    if (r->done)
        return;
    dlock__rc_check_stop(&r->core);
    now = dlock_now_ms();
    if (!dlock__rc_waits(&r->core, send_again, r) || now >= r->core.deadline) {
        finish(r);
        return;
    }
    r->a->loop.timer_set(r->timer, r->core.deadline - now);
}

void dlock__around_free(dlock__around *r)
{
    dlock_async *a;

    if (r == NULL)
        return;
    a = r->a;
    detach_tickets(r);
    if (r->dirty) {
        for (dlock__around **p = &a->dirty; *p != NULL; p = &(*p)->next_dirty) {
            if (*p == r) {
                *p = r->next_dirty;
                break;
            }
        }
    }
    a->loop.timer_free(r->timer);
    dlock__results_clear(r->res, DLOCK_MAX_NODES);
    free(r);
}

void dlock__async_cmd_send_only(dlock_async *a, uint32_t mask, int argc, const char **argv,
                                const size_t *argvlen)
{
    dlock_client *c = a->c;

    mask &= dlock__all_nodes(c);
    c->stats.round_trips++;
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        dlock__ticket *t;
        char detail[DLOCK__DETAIL_LEN];

        /* A node without a connection and its breaker open holds nothing
         * of ours but what its TTL removes (as dlock__send_only). */
        if (!(mask & (1u << i)) || (node->state == DLOCK__DOWN && node->breaker.open))
            continue;
        t = calloc(1, sizeof(*t));
        if (t == NULL)
            continue;
        t->node = i;
        if (dlock__anode_send(a, i, t, argc, argv, argvlen, detail) != 0) {
            free(t);
            continue;
        }
        if (dlock__conn_owe(node) && !node->breaker.open)
            dlock__breaker_trip(c, node, DLOCK_ERR_TIMEOUT, "too many replies behind");
    }
}

void dlock__async_send_only(dlock_async *a, uint32_t mask, dlock__script_id id,
                            const char *const *keys, int nkeys, const char *const *args,
                            int nargs)
{
    dlock__script_call call;

    /* EVALSHA could hit NOSCRIPT with nobody reading the reply: the body. */
    dlock__script_call_build(a->c, &call, id, mask, 0, keys, nkeys, args, nargs);
    dlock__async_cmd_send_only(a, mask, call.argc, call.argv, call.argvlen);
}
