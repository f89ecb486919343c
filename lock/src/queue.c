/* queue.c - one node with wake_on_release: waiters queue in arrival order
 * and a release hands the key straight to the oldest live waiter. So the
 * woken waiter holds the lock when its BLPOP returns (scripts enter.lua,
 * pass.lua, leave.lua, described in script.c; the algorithm and its costs
 * in docs/single-instance.md). Redlock's queue, granted only by a quorum's
 * hand-off, is rqueue.c.
 *
 * Per cycle this costs the releaser one round (pass.lua) and a waiter one
 * round to try and list itself (enter.lua) plus its BLPOP; the waiter that
 * is handed the lock needs no round at all.
 *
 * The rules are steps without I/O (protocol.h: what each answer and each
 * wake-up means), driven here by the blocking client and by the event-loop
 * client (async_queue.c). */
#include "protocol.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A deadline far away (INT64_MAX: wait for ever) must not become a PEXPIRE
 * Redis refuses: a listing lasts at most a day (a waiter still waiting
 * then loses its place, not its wait). */
#define QUEUE_MAX_STAY_MS (24 * 3600 * 1000LL)

/* ---- the steps (protocol.h), shared by both clients ---- */

dlock_err dlock__queue_prepare(dlock_client *c, dlock__queue *q, const char *resource,
                               uint32_t ttl_ms, int64_t deadline_ms, char *err)
{
    int64_t span;

    memset(q, 0, sizeof(*q));
    q->resource = resource;
    q->ttl_ms = ttl_ms;
    q->deadline_ms = deadline_ms;
    /* One token per acquire call: a release may hand it the key at any time. */
    if (dlock__token_new(q->token) != 0) {
        dlock__errf(err, "no randomness for the token");
        return DLOCK_ERR_NOMEM;
    }
    if (dlock__pass_prepare(c, resource, q->token, &q->pb) != 0 ||
        dlock__waiter_list(&q->pb, q->token, q->list, sizeof(q->list)) != 0) {
        dlock__errf(err, "key longer than %d bytes", DLOCK_MAX_KEY_LEN);
        return DLOCK_ERR_ARG;
    }
    /* A listing lasts until our deadline plus the hand-off window (time
     * for leave.lua to run): a waiter that died drops out by itself, and
     * a live one never outlives its listing. */
    snprintf(q->ttl_s, sizeof(q->ttl_s), "%" PRIu32, ttl_ms);
    span = deadline_ms - dlock_now_ms();
    if (span > QUEUE_MAX_STAY_MS)
        span = QUEUE_MAX_STAY_MS;
    snprintf(q->stay_s, sizeof(q->stay_s), "%lld", (long long)(span + c->handoff_ms));
    snprintf(q->member, sizeof(q->member), "%s:%s:%s", q->token, q->ttl_s, q->stay_s);
    q->keys[0] = q->pb.key;
    q->keys[1] = q->pb.fkey;
    q->keys[2] = q->pb.waiters;
    q->keys[3] = q->list;
    q->args[0] = q->token;
    q->args[1] = q->ttl_s;
    q->args[2] = q->member;
    q->args[3] = q->stay_s;
    q->args[4] = "0";
    q->leave_args[0] = q->token;
    q->leave_args[1] = q->member;
    return DLOCK_OK;
}

void dlock__queue_entering(dlock__queue *q, unsigned attempt)
{
    /* "1" once an enter.lua has been sent: from then on we may be listed
     * (or were, with an unknown answer) and our list may hold a message,
     * so taking a free key must also drop both. The first enter.lua of a
     * call has a token nobody has seen: the free key costs SET NX + INCR
     * and nothing else, the queue untouched. */
    q->args[4] = attempt > 0 ? "1" : "0";
}

/* The key holds our token: make the handle. base_ms: when the key's TTL
 * started, at the earliest. A key we will not use (validity already spent,
 * no memory for the handle) is passed on at once (q->pass_on), so the
 * next waiter need not wait for it to expire. */
static dlock_err take(dlock_client *c, dlock__queue *q, uint64_t fence, int64_t base_ms,
                      int64_t valid_until_ms, dlock_lock **out, char *err)
{
    dlock__grant g = {q->resource, q->token, fence, q->ttl_ms, base_ms, valid_until_ms, 1};
    dlock_err rc = dlock__lock_grant(c, &g, err, out);

    if (rc != DLOCK_OK) {
        q->pass_on = 1;
        return rc;
    }
    c->stats.acquires++;
    return DLOCK_OK;
}

/* enter.lua and leave.lua answer {1, fence, pttl} when the key holds our
 * token:
 * - pttl -1 when enter.lua has just set it (its TTL started after t0);
 * - else the key's remaining TTL, read by the script after t0: the key
 *   lives at least until t0 + pttl.
 * {0, pttl}: held by another, we are listed. */
dlock_err dlock__queue_answer(dlock_client *c, dlock__queue *q, dlock__script_id id,
                              const dlock__result *r, int64_t t0, int64_t *pttl,
                              dlock_lock **out, char *err)
{
    const redisReply *x = r->reply;
    long long left;

    if (r->status != DLOCK__R_REPLY || x->type != REDIS_REPLY_ARRAY || x->elements < 2 ||
        x->element[0]->type != REDIS_REPLY_INTEGER || x->element[1]->type != REDIS_REPLY_INTEGER)
        return dlock__unavailable(c, r, 1, 0, err);
    if (x->element[0]->integer == 0) {
        *pttl = x->element[1]->integer;
        dlock__errf(err, "\"%s\" is held by another owner", q->resource);
        if (id == DLOCK__SCRIPT_ENTER) {
            /* Listed: any hand-off we are woken for from now on ran after
             * this script, so after t0 (enter.lua dropped older messages).
             * Taken from every such answer, not the first only: a waiter
             * whose listing was removed (a hand-off that expired, FLUSHALL,
             * a restart) and added again is handed keys counted from its
             * new listing. An old instant would make every later hand-off
             * look used up (lock_handoff relisted_waiter_keeps_its_turn). */
            q->listed = 1;
            q->listed_sent_ms = t0;
        }
        return DLOCK_ERR_TAKEN;
    }
    if (x->elements < 3 || x->element[2]->type != REDIS_REPLY_INTEGER || x->element[1]->integer <= 0)
        return dlock__unavailable(c, r, 1, 0, err);
    left = x->element[2]->integer;
    if (left < 0) /* set by this script: the usual TTL - drift from the send time */
        return take(c, q, (uint64_t)x->element[1]->integer, t0,
                    t0 + (int64_t)q->ttl_ms - dlock__drift_ms(c, q->ttl_ms), out, err);
    return take(c, q, (uint64_t)x->element[1]->integer, t0 + left - (int64_t)q->ttl_ms,
                t0 + left - dlock__drift_span_ms(c, left), out, err);
}

int64_t dlock__queue_block_ms(const dlock__queue *q, int64_t pttl, int64_t now)
{
    int64_t block_ms = q->deadline_ms - now;

    /* Never past the holder's key: if it dies without releasing, no
     * hand-off comes, and its expiry is our cue to try again. A PTTL of 0
     * is a key in its last millisecond (a script sees time frozen at its
     * start, so its SET NX still failed): wait 1 ms, not until the
     * deadline. -1, a key without expiry, bounds nothing. */
    if (pttl >= 0 && pttl < block_ms)
        block_ms = pttl > 0 ? pttl : 1;
    if (block_ms > DLOCK__QUEUE_MAX_BLOCK_MS)
        block_ms = DLOCK__QUEUE_MAX_BLOCK_MS;
    return block_ms < 1 ? 1 : block_ms;
}

int dlock__queue_woken(dlock_client *c, dlock__queue *q, const char *msg, dlock_err *rc,
                       dlock_lock **out, char *err)
{
    unsigned long long fence;
    int64_t valid_until;

    if (sscanf(msg, "%llu", &fence) != 1 || fence == 0 || !q->listed) {
        /* Not pass.lua's message: the key may still be ours; the next
         * enter.lua (or leave.lua) finds out. */
        return -1;
    }
    /* Validity of a handed key, on our clock only: pass.lua SET it with
     * our TTL after the enter.lua that last listed us ran (that script
     * dropped any older message), so after listed_sent_ms. The key lives
     * at least until listed_sent_ms + TTL (less drift for the two clocks'
     * rates). Never from Redis TIME: a difference of two readings of the
     * server's wall clock grows by a whole clock step taken between them.
     * A waiter counting from it would hold a key seconds after it expired,
     * while a third client held it too (lock_handoff steps the server's
     * clock for real). Counting from when the BLPOP returned would be
     * later than the SET: unsafe. */
    valid_until = q->listed_sent_ms + (int64_t)q->ttl_ms - dlock__drift_ms(c, q->ttl_ms);
    if (valid_until - dlock_now_ms() < (int64_t)q->ttl_ms / 2) {
        /* Too little left by that bound (the hand-off came long after we
         * were listed): ask the node. The next enter.lua answers the
         * key's own PTTL when the key is ours, which counts from a read
         * after its send time (dlock__queue_answer), so no hand-off is
         * wasted for want of a bound. */
        return 0;
    }
    *rc = take(c, q, fence, q->listed_sent_ms, valid_until, out, err);
    return 1;
}

dlock_err dlock__queue_left(dlock_client *c, dlock__queue *q, const dlock__result *r,
                            int64_t t0, dlock_err rc, dlock_lock **out, char *err)
{
    char why[DLOCK_ERRSTR_LEN];
    int64_t pttl = 0;
    dlock_err left;

    memcpy(why, err, sizeof(why)); /* the caller's error, not leave.lua's */
    left = dlock__queue_answer(c, q, DLOCK__SCRIPT_LEAVE, r, t0, &pttl, out, err);
    if (left == DLOCK_OK || left == DLOCK_ERR_NOMEM)
        return left;
    if (dlock_err_is_unavailable(left))
        q->pass_on = 1;
    memcpy(err, why, sizeof(why));
    return rc;
}

/* ---- the blocking client's driver ---- */

/* The key was ours but is not used: pass.lua, nobody waits for the answer. */
static void pass_if_asked(dlock_client *c, dlock__queue *q)
{
    if (q->pass_on)
        dlock__script_send_only(c, 1, DLOCK__SCRIPT_PASS, q->pb.keys, 3, q->pb.args, 4);
    q->pass_on = 0;
}

/* One script round on the node (keys: lock, fence, waiters, our list). */
static dlock_err script(dlock_client *c, dlock__queue *q, dlock__script_id id, int64_t *pttl,
                        dlock_err rc_before, dlock_lock **out)
{
    dlock__result res[DLOCK_MAX_NODES];
    int64_t t0 = dlock_now_ms();
    int leave = id == DLOCK__SCRIPT_LEAVE;
    dlock_err rc;

    memset(res, 0, sizeof(res));
    dlock__script_round(c, 1, 0, id, q->keys, 4, leave ? q->leave_args : q->args, leave ? 2 : 5,
                        res, NULL, NULL);
    rc = leave ? dlock__queue_left(c, q, &res[0], t0, rc_before, out, c->errstr)
               : dlock__queue_answer(c, q, id, &res[0], t0, pttl, out, c->errstr);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    pass_if_asked(c, q);
    return rc;
}

/* Giving up (deadline, or an error returned to the caller): off the list.
 * If a release handed us the key in the meantime, it is ours (a waiter
 * that walked away from a handed key would leave it locked for a whole
 * TTL). If leave.lua gets no answer (Redis stalled; a release may
 * have handed us the key inside the stall), pass.lua follows it on the
 * same connection without waiting, as the plain path's failed acquire
 * sends its undo. When the node runs them, the key is passed on if it
 * became ours, and nothing happens if it did not (lock_handoff
 * waiter_gives_up_in_a_stall). */
static dlock_err give_up(dlock_client *c, dlock__queue *q, dlock_err rc, dlock_lock **out)
{
    return script(c, q, DLOCK__SCRIPT_LEAVE, NULL, rc, out);
}

/* Blocks (without the mutex) until a release hands us the key, the
 * holder's key runs out (pttl) or the deadline. Returns:
 * - 1 = we hold the lock now (*rc says whether the handle was made);
 * - 0 = no hand-off came, or one came too late for our own bound (the next
 *   enter.lua finds out);
 * - -1 = no wait was possible (no memory, connection failed): back off. */
static int wait_handoff(dlock_client *c, dlock__queue *q, int64_t pttl, dlock_err *rc,
                        dlock_lock **out)
{
    dlock__waker *w = dlock__waker_take(c);
    int64_t block_ms = dlock__queue_block_ms(q, pttl, dlock_now_ms());
    char msgs[DLOCK_MAX_NODES][DLOCK__RQ_MSG_LEN];
    int woke = -1;

    if (w != NULL) {
        dlock__sigpipe_guard g;
        uint32_t got;

        /* A BLPOP an earlier wait left pending is not ours to read. */
        dlock__waker_settle(w);
        pthread_mutex_unlock(&c->mu);
        dlock__sigpipe_block(&g);
        /* Ends at block_ms by our clock, whenever Redis sends its nil (its
         * timer fires up to 1000/hz ms late): the BLPOP stays pending and
         * the next taker settles it. The same wait as Redlock's, on node 0. */
        got = dlock__wake_pop_any(c, w, 1, q->list, block_ms, msgs);
        dlock__sigpipe_restore(&g);
        pthread_mutex_lock(&c->mu);
        /* No connection to block on (the connect failed): no wait at all,
         * the caller backs off rather than spin. */
        woke = got != 0 ? 1 : w->ctx[0] != NULL ? 0 : -1;
    }
    dlock__waker_put(c, w);
    if (woke != 1)
        return woke;
    woke = dlock__queue_woken(c, q, msgs[0], rc, out, c->errstr);
    pass_if_asked(c, q);
    return woke;
}

dlock_err dlock__acquire_queued(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                int64_t deadline_ms, dlock_lock **out)
{
    dlock__queue q;
    unsigned attempt = 0;
    dlock_err rc = dlock__queue_prepare(c, &q, resource, ttl_ms, deadline_ms, c->errstr);

    if (rc != DLOCK_OK)
        return rc;
    for (;;) {
        int64_t pttl = 0, now;

        dlock__count_try(c, attempt);
        dlock__queue_entering(&q, attempt);
        rc = script(c, &q, DLOCK__SCRIPT_ENTER, &pttl, DLOCK_OK, out);
        if (rc == DLOCK_OK || rc == DLOCK_ERR_NOMEM)
            return rc;
        if (rc == DLOCK_ERR_TAKEN)
            c->stats.taken++;
        now = dlock_now_ms();
        if (now >= deadline_ms || !dlock__should_retry(c, rc))
            return give_up(c, &q, rc, out);
        attempt++;
        if (rc == DLOCK_ERR_TAKEN) {
            dlock_err got = DLOCK_ERR_TAKEN;
            int woke = wait_handoff(c, &q, pttl, &got, out);

            if (woke == 1 && (got == DLOCK_OK || got == DLOCK_ERR_NOMEM))
                return got;
            if (woke >= 0)
                continue; /* woken too late for our bound, or the wait ran out: ask again */
        }
        dlock__backoff_sleep(c, attempt, now, deadline_ms);
    }
}
