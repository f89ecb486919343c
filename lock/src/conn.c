/* conn.c - per-node hiredis connections: non-blocking connect with
 * pipelined AUTH, close, and the SIGPIPE guard for writes. Also the
 * bookkeeping of each connection's reply stream (the AUTH answer, replies
 * owed to rounds that ended early, lagging connections kept until they
 * drain or fall silent for too long, dead idle connections replaced before
 * a round). A connection that fails or falls behind trips its node's
 * breaker (breaker.c). The rounds (rounds.c) only see the replies meant
 * for them. */
#include "dlock_internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* A node may owe at most this many replies to rounds that ended early. Past
 * that it is not keeping up (paused, overloaded) and its breaker opens: new
 * votes skip it while the connection is kept for what it still owes. */
#define DLOCK__MAX_STALE 4

void dlock__node_close(dlock__node *node)
{
    /* The event-loop client's connection is its own (async_conn.c). */
    if (node->async != NULL)
        dlock__async_node_close(node);
    if (node->ctx != NULL)
        redisFree(node->ctx);
    node->ctx = NULL;
    node->state = DLOCK__DOWN;
    node->auth_pending = 0;
    node->runid_pending = 0;
    /* A refusal belongs to the connection it came on: after a reconnect
     * (the password may have been fixed meanwhile) an error reply must not
     * be reported as an AUTH failure. */
    node->auth_failed = 0;
    node->stale = 0;
    node->unwritten = 0;
    node->ssl = NULL; /* was owned by ctx */
    node->handshaking = 0;
}

/* ---- connecting ---- */

void dlock__conn_fresh(dlock__node *node)
{
    node->state = DLOCK__CONNECTING;
    node->connect_started_ms = dlock_now_ms();
    node->auth_pending = 0;
    node->runid_pending = 0;
    node->stale = 0;
    node->unwritten = 0;
    node->scripts_known = 0; /* a new server process may have an empty script cache */
}

static void fail_node(dlock_client *c, dlock__node *node, dlock__result *r, const char *why,
                      const char *arg)
{
    char detail[DLOCK__DETAIL_LEN];

    dlock__detailf(detail, "%s%s", why, arg);
    dlock__detailf(r->detail, "%s", detail);
    dlock__node_close(node);
    dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, detail);
    r->status = DLOCK__R_DOWN;
}

/* Starts a non-blocking connect and queues AUTH behind it. Nothing waits
 * here: the caller polls the socket for writability (finishing with
 * dlock__conn_finish), so a dead or tarpitted host costs no caller more
 * than its own poll deadline, and never an unbounded kernel SYN-retry wait.
 * Commands appended now leave when the connect is done. */
void dlock__conn_start(dlock_client *c, dlock__node *node, dlock__result *r)
{
    const char *argv[3];
    size_t argvlen[3];
    /* INFO's default sections: server (run_id) and cluster (cluster_enabled). */
    static const char *const info_argv[1] = {"INFO"};
    static const size_t info_len[1] = {4};
    int argc;

    if (node->same_as != 0) {
        fail_node(c, node, r, node->same_detail, "");
        return;
    }
    if (node->addr.is_sentinel) {
        /* Every connect uses a fresh answer of the sentinels: a connect
         * follows a broken connection or a -READONLY reply (rounds.c),
         * which is what a failover looks like from here. The asking is
         * blocking, so it never runs here, under the client mutex (it
         * would hold it for up to n_sentinels x (connect + command) +
         * ROLE, stalling the watchdog's renewals of every lock on the
         * client). Without an answer the node fails this round and the
         * resolver thread asks (sentinel.c). */
        if (!node->master_fresh) {
            char why[DLOCK__DETAIL_LEN];

            if (node->master_why[0] != '\0')
                dlock__detailf(why, "%s", node->master_why);
            else
                dlock__detailf(why, "sentinel: asking for master '%s'", node->addr.master_name);
            dlock__conn_ask_master(c, node);
            fail_node(c, node, r, why, "");
            return;
        }
        node->master_fresh = 0;
        node->ctx = redisConnectNonBlock(node->master.host, node->master.port);
    } else if (node->addr.is_unix) {
        node->ctx = redisConnectUnixNonBlock(node->addr.host);
    } else {
        node->ctx = redisConnectNonBlock(node->addr.host, node->addr.port);
    }
    if (node->ctx == NULL) {
        fail_node(c, node, r, "out of memory creating the connection", "");
        return;
    }
    if (node->ctx->err != 0) {
        fail_node(c, node, r, "connect: ", node->ctx->errstr);
        return;
    }
    dlock__reader_bound(node->ctx);
    dlock__conn_fresh(node);
    argc = dlock__auth_argv(c, argv);
    if (argc > 0) {
        for (int k = 0; k < argc; k++)
            argvlen[k] = strlen(argv[k]);
        /* AUTH is only queued here: it goes out with the first command of
         * the next round, so authenticating costs no extra round trip. Its
         * reply arrives first on the stream and is checked by the round. */
        if (redisAppendCommandArgv(node->ctx, argc, argv, argvlen) != REDIS_OK) {
            fail_node(c, node, r, "out of memory queueing AUTH", "");
            return;
        }
        node->auth_pending = 1;
    }
    /* INFO server rides along the same way: its run_id says which server
     * this address reaches. Two addresses that reach one server (two
     * sentinel names, a sentinel name and a plain address, two host names)
     * must not count twice toward the quorum (dlock__conn_next_reply). */
    if (redisAppendCommandArgv(node->ctx, 1, (const char **)info_argv, info_len) != REDIS_OK) {
        fail_node(c, node, r, "out of memory queueing INFO", "");
        return;
    }
    node->runid_pending = 1;
    node->unwritten = 1;
}

/* Hands hiredis's buffered output to the kernel, as much as it takes now.
 * 0, or -1 with the reason in ebuf (DLOCK__DETAIL_LEN bytes; the caller
 * closes the connection). */
int dlock__conn_write(dlock__node *node, char *ebuf)
{
    int done = 0;

    if (node->state != DLOCK__UP)
        return 0; /* leaves when the connect is done */
    if (redisBufferWrite(node->ctx, &done) != REDIS_OK) {
        dlock__detailf(ebuf, "write: %s", dlock__conn_lost_why(node));
        return -1;
    }
    node->unwritten = !done;
    return 0;
}

/* One poll() over the k entries of pfd. Returns:
 * - 1 when poll() returned (revents tell which fds are ready; none are at
 *   the timeout);
 * - 0 when a signal interrupted it (the caller goes round its loop again:
 *   rebuilds the set, checks its deadline);
 * - -1 when poll() failed, with the reason in ebuf. */
int dlock__poll(struct pollfd *pfd, size_t k, int timeout_ms, char *ebuf, size_t ebuflen)
{
    if (poll(pfd, (nfds_t)k, timeout_ms) >= 0)
        return 1;
    if (errno == EINTR)
        return 0;
    dlock__strerror(errno, ebuf, ebuflen);
    return -1;
}

short dlock__conn_connect_events(const dlock__node *node)
{
    return node->handshaking ? node->hs_events : POLLOUT;
}

/* A TLS node's handshake, one step (when poll() said the socket is ready
 * for what it waited for): 1 done, 0 under way, -1 failed (closed,
 * tripped). Non-blocking throughout: a server that accepts and then says
 * nothing costs its poll deadline (dlock__conn_connect_deadline), never a
 * blocked thread. */
static int handshake(dlock_client *c, dlock__node *node, dlock__result *r)
{
    char why[DLOCK__DETAIL_LEN];
    int rc;

    if (!node->handshaking) {
        const char *host = node->addr.is_sentinel ? node->master.host : node->addr.host;

        if (dlock__tls_start(c->tls, node->ctx, host, &node->ssl, why) != 0) {
            fail_node(c, node, r, why, "");
            return -1;
        }
        node->handshaking = 1;
        node->hs_started_ms = dlock_now_ms();
    }
    rc = dlock__tls_step(node->ssl, &node->hs_events, why);
    if (rc < 0) {
        fail_node(c, node, r, why, "");
        return -1;
    }
    if (rc == 1)
        node->handshaking = 0;
    return rc;
}

/* A connect poll() reported done on node: finds out how it went and, if it
 * worked, sends what was queued behind it. 0 when the node is UP or (TLS)
 * still shaking hands, -1 when it failed (closed, breaker tripped, r says
 * why). */
int dlock__conn_finish(dlock_client *c, dlock__node *node, dlock__result *r)
{
    int soerr = 0;
    socklen_t len = sizeof(soerr);
    char ebuf[DLOCK__DETAIL_LEN];

    if (node->handshaking) {
        int hs = handshake(c, node, r);

        if (hs <= 0)
            return hs;
        goto up;
    }

    /* Writability only says the connect finished; SO_ERROR says how
     * (ECONNREFUSED from a dead port arrives this way). */
    if (getsockopt(node->ctx->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        soerr = errno;
    if (soerr != 0) {
        dlock__strerror(soerr, ebuf, sizeof(ebuf));
        fail_node(c, node, r, "connect: ", ebuf);
        return -1;
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
    if (node->addr.tls) {
        /* The commands queued at connect (AUTH, INFO) stay in hiredis's
         * buffer until the handshake is done: hiredis_ssl writes them then. */
        int hs = handshake(c, node, r);

        if (hs <= 0)
            return hs;
    }
up:
    node->state = DLOCK__UP;
    node->heard_ms = dlock_now_ms();
    if (c->count_reconnects)
        c->stats.reconnects++;
    if (dlock__conn_write(node, ebuf) != 0) {
        fail_node(c, node, r, ebuf, "");
        return -1;
    }
    return 0;
}

int64_t dlock__conn_connect_deadline(const dlock_client *c, const dlock__node *node)
{
    /* A TLS handshake is a round trip or two with the server's work: it
     * gets one command timeout of its own from the TCP connect's end, not
     * the rest of the connect timeout nor the call's deadline. */
    if (node->handshaking)
        return node->hs_started_ms + c->command_timeout_ms;
    return node->connect_started_ms + c->connect_timeout_ms;
}

/* Connects every DOWN node in mask, in parallel, within connect_timeout_ms:
 * only dlock_client_new waits like this (the request path never does).
 * Nodes that fail are closed, tripped, and res[i] gets DLOCK__R_DOWN with
 * the reason; res of the other nodes is untouched. */
void dlock__connect_nodes(dlock_client *c, uint32_t mask, dlock__result *res)
{
    struct pollfd pfd[DLOCK_MAX_NODES];
    size_t idx[DLOCK_MAX_NODES];
    int64_t deadline;
    int any = 0;

    for (size_t i = 0; i < c->n; i++) {
        if ((mask & (1u << i)) && c->nodes[i].state == DLOCK__DOWN) {
            dlock__conn_start(c, &c->nodes[i], &res[i]);
            any = 1;
        }
    }
    if (!any)
        return;
    for (;;) {
        size_t k = 0;
        int64_t now = dlock_now_ms();
        char ebuf[64];
        int rc;

        /* Each node's own deadline: its connect, then its TLS handshake. */
        deadline = INT64_MAX;
        for (size_t i = 0; i < c->n; i++) {
            dlock__node *node = &c->nodes[i];

            if (!(mask & (1u << i)) || node->state != DLOCK__CONNECTING)
                continue;
            if (now >= dlock__conn_connect_deadline(c, node)) {
                dlock__conn_expire(c, node, now);
                res[i].status = DLOCK__R_DOWN;
                dlock__detailf(res[i].detail, "%s", node->breaker.detail);
                continue;
            }
            if (dlock__conn_connect_deadline(c, node) < deadline)
                deadline = dlock__conn_connect_deadline(c, node);
            pfd[k].fd = node->ctx->fd;
            pfd[k].events = dlock__conn_connect_events(node);
            pfd[k].revents = 0;
            idx[k++] = i;
        }
        if (k == 0)
            return;
        rc = dlock__poll(pfd, k, (int)(deadline - now), ebuf, sizeof(ebuf));
        if (rc == 0)
            continue;
        if (rc < 0) {
            for (size_t j = 0; j < k; j++)
                fail_node(c, &c->nodes[idx[j]], &res[idx[j]], "poll: ", ebuf);
            return;
        }
        for (size_t j = 0; j < k; j++) {
            if (pfd[j].revents != 0)
                (void)dlock__conn_finish(c, &c->nodes[idx[j]], &res[idx[j]]);
        }
    }
}

const char *dlock__conn_lost_why(dlock__node *node)
{
    size_t len = strlen(node->ctx->errstr);
    static const char plain[] = " (closed before any reply: a TLS port? nodes over TLS are "
                                "rediss://)";
    static const char tls[] = " (dropped after the TLS handshake: does the server want a "
                              "client certificate? tls_cert_file)";
    const char *hint = node->addr.tls ? tls : plain;
    size_t hlen = strlen(hint) + 1;

    /* A new connection that a server drops before its first reply
     * (INFO's, queued at connect):
     * - over plaintext, what a TLS port does with it (a reset);
     * - over TLS 1.3, what a server that wants a client certificate does
     *   when none came - its alert may be lost to the reset.
     * Said once, in ctx's own buffer, so the text lives as long as
     * the caller needs it. */
    if (!node->addr.is_unix && node->runid_pending && strstr(node->ctx->errstr, " (") == NULL &&
        len + hlen <= sizeof(node->ctx->errstr))
        memcpy(node->ctx->errstr + len, hint, hlen);
    return node->ctx->errstr;
}

/* ---- the reply stream of a connection ---- */

/* The poll events a node needs outside any round's command: a connect to
 * finish, output to flush, replies owed to earlier rounds to drain. 0 when
 * it has nothing going on. Every round serves these nodes in its poll loop
 * without waiting for them. */
int dlock__conn_background(const dlock__node *node)
{
    if (node->state == DLOCK__CONNECTING)
        return dlock__conn_connect_events(node);
    if (node->state != DLOCK__UP)
        return 0;
    if (node->stale > 0 || node->auth_pending || node->runid_pending)
        return POLLIN | (node->unwritten ? POLLOUT : 0);
    return node->unwritten ? POLLOUT : 0;
}

/* Acts on what poll() reported for a node outside the round: finishes its
 * connect, flushes its output, discards owed replies as they come. A
 * tripped node that has drained everything it owed answers again: its
 * breaker closes. */
void dlock__conn_service(dlock_client *c, dlock__node *node, short revents)
{
    dlock__result scratch;
    char ebuf[DLOCK__DETAIL_LEN];

    if (revents == 0)
        return;
    memset(&scratch, 0, sizeof(scratch));
    if (node->state == DLOCK__CONNECTING) {
        (void)dlock__conn_finish(c, node, &scratch);
        return;
    }
    if (node->state != DLOCK__UP)
        return;
    if ((revents & POLLOUT) && node->unwritten && dlock__conn_write(node, ebuf) != 0) {
        dlock__node_close(node);
        dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, ebuf);
        return;
    }
    if (revents & (POLLIN | POLLERR | POLLHUP)) {
        redisReply *extra = NULL;
        int got;

        if (redisBufferRead(node->ctx) != REDIS_OK) {
            dlock__detailf(ebuf, "connection lost: %s", dlock__conn_lost_why(node));
            dlock__node_close(node);
            dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, ebuf);
            return;
        }
        got = dlock__conn_next_reply(c, node, &extra);
        if (got == DLOCK__CONN_SAME_SERVER) {
            dlock__conn_refuse(c, node);
            return;
        }
        if (got != 0 || extra != NULL) {
            /* Nothing is owed beyond stale: a reply past it means the
             * stream is out of step, and only a fresh connection is. */
            if (extra != NULL)
                freeReplyObject(extra);
            dlock__node_close(node);
            dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, "reply stream out of step");
            return;
        }
    }
    if (node->breaker.open && node->stale == 0 && !node->auth_pending && !node->runid_pending)
        dlock__breaker_heard(node);
}

/* Gives up on what is hopeless: a connect older than connect_timeout_ms,
 * and a connection that owes replies and has said nothing for longer than
 * the longest TTL any lock of ours used. Until then a lagging connection is
 * kept, so that releases queue behind the commands already sent on it, in
 * order, and a resumed node deletes what it sets. Past the longest TTL even
 * the newest lock that counted on the node has run out of validity. */
void dlock__conn_expire(dlock_client *c, dlock__node *node, int64_t now)
{
    char why[DLOCK__DETAIL_LEN];
    int64_t silence_ms = c->longest_ttl_ms > (uint32_t)c->command_timeout_ms
                             ? (int64_t)c->longest_ttl_ms
                             : (int64_t)c->command_timeout_ms;

    if (node->state == DLOCK__CONNECTING && now >= dlock__conn_connect_deadline(c, node)) {
        if (node->handshaking)
            dlock__detailf(why, "TLS handshake timeout after %d ms: the server took the "
                           "connection and did not answer (stalled, or a plaintext port)",
                           c->command_timeout_ms);
        else
            dlock__detailf(why, "connect timeout after %d ms", c->connect_timeout_ms);
        dlock__node_close(node);
        dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, why);
    } else if (node->state == DLOCK__UP && node->stale > 0 && now - node->heard_ms > silence_ms) {
        dlock__detailf(why, "silent for %lld ms while owing %u replies",
                       (long long)(now - node->heard_ms), node->stale);
        dlock__node_close(node);
        dlock__breaker_trip(c, node, DLOCK_ERR_TIMEOUT, why);
    }
}

void dlock__conn_ask_master(dlock_client *c, dlock__node *node)
{
    /* Only flags and signals: this file never calls into sentinel.c (which
     * uses it to connect), the resolver thread reads the flag. */
    if (!node->addr.is_sentinel || node->master_fresh || node->master_asking != 0 ||
        !c->rs_started)
        return;
    node->master_asking = 1;
    pthread_cond_signal(&c->rs_cond);
}

/* Readies the client for a round, without waiting for anything:
 * - gives up on hopeless connects and silences (dlock__conn_expire);
 * - serves what the nodes said since the last round (a resumed node's owed
 *   replies close its breaker before the round chooses its nodes);
 * - drops idle connections the server closed, so the round reconnects
 *   instead of failing on a socket known to be dead. An idle connection has nothing to say in RESP2: if it
 * is readable before we send, the server closed it or sent junk. */
void dlock__conn_prepare(dlock_client *c)
{
    struct pollfd pfd[DLOCK_MAX_NODES];
    size_t idx[DLOCK_MAX_NODES];
    size_t k = 0;
    int64_t now = dlock_now_ms();

    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        int ev;

        dlock__conn_expire(c, node, now);
        ev = dlock__conn_background(node);
        if (node->state == DLOCK__UP && ev == 0)
            ev = POLLIN; /* idle: readable means closed */
        if (ev == 0)
            continue;
        pfd[k].fd = node->ctx->fd;
        pfd[k].events = (short)ev;
        pfd[k].revents = 0;
        idx[k++] = i;
    }
    if (k == 0 || poll(pfd, (nfds_t)k, 0) <= 0)
        return;
    for (size_t j = 0; j < k; j++) {
        dlock__node *node = &c->nodes[idx[j]];

        if (pfd[j].revents == 0)
            continue;
        if (dlock__conn_background(node) == 0)
            dlock__node_close(node);
        else
            dlock__conn_service(c, node, pfd[j].revents);
    }
}

int dlock__auth_argv(const dlock_client *c, const char *argv[3])
{
    if (c->password == NULL)
        return 0;
    argv[0] = "AUTH";
    if (c->username == NULL) {
        argv[1] = c->password;
        return 2;
    }
    argv[1] = c->username;
    argv[2] = c->password;
    return 3;
}

/* The run_id of an INFO server answer into out[48] ("" when absent: an
 * ACL user without INFO, an error reply). */
static void run_id_of(const redisReply *r, char *out)
{
    const char *p;
    size_t n = 0;

    out[0] = '\0';
    if ((r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) || r->str == NULL ||
        (p = strstr(r->str, "run_id:")) == NULL)
        return;
    p += 7;
    while (n < 47 && ((p[n] >= '0' && p[n] <= '9') || (p[n] >= 'a' && p[n] <= 'f')))
        n++;
    memcpy(out, p, n);
    out[n] = '\0';
}

/* The node reached a server another node of c reaches too: refused for
 * good (1 when it is). The later one to answer is refused, so one address
 * keeps the server's one vote; its run id is forgotten, so that the kept
 * node, reconnecting, is not refused in turn. */
static int same_server(dlock_client *c, dlock__node *node)
{
    for (size_t j = 0; j < c->n; j++) {
        dlock__node *o = &c->nodes[j];

        if (o == node || o->same_as != 0 || o->run_id[0] == '\0' ||
            strcmp(o->run_id, node->run_id) != 0)
            continue;
        node->same_as = (int)j + 1;
        /* Whole (dlock__errf's length, not a round detail's): it is what
         * dlock_client_new answers. */
        dlock__errf(node->same_detail,
                       "%s reaches the same server as %s (run_id %.12s...): it would count "
                       "twice toward the quorum, so it is refused",
                       node->addr.text, o->addr.text, node->run_id);
        node->run_id[0] = '\0';
        return 1;
    }
    return 0;
}

void dlock__conn_refuse(dlock_client *c, dlock__node *node)
{
    dlock__node_close(node);
    dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, node->same_detail);
}

/* The answer to our AUTH or our INFO server, the first replies on every
 * connection (both clients: the blocking streams here, the event-loop
 * client's callbacks in async_conn.c). Takes reply (frees it). Returns
 * DLOCK__CONN_SAME_SERVER when the node reaches another node's server or a
 * Redis Cluster node (refused for good), 0 otherwise. */
int dlock__conn_handshake_reply(dlock_client *c, dlock__node *node, redisReply *reply)
{
    if (node->auth_pending) {
        node->auth_pending = 0;
        /* Every refusal counts, "no password is set" too: credentials
         * the server does not have are a configuration to fix, as
         * Redis and redis-py say, not a reason to go on as someone
         * else. The command waited for this answer (rounds.c). */
        if (reply->type == REDIS_REPLY_ERROR) {
            node->auth_failed = 1;
            dlock__detailf(node->auth_detail, "AUTH refused: %s",
                           reply->str != NULL ? reply->str : "(no text)");
        }
        freeReplyObject(reply);
        return 0;
    }
    node->runid_pending = 0;
    run_id_of(reply, node->run_id);
    /* A Redis Cluster node would answer CROSSSLOT to the first
     * script over a lock key and its fence key: refused for good
     * now, saying why. */
    if ((reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_STATUS) &&
        reply->str != NULL && strstr(reply->str, "cluster_enabled:1") != NULL) {
        freeReplyObject(reply);
        node->same_as = -1;
        dlock__errf(node->same_detail,
                    "%s is a Redis Cluster node (cluster_enabled:1): libdlock needs "
                    "independent masters, not a cluster; give the addresses of "
                    "masters outside cluster mode", node->addr.text);
        return DLOCK__CONN_SAME_SERVER;
    }
    freeReplyObject(reply);
    if (node->run_id[0] != '\0' && same_server(c, node))
        return DLOCK__CONN_SAME_SERVER;
    return 0;
}

/* Takes the complete replies already read from node's connection in stream
 * order:
 * - our AUTH answer first (its verdict is kept for dlock__conn_auth_refusal);
 * - then our INFO server (the server's run id);
 * - then replies owed to earlier rounds (freed);
 * - then the caller's answer, handed over in *out (the caller owns it).
 * *out is NULL when no reply for the caller is complete yet. Returns -1
 * when the stream is garbled (the reason in node->ctx->errstr),
 * DLOCK__CONN_SAME_SERVER when the node reaches another node's server, 0
 * otherwise. */
int dlock__conn_next_reply(dlock_client *c, dlock__node *node, redisReply **out)
{
    *out = NULL;
    for (;;) {
        void *p = NULL;
        redisReply *reply;

        if (redisGetReplyFromReader(node->ctx, &p) != REDIS_OK) {
            /* 0x15 / 0x16 open a TLS alert / handshake record: a plaintext
             * client reached a TLS port, whose answer is no RESP. */
            if (!node->addr.tls && node->ctx->err == REDIS_ERR_PROTOCOL &&
                (strstr(node->ctx->errstr, "\\x15") != NULL ||
                 strstr(node->ctx->errstr, "\\x16") != NULL))
                snprintf(node->ctx->errstr, sizeof(node->ctx->errstr),
                         "the server answered in TLS: a TLS port (write the node as rediss://)");
            return -1;
        }
        if (p == NULL)
            return 0;
        reply = p;
        node->heard_ms = dlock_now_ms();
        if (node->auth_pending || node->runid_pending) {
            int rc = dlock__conn_handshake_reply(c, node, reply);

            if (rc != 0)
                return rc;
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

/* NOAUTH and WRONGPASS, and the protocol error Redis answers an
 * unauthenticated client whose command has more than 10 arguments (or a
 * long argument) before it closes the connection. enter.lua's EVALSHA has
 * more: without this, a queued acquire with no or a wrong password would
 * say PROTOCOL where a try says AUTH (lock_handoff
 * queued_acquire_without_password_says_auth). */
static int is_auth_refusal(const redisReply *r)
{
    return r->type == REDIS_REPLY_ERROR && r->str != NULL &&
           (strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0 ||
            strncmp(r->str, "ERR Protocol error: unauthenticated", 35) == 0);
}

/* Whether reply, the caller's answer on node's connection, says the command
 * was refused for want of authentication: returns the text to report (valid
 * while reply and the connection live), or NULL when the reply stands.
 * Only the server's own refusal counts: any other error reply is the
 * command's (NOSCRIPT must reach the EVAL fallback). A command never runs
 * behind a refused AUTH (rounds.c holds it back). So this is a server
 * asking for a password the client did not give: said as NOAUTH, also
 * where Redis answers a long command with its protocol error instead. */
const char *dlock__conn_auth_refusal(const dlock__node *node, const redisReply *reply)
{
    if (!is_auth_refusal(reply))
        return NULL;
    if (node->auth_failed)
        return node->auth_detail;
    if (strncmp(reply->str, "ERR Protocol error: unauthenticated", 35) == 0)
        return "NOAUTH Authentication required (the server needs a password; it answers a "
               "long command from an unauthenticated client with a protocol error)";
    return reply->str;
}

/* The caller sent (or queued) node a command whose reply it will not read:
 * counts the reply as owed, so that whoever reads the stream next discards
 * it on arrival. Returns 1 when the node now owes more than
 * DLOCK__MAX_STALE replies (not keeping up: the caller trips its breaker),
 * 0 otherwise. The connection is kept either way. */
int dlock__conn_owe(dlock__node *node)
{
    node->stale++;
    return node->stale > DLOCK__MAX_STALE;
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
