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
 * the key lives at least until that enter.lua's send time + TTL - drift.
 *
 * The rules are steps without I/O (protocol.h): what each answer and each
 * message means, when to wait, recheck or yield, and the grant. What they
 * send without waiting goes through the driver's io hooks. The blocking
 * client drives them below; the event-loop client in async_rqueue.c. */
#include "protocol.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Keys we own but will not use: pass.lua hands each to its next waiter
 * (or deletes it). Nobody waits for the answers; the round connections
 * run them in order behind anything we sent before. */
static void pass_on(dlock__rqueue *q, uint32_t mask)
{
    if (mask != 0)
        q->io->script_send(q->io_arg, mask, DLOCK__SCRIPT_PASS, q->b.pb.keys, 3, q->b.pb.args, 4);
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
static void yield_minority(dlock__rqueue *q, uint32_t mask)
{
    for (size_t i = 0; i < q->c->n; i++) {
        char score[24];
        const char *argv[5] = {"ZADD", q->b.pb.waiters, "NX", score, q->b.member};
        size_t argvlen[5];

        /* The score that node gave us (its own clock's, if ours was off);
         * unknown (its answer was lost): passed on without listing. */
        if (!(mask & (1u << i)) || q->nscore[i] <= 0)
            continue;
        snprintf(score, sizeof(score), "%lld", q->nscore[i]);
        for (size_t k = 0; k < 5; k++)
            argvlen[k] = strlen(argv[k]);
        q->io->cmd_send(q->io_arg, 1u << i, 5, argv, argvlen);
    }
    pass_on(q, mask);
}

/* Nodes owned whose bound is still ahead. */
static uint32_t owned_now(dlock__rqueue *q)
{
    int64_t now = dlock_now_ms();

    for (size_t i = 0; i < q->c->n; i++)
        if ((q->owned & (1u << i)) && q->valid[i] <= now)
            q->owned &= ~(1u << i); /* expired by our bound: not counted, not passed on */
    return q->owned;
}

void dlock__rq_pass_on(dlock__rqueue *q, uint32_t mask)
{
    pass_on(q, mask);
}

/* A quorum of keys is ours: the handle, or pass them all on. First the
 * fence counters of the owned nodes that lag behind the largest fence are
 * raised to it (acquire.c's fence_sync, for handed keys). */
int dlock__rq_grant_begin(dlock__rqueue *q)
{
    dlock_client *c = q->c;

    q->g_own = owned_now(q);
    if (dlock__popcount(q->g_own) < c->quorum)
        return 0;
    q->g_fence = 0;
    q->g_valid = INT64_MAX;
    q->g_synced = q->g_lagging = 0;
    for (size_t i = 0; i < c->n; i++)
        if (q->g_own & (1u << i)) {
            if (q->fence[i] > q->g_fence)
                q->g_fence = q->fence[i];
            if (q->valid[i] < q->g_valid)
                q->g_valid = q->valid[i];
        }
    for (size_t i = 0; i < c->n; i++) {
        if (!(q->g_own & (1u << i)))
            continue;
        if (q->fence[i] == q->g_fence)
            q->g_synced |= 1u << i;
        else
            q->g_lagging |= 1u << i;
    }
    snprintf(q->g_fence_s, sizeof(q->g_fence_s), "%" PRIu64, q->g_fence);
    q->g_sync_keys[0] = q->b.pb.fkey;
    q->g_sync_args[0] = q->g_fence_s;
    return 1;
}

/* 1 when decided (*rc set), 0 when the validity ran out during the grant
 * with time left to wait (keys passed on, off every queue: q->recheck asks
 * the caller to enter again). */
int dlock__rq_grant_end(dlock__rqueue *q, uint32_t ones, dlock_err *rc, dlock_lock **out,
                        char *err)
{
    dlock_client *c = q->c;
    uint32_t own = q->g_own, synced = q->g_synced | (ones & q->g_lagging), rest;
    uint64_t fence = q->g_fence;
    int64_t valid = q->g_valid;
    dlock__grant g;
    dlock_err got;

    rest = dlock__all_nodes(c) & ~own;
    /* Off the queues of the nodes not handed over yet: a key they hand
     * us later would sit unused until it expired. Sent before any
     * release, on the same connections, so a key handed before leave.lua
     * ran is passed on by our release. */
    if (rest != 0)
        q->io->script_send(q->io_arg, rest, DLOCK__SCRIPT_LEAVE, q->b.keys, 4, q->b.leave_args, 2);
    if (dlock__popcount(synced) < c->quorum) {
        dlock__errf(err, "\"%s\" handed over on %zu/%zu nodes, but the fence counter "
                    "reached %" PRIu64 " on only %zu of them", q->b.resource,
                    dlock__popcount(own), c->n, fence, dlock__popcount(synced));
        pass_on(q, dlock__all_nodes(c));
        *rc = DLOCK_ERR_FENCE_SYNC;
        return 1;
    }
    /* base: when the earliest key's TTL started at the earliest. The
     * validity is judged by dlock__lock_grant now, after the sync round:
     * a sync held up past the earliest key's bound must not return a
     * handle whose keys may already be another client's. */
    g = (dlock__grant){q->b.resource, q->b.token, fence, q->b.ttl_ms,
                       valid + dlock__drift_ms(c, q->b.ttl_ms) - (int64_t)q->b.ttl_ms, valid,
                       dlock__all_nodes(c)};
    got = dlock__lock_grant(c, &g, err, out);
    if (got == DLOCK_ERR_EXPIRED && dlock_now_ms() < q->b.deadline_ms) {
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
 * kept connection: see dlock__rq_answer for what an unknown answer means. */
int dlock__rq_decided(const dlock__result *res, size_t n, void *arg)
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
 * wait listens there too (dlock__rq_wait_next), unless its breaker is open.
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
dlock_err dlock__rq_answer(dlock__rqueue *q, dlock__script_id id, const dlock__result *res,
                           int64_t t0, int64_t *pttl, char *err)
{
    dlock_client *c = q->c;
    uint32_t answered = 0;
    dlock_err rc = DLOCK_ERR_TAKEN;

    *pttl = -1; /* no holder's key seen: no bound (0 is a key in its last ms) */
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
            q->valid[i] = t0 + (int64_t)q->b.ttl_ms - dlock__drift_ms(c, q->b.ttl_ms);
        else
            q->valid[i] = t0 + x->element[2]->integer -
                          dlock__drift_span_ms(c, x->element[2]->integer);
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
        rc = dlock__unavailable(c, res, dlock__all_nodes(c), answered, err);
    return rc;
}

int64_t dlock__rq_wait_end(const dlock__rqueue *q, int64_t pttl, int64_t now)
{
    int64_t wait_end = q->b.deadline_ms;

    /* Never past another holder's key (if it dies without releasing, its
     * expiry is our cue to enter again) nor our deadline. 0: the key's
     * last millisecond (queue.c): 1 ms. */
    if (pttl >= 0 && now + (pttl > 0 ? pttl : 1) < wait_end)
        wait_end = now + (pttl > 0 ? pttl : 1);
    return wait_end;
}

int dlock__rq_wait_next(dlock__rqueue *q, int64_t now, int64_t wait_end, uint32_t conn,
                        int64_t *block, uint32_t *mask)
{
    dlock_client *c = q->c;
    uint32_t skip = 0, want;
    int could = owned_now(q) != 0 &&
                dlock__popcount(q->owned | (q->maybe & ~q->rechecked)) >= c->quorum;

    *block = wait_end - now;
    *mask = 0;
    if (q->recheck || could) {
        /* A key handed to us that only an enter.lua can bound
         * (dlock__rq_heard), or a minority that the nodes whose enter.lua
         * went unanswered would make a quorum: their script may have taken
         * the free key for us (SET NX) while the round had stopped
         * waiting. Ask again now (the next answer comes behind the late
         * one, on the same connection) rather than hold the minority for
         * a window while that key, unknown to us, keeps everyone else from
         * a quorum. Once per node until it answers a round. A node slower
         * than the grace every time (its breaker never opens, it owes one
         * reply at most) would leave every recheck unanswered. We would
         * then recheck for as long as our key lived, while the other
         * waiters held minorities (the livelock SPIN found,
         * docs/model.md). After one, the minority is held for a window and
         * yielded like any other. */
        q->rechecking = could;
        return DLOCK__RQ_RECHECK;
    }
    if (owned_now(q) != 0) {
        /* Keys short of a quorum: the nodes' queues disagree (a listing
         * reached some nodes late). Held for one hand-off window at most,
         * then yielded to the oldest waiter, so that waiters each holding
         * a minority cannot stall each other. */
        if (q->minority_since == 0)
            q->minority_since = now;
        if (now - q->minority_since >= c->handoff_ms) {
            yield_minority(q, q->owned);
            return DLOCK__RQ_YIELDED;
        }
        if (q->minority_since + c->handoff_ms - now < *block)
            *block = q->minority_since + c->handoff_ms - now;
    }
    if (*block > DLOCK__QUEUE_MAX_BLOCK_MS)
        *block = DLOCK__QUEUE_MAX_BLOCK_MS;
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
    for (size_t i = 0; i < c->n; i++)
        if (c->nodes[i].breaker.open && !(conn & (1u << i)))
            skip |= 1u << i;
    if ((want & skip) != 0 && *block > c->handoff_ms)
        *block = c->handoff_ms;
    *mask = want & ~skip;
    return *mask != 0 ? DLOCK__RQ_WAIT : DLOCK__RQ_NOWHERE;
}

void dlock__rq_heard(dlock__rqueue *q, size_t i, const char *msg, int64_t now)
{
    dlock_client *c = q->c;
    unsigned long long f;
    int64_t valid, since;

    if (sscanf(msg, "%llu", &f) != 1 || f == 0)
        return; /* not pass.lua's: the next enter.lua finds out */
    /* Every hand-off INCRs the node's fence. A message whose fence we
     * have seen already is a stale copy that a BLPOP popped before the
     * enter.lua emptied our list. (Seen: an enter.lua found that key
     * ours, or listed us after that hand-off, and we may have passed
     * it on since.) */
    if (f <= q->seen[i])
        return;
    q->seen[i] = f;
    /* Never from Redis TIME (a clock step on the node would move it;
     * see queue.c). Instead, the send time of the enter.lua that last
     * listed us there, which emptied our list before pass.lua pushed
     * (a message older than that listing has a fence <= seen). Where no
     * listing was answered, the first enter.lua of this call: every
     * message on our list follows one of ours. */
    since = (q->listed & (1u << i)) ? q->listed_sent[i] : q->first_sent;
    valid = since + (int64_t)q->b.ttl_ms - dlock__drift_ms(c, q->b.ttl_ms);
    if (valid - now < (int64_t)q->b.ttl_ms / 2) {
        /* Too little by that bound: the key is ours there, but only
         * the next enter.lua can say for how long (it reads the
         * PTTL). Ask now rather than at the end of the wait, or
         * the key would sit unused meanwhile. */
        q->recheck = 1;
        return;
    }
    q->owned |= 1u << i;
    q->fence[i] = f;
    q->valid[i] = valid;
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

dlock_err dlock__rq_prepare(dlock_client *c, dlock__rqueue *q, const dlock__rq_io *io,
                            void *io_arg, const char *resource, uint32_t ttl_ms,
                            int64_t deadline_ms, char *err)
{
    long long score;
    dlock_err rc;

    memset(q, 0, sizeof(*q));
    q->c = c;
    q->io = io;
    q->io_arg = io_arg;
    /* The token, keys, listing and its stay: as one node's queue. */
    rc = dlock__queue_prepare(c, &q->b, resource, ttl_ms, deadline_ms, err);
    if (rc != DLOCK_OK)
        return rc;
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
        dlock__errf(err, "no wall clock for the queue score");
        return DLOCK_ERR_NOMEM;
    }
    snprintf(q->score_s, sizeof(q->score_s), "%lld", score);
    snprintf(q->slack_s, sizeof(q->slack_s), "%lld",
             500LL * (ttl_ms > (uint32_t)c->command_timeout_ms ? (long long)ttl_ms
                                                               : (long long)c->command_timeout_ms));
    q->args[0] = q->b.token;
    q->args[1] = q->b.ttl_s;
    q->args[2] = q->b.member;
    q->args[3] = q->b.stay_s;
    q->args[4] = "0";
    q->args[5] = q->score_s;
    q->args[6] = q->sent_s;
    q->args[7] = q->slack_s;
    /* A key that enter.lua finds or makes ours is announced on our list
     * like a hand-off: a round that stopped at a quorum of answers never
     * reads the late node's. A key its enter.lua took for us there would
     * otherwise sit unused, unknown to us, until it expired. */
    q->args[8] = "1";
    return DLOCK_OK;
}

void dlock__rq_entering(dlock__rqueue *q, unsigned attempt)
{
    if (attempt > 0)
        q->args[4] = "1";
    q->recheck = 0;
    /* This round's send time, our wall clock: what each node measures our
     * clock's offset by (dlock__rq_prepare checked that the clock works). */
    snprintf(q->sent_s, sizeof(q->sent_s), "%lld", wall_us());
}

/* ---- the blocking client's driver ---- */

static void blocking_script_send(void *arg, uint32_t mask, dlock__script_id id,
                                 const char *const *keys, int nkeys, const char *const *args,
                                 int nargs)
{
    dlock__script_send_only(arg, mask, id, keys, nkeys, args, nargs);
}

static void blocking_cmd_send(void *arg, uint32_t mask, int argc, const char **argv,
                              const size_t *argvlen)
{
    dlock__send_only(arg, mask, argc, argv, argvlen);
}

static const dlock__rq_io blocking_io = {blocking_script_send, blocking_cmd_send};

/* One enter.lua (or leave.lua) round, ended at a quorum of answers. */
static dlock_err round_of(dlock__rqueue *q, dlock__script_id id, uint32_t reach, int64_t *pttl)
{
    dlock_client *c = q->c;
    dlock__result res[DLOCK_MAX_NODES];
    int64_t t0 = dlock_now_ms();
    int leave = id == DLOCK__SCRIPT_LEAVE;
    dlock_err rc;

    memset(res, 0, sizeof(res));
    dlock__script_round(c, dlock__all_nodes(c), reach, id, q->b.keys, 4,
                        leave ? q->b.leave_args : q->args, leave ? 2 : 9, res, dlock__rq_decided,
                        &c->quorum);
    rc = dlock__rq_answer(q, id, res, t0, pttl, c->errstr);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return rc;
}

/* The grant's steps with its fence sync round between them. */
static int try_grant(dlock__rqueue *q, dlock_err *rc, dlock_lock **out)
{
    dlock_client *c = q->c;
    dlock__result res[DLOCK_MAX_NODES];
    uint32_t ones = 0;
    int decided;

    if (!dlock__rq_grant_begin(q))
        return 0;
    memset(res, 0, sizeof(res));
    if (q->g_lagging != 0) {
        dlock__script_round(c, q->g_lagging, 0, DLOCK__SCRIPT_FENCE_SYNC, q->g_sync_keys, 1,
                            q->g_sync_args, 1, res, NULL, NULL);
        dlock__count_int(res, c->n, 1, &ones);
    }
    decided = dlock__rq_grant_end(q, ones, rc, out, c->errstr);
    dlock__results_clear(res, DLOCK_MAX_NODES);
    return decided;
}

/* Waits (without the mutex) for hand-offs on the nodes of mask, at most
 * block_ms; records the keys handed to us. */
static void wait_handoffs(dlock__rqueue *q, dlock__waker *w, uint32_t mask, int64_t block_ms)
{
    dlock_client *c = q->c;
    char msgs[DLOCK_MAX_NODES][DLOCK__RQ_MSG_LEN];
    dlock__sigpipe_guard g;
    uint32_t got;
    int64_t now;

    pthread_mutex_unlock(&c->mu);
    dlock__sigpipe_block(&g);
    got = dlock__wake_pop_any(c, w, mask, q->b.list, block_ms, msgs);
    dlock__sigpipe_restore(&g);
    pthread_mutex_lock(&c->mu);
    now = dlock_now_ms();
    for (size_t i = 0; i < c->n; i++)
        if (got & (1u << i))
            dlock__rq_heard(q, i, msgs[i], now);
}

/* Giving up: off every queue; keys handed to us meanwhile are counted,
 * and unless they make a quorum, passed on. */
static dlock_err give_up(dlock__rqueue *q, dlock_err rc, dlock_lock **out)
{
    char why[DLOCK_ERRSTR_LEN];
    int64_t pttl;
    dlock_err got;

    memcpy(why, q->c->errstr, sizeof(why));
    /* reach: a node whose breaker is open may still run our enter.lua
     * late; leave.lua queues behind it on the kept connection. */
    (void)round_of(q, DLOCK__SCRIPT_LEAVE, dlock__all_nodes(q->c), &pttl);
    if (try_grant(q, &got, out))
        return got;
    /* Every node: one whose leave.lua went unanswered may have handed us
     * its key; pass.lua's token check makes the others no-ops. */
    dlock__rq_pass_on(q, dlock__all_nodes(q->c));
    memcpy(q->c->errstr, why, sizeof(why));
    return rc;
}

/* The nodes where w has a connection (a BLPOP there costs a write). */
static uint32_t waker_conns(const dlock_client *c, const dlock__waker *w)
{
    uint32_t conn = 0;

    for (size_t i = 0; w != NULL && i < c->n; i++)
        if (w->ctx[i] != NULL)
            conn |= 1u << i;
    return conn;
}

static dlock_err acquire_rqueued(dlock__rqueue *q, dlock__waker **wp, dlock_client *c,
                                 const char *resource, uint32_t ttl_ms, int64_t deadline_ms,
                                 dlock_lock **out)
{
    unsigned attempt = 0;
    dlock_err rc = dlock__rq_prepare(c, q, &blocking_io, c, resource, ttl_ms, deadline_ms,
                                     c->errstr);

    if (rc != DLOCK_OK)
        return rc;
    for (;;) {
        int64_t pttl = 0, now, block, wait_end;
        int waited = 0, recheck = 0;
        uint32_t mask;
        dlock_err got;

        dlock__count_try(c, attempt);
        dlock__rq_entering(q, attempt);
        rc = round_of(q, DLOCK__SCRIPT_ENTER, 0, &pttl);
        if (try_grant(q, &got, out))
            return got;
        if (rc == DLOCK_ERR_TAKEN)
            c->stats.taken++;
        now = dlock_now_ms();
        /* rc is TAKEN or the round's unavailability, never EXPIRED: a
         * grant spent in its fence sync goes back in line in
         * dlock__rq_grant_end. */
        if (now >= deadline_ms || !dlock__should_retry(c, rc))
            return give_up(q, rc, out);
        attempt++;
        if (rc != DLOCK_ERR_TAKEN) {
            dlock__backoff_sleep(c, attempt, now, deadline_ms);
            continue;
        }
        wait_end = dlock__rq_wait_end(q, pttl, now);
        while ((now = dlock_now_ms()) < wait_end) {
            int next;

            if (*wp == NULL && (*wp = dlock__waker_take(c)) != NULL)
                dlock__waker_settle(*wp); /* a BLPOP of an earlier call is not ours to read */
            next = dlock__rq_wait_next(q, now, wait_end, waker_conns(c, *wp), &block, &mask);
            if (next == DLOCK__RQ_RECHECK)
                recheck = 1;
            if (next != DLOCK__RQ_WAIT || *wp == NULL)
                break; /* recheck, yielded, or nowhere to wait: the caller backs off */
            wait_handoffs(q, *wp, mask, block);
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
    dlock__rqueue q;
    dlock__waker *w = NULL;
    dlock_err rc = acquire_rqueued(&q, &w, c, resource, ttl_ms, deadline_ms, out);

    dlock__waker_put(c, w);
    return rc;
}
