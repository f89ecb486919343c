/* rounds.c - the parallel request engine: one command to N nodes at once,
 * one poll() loop, one deadline. What each connection's reply stream still
 * owes (AUTH answer, replies to rounds that ended early) is kept by conn.c,
 * each node's circuit breaker by breaker.c, and what the answers add up to
 * is read by tally.c. */
#include "round_core.h"

#include <poll.h>
#include <string.h>

_Thread_local int64_t dlock__call_deadline_ms = INT64_MAX;

int64_t dlock__call_begin(int64_t deadline_ms)
{
    int64_t previous = dlock__call_deadline_ms, now = dlock_now_ms();

    dlock__call_deadline_ms = deadline_ms > now ? deadline_ms : now;
    return previous;
}

void dlock__call_end(int64_t previous)
{
    dlock__call_deadline_ms = previous;
}

/* One node's part in a round, as the poll driver keeps it (its role and
 * whether its answer is due are the core's: round_core.c). */
typedef struct round_slot {
    dlock__node *node;
    dlock__result *res; /* the caller's entry for this node */
    int deferred;       /* held back until the connection's AUTH is answered (queue_command) */
} round_slot;

/* A round in progress: the core's rules, and the bytes of the command. */
typedef struct round_run {
    dlock__round_core core;
    dlock_client *c;
    round_slot slot[DLOCK_MAX_NODES];
    int argc;
    const char **argv;
    const size_t *argvlen;
} round_run;

/* The connection broke or the stream is garbled: the reply stream position
 * is unknown, a late reply would be taken for the answer to the next
 * command. Only a fresh connection is trustworthy; until one answers, the
 * node's breaker is open. */
static void io_fail(round_run *rr, size_t i, const char *what, const char *arg)
{
    round_slot *s = &rr->slot[i];

    dlock__detailf(s->res->detail, "%s%s", what, arg);
    s->res->status = DLOCK__R_IOERR;
    dlock__rc_failed(&rr->core, i);
    dlock__node_close(s->node);
    dlock__breaker_trip(rr->c, s->node, DLOCK_ERR_UNREACHABLE, s->res->detail);
}

/* What every round and send-only does before sending: serves what the
 * connections said since the last round and gives up on hopeless ones
 * (conn.c; nothing here waits), and blocks SIGPIPE for the writes. */
static void round_open(dlock_client *c, dlock__sigpipe_guard *guard)
{
    dlock__sigpipe_block(guard);
    dlock__conn_prepare(c);
}

/* Queues the command on node (connecting it first when it has no
 * connection: the command waits in the buffer until the connect is done)
 * and writes what the kernel takes at once. 0 when queued; -1 when the node
 * could not be reached (r says why). With deferred non-NULL, a connection
 * whose AUTH is not answered yet gets only that AUTH written, and
 * *deferred = 1: the round sends the command once the AUTH is accepted
 * (read_node). A command pipelined behind a refused AUTH would run as the
 * server's default user, a silent change of identity when that user has
 * no password. Costs one round trip per new connection, none after. */
static int queue_command(dlock_client *c, dlock__node *node, dlock__result *r, int argc,
                         const char **argv, const size_t *argvlen, int *deferred)
{
    char ebuf[DLOCK__DETAIL_LEN];

    if (node->state == DLOCK__DOWN) {
        dlock__conn_start(c, node, r);
        if (node->state == DLOCK__DOWN)
            return -1;
    }
    if (deferred != NULL && (node->auth_pending || node->auth_failed)) {
        *deferred = 1;
        argc = 0; /* nothing appended: AUTH (and INFO) go out alone */
    }
    if (argc > 0 && redisAppendCommandArgv(node->ctx, argc, argv, argvlen) != REDIS_OK) {
        dlock__detailf(r->detail, "out of memory queueing the command");
        r->status = DLOCK__R_IOERR;
        dlock__node_close(node);
        return -1;
    }
    /* Silence is counted from the oldest answer still due. */
    if (node->stale == 0 && node->state == DLOCK__UP)
        node->heard_ms = dlock_now_ms();
    node->unwritten = 1;
    if (dlock__conn_write(node, ebuf) != 0) {
        dlock__detailf(r->detail, "%s", ebuf);
        r->status = DLOCK__R_IOERR;
        dlock__node_close(node);
        dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, ebuf);
        return -1;
    }
    return 0;
}

/* The AUTH a deferred command waited for is answered: refused, the node
 * fails this round with the server's words and the connection is closed
 * (the next call authenticates afresh); accepted, the command goes out. */
static void send_deferred(round_run *rr, size_t i)
{
    round_slot *s = &rr->slot[i];
    dlock__node *node = s->node;

    s->deferred = 0;
    if (node->auth_failed) {
        dlock__detailf(s->res->detail, "%s", node->auth_detail);
        s->res->status = DLOCK__R_AUTH;
        dlock__rc_failed(&rr->core, i);
        dlock__node_close(node);
        return;
    }
    if (queue_command(rr->c, node, s->res, rr->argc, rr->argv, rr->argvlen, NULL) != 0)
        dlock__rc_failed(&rr->core, i);
}

static void send_slot(round_run *rr, size_t i)
{
    round_slot *s = &rr->slot[i];
    int queued;

    s->deferred = 0;
    queued = queue_command(rr->c, s->node, s->res, rr->argc, rr->argv, rr->argvlen,
                           &s->deferred) == 0;
    dlock__rc_sent(&rr->core, i, queued);
    /* Its AUTH was answered already (read while serving the connection
     * between rounds): decided now. */
    if (queued && s->deferred && !s->node->auth_pending)
        send_deferred(rr, i);
}

/* Sends to the nodes of mask; 1 when a waited one of them is connecting. */
static int send_slots(round_run *rr, uint32_t mask)
{
    int connecting = 0;

    for (size_t i = 0; i < rr->c->n; i++) {
        if (!(mask & (1u << i)))
            continue;
        send_slot(rr, i);
        connecting |= rr->core.role[i] == DLOCK__SLOT_WAITED && rr->core.waiting[i] &&
                      rr->slot[i].node->state == DLOCK__CONNECTING;
    }
    return connecting;
}

/* The core's second chance, sent by this driver. */
static int send_again(void *driver, uint32_t mask)
{
    return send_slots(driver, mask);
}

/* Reads what the node sent and dispatches every complete reply in stream
 * order: our AUTH answer first, then replies owed to earlier rounds (those
 * two are conn.c's business: dlock__conn_next_reply), then this round's
 * answer. */
static void read_node(round_run *rr, size_t i)
{
    dlock_client *c = rr->c;
    round_slot *s = &rr->slot[i];
    dlock__node *node = s->node;
    dlock__result *r = s->res;

    if (redisBufferRead(node->ctx) != REDIS_OK) {
        io_fail(rr, i, "connection lost: ", dlock__conn_lost_why(node));
        return;
    }
    for (;;) {
        redisReply *reply;
        const char *refused;
        int got = dlock__conn_next_reply(c, node, &reply);

        if (got == DLOCK__CONN_SAME_SERVER) {
            /* Another address of the client reaches this server: its
             * answer must not be a second vote. */
            dlock__detailf(r->detail, "%s", node->same_detail);
            r->status = DLOCK__R_DOWN;
            dlock__rc_failed(&rr->core, i);
            dlock__conn_refuse(c, node);
            return;
        }
        if (got != 0) {
            io_fail(rr, i, "protocol error: ", node->ctx->errstr);
            return;
        }
        if (reply == NULL) {
            if (s->deferred && !node->auth_pending)
                send_deferred(rr, i);
            return;
        }
        if (!rr->core.waiting[i] || s->deferred) {
            freeReplyObject(reply);
            io_fail(rr, i, "unsolicited reply (stream out of step)", "");
            return;
        }
        refused = dlock__conn_auth_refusal(node, reply);
        if (refused != NULL) {
            dlock__rc_replied(&rr->core, i);
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
        dlock__rc_replied(&rr->core, i);
        if (dlock__sentinel_demoted(&node->addr, reply)) {
            /* The master we were sent to is a replica now: drop the
             * connection, so that the next round asks the sentinels. */
            dlock__node_close(node);
            return;
        }
    }
}

/* Acts on what poll() reported for a slot of the round: finishes the
 * connect, the write, then reads. */
static void serve(round_run *rr, size_t i, short revents)
{
    round_slot *s = &rr->slot[i];
    char ebuf[DLOCK__DETAIL_LEN];

    if (revents == 0 || !rr->core.waiting[i])
        return;
    if (s->node->state == DLOCK__CONNECTING) {
        if (dlock__conn_finish(rr->c, s->node, s->res) != 0)
            dlock__rc_failed(&rr->core, i);
        return;
    }
    if ((revents & POLLOUT) && s->node->unwritten &&
        dlock__conn_write(s->node, ebuf) != 0) {
        io_fail(rr, i, ebuf, "");
        return;
    }
    if (revents & (POLLIN | POLLERR | POLLHUP))
        read_node(rr, i);
}


/* Fills pfd with what the round polls: its nodes whose answer is due, and
 * every other node with I/O of its own (a connect, owed replies), which is
 * served but never waited for. *wake gets the earliest connect deadline of
 * the round's nodes. Returns the count. */
static size_t poll_set(round_run *rr, struct pollfd *pfd, size_t *idx, int64_t *wake)
{
    size_t k = 0;

    for (size_t i = 0; i < rr->c->n; i++) {
        round_slot *s = &rr->slot[i];
        int ev;

        if (rr->core.waiting[i]) {
            if (s->node->state == DLOCK__CONNECTING) {
                int64_t cd = dlock__conn_connect_deadline(rr->c, s->node);
                ev = dlock__conn_connect_events(s->node);
                if (cd < *wake)
                    *wake = cd;
            } else {
                ev = POLLIN | (s->node->unwritten ? POLLOUT : 0);
            }
        } else {
            ev = dlock__conn_background(s->node);
        }
        if (ev == 0)
            continue;
        pfd[k].fd = s->node->ctx->fd;
        pfd[k].events = (short)ev;
        pfd[k].revents = 0;
        idx[k++] = i;
    }
    return k;
}

/* A connect of the round that is not done by connect_timeout_ms has
 * failed: the node is unreachable for this round. */
static void expire_connects(round_run *rr, int64_t now)
{
    for (size_t i = 0; i < rr->c->n; i++) {
        round_slot *s = &rr->slot[i];

        if (!rr->core.waiting[i] || s->node->state != DLOCK__CONNECTING ||
            now < dlock__conn_connect_deadline(rr->c, s->node))
            continue;
        dlock__conn_expire(rr->c, s->node, now);
        s->res->status = DLOCK__R_DOWN;
        dlock__detailf(s->res->detail, "%s", s->node->breaker.detail);
        dlock__rc_failed(&rr->core, i);
    }
}

/* One poll() over every node whose answer is due (plus the background I/O
 * of the others), until no answer the round waits for is due or the
 * deadline passed. */
static void collect(round_run *rr)
{
    for (;;) {
        struct pollfd pfd[DLOCK_MAX_NODES];
        size_t idx[DLOCK_MAX_NODES];
        int64_t now = dlock_now_ms(), wake;
        size_t k;
        char ebuf[64];
        int rc;

        expire_connects(rr, now);
        if (!dlock__rc_waits(&rr->core, send_again, rr) || now >= rr->core.deadline)
            return;
        wake = rr->core.deadline;
        k = poll_set(rr, pfd, idx, &wake);
        rc = dlock__poll(pfd, k, (int)(wake - now), ebuf, sizeof(ebuf));
        if (rc == 0)
            continue;
        if (rc < 0) {
            for (size_t j = 0; j < k; j++) {
                if (rr->core.waiting[idx[j]])
                    io_fail(rr, idx[j], "poll: ", ebuf);
            }
            return;
        }
        for (size_t j = 0; j < k; j++) {
            if (rr->core.waiting[idx[j]])
                serve(rr, idx[j], pfd[j].revents);
            else
                dlock__conn_service(rr->c, rr->slot[idx[j]].node, pfd[j].revents);
        }
        dlock__rc_check_stop(&rr->core);
    }
}

/* Sends one command to the nodes of mask and collects the replies.
 *
 * Why one poll() over all nodes: the distlock page asks to "multiplex" the
 * SETs so the time to reach a majority does not grow with N (and thus
 * neither does the window in which two clients split the votes). The
 * round costs the slowest node's round trip, bounded by
 * command_timeout_ms, not the sum.
 *
 * Nothing waits outside that poll. A node without a connection is
 * connected in the same loop (the command queued behind the connect). A
 * node whose breaker is open is skipped (choose_roles), so a sick
 * minority costs the healthy majority nothing. res[i] of every node in mask
 * is overwritten; other entries are kept (a caller may merge two rounds).
 * When stop() says the outcome is decided the round ends after a short
 * grace: nodes still pending then keep their connection and owe a stale
 * reply. reach: nodes the command must reach even with their breaker open
 * (a release). Returns 1 if stop() ended the round, 0 otherwise. */
int dlock__round(dlock_client *c, uint32_t mask, uint32_t reach, int argc, const char **argv,
                 const size_t *argvlen, dlock__result *res, dlock__stop_fn stop, void *stop_arg)
{
    round_run rr;
    dlock__sigpipe_guard guard;
    uint32_t send, close;

    round_open(c, &guard);
    memset(&rr, 0, sizeof(rr));
    rr.c = c;
    rr.argc = argc;
    rr.argv = argv;
    rr.argvlen = argvlen;
    for (size_t i = 0; i < c->n; i++) {
        rr.slot[i].node = &c->nodes[i];
        rr.slot[i].res = &res[i];
    }
    send = dlock__rc_open(&rr.core, c, mask, reach, res, stop, stop_arg, dlock__call_deadline_ms);
    dlock__rc_start(&rr.core, send_slots(&rr, send));
    collect(&rr);
    close = dlock__rc_finish(&rr.core);
    for (size_t i = 0; i < c->n; i++)
        if (close & (1u << i))
            dlock__node_close(&c->nodes[i]);
    dlock__sigpipe_restore(&guard);
    return rr.core.stopped;
}

/* Sends one command to every node in mask without waiting for the answers
 * (they are discarded by the next round). For clean-up that nobody waits
 * on: the release after a failed acquire, the script re-cache. A kept
 * lagging connection gets it too, queued behind the command it undoes; a
 * node without a connection gets a non-blocking connect unless its breaker
 * is open (then nothing of ours can be on it but what its TTL removes). */
void dlock__send_only(dlock_client *c, uint32_t mask, int argc, const char **argv,
                      const size_t *argvlen)
{
    dlock__result res[DLOCK_MAX_NODES];
    dlock__sigpipe_guard guard;

    memset(res, 0, sizeof(res));
    mask &= dlock__all_nodes(c);
    c->stats.round_trips++;
    round_open(c, &guard);
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];

        if (!(mask & (1u << i)) || (node->state == DLOCK__DOWN && node->breaker.open))
            continue;
        if (queue_command(c, node, &res[i], argc, argv, argvlen, NULL) != 0)
            continue;
        if (dlock__conn_owe(node) && !node->breaker.open)
            dlock__breaker_trip(c, node, DLOCK_ERR_TIMEOUT, "too many replies behind");
    }
    dlock__sigpipe_restore(&guard);
}
