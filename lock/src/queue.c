/* queue.c - one node with wake_on_release: waiters queue in arrival order
 * and a release hands the key straight to the oldest live waiter, so the
 * woken waiter holds the lock when its BLPOP returns (scripts enter.lua,
 * pass.lua, leave.lua, described in script.c; the algorithm and its costs
 * in docs/single-instance.md). Redlock's queue, granted only by a quorum's
 * hand-off, is rqueue.c.
 *
 * Per cycle this costs the releaser one round (pass.lua) and a waiter one
 * round to try and list itself (enter.lua) plus its BLPOP; the waiter that
 * is handed the lock needs no round at all. */
#include "dlock_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A deadline far away (INT64_MAX: wait for ever) must not become a PEXPIRE
 * or BLPOP timeout Redis refuses: a listing lasts at most a day (a waiter
 * still waiting then loses its place, not its wait), a BLPOP an hour. */
#define QUEUE_MAX_STAY_MS (24 * 3600 * 1000LL)
#define QUEUE_MAX_BLOCK_MS (3600 * 1000LL)

typedef struct queue_run {
    dlock_client *c;
    const char *resource;
    uint32_t ttl_ms;
    int64_t deadline_ms;
    char token[DLOCK_TOKEN_LEN]; /* one per dlock_acquire call: a release may hand it the key at any time */
    char ttl_s[16], stay_s[24];
    char member[DLOCK_TOKEN_LEN + 48]; /* "<token>:<ttl>:<stay ms>" in the waiters set */
    char list[DLOCK__KEY_BUF + 48];    /* our own list: P "waiter:" token ":" R */
    dlock__pass_buf pb;                /* lock, fence and waiters keys; pass.lua's arguments */
    const char *keys[4];
    int listed;              /* an enter.lua answered "held, you are listed": listed_sent_ms is set */
    int64_t listed_sent_ms;  /* when the last such enter.lua was sent (our monotonic clock) */
} queue_run;

static int64_t drift_of(const dlock_client *c, int64_t span_ms)
{
    return dlock__drift_ms(c, span_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)(span_ms > 0 ? span_ms : 0));
}

/* The key is ours but we will not use it (validity already spent, no
 * memory for the handle): pass it on at once, so the next waiter need not
 * wait for it to expire. Nobody waits for the answer. */
static void pass_on(queue_run *q)
{
    dlock__script_send_only(q->c, 1, DLOCK__SCRIPT_PASS, q->pb.keys, 3, q->pb.args, 4);
}

/* The key holds our token: make the handle. base_ms: when the key's TTL
 * started, at the earliest. */
static dlock_err take(queue_run *q, uint64_t fence, int64_t base_ms, int64_t valid_until_ms,
                      dlock_lock **out)
{
    dlock__grant g = {q->resource, q->token, fence, q->ttl_ms, base_ms, valid_until_ms, 1};
    dlock_err rc = dlock__lock_grant(q->c, &g, q->c->errstr, out);

    if (rc != DLOCK_OK) {
        pass_on(q); /* used up or no memory: the next waiter need not wait for its expiry */
        return rc;
    }
    q->c->stats.acquires++;
    return DLOCK_OK;
}

/* enter.lua and leave.lua answer {1, fence, pttl} when the key holds our
 * token: pttl -1 when enter.lua has just set it (its TTL started after t0),
 * else the key's remaining TTL, read by the script after t0: the key lives
 * at least until t0 + pttl. {0, pttl}: held by another, we are listed. */
static dlock_err took_or_listed(queue_run *q, const dlock__result *r, int64_t t0, int64_t *pttl,
                                dlock_lock **out)
{
    const redisReply *x = r->reply;
    long long left;

    if (r->status != DLOCK__R_REPLY || x->type != REDIS_REPLY_ARRAY || x->elements < 2 ||
        x->element[0]->type != REDIS_REPLY_INTEGER || x->element[1]->type != REDIS_REPLY_INTEGER)
        return dlock__unavailable(q->c, r, 1, 0, q->c->errstr);
    if (x->element[0]->integer == 0) {
        *pttl = x->element[1]->integer;
        dlock__errf(q->c->errstr, "\"%s\" is held by another owner", q->resource);
        return DLOCK_ERR_TAKEN;
    }
    if (x->elements < 3 || x->element[2]->type != REDIS_REPLY_INTEGER || x->element[1]->integer <= 0)
        return dlock__unavailable(q->c, r, 1, 0, q->c->errstr);
    left = x->element[2]->integer;
    if (left < 0) /* set by this script: the usual TTL - drift from the send time */
        return take(q, (uint64_t)x->element[1]->integer, t0,
                    t0 + (int64_t)q->ttl_ms - drift_of(q->c, q->ttl_ms), out);
    return take(q, (uint64_t)x->element[1]->integer, t0 + left - (int64_t)q->ttl_ms,
                t0 + left - drift_of(q->c, left), out);
}

/* One script round on the node (keys: lock, fence, waiters, our list). */
static dlock_err script(queue_run *q, dlock__script_id id, const char *const *args, int nargs,
                        int64_t *pttl, dlock_lock **out)
{
    dlock__result res[DLOCK_MAX_NODES];
    int64_t t0 = dlock_now_ms();
    dlock_err rc;

    memset(res, 0, sizeof(res));
    dlock__script_round(q->c, 1, 0, id, q->keys, 4, args, nargs, res, NULL, NULL);
    rc = took_or_listed(q, &res[0], t0, pttl, out);
    if (id == DLOCK__SCRIPT_ENTER && rc == DLOCK_ERR_TAKEN) {
        /* Listed: any hand-off we are woken for from now on ran after this
         * script, so after t0 (enter.lua dropped older messages). Taken
         * from every such answer, not the first only: a waiter whose
         * listing was removed (a hand-off that expired, FLUSHALL, a
         * restart) and added again is handed keys counted from its new
         * listing, and an old instant would make every later hand-off look
         * used up (lock_handoff relisted_waiter_keeps_its_turn). */
        q->listed = 1;
        q->listed_sent_ms = t0;
    }
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return rc;
}

/* Giving up (deadline, or an error returned to the caller): off the list,
 * and if a release handed us the key in the meantime, it is ours (a
 * waiter that walked away from a handed key would leave it locked for a
 * whole TTL). If leave.lua gets no answer (Redis stalled; a release may
 * have handed us the key inside the stall), pass.lua follows it on the
 * same connection without waiting, as the plain path's failed acquire
 * sends its undo. When the node runs them, the key is passed on if it
 * became ours, and nothing happens if it did not (lock_handoff
 * waiter_gives_up_in_a_stall). */
static dlock_err give_up(queue_run *q, dlock_err rc, dlock_lock **out)
{
    const char *args[2] = {q->token, q->member};
    char why[DLOCK_ERRSTR_LEN];
    int64_t pttl = 0;
    dlock_err left;

    memcpy(why, q->c->errstr, sizeof(why)); /* the caller's error, not leave.lua's */
    left = script(q, DLOCK__SCRIPT_LEAVE, args, 2, &pttl, out);
    if (left == DLOCK_OK || left == DLOCK_ERR_NOMEM)
        return left;
    if (dlock_err_is_unavailable(left))
        pass_on(q);
    memcpy(q->c->errstr, why, sizeof(why));
    return rc;
}

/* Blocks (without the mutex) until a release hands us the key, the
 * holder's key runs out (pttl) or the deadline. 1 = we hold the lock now
 * (*rc says whether the handle was made), 0 = no hand-off came, or one
 * came too late for our own bound (the next enter.lua finds out), -1 = no
 * wait was possible (no memory, connection failed): back off. */
static int wait_handoff(queue_run *q, int64_t pttl, dlock_err *rc, dlock_lock **out)
{
    dlock_client *c = q->c;
    dlock__waker *w = dlock__waker_take(c);
    int64_t block_ms = q->deadline_ms - dlock_now_ms();
    char msgs[DLOCK_MAX_NODES][DLOCK__RQ_MSG_LEN];
    const char *msg = msgs[0];
    unsigned long long fence;
    int64_t valid_until;
    int woke = -1;

    /* Never past the holder's key: if it dies without releasing, no
     * hand-off comes, and its expiry is our cue to try again. */
    /* A PTTL of 0 is a key in its last millisecond (a script sees time
     * frozen at its start, so its SET NX still failed): wait 1 ms, not
     * until the deadline. -1, a key without expiry, bounds nothing. */
    if (pttl >= 0 && pttl < block_ms)
        block_ms = pttl > 0 ? pttl : 1;
    if (block_ms > QUEUE_MAX_BLOCK_MS)
        block_ms = QUEUE_MAX_BLOCK_MS;
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
    if (sscanf(msg, "%llu", &fence) != 1 || fence == 0 || !q->listed) {
        /* Not pass.lua's message: the key may still be ours; the next
         * enter.lua (or leave.lua) finds out. */
        return -1;
    }
    /* Validity of a handed key, on our clock only: pass.lua SET it with
     * our TTL after the enter.lua that last listed us ran (that script
     * dropped any older message), so after listed_sent_ms, and the key
     * lives at least until listed_sent_ms + TTL (less drift for the two
     * clocks' rates). Never from Redis TIME: a difference of two readings
     * of the server's wall clock grows by a whole clock step taken between
     * them, and a waiter counting from it would hold a key seconds after
     * it expired, while a third client held it too (lock_handoff steps the
     * server's clock for real). Counting from when the BLPOP returned
     * would be later than the SET: unsafe. */
    valid_until = q->listed_sent_ms + (int64_t)q->ttl_ms - drift_of(c, q->ttl_ms);
    if (valid_until - dlock_now_ms() < (int64_t)q->ttl_ms / 2) {
        /* Too little left by that bound (the hand-off came long after we
         * were listed): ask the node. The next enter.lua answers the
         * key's own PTTL when the key is ours, which counts from a read
         * after its send time (took_or_listed), so no hand-off is wasted
         * for want of a bound. */
        return 0;
    }
    *rc = take(q, fence, q->listed_sent_ms, valid_until, out);
    return 1;
}

dlock_err dlock__acquire_queued(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                int64_t deadline_ms, dlock_lock **out)
{
    queue_run q;
    const char *args[5];
    unsigned attempt = 0;
    int64_t span;

    memset(&q, 0, sizeof(q));
    q.c = c;
    q.resource = resource;
    q.ttl_ms = ttl_ms;
    q.deadline_ms = deadline_ms;
    if (dlock__token_new(q.token) != 0) {
        dlock__errf(c->errstr, "no randomness for the token");
        return DLOCK_ERR_NOMEM;
    }
    if (dlock__pass_prepare(c, resource, q.token, &q.pb) != 0 ||
        dlock__waiter_list(&q.pb, q.token, q.list, sizeof(q.list)) != 0) {
        dlock__errf(c->errstr, "key longer than %d bytes", DLOCK_MAX_KEY_LEN);
        return DLOCK_ERR_ARG;
    }
    /* A listing lasts until our deadline plus the hand-off window (time
     * for leave.lua to run): a waiter that died drops out by itself, and
     * a live one never outlives its listing. */
    snprintf(q.ttl_s, sizeof(q.ttl_s), "%" PRIu32, ttl_ms);
    span = deadline_ms - dlock_now_ms();
    if (span > QUEUE_MAX_STAY_MS)
        span = QUEUE_MAX_STAY_MS;
    snprintf(q.stay_s, sizeof(q.stay_s), "%lld", (long long)(span + c->handoff_ms));
    snprintf(q.member, sizeof(q.member), "%s:%s:%s", q.token, q.ttl_s, q.stay_s);
    q.keys[0] = q.pb.key;
    q.keys[1] = q.pb.fkey;
    q.keys[2] = q.pb.waiters;
    q.keys[3] = q.list;
    args[0] = q.token;
    args[1] = q.ttl_s;
    args[2] = q.member;
    args[3] = q.stay_s;
    /* "1" once an enter.lua has been sent: from then on we may be listed
     * (or were, with an unknown answer) and our list may hold a message,
     * so taking a free key must also drop both. The first enter.lua of a
     * call has a token nobody has seen: the free key costs SET NX + INCR
     * and nothing else, the queue untouched. */
    args[4] = "0";

    for (;;) {
        int64_t pttl = 0, now;
        dlock_err rc;

        c->stats.attempts++;
        if (attempt > 0)
            c->stats.retries++;
        if (attempt > 0)
            args[4] = "1";
        rc = script(&q, DLOCK__SCRIPT_ENTER, args, 5, &pttl, out);
        if (rc == DLOCK_OK || rc == DLOCK_ERR_NOMEM)
            return rc;
        if (rc == DLOCK_ERR_TAKEN)
            c->stats.taken++;
        now = dlock_now_ms();
        if (now >= deadline_ms || !dlock__should_retry(c, rc))
            return give_up(&q, rc, out);
        attempt++;
        if (rc == DLOCK_ERR_TAKEN) {
            dlock_err got = DLOCK_ERR_TAKEN;
            int woke = wait_handoff(&q, pttl, &got, out);

            if (woke == 1 && (got == DLOCK_OK || got == DLOCK_ERR_NOMEM))
                return got;
            if (woke >= 0)
                continue; /* woken too late for our bound, or the wait ran out: ask again */
        }
        dlock__backoff_sleep(c, attempt, now, deadline_ms);
    }
}
