/* rounds.c - the parallel request engine: one command to N nodes at once,
 * one poll() loop, one deadline; plus result helpers and the mapping of
 * failed nodes to an "unavailable" error code. */
#include "dlock_internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

/* A node may owe at most this many replies to rounds that ended early; past
 * that it is not keeping up (paused, overloaded) and its connection is
 * dropped rather than letting a backlog of stale commands grow. */
#define DLOCK__MAX_STALE 4

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

/* An idle connection has nothing to say in RESP2: if it is readable before
 * we send, the server closed it (restart, idle timeout, kill) or sent junk.
 * Dropping it now lets the connect phase replace it, instead of failing this
 * round on a socket known to be dead. */
static void drop_dead_idle(dlock_client *c, uint32_t mask)
{
    struct pollfd pfd[DLOCK_MAX_NODES];
    size_t idx[DLOCK_MAX_NODES];
    size_t k = 0;

    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        if ((mask & (1u << i)) && node->state == DLOCK__UP && node->stale == 0 &&
            !node->auth_pending) {
            pfd[k].fd = node->ctx->fd;
            pfd[k].events = POLLIN;
            pfd[k].revents = 0;
            idx[k++] = i;
        }
    }
    if (k == 0 || poll(pfd, (nfds_t)k, 0) <= 0)
        return;
    for (size_t j = 0; j < k; j++) {
        if (pfd[j].revents != 0)
            dlock__node_close(&c->nodes[idx[j]]);
    }
}

static int is_auth_refusal(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->str != NULL &&
           (strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0);
}

/* Reads what the node sent and dispatches every complete reply in stream
 * order: our AUTH answer first, then replies owed to earlier rounds, then
 * this round's answer. */
static void read_node(dlock__node *node, dlock__result *r, int *waiting)
{
    if (redisBufferRead(node->ctx) != REDIS_OK) {
        fail(node, r, DLOCK__R_IOERR, "connection lost: ", node->ctx->errstr);
        *waiting = 0;
        return;
    }
    for (;;) {
        void *p = NULL;
        redisReply *reply;

        if (redisGetReplyFromReader(node->ctx, &p) != REDIS_OK) {
            fail(node, r, DLOCK__R_IOERR, "protocol error: ", node->ctx->errstr);
            *waiting = 0;
            return;
        }
        if (p == NULL)
            return;
        reply = p;
        if (node->auth_pending) {
            node->auth_pending = 0;
            if (reply->type == REDIS_REPLY_ERROR) {
                node->auth_failed = 1;
                dlock__detailf(node->auth_detail, "AUTH refused: %s",
                               reply->str != NULL ? reply->str : "(no text)");
            }
            freeReplyObject(reply);
            continue;
        }
        if (node->stale > 0) {
            node->stale--;
            freeReplyObject(reply);
            continue;
        }
        if (!*waiting) {
            freeReplyObject(reply);
            fail(node, r, DLOCK__R_IOERR, "unsolicited reply (stream out of step)", "");
            return;
        }
        *waiting = 0;
        /* A refused AUTH makes the server answer NOAUTH; a server without a
         * password answers our AUTH with an error but runs the command, and
         * then the command's own reply stands. */
        if (is_auth_refusal(reply) || (node->auth_failed && reply->type == REDIS_REPLY_ERROR)) {
            dlock__detailf(r->detail, "%s", node->auth_failed ? node->auth_detail : reply->str);
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
    struct pollfd pfd[DLOCK_MAX_NODES];
    size_t idx[DLOCK_MAX_NODES];
    int waiting[DLOCK_MAX_NODES] = {0};
    int wdone[DLOCK_MAX_NODES] = {0};
    dlock__sigpipe_guard guard;
    int64_t start, deadline;
    int stopped = 0;

    mask &= dlock__all_nodes(c);
    for (size_t i = 0; i < c->n; i++) {
        if (mask & (1u << i))
            dlock__results_clear(&res[i], 1);
    }
    c->stats.round_trips++;
    drop_dead_idle(c, mask);
    dlock__connect_nodes(c, mask, res);
    dlock__sigpipe_block(&guard);
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        if (!(mask & (1u << i)) || node->state != DLOCK__UP)
            continue;
        if (redisAppendCommandArgv(node->ctx, argc, argv, argvlen) != REDIS_OK) {
            fail(node, &res[i], DLOCK__R_IOERR, "out of memory queueing the command", "");
            continue;
        }
        waiting[i] = 1;
        if (redisBufferWrite(node->ctx, &wdone[i]) != REDIS_OK) {
            fail(node, &res[i], DLOCK__R_IOERR, "write: ", node->ctx->errstr);
            waiting[i] = 0;
        }
    }
    start = dlock_now_ms();
    deadline = start + c->command_timeout_ms;
    for (;;) {
        size_t k = 0;
        int64_t now;
        int rc;

        for (size_t i = 0; i < c->n; i++) {
            if (!waiting[i])
                continue;
            pfd[k].fd = c->nodes[i].ctx->fd;
            pfd[k].events = (short)(POLLIN | (wdone[i] ? 0 : POLLOUT));
            pfd[k].revents = 0;
            idx[k++] = i;
        }
        if (k == 0)
            break;
        now = dlock_now_ms();
        if (now >= deadline)
            break;
        rc = poll(pfd, (nfds_t)k, (int)(deadline - now));
        if (rc < 0) {
            char ebuf[64];
            if (errno == EINTR)
                continue;
            dlock__strerror(errno, ebuf, sizeof(ebuf));
            for (size_t j = 0; j < k; j++) {
                fail(&c->nodes[idx[j]], &res[idx[j]], DLOCK__R_IOERR, "poll: ", ebuf);
                waiting[idx[j]] = 0;
            }
            break;
        }
        for (size_t j = 0; j < k; j++) {
            size_t i = idx[j];
            dlock__node *node = &c->nodes[i];

            if (pfd[j].revents == 0 || !waiting[i])
                continue;
            if ((pfd[j].revents & POLLOUT) && !wdone[i] &&
                redisBufferWrite(node->ctx, &wdone[i]) != REDIS_OK) {
                fail(node, &res[i], DLOCK__R_IOERR, "write: ", node->ctx->errstr);
                waiting[i] = 0;
                continue;
            }
            if (pfd[j].revents & (POLLIN | POLLERR | POLLHUP))
                read_node(node, &res[i], &waiting[i]);
        }
        if (!stopped && stop != NULL && stop(res, c->n, stop_arg)) {
            int64_t t = dlock_now_ms(), grace = t - start;
            /* Decided - but give the other nodes as long again as the
             * deciding replies took (at least 2 ms). A healthy node that is
             * merely a little slower answers within that and stays in step;
             * without the grace it would fall one reply behind each round
             * and never catch up. A paused node costs only the grace. */
            stopped = 1;
            if (grace < 2)
                grace = 2;
            if (t + grace < deadline)
                deadline = t + grace;
        }
    }
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        char ms[24];

        if (!waiting[i])
            continue;
        if (stopped && node->stale < DLOCK__MAX_STALE) {
            node->stale++;
            res[i].status = DLOCK__R_PENDING;
            dlock__detailf(res[i].detail, "no reply yet (round decided)");
            continue;
        }
        snprintf(ms, sizeof(ms), "%d ms", c->command_timeout_ms);
        fail(node, &res[i], DLOCK__R_TIMEOUT, "timeout after ", ms);
    }
    dlock__sigpipe_restore(&guard);
    return stopped;
}

/* Sends one command to every node in mask without waiting for the answers
 * (they are discarded by the next round). For clean-up that nobody waits
 * on: the release after a failed acquire, the script re-cache. */
void dlock__send_only(dlock_client *c, uint32_t mask, int argc, const char **argv,
                      const size_t *argvlen)
{
    dlock__result res[DLOCK_MAX_NODES];
    dlock__sigpipe_guard guard;

    mask &= dlock__all_nodes(c);
    memset(res, 0, sizeof(res));
    c->stats.round_trips++;
    drop_dead_idle(c, mask);
    dlock__connect_nodes(c, mask, res);
    dlock__sigpipe_block(&guard);
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        int done = 0;

        if (!(mask & (1u << i)) || node->state != DLOCK__UP)
            continue;
        if (node->stale >= DLOCK__MAX_STALE) {
            dlock__node_close(node);
            continue;
        }
        if (redisAppendCommandArgv(node->ctx, argc, argv, argvlen) != REDIS_OK) {
            dlock__node_close(node);
            continue;
        }
        node->stale++;
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
