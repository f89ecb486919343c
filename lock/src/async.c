/* async.c - the event-loop client's calls: acquire (with retry and
 * backoff on loop timers), release, extend, cancel and free. Each call is
 * a small state machine over the protocol core's steps (protocol.h): the
 * same prepare, decide, fence sync, grant and undo as the blocking calls,
 * with rounds driven by async_round.c instead of poll(). */
#include "async_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- the list of calls in flight ---- */

static void op_unlink(dlock_async_op *op)
{
    dlock_async *a = op->a;

    if (op->prev != NULL)
        op->prev->next = op->next;
    else
        a->ops = op->next;
    if (op->next != NULL)
        op->next->prev = op->prev;
    op->prev = op->next = NULL;
}

static void op_free(dlock_async_op *op)
{
    dlock_async *a = op->a;

    dlock__around_free(op->round);
    dlock__around_free(op->acq_round);
    dlock__aqueue_free(op);
    if (op->timer != NULL)
        a->loop.timer_free(op->timer);
    dlock__extend_done(&op->ext);
    for (size_t i = 0; op->names != NULL && i < op->n; i++)
        free(op->names[i]);
    free(op->names);
    free(op->mk);
    free(op->resource);
    free(op);
}

/* The call's one callback. What the callback starts is settled after it
 * returns, and a free it asks for waits for that too (the frame). */
static void op_complete(dlock_async_op *op, dlock_err rc, dlock_lock *lock)
{
    dlock_async *a = op->a;

    op_unlink(op);
    if (rc != DLOCK_OK && op->detail[0] == '\0')
        dlock__errf(op->detail, "%s", dlock_strerror(rc));
    if (rc == DLOCK_OK)
        op->detail[0] = '\0';
    a->depth++;
    if (op->kind == OP_ACQUIRE) {
        if (op->acquire_cb != NULL)
            op->acquire_cb(a, rc, lock, op->detail, op->arg);
        else
            dlock_lock_free(lock);
    } else if (op->done_cb != NULL) {
        op->done_cb(a, rc, op->detail, op->arg);
    }
    a->depth--;
    op_free(op);
    /* Freed from inside the callback, called from the program (a cancel):
     * no frame is left to do it. */
    if (a->depth == 0 && a->free_pending)
        dlock_async_free(a);
}

void dlock__aop_complete(dlock_async_op *op, dlock_err rc, dlock_lock *lock)
{
    op_complete(op, rc, lock);
}

static void on_op_timer(void *arg);

static dlock_async_op *op_new(dlock_async *a, op_kind kind, void *arg)
{
    dlock_async_op *op = calloc(1, sizeof(*op));

    if (op == NULL)
        return NULL;
    op->a = a;
    op->kind = kind;
    op->arg = arg;
    op->timer = a->loop.timer_new(a->loop.loop, on_op_timer, op);
    if (op->timer == NULL) {
        free(op);
        return NULL;
    }
    op->next = a->ops;
    if (a->ops != NULL)
        a->ops->prev = op;
    a->ops = op;
    return op;
}

/* A completion decided inside a call from the program: delivered from the
 * loop, so that no callback runs inside the call that started it. */
static void op_complete_later(dlock_async_op *op, dlock_err rc)
{
    op->pending_rc = rc;
    op->a->loop.timer_set(op->timer, 0);
}

/* ---- acquire ---- */

static void attempt_start(dlock_async_op *op);

/* The undo of the attempt in flight when it ends as rc (CANCELLED: a grant
 * given up), by the protocol core's rule for one resource or several. */
static void attempt_undo(dlock_async_op *op, dlock_err rc)
{
    dlock_async *a = op->a;
    uint32_t undo;

    if (op->n > 0) {
        undo = dlock__multi_undo_mask(&op->ma, rc);
        if (undo != 0)
            dlock__async_send_only(a, undo, DLOCK__SCRIPT_MULTI_RELEASE, op->mk->keys,
                                   (int)(3 * op->n), op->mk->args, (int)(3 + op->n));
        return;
    }
    undo = dlock__attempt_undo_mask(a->c, &op->att, rc);
    if (undo != 0)
        dlock__async_send_only(a, undo, DLOCK__SCRIPT_PASS, op->att.undo.keys, 3,
                               op->att.undo.args, 4);
}

/* Granted while being cancelled: handed on at once (pass.lua or
 * multi_release.lua, token-checked), never left to its TTL. */
static void hand_on_grant(dlock_async_op *op, dlock_lock *lock)
{
    attempt_undo(op, DLOCK_ERR_CANCELLED);
    dlock_lock_free(lock);
}

static void acquire_finish(dlock_async_op *op, dlock_err rc, dlock_lock *lock)
{
    dlock_async *a = op->a;
    dlock_client *c = a->c;
    int64_t now;

    /* Redlock step 5, as the blocking attempt: the undo of a failed one. */
    attempt_undo(op, rc);
    dlock__acquire_count_attempt(c, op->attempt, rc);
    dlock__around_free(op->acq_round);
    op->acq_round = NULL;
    if (op->cancelled) {
        if (rc == DLOCK_OK)
            hand_on_grant(op, lock);
        dlock__aop_end_acquire(op, rc, NULL);
        return;
    }
    now = dlock_now_ms();
    if (rc == DLOCK_OK || !dlock__should_retry(c, rc) || now >= op->deadline_ms) {
        dlock__aop_end_acquire(op, rc, lock);
        return;
    }
    /* Between attempts: the blocking client's backoff, on a loop timer. */
    dlock__aop_back_off(op, op->attempt);
    op->attempt++;
}

void dlock__aop_end_acquire(dlock_async_op *op, dlock_err rc, dlock_lock *lock)
{
    if (op->cancelled) {
        dlock_lock_free(lock);
        dlock__errf(op->detail, "acquire \"%s\": cancelled", op->resource);
        op_complete(op, DLOCK_ERR_CANCELLED, NULL);
        return;
    }
    dlock__acquire_count_call(op->a->c, rc);
    op_complete(op, rc, lock);
}

void dlock__aop_back_off(dlock_async_op *op, unsigned attempt)
{
    int64_t wait = dlock__backoff_ms(op->a->c, attempt);
    int64_t left = op->deadline_ms - dlock_now_ms();

    op->a->loop.timer_set(op->timer, wait < left ? wait : left > 0 ? left : 0);
}

static void sync_done(dlock__around *r, void *arg)
{
    dlock_async_op *op = arg;
    dlock_client *c = op->a->c;
    dlock__result *res = op->acq_round->res;
    dlock_lock *lock = NULL;
    dlock_err rc;

    /* The sync's answers take the lagging nodes' places among the
     * acquire's, as in the blocking attempt's one array. */
    for (size_t i = 0; i < c->n; i++) {
        if (!(op->lagging & (1u << i)))
            continue;
        dlock__results_clear(&res[i], 1);
        res[i] = r->res[i];
        r->res[i].reply = NULL;
    }
    op->round = NULL;
    dlock__around_free(r);
    rc = op->n > 0 ? dlock__multi_grant(c, &op->ma, op->lagging, res, &lock, op->detail)
                   : dlock__attempt_grant(c, &op->att, op->lagging, res, &lock, op->detail);
    acquire_finish(op, rc, lock);
}

static void acquire_done(dlock__around *r, void *arg)
{
    dlock_async_op *op = arg;
    dlock_async *a = op->a;
    dlock_client *c = a->c;
    dlock_lock *lock = NULL;
    dlock_err rc;

    op->round = NULL;
    op->acq_round = r;
    rc = op->n > 0 ? dlock__multi_decide(c, &op->ma, r->res, &op->lagging, op->detail)
                   : dlock__attempt_decide(c, &op->att, r->res, &op->lagging, op->detail);
    if (rc == DLOCK_OK && op->lagging != 0) {
        if (op->n > 0)
            op->round = dlock__around_start(a, op->lagging, 0, DLOCK__SCRIPT_MULTI_FENCE_SYNC,
                                            op->mk->keys + op->n, (int)op->n, op->ma.sync_args,
                                            (int)op->n, NULL, NULL, op->call_deadline_ms,
                                            sync_done, op);
        else
            op->round = dlock__around_start(a, op->lagging, 0, DLOCK__SCRIPT_FENCE_SYNC,
                                            (const char *const *)&op->att.keys[1], 1,
                                            op->att.sync_args, 1, NULL, NULL,
                                            op->call_deadline_ms, sync_done, op);
        if (op->round != NULL)
            return;
        dlock__errf(op->detail, "out of memory for the fence sync round");
        rc = DLOCK_ERR_NOMEM;
    } else if (rc == DLOCK_OK) {
        rc = op->n > 0 ? dlock__multi_grant(c, &op->ma, 0, r->res, &lock, op->detail)
                       : dlock__attempt_grant(c, &op->att, 0, r->res, &lock, op->detail);
    }
    acquire_finish(op, rc, lock);
}

static void attempt_start(dlock_async_op *op)
{
    dlock_async *a = op->a;
    dlock_client *c = a->c;
    dlock_err rc;

    op->detail[0] = '\0';
    if (op->n > 0) {
        rc = dlock__multi_prepare(c, &op->ma, (const char *const *)op->names, op->n, op->ttl_ms,
                                  op->mk, op->detail);
        if (rc == DLOCK_OK)
            op->round = dlock__around_start(a, dlock__all_nodes(c), 0,
                                            DLOCK__SCRIPT_MULTI_ACQUIRE, op->mk->keys,
                                            (int)(2 * op->n), op->ma.args, 2,
                                            dlock__multi_decided, &op->ma.dq,
                                            op->call_deadline_ms, acquire_done, op);
    } else {
        rc = dlock__attempt_prepare(c, &op->att, op->resource, op->ttl_ms, op->detail);
        if (rc == DLOCK_OK)
            op->round = dlock__around_start(a, dlock__all_nodes(c), 0, DLOCK__SCRIPT_ACQUIRE,
                                            op->att.keys, 2, op->att.args, 2,
                                            dlock__attempt_decided, &c->quorum,
                                            op->call_deadline_ms, acquire_done, op);
    }
    if (rc == DLOCK_OK && op->round != NULL)
        return;
    if (rc == DLOCK_OK) {
        dlock__errf(op->detail, "out of memory for the acquire round");
        rc = DLOCK_ERR_NOMEM;
    }
    acquire_finish(op, rc, NULL);
}

static void on_op_timer(void *arg)
{
    dlock_async_op *op = arg;
    dlock_async *a = op->a;

    dlock__async_enter(a);
    if (op->pending_rc != DLOCK_OK)
        op_complete(op, op->pending_rc, NULL);
    else if (dlock__aqueue_wanted(op))
        dlock__aqueue_step(op); /* one node, waking: the queue (async_queue.c) */
    else
        attempt_start(op);
    dlock__async_leave(a);
}

/* The common start of an acquire: its deadlines, then the first attempt
 * from the loop (a failure found at once still reaches cb later, never
 * inside the call that started it). */
static void acquire_begin(dlock_async_op *op, dlock_async_acquire_cb cb, uint32_t ttl_ms,
                          int64_t deadline_ms, dlock_async_op **out)
{
    int64_t now = dlock_now_ms();

    op->acquire_cb = cb;
    op->ttl_ms = ttl_ms;
    op->deadline_ms = deadline_ms;
    /* As dlock__call_begin: a try's rounds are bounded by now. */
    op->call_deadline_ms = deadline_ms > now ? deadline_ms : now;
    op->a->loop.timer_set(op->timer, 0);
    if (out != NULL)
        *out = op;
}

/* Out of memory making the call: undone, said in the client's errstr. */
static dlock_err call_nomem(dlock_async *a, dlock_async_op *op, const char *what)
{
    if (op != NULL) {
        op_unlink(op);
        op_free(op);
    }
    dlock__errf(a->c->errstr, "%s: out of memory", what);
    return DLOCK_ERR_NOMEM;
}

dlock_err dlock_async_acquire(dlock_async *a, const char *resource, uint32_t ttl_ms,
                              int64_t deadline_ms, dlock_async_acquire_cb cb, void *arg,
                              dlock_async_op **out)
{
    dlock_async_op *op;

    if (out != NULL)
        *out = NULL;
    if (a == NULL)
        return DLOCK_ERR_ARG;
    if (dlock__acquire_check(a->c, resource, ttl_ms, deadline_ms) != 0)
        return DLOCK_ERR_ARG;
    op = op_new(a, OP_ACQUIRE, arg);
    if (op == NULL || (op->resource = strdup(resource)) == NULL)
        return call_nomem(a, op, "acquire");
    acquire_begin(op, cb, ttl_ms, deadline_ms, out);
    return DLOCK_OK;
}

dlock_err dlock_async_acquire_multi(dlock_async *a, const char *const *resources, size_t n,
                                    uint32_t ttl_ms, int64_t deadline_ms,
                                    dlock_async_acquire_cb cb, void *arg, dlock_async_op **out)
{
    dlock_async_op *op;

    if (out != NULL)
        *out = NULL;
    if (a == NULL)
        return DLOCK_ERR_ARG;
    a->c->errstr[0] = '\0';
    if (dlock__names_check(a->c, "acquire_multi", resources, n, ttl_ms) != 0 ||
        dlock__deadline_check(deadline_ms, "dlock_async_acquire_multi", a->c->errstr) != 0)
        return DLOCK_ERR_ARG;
    op = op_new(a, OP_ACQUIRE, arg);
    if (op == NULL || (op->names = calloc(n, sizeof(*op->names))) == NULL)
        return call_nomem(a, op, "acquire_multi");
    for (; op->n < n; op->n++) {
        op->names[op->n] = strdup(resources[op->n]);
        if (op->names[op->n] == NULL)
            return call_nomem(a, op, "acquire_multi");
    }
    op->resource = strdup(resources[0]);
    op->mk = dlock__multi_keys_new(a->c, resources, n, NULL);
    if (op->resource == NULL || op->mk == NULL)
        return call_nomem(a, op, "acquire_multi");
    acquire_begin(op, cb, ttl_ms, deadline_ms, out);
    return DLOCK_OK;
}

dlock_err dlock_async_acquire_multi_for(dlock_async *a, const char *const *resources, size_t n,
                                        uint32_t ttl_ms, int64_t wait_ms,
                                        dlock_async_acquire_cb cb, void *arg,
                                        dlock_async_op **op)
{
    return dlock_async_acquire_multi(a, resources, n, ttl_ms, dlock__deadline_after(wait_ms), cb,
                                     arg, op);
}

dlock_err dlock_async_try_acquire(dlock_async *a, const char *resource, uint32_t ttl_ms,
                                  dlock_async_acquire_cb cb, void *arg, dlock_async_op **op)
{
    return dlock_async_acquire(a, resource, ttl_ms, INT64_MIN, cb, arg, op);
}

dlock_err dlock_async_acquire_for(dlock_async *a, const char *resource, uint32_t ttl_ms,
                                  int64_t wait_ms, dlock_async_acquire_cb cb, void *arg,
                                  dlock_async_op **op)
{
    return dlock_async_acquire(a, resource, ttl_ms, dlock__deadline_after(wait_ms), cb, arg, op);
}

int dlock_async_cancel(dlock_async *a, dlock_async_op *op)
{
    dlock_async_op *p;

    if (a == NULL || op == NULL)
        return 0;
    for (p = a->ops; p != NULL && p != op; p = p->next)
        ;
    if (p == NULL || op->kind != OP_ACQUIRE || op->cancelled)
        return 0;
    if (op->q != NULL || op->rq != NULL)
        return dlock__aqueue_cancel(op);
    if (op->round != NULL) {
        /* Mid-round: what the round grants is handed on when it ends. */
        op->cancelled = 1;
        return 1;
    }
    /* Before its first round or between attempts: nothing of ours is on
     * any node (the failed attempt's undo went out already). */
    a->loop.timer_stop(op->timer);
    op->cancelled = 1;
    dlock__aop_end_acquire(op, DLOCK_ERR_CANCELLED, NULL);
    return 1;
}

/* ---- release ---- */

static void release_done(dlock__around *r, void *arg)
{
    dlock_async_op *op = arg;
    dlock_client *c = op->a->c;
    uint32_t ones = 0, zeros = 0, unknown;
    dlock_err rc;

    op->round = NULL;
    /* As dlock__release_round: a single node that did not answer may yet
     * answer NOSCRIPT, so the body goes behind it. */
    unknown = dlock__release_unanswered(c, dlock__all_nodes(c), r->res);
    if (unknown != 0 && op->mk != NULL)
        dlock__async_send_only(op->a, unknown, DLOCK__SCRIPT_MULTI_RELEASE, op->mk->keys,
                               (int)(3 * op->mk->n), op->mk->args, (int)(3 + op->mk->n));
    else if (unknown != 0)
        dlock__async_send_only(op->a, unknown, DLOCK__SCRIPT_PASS, op->pass.keys, 3,
                               op->pass.args, 4);
    dlock__count_int(r->res, c->n, 1, &ones);
    dlock__count_int(r->res, c->n, 0, &zeros);
    rc = dlock__release_outcome(c, op->lock, ones, zeros, r->res, op->detail);
    dlock__around_free(r);
    op_complete(op, rc, NULL);
}

dlock_err dlock_async_release(dlock_async *a, dlock_lock *lock, dlock_async_done_cb cb,
                              void *arg)
{
    dlock_client *c;
    dlock_async_op *op;

    if (a == NULL)
        return DLOCK_ERR_ARG;
    c = a->c;
    c->errstr[0] = '\0';
    if (dlock__release_ready(c, lock, "release", c->errstr) != 0)
        return DLOCK_ERR_ARG;
    op = op_new(a, OP_RELEASE, arg);
    if (op == NULL) {
        dlock__errf(c->errstr, "release: out of memory");
        return DLOCK_ERR_NOMEM;
    }
    if (lock->multi != NULL) {
        op->mk = dlock__multi_keys_new(c, (const char *const *)lock->multi->names,
                                       lock->multi->n, lock->token);
        if (op->mk == NULL)
            return call_nomem(a, op, "release");
    } else if (dlock__pass_prepare(c, lock->resource, lock->token, &op->pass) != 0) {
        op_unlink(op);
        op_free(op);
        dlock__errf(c->errstr, "release: key longer than %d bytes", DLOCK_MAX_KEY_LEN);
        return DLOCK_ERR_ARG;
    }
    op->done_cb = cb;
    op->lock = lock;
    op->call_deadline_ms = INT64_MAX;
    dlock__release_mark(c, lock);
    /* As dlock_release: pass.lua for one key, multi_release.lua for a set
     * (every key still ours handed to its waiter or deleted, in one step). */
    if (op->mk != NULL)
        op->round = dlock__around_start(a, dlock__all_nodes(c), lock->may_hold,
                                        DLOCK__SCRIPT_MULTI_RELEASE, op->mk->keys,
                                        (int)(3 * op->mk->n), op->mk->args,
                                        (int)(3 + op->mk->n), dlock__release_decided,
                                        &c->quorum, INT64_MAX, release_done, op);
    else
        op->round = dlock__around_start(a, dlock__all_nodes(c), lock->may_hold,
                                        DLOCK__SCRIPT_PASS, op->pass.keys, 3, op->pass.args, 4,
                                        dlock__quorum_of_ones, &c->quorum, INT64_MAX,
                                        release_done, op);
    if (op->round == NULL) {
        dlock__errf(op->detail, "release: out of memory for the round");
        op_complete_later(op, DLOCK_ERR_NOMEM);
    }
    return DLOCK_OK;
}

/* ---- extend ---- */

static void extend_done(dlock__around *r, void *arg)
{
    dlock_async_op *op = arg;
    dlock_client *c = op->a->c;
    dlock_err rc;

    op->round = NULL;
    rc = dlock__extend_decide(c, op->lock, &op->ext, r->res, op->detail);
    if (rc == DLOCK_ERR_LOST && dlock__extend_undo(c, op->lock, &op->ext))
        dlock__async_send_only(op->a, op->ext.undo_mask, op->ext.undo_id, op->ext.undo_keys,
                               op->ext.undo_nkeys, op->ext.undo_args, op->ext.undo_nargs);
    dlock__around_free(r);
    op_complete(op, rc, NULL);
}

dlock_err dlock_async_extend(dlock_async *a, dlock_lock *lock, uint32_t ttl_ms,
                             dlock_async_done_cb cb, void *arg)
{
    dlock_client *c;
    dlock_async_op *op;
    dlock_err rc;

    if (a == NULL)
        return DLOCK_ERR_ARG;
    c = a->c;
    c->errstr[0] = '\0';
    if (lock == NULL) {
        dlock__errf(c->errstr, "extend: lock is NULL");
        return DLOCK_ERR_ARG;
    }
    if (dlock__ttl_check(ttl_ms, "extend", c->errstr) != 0 ||
        dlock__check_owner(c, lock, "extend", c->errstr) != 0)
        return DLOCK_ERR_ARG;
    op = op_new(a, OP_EXTEND, arg);
    if (op == NULL) {
        dlock__errf(c->errstr, "extend: out of memory");
        return DLOCK_ERR_NOMEM;
    }
    op->done_cb = cb;
    op->lock = lock;
    rc = dlock__extend_prepare(c, lock, ttl_ms, &op->ext, op->detail);
    if (rc != DLOCK_OK) {
        op_complete_later(op, rc);
        return DLOCK_OK;
    }
    op->round = dlock__around_start(a, dlock__all_nodes(c), 0, op->ext.id, op->ext.keys,
                                    op->ext.nkeys, op->ext.args, 2, dlock__quorum_of_ones,
                                    &c->quorum, INT64_MAX, extend_done, op);
    if (op->round == NULL) {
        dlock__errf(op->detail, "extend: out of memory for the round");
        op_complete_later(op, DLOCK_ERR_NOMEM);
    }
    return DLOCK_OK;
}

/* ---- the client ---- */

static void on_kick(void *arg)
{
    dlock_async *a = arg;

    dlock__async_enter(a);
    dlock__async_leave(a);
}

dlock_err dlock_async_new(const dlock_options *opts, const dlock_loop *loop, dlock_async **out,
                          char *errbuf, size_t errbuf_len)
{
    dlock_async *a;
    dlock_err rc;

    if (out != NULL)
        *out = NULL;
    if (out == NULL || loop == NULL || loop->watch_new == NULL || loop->watch_set == NULL ||
        loop->watch_free == NULL || loop->timer_new == NULL || loop->timer_set == NULL ||
        loop->timer_stop == NULL || loop->timer_free == NULL) {
        if (errbuf != NULL && errbuf_len > 0)
            snprintf(errbuf, errbuf_len, "dlock_async_new: %s",
                     out == NULL ? "out is NULL" : "the loop or one of its hooks is NULL");
        return DLOCK_ERR_ARG;
    }
    a = calloc(1, sizeof(*a));
    if (a == NULL) {
        if (errbuf != NULL && errbuf_len > 0)
            snprintf(errbuf, errbuf_len, "out of memory");
        return DLOCK_ERR_NOMEM;
    }
    a->loop = *loop;
    rc = dlock__client_make(opts, 0, &a->c, errbuf, errbuf_len);
    if (rc != DLOCK_OK) {
        free(a);
        return rc;
    }
    for (size_t i = 0; i < a->c->n; i++) {
        if (a->c->nodes[i].addr.is_sentinel) {
            if (errbuf != NULL && errbuf_len > 0)
                snprintf(errbuf, errbuf_len,
                         "%s: sentinel:// addresses are not supported by the event-loop client "
                         "yet; give the masters' addresses, or use dlock_client_new",
                         a->c->nodes[i].addr.text);
            dlock_async_free(a);
            return DLOCK_ERR_ARG;
        }
    }
    a->kick = loop->timer_new(loop->loop, on_kick, a);
    if (a->kick != NULL && dlock__async_renew_init(a) != 0) {
        loop->timer_free(a->kick);
        a->kick = NULL;
    }
    for (size_t i = 0; a->kick != NULL && i < a->c->n; i++) {
        if (dlock__anode_init(a, i) != 0) {
            loop->timer_free(a->kick);
            a->kick = NULL;
        }
    }
    if (a->kick == NULL) {
        if (errbuf != NULL && errbuf_len > 0)
            snprintf(errbuf, errbuf_len, "out of memory for the loop's timers");
        dlock_async_free(a);
        return DLOCK_ERR_NOMEM;
    }
    *out = a;
    return DLOCK_OK;
}

/* Pushes what the client has queued to the sockets once, without waiting:
 * the hand-overs of cancelled acquires leave before the connections close. */
static void flush_writes(dlock_async *a)
{
    for (size_t i = 0; i < a->c->n; i++) {
        if (a->an[i].ac != NULL && a->an[i].connected)
            redisAsyncHandleWrite(a->an[i].ac);
    }
}

void dlock_async_free(dlock_async *a)
{
    if (a == NULL || a->freeing)
        return;
    if (a->depth > 0) {
        a->free_pending = 1;
        return;
    }
    a->freeing = 1;
    a->depth++; /* nothing below settles or frees behind our back */
    while (a->ops != NULL) {
        dlock_async_op *op = a->ops;

        if (op->q != NULL || op->rq != NULL) {
            dlock__aqueue_abandon(op);
        } else if (op->kind == OP_ACQUIRE && op->round != NULL) {
            /* Its keys may land anywhere: the token-checked hand-over to
             * every node (the undo's rule, as if every node had set it). */
            op->att.ok_mask = op->ma.ok_mask = dlock__all_nodes(a->c);
            attempt_undo(op, DLOCK_ERR_CANCELLED);
        }
        dlock__around_free(op->round);
        op->round = NULL;
        a->loop.timer_stop(op->timer);
        if (op->detail[0] == '\0' || op->kind == OP_ACQUIRE)
            dlock__errf(op->detail, "cancelled: the client was freed");
        op_complete(op, DLOCK_ERR_CANCELLED, NULL);
    }
    dlock__async_renew_free(a);
    flush_writes(a);
    dlock__anodes_free(a);
    dlock__awakers_free(a);
    a->dirty = NULL;
    if (a->kick != NULL)
        a->loop.timer_free(a->kick);
    dlock_client_free(a->c);
    free(a);
}

void dlock_async_stats(dlock_async *a, dlock_stats *out)
{
    if (a == NULL || out == NULL)
        return;
    *out = a->c->stats;
}
