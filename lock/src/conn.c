/* conn.c - per-node hiredis connections: parallel non-blocking connect with
 * pipelined AUTH, close, and the SIGPIPE guard for writes. */
#include "dlock_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

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
        rc = poll(pfd, (nfds_t)k, (int)(deadline - now));
        if (rc < 0) {
            char ebuf[64];
            if (errno == EINTR)
                continue;
            dlock__strerror(errno, ebuf, sizeof(ebuf));
            for (size_t j = 0; j < k; j++)
                fail_node(&c->nodes[idx[j]], &res[idx[j]], "poll: ", ebuf);
            return;
        }
        for (size_t j = 0; j < k; j++) {
            dlock__node *node = &c->nodes[idx[j]];
            int soerr = 0;
            socklen_t len = sizeof(soerr);

            if (pfd[j].revents == 0)
                continue;
            /* Writability only says the connect finished; SO_ERROR says how
             * (ECONNREFUSED from a dead port arrives this way). */
            if (getsockopt(node->ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
                soerr = errno;
            if (soerr != 0) {
                char ebuf[64];
                dlock__strerror(soerr, ebuf, sizeof(ebuf));
                fail_node(node, &res[idx[j]], "connect: ", ebuf);
                continue;
            }
            /* Lock rounds are small writes that must leave at once: hiredis
             * 0.14 sets TCP_NODELAY on non-blocking connects, 1.x only on
             * blocking ones, so set it here or Nagle's algorithm holds a
             * round's command back behind an unacknowledged earlier write.
             * Best effort: a failure only costs latency. */
            if (!node->addr.is_unix) {
                int one = 1;
                (void)setsockopt(node->ctx->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            }
            node->state = DLOCK__UP;
            if (c->count_reconnects)
                c->stats.reconnects++;
        }
    }
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
