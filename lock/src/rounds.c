/* rounds.c - the parallel request engine: one command to N nodes at once,
 * one poll() loop, one deadline; plus result helpers and the mapping of
 * failed nodes to an "unavailable" error code. What each connection's reply
 * stream still owes (AUTH answer, replies to rounds that ended early) is
 * kept by conn.c. */
#include "dlock_internal.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

size_t dlock__popcount(uint32_t mask)
{
    size_t k = 0;

    for (; mask != 0; mask &= mask - 1)
        k++;
    return k;
}

uint32_t dlock__all_nodes(const dlock_client *c)
{
    return c->n >= 32 ? 0xffffffffu : ((1u << c->n) - 1u);
}

void dlock__results_clear(dlock__result *res, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (res[i].reply != NULL)
            freeReplyObject(res[i].reply);
        res[i].reply = NULL;
        res[i].status = DLOCK__R_UNSENT;
        res[i].detail[0] = '\0';
    }
}

int dlock__reply_is_error(const dlock__result *r, const char *prefix)
{
    if (r->status != DLOCK__R_REPLY || r->reply == NULL || r->reply->type != REDIS_REPLY_ERROR)
        return 0;
    if (prefix == NULL)
        return 1;
    return r->reply->str != NULL && strncmp(r->reply->str, prefix, strlen(prefix)) == 0;
}

static void fail(dlock__node *node, dlock__result *r, dlock__status st, const char *what,
                 const char *arg)
{
    dlock__detailf(r->detail, "%s%s", what, arg);
    r->status = st;
    /* After an I/O error or a timeout the reply stream position is unknown:
     * a late reply would be taken for the answer to the next command. Only a
     * fresh connection is trustworthy. */
    dlock__node_close(node);
}

/* One node's part in a round. */
typedef struct round_slot {
    dlock__node *node;
    dlock__result *res; /* the caller's entry for this node */
    int waiting;        /* the command went out (or is queued): its answer is due */
    int written;        /* hiredis has handed the whole command to the kernel */
} round_slot;

/* A round in progress: a slot per node of the client, and the clock. */
typedef struct round_run {
    dlock_client *c;
    dlock__result *res; /* the caller's array, as stop() sees it */
    round_slot slot[DLOCK_MAX_NODES];
    int64_t start;      /* when the commands went out */
    int64_t deadline;   /* start + command_timeout_ms, or sooner once decided */
    int stopped;        /* stop() said the outcome is decided */
} round_run;

/* What every round and send-only does before sending: clears the results of
 * the nodes in mask, drops dead connections and (re)connects, and blocks
 * SIGPIPE for the writes. Returns mask limited to the client's nodes. */
static uint32_t round_open(dlock_client *c, uint32_t mask, dlock__result *res,
                           dlock__sigpipe_guard *guard)
{
    mask &= dlock__all_nodes(c);
    for (size_t i = 0; i < c->n; i++) {
        if (mask & (1u << i))
            dlock__results_clear(&res[i], 1);
    }
    c->stats.round_trips++;
    dlock__conn_prepare(c, mask, res);
    dlock__sigpipe_block(guard);
    return mask;
}

/* Reads what the node sent and dispatches every complete reply in stream
 * order: our AUTH answer first, then replies owed to earlier rounds (those
 * two are conn.c's business: dlock__conn_next_reply), then this round's
 * answer. */
static void read_node(round_slot *s)
{
    dlock__node *node = s->node;
    dlock__result *r = s->res;

    if (redisBufferRead(node->ctx) != REDIS_OK) {
        fail(node, r, DLOCK__R_IOERR, "connection lost: ", node->ctx->errstr);
        s->waiting = 0;
        return;
    }
    for (;;) {
        redisReply *reply;
        const char *refused;

        if (dlock__conn_next_reply(node, &reply) != 0) {
            fail(node, r, DLOCK__R_IOERR, "protocol error: ", node->ctx->errstr);
            s->waiting = 0;
            return;
        }
        if (reply == NULL)
            return;
        if (!s->waiting) {
            freeReplyObject(reply);
            fail(node, r, DLOCK__R_IOERR, "unsolicited reply (stream out of step)", "");
            return;
        }
        s->waiting = 0;
        refused = dlock__conn_auth_refusal(node, reply);
        if (refused != NULL) {
            dlock__detailf(r->detail, "%s", refused);
            freeReplyObject(reply);
            r->status = DLOCK__R_AUTH;
            /* Closed so the next call authenticates afresh (the password
             * may have been fixed on the server meanwhile). */
            dlock__node_close(node);
            return;
        }
        r->status = DLOCK__R_REPLY;
        r->reply = reply;
    }
}

/* Step 1: queues the command on every connected node of mask and writes
 * what the kernel takes at once; the rest goes out when poll() says there
 * is room. */
static void send_all(round_run *rr, uint32_t mask, int argc, const char **argv,
                     const size_t *argvlen)
{
    for (size_t i = 0; i < rr->c->n; i++) {
        round_slot *s = &rr->slot[i];

        if (!(mask & (1u << i)) || s->node->state != DLOCK__UP)
            continue;
        if (redisAppendCommandArgv(s->node->ctx, argc, argv, argvlen) != REDIS_OK) {
            fail(s->node, s->res, DLOCK__R_IOERR, "out of memory queueing the command", "");
            continue;
        }
        s->waiting = 1;
        if (redisBufferWrite(s->node->ctx, &s->written) != REDIS_OK) {
            fail(s->node, s->res, DLOCK__R_IOERR, "write: ", s->node->ctx->errstr);
            s->waiting = 0;
        }
    }
}

/* Acts on what poll() reported for a slot: finishes the write, then reads. */
static void serve(round_slot *s, short revents)
{
    if (revents == 0 || !s->waiting)
        return;
    if ((revents & POLLOUT) && !s->written &&
        redisBufferWrite(s->node->ctx, &s->written) != REDIS_OK) {
        fail(s->node, s->res, DLOCK__R_IOERR, "write: ", s->node->ctx->errstr);
        s->waiting = 0;
        return;
    }
    if (revents & (POLLIN | POLLERR | POLLHUP))
        read_node(s);
}

/* Asks stop() whether the outcome is decided and, the first time it is,
 * brings the deadline forward to the end of the grace. */
static void check_stop(round_run *rr, dlock__stop_fn stop, void *stop_arg)
{
    int64_t t, grace;

    if (rr->stopped || stop == NULL || !stop(rr->res, rr->c->n, stop_arg))
        return;
    t = dlock_now_ms();
    grace = t - rr->start;
    /* Decided - but give the other nodes as long again as the deciding
     * replies took (at least 2 ms). A healthy node that is merely a little
     * slower answers within that and stays in step; without the grace it
     * would fall one reply behind each round and never catch up. A paused
     * node costs only the grace. */
    rr->stopped = 1;
    if (grace < 2)
        grace = 2;
    if (t + grace < rr->deadline)
        rr->deadline = t + grace;
}

/* Step 2: one poll() over every node whose answer is still due, until all
 * answered or the deadline passed. */
static void collect(round_run *rr, dlock__stop_fn stop, void *stop_arg)
{
    for (;;) {
        struct pollfd pfd[DLOCK_MAX_NODES];
        round_slot *polled[DLOCK_MAX_NODES]; /* polled[j] is the slot pfd[j] watches */
        size_t k = 0;
        int64_t now;
        char ebuf[64];
        int rc;

        for (size_t i = 0; i < rr->c->n; i++) {
            round_slot *s = &rr->slot[i];

            if (!s->waiting)
                continue;
            pfd[k].fd = s->node->ctx->fd;
            pfd[k].events = (short)(POLLIN | (s->written ? 0 : POLLOUT));
            pfd[k].revents = 0;
            polled[k++] = s;
        }
        if (k == 0)
            return;
        now = dlock_now_ms();
        if (now >= rr->deadline)
            return;
        rc = dlock__poll(pfd, k, (int)(rr->deadline - now), ebuf, sizeof(ebuf));
        if (rc == 0)
            continue;
        if (rc < 0) {
            for (size_t j = 0; j < k; j++) {
                fail(polled[j]->node, polled[j]->res, DLOCK__R_IOERR, "poll: ", ebuf);
                polled[j]->waiting = 0;
            }
            return;
        }
        for (size_t j = 0; j < k; j++)
            serve(polled[j], pfd[j].revents);
        check_stop(rr, stop, stop_arg);
    }
}

/* Step 3: a node whose answer is still due either owes it (the round was
 * decided; the next round discards it) or, if the round was not decided or
 * the node is too far behind already, has timed out. */
static void finish(round_run *rr)
{
    for (size_t i = 0; i < rr->c->n; i++) {
        round_slot *s = &rr->slot[i];
        char ms[24];

        if (!s->waiting)
            continue;
        if (rr->stopped && dlock__conn_owe(s->node) == 0) {
            s->res->status = DLOCK__R_PENDING;
            dlock__detailf(s->res->detail, "no reply yet (round decided)");
            continue;
        }
        snprintf(ms, sizeof(ms), "%d ms", rr->c->command_timeout_ms);
        fail(s->node, s->res, DLOCK__R_TIMEOUT, "timeout after ", ms);
    }
}

/* Sends one command to every node in mask and collects the replies.
 *
 * Why one poll() over all nodes: the distlock page asks to "multiplex" the
 * SETs so the time to reach a majority - and thus the window in which two
 * clients split the votes - does not grow with N; the round costs the
 * slowest node's round trip, bounded by command_timeout_ms, not the sum.
 *
 * DOWN nodes in mask are (re)connected first, within connect_timeout_ms.
 * res[i] of every node in mask is overwritten; other entries are kept (a
 * caller may merge two rounds). When stop() says the outcome is decided the
 * round ends after a short grace: nodes still pending then keep their
 * connection and owe a stale reply that the next round discards, so one
 * paused node in a Redlock does not make every call wait the full timeout.
 * Returns 1 if stop() ended the round, 0 otherwise. */
int dlock__round(dlock_client *c, uint32_t mask, int argc, const char **argv,
                 const size_t *argvlen, dlock__result *res, dlock__stop_fn stop, void *stop_arg)
{
    round_run rr;
    dlock__sigpipe_guard guard;

    mask = round_open(c, mask, res, &guard);
    memset(&rr, 0, sizeof(rr));
    rr.c = c;
    rr.res = res;
    for (size_t i = 0; i < c->n; i++) {
        rr.slot[i].node = &c->nodes[i];
        rr.slot[i].res = &res[i];
    }
    send_all(&rr, mask, argc, argv, argvlen);
    rr.start = dlock_now_ms();
    rr.deadline = rr.start + c->command_timeout_ms;
    collect(&rr, stop, stop_arg);
    finish(&rr);
    dlock__sigpipe_restore(&guard);
    return rr.stopped;
}

/* Sends one command to every node in mask without waiting for the answers
 * (they are discarded by the next round). For clean-up that nobody waits
 * on: the release after a failed acquire, the script re-cache. */
void dlock__send_only(dlock_client *c, uint32_t mask, int argc, const char **argv,
                      const size_t *argvlen)
{
    dlock__result res[DLOCK_MAX_NODES];
    dlock__sigpipe_guard guard;

    memset(res, 0, sizeof(res));
    mask = round_open(c, mask, res, &guard);
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        int done = 0;

        if (!(mask & (1u << i)) || node->state != DLOCK__UP)
            continue;
        /* Counted as owed before it is queued: a node already too far
         * behind is dropped (by conn.c) instead of sent more. */
        if (dlock__conn_owe(node) != 0)
            continue;
        if (redisAppendCommandArgv(node->ctx, argc, argv, argvlen) != REDIS_OK) {
            dlock__node_close(node);
            continue;
        }
        /* One non-blocking write; whatever the kernel does not take now goes
         * out first thing in the next round (same buffer, same order). */
        if (redisBufferWrite(node->ctx, &done) != REDIS_OK)
            dlock__node_close(node);
    }
    dlock__sigpipe_restore(&guard);
}

static dlock_err node_code(const dlock__result *r)
{
    switch (r->status) {
    case DLOCK__R_TIMEOUT:
    case DLOCK__R_PENDING:
        return DLOCK_ERR_TIMEOUT;
    case DLOCK__R_AUTH:
        return DLOCK_ERR_AUTH;
    case DLOCK__R_REPLY:
        return DLOCK_ERR_PROTOCOL;
    case DLOCK__R_UNSENT:
    case DLOCK__R_DOWN:
    case DLOCK__R_IOERR:
        return DLOCK_ERR_UNREACHABLE;
    }
    return DLOCK_ERR_UNREACHABLE;
}

static void node_detail(const dlock__result *r, char *out, size_t outlen)
{
    if (r->status == DLOCK__R_REPLY && r->reply != NULL) {
        if (r->reply->type == REDIS_REPLY_ERROR)
            snprintf(out, outlen, "error reply: %s", r->reply->str != NULL ? r->reply->str : "");
        else
            snprintf(out, outlen, "unexpected reply type %d", r->reply->type);
        return;
    }
    snprintf(out, outlen, "%s", r->detail[0] != '\0' ? r->detail : "no answer");
}

/* Maps a round where too few nodes answered to the code the caller returns:
 * with one node its own failure (TIMEOUT, UNREACHABLE, AUTH, PROTOCOL);
 * with N nodes NO_QUORUM, unless every failed node failed the same
 * configuration-like way (AUTH, PROTOCOL), which the operator must see.
 * Writes "node <addr>: <why>; k/N nodes answered" into errbuf. */
dlock_err dlock__unavailable(const dlock_client *c, const dlock__result *res, uint32_t mask,
                             uint32_t answered, char *errbuf)
{
    dlock_err code = DLOCK_ERR_NO_QUORUM;
    dlock_err common = DLOCK_OK;
    int mixed = 0;
    size_t first = c->n;
    char why[DLOCK__DETAIL_LEN + 32];

    for (size_t i = 0; i < c->n; i++) {
        dlock_err e;
        if (!(mask & (1u << i)) || (answered & (1u << i)))
            continue;
        e = node_code(&res[i]);
        if (first == c->n) {
            first = i;
            common = e;
        } else if (e != common) {
            mixed = 1;
        }
    }
    if (c->n == 1)
        code = common != DLOCK_OK ? common : DLOCK_ERR_UNREACHABLE;
    else if (!mixed && (common == DLOCK_ERR_AUTH || common == DLOCK_ERR_PROTOCOL))
        code = common;
    if (first < c->n) {
        node_detail(&res[first], why, sizeof(why));
        dlock__errf(errbuf, "node %s: %s; %zu/%zu nodes answered", c->nodes[first].addr.text,
                    why, dlock__popcount(answered & mask), c->n);
    } else {
        dlock__errf(errbuf, "%zu/%zu nodes answered, quorum is %zu",
                    dlock__popcount(answered & mask), c->n, c->quorum);
    }
    return code;
}

/* Counts the nodes that answered the integer `value`; their bits go to
 * *mask_out when it is not NULL. */
size_t dlock__count_int(const dlock__result *res, size_t n, long long value, uint32_t *mask_out)
{
    size_t k = 0;
    uint32_t mask = 0;

    for (size_t i = 0; i < n; i++) {
        if (res[i].status == DLOCK__R_REPLY && res[i].reply->type == REDIS_REPLY_INTEGER &&
            res[i].reply->integer == value) {
            k++;
            mask |= 1u << i;
        }
    }
    if (mask_out != NULL)
        *mask_out = mask;
    return k;
}

/* Stop rule for release and extend: once a quorum answered 1 the call has
 * succeeded, whatever the remaining nodes say. arg points to the quorum. */
int dlock__quorum_of_ones(const dlock__result *res, size_t n, void *arg)
{
    return dlock__count_int(res, n, 1, NULL) >= *(const size_t *)arg;
}
