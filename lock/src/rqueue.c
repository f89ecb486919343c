/* rqueue.c - Redlock with wake_on_release: queue.c's FIFO with direct
 * hand-off on every node, and the lock held only once a quorum of nodes
 * has handed its key to this waiter (docs/redlock.md, "Hand-off").
 *
 * A waiter lists itself on every node (enter.lua) under one score of its
 * own, so that the nodes order the same waiters the same way. (A node
 * moves it onto its own clock only when the waiter's clock is far off:
 * see setup.) A release runs pass.lua on every node. It SETs the key to the
 * head waiter's token and pushes that node's fence to the waiter's list.
 * The waiter BLPOPs its list on every node at once (wake.c,
 * dlock__wake_pop_any) and counts the nodes whose key is now its own. Each
 * node's key is bounded on the waiter's clock only: pass.lua ran after the
 * last enter.lua that listed us there (that script empties our list), so
 * the key lives at least until that enter.lua's send time + TTL - drift. */
#include "dlock_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RQ_MAX_STAY_MS (24 * 3600 * 1000LL)
#define RQ_MAX_BLOCK_MS (3600 * 1000LL)

typedef struct rq_run {
    dlock_client *c;
    const char *resource;
    uint32_t ttl_ms;
    int64_t deadline_ms;
    char token[DLOCK_TOKEN_LEN];
    char ttl_s[16], stay_s[24], score_s[24], sent_s[24], slack_s[24];
    char member[DLOCK_TOKEN_LEN + 48];
    char list[DLOCK__KEY_BUF + 48];
    dlock__pass_buf pb;
    const char *keys[4];
    uint32_t listed;                     /* nodes whose last answered enter.lua listed us */
    uint32_t answered;                   /* nodes that answered the last round */
    uint32_t maybe;                      /* sent the last enter.lua, no answer: ours or not, unknown */
    uint32_t rechecked;                  /* maybe nodes a recheck asked in vain: not asked again */
    int rechecking;                      /* this round is a recheck for the maybe nodes */
    int64_t first_sent;                  /* the first enter.lua's send time, our clock */
    int recheck;                         /* a hand-off came that only an enter.lua can bound */
    int64_t listed_sent[DLOCK_MAX_NODES]; /* that enter.lua's send time, our clock */
    long long nscore[DLOCK_MAX_NODES];   /* our score in that node's queue, as it answered; 0 unknown */
    uint32_t owned;                      /* nodes whose key holds our token */
    int64_t valid[DLOCK_MAX_NODES];      /* owned: the key lives at least until then (less drift) */
    uint64_t fence[DLOCK_MAX_NODES];     /* owned: that node's fence */
    uint64_t seen[DLOCK_MAX_NODES];      /* the largest fence of a key of ours on that node so far */
    dlock__waker *w;                     /* our blocking connections, kept for the whole call */
    int64_t minority_since;              /* first instant we held keys short of a quorum; 0 none */
} rq_run;

static int64_t drift_of(const dlock_client *c, int64_t span_ms)
{
    return dlock__drift_ms(c, span_ms > UINT32_MAX ? UINT32_MAX
                                                   : (uint32_t)(span_ms > 0 ? span_ms : 0));
}

/* Keys we own but will not use: pass.lua hands each to its next waiter
 * (or deletes it). Nobody waits for the answers; the round connections
 * run them in order behind anything we sent before. */
static void pass_on(rq_run *q, uint32_t mask)
{
    if (mask != 0)
        dlock__script_send_only(q->c, mask, DLOCK__SCRIPT_PASS, q->pb.keys, 3, q->pb.args, 4);
    q->owned &= ~mask;
    q->minority_since = 0;
}

/* A minority held for a hand-off window: give its keys to the oldest
 * waiter of each node, counting ourselves. We list ourselves again first
 * (ZADD NX, our one score), then pass.lua hands each key to the head of
 * its node's queue, in order on the same connection. Without the
 * listing, two waiters each holding the other's missing key would swap
 * keys at every window for ever. (A plain pass_on hands each key to the
 * other, which is now the only one listed there. Then both list again.)
 * With the yielder listed, the older of the two gets its own key back,
 * the younger's key too, and a quorum. A key handed back to us arrives as a
 * message like any hand-off, bounded by our earlier listing there, which
 * is older than this one. */
static void yield_minority(rq_run *q, uint32_t mask)
{
    for (size_t i = 0; i < q->c->n; i++) {
        char score[24];
        const char *argv[5] = {"ZADD", q->pb.waiters, "NX", score, q->member};
        size_t argvlen[5];

        /* The score that node gave us (its own clock's, if ours was off);
         * unknown (its answer was lost): passed on without listing. */
        if (!(mask & (1u << i)) || q->nscore[i] <= 0)
            continue;
        snprintf(score, sizeof(score), "%lld", q->nscore[i]);
        for (size_t k = 0; k < 5; k++)
            argvlen[k] = strlen(argv[k]);
        dlock__send_only(q->c, 1u << i, 5, argv, argvlen);
    }
    pass_on(q, mask);
}

/* Nodes owned whose bound is still ahead. */
static uint32_t owned_now(rq_run *q)
{
    int64_t now = dlock_now_ms();

    for (size_t i = 0; i < q->c->n; i++)
        if ((q->owned & (1u << i)) && q->valid[i] <= now)
            q->owned &= ~(1u << i); /* expired by our bound: not counted, not passed on */
    return q->owned;
}

/* Raises lagging fence counters of the owned nodes to fence; the mask of
 * nodes known to hold >= fence (acquire.c's fence_sync, for handed keys). */
static uint32_t sync_fences(rq_run *q, uint64_t fence)
{
    dlock_client *c = q->c;
    dlock__result res[DLOCK_MAX_NODES];
    uint32_t synced = 0, lagging = 0, ones = 0;
    const char *keys[1] = {q->pb.fkey};
    const char *args[1];
    char fence_s[24];

    for (size_t i = 0; i < c->n; i++) {
        if (!(q->owned & (1u << i)))
            continue;
        if (q->fence[i] == fence)
            synced |= 1u << i;
        else
            lagging |= 1u << i;
    }
    if (lagging == 0)
        return synced;
    memset(res, 0, sizeof(res));
    snprintf(fence_s, sizeof(fence_s), "%" PRIu64, fence);
    args[0] = fence_s;
    dlock__script_round(c, lagging, 0, DLOCK__SCRIPT_FENCE_SYNC, keys, 1, args, 1, res, NULL, NULL);
    dlock__count_int(res, c->n, 1, &ones);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return synced | (ones & lagging);
}

/* A quorum of keys is ours: the handle, or pass them all on. 1 when
 * decided (*rc set), 0 when not yet a quorum, or when the validity ran
 * out during the grant with time left to wait (keys passed on, off every
 * queue: q->recheck asks the caller to enter again). */
static int try_grant(rq_run *q, dlock_err *rc, dlock_lock **out)
{
    dlock_client *c = q->c;
    uint32_t own = owned_now(q), synced, rest;
    uint64_t fence = 0;
    int64_t valid = INT64_MAX;
    dlock__grant g;
    dlock_err got;

    if (dlock__popcount(own) < c->quorum)
        return 0;
    for (size_t i = 0; i < c->n; i++)
        if (own & (1u << i)) {
            if (q->fence[i] > fence)
                fence = q->fence[i];
            if (q->valid[i] < valid)
                valid = q->valid[i];
        }
    synced = sync_fences(q, fence);
    rest = dlock__all_nodes(c) & ~own;
    /* Off the queues of the nodes not handed over yet: a key they hand
     * us later would sit unused until it expired. Sent before any
     * release, on the same connections, so a key handed before leave.lua
     * ran is passed on by our release. */
    if (rest != 0) {
        const char *args[2] = {q->token, q->member};

        dlock__script_send_only(c, rest, DLOCK__SCRIPT_LEAVE, q->keys, 4, args, 2);
    }
    if (dlock__popcount(synced) < c->quorum) {
        dlock__errf(c->errstr, "\"%s\" handed over on %zu/%zu nodes, but the fence counter "
                    "reached %" PRIu64 " on only %zu of them", q->resource,
                    dlock__popcount(own), c->n, fence, dlock__popcount(synced));
        pass_on(q, dlock__all_nodes(c));
        *rc = DLOCK_ERR_FENCE_SYNC;
        return 1;
    }
    /* base: when the earliest key's TTL started at the earliest. The
     * validity is judged by dlock__lock_grant now, after the sync round:
     * a sync held up past the earliest key's bound must not return a
     * handle whose keys may already be another client's. */
    g = (dlock__grant){q->resource, q->token, fence, q->ttl_ms,
                       valid + drift_of(c, q->ttl_ms) - (int64_t)q->ttl_ms, valid,
                       dlock__all_nodes(c)};
    got = dlock__lock_grant(c, &g, c->errstr, out);
    if (got == DLOCK_ERR_EXPIRED && dlock_now_ms() < q->deadline_ms) {
        /* Spent before it was ours, with time left to wait: back in line
         * where we were (each node's score, behind the leave.lua above on
         * the same connections), the keys passed on. Then the caller enters
         * again, as the plain path retries. Only the keys we know: one
         * handed to us unknown (its message not read yet, perhaps already
         * popped into our BLPOP's reply) stays ours for the next round to
         * find. Passed on, that message would later read as ours a key
         * that is another's, wherever that round went unanswered. */
        yield_minority(q, own);
        q->recheck = 1;
        return 0;
    }
    if (got != DLOCK_OK) {
        pass_on(q, dlock__all_nodes(c));
        *rc = got;
        return 1;
    }
    c->stats.acquires++;
    *rc = DLOCK_OK;
    return 1;
}

/* enter.lua answers {1, fence, pttl} (the key is ours), {0, pttl, fence,
 * score} (listed behind another holder, at that score in the node's
 * queue); leave.lua {1, fence, pttl} or {0, 0}. Whether r is one of them. */
static int well_formed(const dlock__result *r)
{
    const redisReply *x = r->reply;

    return r->status == DLOCK__R_REPLY && x->type == REDIS_REPLY_ARRAY && x->elements >= 2 &&
           x->element[0]->type == REDIS_REPLY_INTEGER &&
           x->element[1]->type == REDIS_REPLY_INTEGER;
}

/* Stop rule of the listing and leaving rounds: decided once a quorum
 * answered, whatever it said. The round then waits only its grace
 * (rounds.c, check_stop) for the others: a paused or cut-off node costs a
 * few ms instead of the command timeout. Once it owes too many replies
 * its breaker opens and rounds skip it, as a plain acquire's do.
 * The rest of the round's commands still run there, in order, on the
 * kept connection: see round_of for what an unknown answer means. */
static int answered_quorum(const dlock__result *res, size_t n, void *arg)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += (size_t)well_formed(&res[i]);
    return k >= *(const size_t *)arg;
}

/* One enter.lua (or leave.lua) round, ended at a quorum of answers:
 * records which nodes listed us and which keys are ours. DLOCK_ERR_TAKEN
 * when a quorum answered, else the round's unavailability. pttl: the
 * longest remaining TTL of another holder's key among the answers.
 *
 * A node that did not answer (paused, cut off, slower than the grace, or
 * skipped with its breaker open) is unknown, never guessed: its enter.lua
 * may still run there, late. It is not counted as ours. (A key it sets
 * for us counts once its announcement on our list arrives, or once a
 * later round reads it. The wait asks for that early when the key would
 * complete a quorum.) Its listing bound keeps the last answered one. The
 * wait listens there too (wait_handoffs), unless its breaker is open.
 *
 * If the late enter.lua lists us, what we send later on that connection
 * runs after it, in order: leave.lua when we give up or are granted
 * elsewhere, pass.lua on our release or give-up. So the node never hands
 * its key to a waiter that has left. (The kept lagging connection is
 * conn.c's; reach makes the leaving round go to nodes whose breaker is
 * open.)
 *
 * A listing that runs even later, after that connection was closed (a
 * node paused for longer than max(TTL, command timeout)), is no longer
 * followed by our leave.lua. It lasts until its stay runs out by that
 * node's clock. A release there meanwhile hands that one node's key to
 * nobody for one TTL (pass.lua pops the listing as it hands over, so
 * once). That is the price of not judging lateness by our wall clock
 * against the node's, which would starve every waiter whose clock is off.
 * It costs one node's key for a TTL after an outage, never safety, and the
 * other nodes still
 * make a quorum. */
static dlock_err round_of(rq_run *q, dlock__script_id id, const char *const *args, int nargs,
                          uint32_t reach, int64_t *pttl)
{
    dlock_client *c = q->c;
    dlock__result res[DLOCK_MAX_NODES];
    int64_t t0 = dlock_now_ms();
    uint32_t answered = 0;
    dlock_err rc = DLOCK_ERR_TAKEN;

    memset(res, 0, sizeof(res));
    *pttl = -1; /* no holder's key seen: no bound (0 is a key in its last ms) */
    dlock__script_round(c, dlock__all_nodes(c), reach, id, q->keys, 4, args, nargs, res,
                        answered_quorum, &c->quorum);
    for (size_t i = 0; i < c->n; i++) {
        const redisReply *x = res[i].reply;
        long long what;

        if (!well_formed(&res[i]))
            continue; /* unknown: see above */
        answered |= 1u << i;
        what = x->element[0]->integer;
        if (what == 0) {
            q->owned &= ~(1u << i);
            /* Every hand-off INCRs the node's fence: a message with a
             * fence no larger than the one read here was pushed before
             * this script ran, for a key that is no longer ours. */
            if (x->elements >= 3 && x->element[2]->type == REDIS_REPLY_INTEGER &&
                (uint64_t)x->element[2]->integer > q->seen[i])
                q->seen[i] = (uint64_t)x->element[2]->integer;
            if (id == DLOCK__SCRIPT_ENTER && what == 0) {
                q->listed |= 1u << i;
                q->listed_sent[i] = t0;
                if (x->elements >= 4 && x->element[3]->type == REDIS_REPLY_INTEGER)
                    q->nscore[i] = x->element[3]->integer;
            }
            if (x->element[1]->integer > *pttl)
                *pttl = x->element[1]->integer;
            continue;
        }
        if (x->elements < 3 || x->element[2]->type != REDIS_REPLY_INTEGER ||
            x->element[1]->integer <= 0)
            continue;
        q->owned |= 1u << i;
        q->fence[i] = (uint64_t)x->element[1]->integer;
        if (q->fence[i] > q->seen[i])
            q->seen[i] = q->fence[i];
        /* -1: set by this script after t0; else the key's PTTL read after t0. */
        if (x->element[2]->integer < 0)
            q->valid[i] = t0 + (int64_t)q->ttl_ms - drift_of(c, q->ttl_ms);
        else
            q->valid[i] = t0 + x->element[2]->integer - drift_of(c, x->element[2]->integer);
    }
    q->answered = answered;
    q->rechecked &= ~answered;
    if (id == DLOCK__SCRIPT_ENTER && q->first_sent == 0)
        q->first_sent = t0;
    if (id == DLOCK__SCRIPT_ENTER) {
        q->maybe = 0;
        for (size_t i = 0; i < c->n; i++)
            if (res[i].status == DLOCK__R_PENDING || res[i].status == DLOCK__R_TIMEOUT ||
                res[i].status == DLOCK__R_IOERR)
                q->maybe |= 1u << i;
        /* A recheck that did not hear them either: a node slower than the
         * grace every time would leave every recheck unanswered in turn. */
        if (q->rechecking)
            q->rechecked |= q->maybe;
        q->rechecking = 0;
    }
    if (dlock__popcount(answered) < c->quorum)
        rc = dlock__unavailable(c, res, dlock__all_nodes(c), answered, c->errstr);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return rc;
}

/* Waits (without the mutex) for hand-offs on every node where we are
 * listed, at most until block_ms. Records the keys handed to us. -1 when
 * no wait was possible. */
static int wait_handoffs(rq_run *q, int64_t block_ms)
{
    dlock_client *c = q->c;
    dlock__waker *w;
    char msgs[DLOCK_MAX_NODES][DLOCK__RQ_MSG_LEN];
    uint32_t got = 0, skip = 0, want, mask;
    int64_t now;

    if (q->w == NULL && (q->w = dlock__waker_take(c)) != NULL)
        dlock__waker_settle(q->w); /* a BLPOP of an earlier call is not ours to read */
    w = q->w;
    /* Where we are listed, and where the last enter.lua went unanswered:
     * it may have listed us there all the same (a node slower than the
     * round's grace). And a hand-off there that we did not hear of would
     * sit unused until our next round. */
    want = (q->listed | q->maybe) & ~q->owned;
    /* A node whose breaker is open (paused, cut off, or a healthy node
     * that fell a few replies behind under load) is skipped only where
     * our blocking connection to it is gone: a new one would cost a
     * blocking connect. On a connection we have, a BLPOP costs a write.
     * And a skipped node is looked at again within a hand-off window: a
     * healthy node's breaker closes as soon as it has caught up, and its
     * hand-off to us must not wait for the end of our wait meanwhile. */
    for (size_t i = 0; w != NULL && i < c->n; i++)
        if (c->nodes[i].breaker.open && w->ctx[i] == NULL)
            skip |= 1u << i;
    if ((want & skip) != 0 && block_ms > c->handoff_ms)
        block_ms = c->handoff_ms;
    mask = want & ~skip;
    if (w == NULL || mask == 0)
        return -1; /* nowhere to wait: the caller backs off */
    {
        dlock__sigpipe_guard g;

        pthread_mutex_unlock(&c->mu);
        dlock__sigpipe_block(&g);
        got = dlock__wake_pop_any(c, w, mask, q->list, block_ms, msgs);
        dlock__sigpipe_restore(&g);
        pthread_mutex_lock(&c->mu);
    }
    now = dlock_now_ms();
    for (size_t i = 0; i < c->n; i++) {
        unsigned long long f;
        int64_t valid, since;

        if (!(got & (1u << i)))
            continue;
        if (sscanf(msgs[i], "%llu", &f) != 1 || f == 0)
            continue; /* not pass.lua's: the next enter.lua finds out */
        /* Every hand-off INCRs the node's fence. A message whose fence we
         * have seen already is a stale copy that a BLPOP popped before the
         * enter.lua emptied our list. (Seen: an enter.lua found that key
         * ours, or listed us after that hand-off, and we may have passed
         * it on since.) */
        if (f <= q->seen[i])
            continue;
        q->seen[i] = f;
        /* Never from Redis TIME (a clock step on the node would move it;
         * see queue.c). Instead, the send time of the enter.lua that last
         * listed us there, which emptied our list before pass.lua pushed
         * (a message older than that listing has a fence <= seen). Where no
         * listing was answered, the first enter.lua of this call: every
         * message on our list follows one of ours. */
        since = (q->listed & (1u << i)) ? q->listed_sent[i] : q->first_sent;
        valid = since + (int64_t)q->ttl_ms - drift_of(c, q->ttl_ms);
        if (valid - now < (int64_t)q->ttl_ms / 2) {
            /* Too little by that bound: the key is ours there, but only
             * the next enter.lua can say for how long (it reads the
             * PTTL). Ask now rather than at the end of the wait, or
             * the key would sit unused meanwhile. */
            q->recheck = 1;
            continue;
        }
        q->owned |= 1u << i;
        q->fence[i] = f;
        q->valid[i] = valid;
    }
    return 0;
}

/* Giving up: off every queue; keys handed to us meanwhile are counted,
 * and unless they make a quorum, passed on. */
static dlock_err give_up(rq_run *q, dlock_err rc, dlock_lock **out)
{
    const char *args[2] = {q->token, q->member};
    char why[DLOCK_ERRSTR_LEN];
    int64_t pttl;
    dlock_err got;

    memcpy(why, q->c->errstr, sizeof(why));
    /* reach: a node whose breaker is open may still run our enter.lua
     * late; leave.lua queues behind it on the kept connection. */
    (void)round_of(q, DLOCK__SCRIPT_LEAVE, args, 2, dlock__all_nodes(q->c), &pttl);
    if (try_grant(q, &got, out))
        return got;
    /* Every node: one whose leave.lua went unanswered may have handed us
     * its key; pass.lua's token check makes the others no-ops. */
    pass_on(q, dlock__all_nodes(q->c));
    memcpy(q->c->errstr, why, sizeof(why));
    return rc;
}

/* The wall clock in microseconds, the unit of enter.lua's scores; -1 when
 * there is none. */
static long long wall_us(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static int setup(rq_run *q, dlock_client *c, const char *resource, uint32_t ttl_ms,
                 int64_t deadline_ms)
{
    long long score;
    int64_t span;

    memset(q, 0, sizeof(*q));
    q->c = c;
    q->resource = resource;
    q->ttl_ms = ttl_ms;
    q->deadline_ms = deadline_ms;
    if (dlock__token_new(q->token) != 0) {
        dlock__errf(c->errstr, "no randomness for the token");
        return DLOCK_ERR_NOMEM;
    }
    if (dlock__pass_prepare(c, resource, q->token, &q->pb) != 0 ||
        dlock__waiter_list(&q->pb, q->token, q->list, sizeof(q->list)) != 0) {
        dlock__errf(c->errstr, "key longer than %d bytes", DLOCK_MAX_KEY_LEN);
        return DLOCK_ERR_ARG;
    }
    /* One score proposed to every node: the call's start, microseconds of
     * our wall clock. So the nodes order the same waiters alike. (A node
     * ordering by its own arrival time alone would split near-simultaneous
     * waiters between nodes, and each would hold a minority for a hand-off
     * window.) Each round also sends its own send time (sent_s).
     * A node that finds it further than the tolerance from its own clock
     * knows our clock is off (a delay that long is not ordinary). It moves
     * the score onto its clock by that offset (enter.lua). So a clock a
     * minute ahead is not put behind every newcomer for ever, nor one far
     * behind ahead of everyone. Within the tolerance a skewed clock gains
     * or loses at most the skew itself of its place. Order only: validity
     * is counted on our monotonic clock, never from a wall clock.
     * Tolerance: half of max(TTL, command timeout), longer than any
     * delay a live round has, so live clients keep one common order. */
    if ((score = wall_us()) < 0) {
        dlock__errf(c->errstr, "no wall clock for the queue score");
        return DLOCK_ERR_NOMEM;
    }
    snprintf(q->score_s, sizeof(q->score_s), "%lld", score);
    snprintf(q->slack_s, sizeof(q->slack_s), "%lld",
             500LL * (ttl_ms > (uint32_t)c->command_timeout_ms ? (long long)ttl_ms
                                                               : (long long)c->command_timeout_ms));
    snprintf(q->ttl_s, sizeof(q->ttl_s), "%" PRIu32, ttl_ms);
    span = deadline_ms - dlock_now_ms();
    if (span > RQ_MAX_STAY_MS)
        span = RQ_MAX_STAY_MS;
    snprintf(q->stay_s, sizeof(q->stay_s), "%lld", (long long)(span + c->handoff_ms));
    snprintf(q->member, sizeof(q->member), "%s:%s:%s", q->token, q->ttl_s, q->stay_s);
    q->keys[0] = q->pb.key;
    q->keys[1] = q->pb.fkey;
    q->keys[2] = q->pb.waiters;
    q->keys[3] = q->list;
    return DLOCK_OK;
}

static dlock_err acquire_rqueued(rq_run *q, dlock_client *c, const char *resource,
                                 uint32_t ttl_ms, int64_t deadline_ms, dlock_lock **out)
{
    const char *args[9];
    unsigned attempt = 0;
    dlock_err rc = setup(q, c, resource, ttl_ms, deadline_ms);

    if (rc != DLOCK_OK)
        return rc;
    args[0] = q->token;
    args[1] = q->ttl_s;
    args[2] = q->member;
    args[3] = q->stay_s;
    args[4] = "0";
    args[5] = q->score_s;
    args[6] = q->sent_s;
    args[7] = q->slack_s;
    /* A key that enter.lua finds or makes ours is announced on our list
     * like a hand-off: a round that stopped at a quorum of answers never
     * reads the late node's. A key its enter.lua took for us there would
     * otherwise sit unused, unknown to us, until it expired. */
    args[8] = "1";
    for (;;) {
        int64_t pttl = 0, now, block;
        dlock_err got;

        c->stats.attempts++;
        if (attempt > 0) {
            c->stats.retries++;
            args[4] = "1";
        }
        q->recheck = 0;
        /* This round's send time, our wall clock: what each node measures
         * our clock's offset by (setup checked that the clock works). */
        snprintf(q->sent_s, sizeof(q->sent_s), "%lld", wall_us());
        rc = round_of(q, DLOCK__SCRIPT_ENTER, args, 9, 0, &pttl);
        if (try_grant(q, &got, out))
            return got;
        if (rc == DLOCK_ERR_TAKEN)
            c->stats.taken++;
        now = dlock_now_ms();
        /* rc is TAKEN or the round's unavailability, never EXPIRED: a
         * grant spent in its fence sync goes back in line in try_grant. */
        if (now >= deadline_ms || !dlock__should_retry(c, rc))
            return give_up(q, rc, out);
        attempt++;
        if (rc != DLOCK_ERR_TAKEN) {
            dlock__backoff_sleep(c, attempt, now, deadline_ms);
            continue;
        }
        /* Wait for hand-offs, never past another holder's key (if it dies
         * without releasing, its expiry is our cue to enter again) nor
         * our deadline. */
        int64_t wait_end = deadline_ms;
        int waited = 0, recheck = 0;

        /* 0: the key's last millisecond (queue.c): 1 ms. */
        if (pttl >= 0 && now + (pttl > 0 ? pttl : 1) < wait_end)
            wait_end = now + (pttl > 0 ? pttl : 1);
        while ((now = dlock_now_ms()) < wait_end) {
            int could = owned_now(q) != 0 &&
                        dlock__popcount(q->owned | (q->maybe & ~q->rechecked)) >= c->quorum;

            block = wait_end - now;
            if (q->recheck || could) {
                /* A key handed to us that only an enter.lua can bound
                 * (wait_handoffs), or a minority that the nodes whose
                 * enter.lua went unanswered would make a quorum. Their
                 * script may have taken the free key for us (SET NX)
                 * while the round had stopped waiting. Ask again now (the
                 * next answer comes behind the late one, on the same
                 * connection) rather than hold the minority for a window
                 * while that key, unknown to us, keeps everyone else from
                 * a quorum. Once per node until it answers a round. A
                 * node slower than the grace every time (its breaker
                 * never opens, it owes one reply at most) would leave
                 * every recheck unanswered. We would then recheck for as
                 * long as our key lived, while the other waiters held
                 * minorities (the livelock SPIN found, docs/model.md).
                 * After one, the minority is held for a window and
                 * yielded like any other. */
                q->rechecking = could;
                recheck = 1;
                break;
            }
            if (owned_now(q) != 0) {
                /* Keys short of a quorum: the nodes' queues disagree (a
                 * listing reached some nodes late). Held for one hand-off
                 * window at most, then yielded to the oldest waiter, so
                 * that waiters each holding a minority cannot stall each
                 * other. */
                if (q->minority_since == 0)
                    q->minority_since = now;
                if (now - q->minority_since >= c->handoff_ms) {
                    yield_minority(q, q->owned);
                    break;
                }
                if (q->minority_since + c->handoff_ms - now < block)
                    block = q->minority_since + c->handoff_ms - now;
            }
            if (block > RQ_MAX_BLOCK_MS)
                block = RQ_MAX_BLOCK_MS;
            if (wait_handoffs(q, block) != 0)
                break;
            waited = 1;
            if (try_grant(q, &got, out))
                return got;
        }
        if (!waited && !recheck)
            dlock__backoff_sleep(c, attempt, dlock_now_ms(), deadline_ms);
        if (dlock_now_ms() >= deadline_ms)
            return give_up(q, DLOCK_ERR_TAKEN, out);
    }
}

/* The loop above, and our blocking connections back to the pool on every
 * way out of it. */
dlock_err dlock__acquire_rqueued(dlock_client *c, const char *resource, uint32_t ttl_ms,
                                 int64_t deadline_ms, dlock_lock **out)
{
    rq_run q;
    dlock_err rc = acquire_rqueued(&q, c, resource, ttl_ms, deadline_ms, out);

    dlock__waker_put(c, q.w);
    return rc;
}
