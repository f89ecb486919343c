/* conn.c - per-node hiredis connections: parallel non-blocking connect with
 * pipelined AUTH, close, and the SIGPIPE guard for writes; plus the
 * bookkeeping of each connection's reply stream (the AUTH answer, replies
 * owed to rounds that ended early, when a connection is too far behind and
 * is dropped, dead idle connections replaced before a round). The rounds
 * (rounds.c) only see the replies meant for them. */
#include "dlock_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* A node may owe at most this many replies to rounds that ended early; past
 * that it is not keeping up (paused, overloaded) and its connection is
 * dropped rather than letting a backlog of stale commands grow. */
#define DLOCK__MAX_STALE 4

void dlock__node_close(dlock__node *node)
{
    if (node->ctx != NULL)
        redisFree(node->ctx);
    node->ctx = NULL;
    node->state = DLOCK__DOWN;
    node->auth_pending = 0;
    /* A refusal belongs to the connection it came on: after a reconnect
     * (the password may have been fixed meanwhile) an error reply must not
     * be reported as an AUTH failure. */
    node->auth_failed = 0;
    node->stale = 0;
}

static void fail_node(dlock__node *node, dlock__result *r, const char *why, const char *arg)
{
    dlock__detailf(r->detail, "%s%s", why, arg);
    dlock__node_close(node);
    r->status = DLOCK__R_DOWN;
}

static void start_connect(dlock_client *c, dlock__node *node, dlock__result *r)
{
    const char *argv[3];
    size_t argvlen[3];
    int argc = 0;

    /* Non-blocking connect: the caller waits for all nodes at once with one
     * poll() bounded by connect_timeout_ms, so a dead host costs one timeout
     * per round instead of one per node, and never an unbounded kernel
     * SYN-retry wait. */
    if (node->addr.is_unix)
        node->ctx = redisConnectUnixNonBlock(node->addr.host);
    else
        node->ctx = redisConnectNonBlock(node->addr.host, node->addr.port);
    if (node->ctx == NULL) {
        fail_node(node, r, "out of memory creating the connection", "");
        return;
    }
    if (node->ctx->err != 0) {
        fail_node(node, r, "connect: ", node->ctx->errstr);
        return;
    }
    node->state = DLOCK__CONNECTING;
    node->auth_pending = 0;
    node->stale = 0;
    if (c->password == NULL)
        return;
    argv[argc] = "AUTH";
    argvlen[argc++] = 4;
    if (c->username != NULL) {
        argv[argc] = c->username;
        argvlen[argc++] = strlen(c->username);
    }
    argv[argc] = c->password;
    argvlen[argc++] = strlen(c->password);
    /* AUTH is only queued here: it goes out with the first command of the
     * next round, so authenticating costs no extra round trip. Its reply
     * arrives first on the stream and is checked by the round. */
    if (redisAppendCommandArgv(node->ctx, argc, argv, argvlen) != REDIS_OK) {
        fail_node(node, r, "out of memory queueing AUTH", "");
        return;
    }
    node->auth_pending = 1;
}

/* One poll() over the k entries of pfd. Returns 1 when poll() returned
 * (revents tell which fds are ready; none are at the timeout), 0 when a
 * signal interrupted it (the caller goes round its loop again: rebuilds the
 * set, checks its deadline), -1 when poll() failed, with the reason in
 * ebuf. */
int dlock__poll(struct pollfd *pfd, size_t k, int timeout_ms, char *ebuf, size_t ebuflen)
{
    if (poll(pfd, (nfds_t)k, timeout_ms) >= 0)
        return 1;
    if (errno == EINTR)
        return 0;
    dlock__strerror(errno, ebuf, ebuflen);
    return -1;
}

/* A connect poll() reported done on node: finds out how it went and, if it
 * worked, makes the connection ready for lock rounds. */
static void finish_connect(dlock_client *c, dlock__node *node, dlock__result *r)
{
    int soerr = 0;
    socklen_t len = sizeof(soerr);

    /* Writability only says the connect finished; SO_ERROR says how
     * (ECONNREFUSED from a dead port arrives this way). */
    if (getsockopt(node->ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        soerr = errno;
    if (soerr != 0) {
        char ebuf[64];
        dlock__strerror(soerr, ebuf, sizeof(ebuf));
        fail_node(node, r, "connect: ", ebuf);
        return;
    }
    /* Lock rounds are small writes that must leave at once: hiredis 0.14
     * sets TCP_NODELAY on non-blocking connects, 1.x only on blocking ones,
     * so set it here or Nagle's algorithm holds a round's command back
     * behind an unacknowledged earlier write. Best effort: a failure only
     * costs latency. */
    if (!node->addr.is_unix) {
        int one = 1;
        (void)setsockopt(node->ctx->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    node->state = DLOCK__UP;
    if (c->count_reconnects)
        c->stats.reconnects++;
}

/* Connects every DOWN node in mask, in parallel, within connect_timeout_ms.
 * Nodes that fail are closed and res[i] gets DLOCK__R_DOWN with the reason;
 * res of the other nodes is untouched. */
void dlock__connect_nodes(dlock_client *c, uint32_t mask, dlock__result *res)
{
    struct pollfd pfd[DLOCK_MAX_NODES];
    size_t idx[DLOCK_MAX_NODES];
    int64_t deadline;
    int any = 0;

    for (size_t i = 0; i < c->n; i++) {
        if ((mask & (1u << i)) && c->nodes[i].state == DLOCK__DOWN) {
            start_connect(c, &c->nodes[i], &res[i]);
            any = 1;
        }
    }
    if (!any)
        return;
    deadline = dlock_now_ms() + c->connect_timeout_ms;
    for (;;) {
        size_t k = 0;
        int64_t now;
        char ebuf[64];
        int rc;

        for (size_t i = 0; i < c->n; i++) {
            if ((mask & (1u << i)) && c->nodes[i].state == DLOCK__CONNECTING) {
                pfd[k].fd = c->nodes[i].ctx->fd;
                pfd[k].events = POLLOUT;
                pfd[k].revents = 0;
                idx[k++] = i;
            }
        }
        if (k == 0)
            return;
        now = dlock_now_ms();
        if (now >= deadline) {
            char ms[16];
            snprintf(ms, sizeof(ms), "%d ms", c->connect_timeout_ms);
            for (size_t j = 0; j < k; j++)
                fail_node(&c->nodes[idx[j]], &res[idx[j]], "connect timeout after ", ms);
            return;
        }
        rc = dlock__poll(pfd, k, (int)(deadline - now), ebuf, sizeof(ebuf));
        if (rc == 0)
            continue;
        if (rc < 0) {
            for (size_t j = 0; j < k; j++)
                fail_node(&c->nodes[idx[j]], &res[idx[j]], "poll: ", ebuf);
            return;
        }
        for (size_t j = 0; j < k; j++) {
            if (pfd[j].revents != 0)
                finish_connect(c, &c->nodes[idx[j]], &res[idx[j]]);
        }
    }
}

/* ---- the reply stream of a connection ---- */

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

/* Readies the nodes of mask for a round: drops the idle connections the
 * server closed, then (re)connects every DOWN node, as
 * dlock__connect_nodes. */
void dlock__conn_prepare(dlock_client *c, uint32_t mask, dlock__result *res)
{
    drop_dead_idle(c, mask);
    dlock__connect_nodes(c, mask, res);
}

/* Takes the complete replies already read from node's connection in stream
 * order: our AUTH answer first (its verdict is kept for
 * dlock__conn_auth_refusal), then replies owed to earlier rounds (freed),
 * then the caller's answer, handed over in *out (the caller owns it). *out
 * is NULL when no reply for the caller is complete yet. Returns -1 when the
 * stream is garbled (the reason in node->ctx->errstr), 0 otherwise. */
int dlock__conn_next_reply(dlock__node *node, redisReply **out)
{
    *out = NULL;
    for (;;) {
        void *p = NULL;
        redisReply *reply;

        if (redisGetReplyFromReader(node->ctx, &p) != REDIS_OK)
            return -1;
        if (p == NULL)
            return 0;
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
        *out = reply;
        return 0;
    }
}

static int is_auth_refusal(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->str != NULL &&
           (strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0);
}

/* Whether reply, the caller's answer on node's connection, says the command
 * was refused for want of authentication: returns the text to report (valid
 * while reply and the connection live), or NULL when the reply stands.
 * A refused AUTH makes the server answer NOAUTH; a server without a
 * password answers our AUTH with an error but runs the command, and then
 * the command's own reply stands. */
const char *dlock__conn_auth_refusal(const dlock__node *node, const redisReply *reply)
{
    if (is_auth_refusal(reply) || (node->auth_failed && reply->type == REDIS_REPLY_ERROR))
        return node->auth_failed ? node->auth_detail : reply->str;
    return NULL;
}

/* The caller sends (or has sent) node a command whose reply it will not
 * read: counts the reply as owed, so that whoever reads the stream next
 * discards it on arrival.
 * Returns 0; or -1 when the node already owes DLOCK__MAX_STALE replies, after
 * dropping its connection (the next round reconnects). */
int dlock__conn_owe(dlock__node *node)
{
    if (node->stale >= DLOCK__MAX_STALE) {
        dlock__node_close(node);
        return -1;
    }
    node->stale++;
    return 0;
}

/* hiredis writes with write(2): on a connection the peer reset, the kernel
 * raises SIGPIPE, whose default action kills the whole process - a library
 * must not do that to its host. The signal is blocked in this thread for the
 * duration of a round; a SIGPIPE our write caused is consumed before the old
 * mask comes back, one that was already pending is left alone. */
void dlock__sigpipe_block(dlock__sigpipe_guard *g)
{
    sigset_t block, pending;

    g->active = 0;
    g->was_pending = 0;
    sigemptyset(&block);
    sigaddset(&block, SIGPIPE);
    if (pthread_sigmask(SIG_BLOCK, &block, &g->old) != 0)
        return;
    g->active = 1;
    if (sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1)
        g->was_pending = 1;
}

void dlock__sigpipe_restore(dlock__sigpipe_guard *g)
{
    sigset_t pipe_set, pending;

    if (!g->active)
        return;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    if (!g->was_pending && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
        const struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
    g->active = 0;
}
