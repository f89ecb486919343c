/* rounds.c - the parallel request engine: one command to N nodes at once,
 * one poll() loop, one deadline. What each connection's reply stream still
 * owes (AUTH answer, replies to rounds that ended early) is kept by conn.c,
 * each node's circuit breaker by breaker.c, and what the answers add up to
 * is read by tally.c. */
#include "dlock_internal.h"

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

/* A node in a round, by what the round owes it. */
typedef enum slot_role {
    SLOT_OUT = 0,  /* not in this round (its own I/O is still served, never waited for) */
    SLOT_WAITED,   /* asked; the round waits for its answer until decided or the deadline */
    SLOT_OPTIONAL, /* breaker open but sent anyway (a release reaching a node that may hold
                      the key, a reconnect probe): its answer counts if it comes in time,
                      the round never waits for it */
    SLOT_SKIPPED   /* breaker open: not sent */
} slot_role;

/* One node's part in a round. */
typedef struct round_slot {
    dlock__node *node;
    dlock__result *res; /* the caller's entry for this node */
    slot_role role;
    int waiting;        /* the command went out (or is queued behind a connect): its answer is due */
    int deferred;       /* held back until the connection's AUTH is answered (queue_command) */
} round_slot;

/* A round in progress: a slot per node of the client, and the clock. */
typedef struct round_run {
    dlock_client *c;
    dlock__result *res; /* the caller's array, as stop() sees it */
    round_slot slot[DLOCK_MAX_NODES];
    int argc;
    const char **argv;
    const size_t *argvlen;
    dlock__stop_fn stop;
    void *stop_arg;
    int64_t start;      /* when the commands went out */
    int64_t deadline;   /* start + command_timeout_ms, or sooner once decided */
    int stopped;        /* stop() said the outcome is decided */
    int second_chance;  /* the skipped nodes were asked after all (once per round) */
} round_run;

/* The connection broke or the stream is garbled: the reply stream position
 * is unknown, a late reply would be taken for the answer to the next
 * command. Only a fresh connection is trustworthy; until one answers, the
 * node's breaker is open. */
static void io_fail(round_slot *s, dlock_client *c, const char *what, const char *arg)
{
    dlock__detailf(s->res->detail, "%s%s", what, arg);
    s->res->status = DLOCK__R_IOERR;
    s->waiting = 0;
    dlock__node_close(s->node);
    dlock__breaker_trip(c, s->node, DLOCK_ERR_UNREACHABLE, s->res->detail);
}

/* What every round and send-only does before sending: clears the results of
 * the nodes in mask, serves what the connections said since the last round
 * and gives up on hopeless ones (conn.c; nothing here waits), and blocks
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
    dlock__sigpipe_block(guard);
    dlock__conn_prepare(c);
    return mask;
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
static void send_deferred(round_run *rr, round_slot *s)
{
    dlock__node *node = s->node;

    s->deferred = 0;
    if (node->auth_failed) {
        dlock__detailf(s->res->detail, "%s", node->auth_detail);
        s->res->status = DLOCK__R_AUTH;
        s->waiting = 0;
        dlock__node_close(node);
        return;
    }
    if (queue_command(rr->c, node, s->res, rr->argc, rr->argv, rr->argvlen, NULL) != 0)
        s->waiting = 0;
}

static void send_slot(round_run *rr, round_slot *s)
{
    s->deferred = 0;
    if (queue_command(rr->c, s->node, s->res, rr->argc, rr->argv, rr->argvlen, &s->deferred) != 0)
        return;
    s->waiting = 1;
    /* Its AUTH was answered already (read while serving the connection
     * between rounds): decided now. */
    if (s->deferred && !s->node->auth_pending)
        send_deferred(rr, s);
}

/* Which nodes of mask the round asks. A node whose breaker is open is
 * skipped - its vote is missing, which is always safe - unless the others
 * cannot make a quorum without it (then the call would fail anyway, so it is
 * asked and waited for: this is also how a single instance recovers), the
 * round has no stop rule (PING, fence sync: asks every node), the command
 * must reach it (reach: a release where the acquire may have landed - it
 * queues behind the commands already sent on the kept connection, in
 * order), or its probe is due (a reconnect that rides along). */
static void choose_roles(round_run *rr, uint32_t mask, uint32_t reach)
{
    dlock_client *c = rr->c;
    int64_t now = dlock_now_ms();
    uint32_t healthy = 0;
    int ask_all;

    for (size_t i = 0; i < c->n; i++) {
        if ((mask & (1u << i)) && !c->nodes[i].breaker.open)
            healthy |= 1u << i;
    }
    ask_all = rr->stop == NULL || dlock__popcount(healthy) < c->quorum;
    for (size_t i = 0; i < c->n; i++) {
        round_slot *s = &rr->slot[i];
        dlock__node *node = s->node;

        if (!(mask & (1u << i)))
            s->role = SLOT_OUT;
        else if ((healthy & (1u << i)) || ask_all)
            s->role = SLOT_WAITED;
        else if (((reach & (1u << i)) && node->state != DLOCK__DOWN) ||
                 dlock__breaker_probe_due(node, now))
            s->role = SLOT_OPTIONAL;
        else
            s->role = SLOT_SKIPPED;
        if (s->role != SLOT_SKIPPED)
            continue;
        s->res->status = DLOCK__R_DOWN;
        s->res->skipped = node->breaker.code;
        dlock__detailf(s->res->detail, "circuit open: %s", node->breaker.detail);
    }
}

/* Reads what the node sent and dispatches every complete reply in stream
 * order: our AUTH answer first, then replies owed to earlier rounds (those
 * two are conn.c's business: dlock__conn_next_reply), then this round's
 * answer. */
static void read_node(round_run *rr, round_slot *s)
{
    dlock_client *c = rr->c;
    dlock__node *node = s->node;
    dlock__result *r = s->res;

    if (redisBufferRead(node->ctx) != REDIS_OK) {
        io_fail(s, c, "connection lost: ", dlock__conn_lost_why(node));
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
            s->waiting = 0;
            dlock__conn_refuse(c, node);
            return;
        }
        if (got != 0) {
            io_fail(s, c, "protocol error: ", node->ctx->errstr);
            return;
        }
        if (reply == NULL) {
            if (s->deferred && !node->auth_pending)
                send_deferred(rr, s);
            return;
        }
        if (!s->waiting || s->deferred) {
            freeReplyObject(reply);
            io_fail(s, c, "unsolicited reply (stream out of step)", "");
            return;
        }
        s->waiting = 0;
        /* It answered this round's command, so everything before too. */
        dlock__breaker_heard(node);
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
static void serve(round_run *rr, round_slot *s, short revents)
{
    char ebuf[DLOCK__DETAIL_LEN];

    if (revents == 0 || !s->waiting)
        return;
    if (s->node->state == DLOCK__CONNECTING) {
        if (dlock__conn_finish(rr->c, s->node, s->res) != 0)
            s->waiting = 0;
        return;
    }
    if ((revents & POLLOUT) && s->node->unwritten &&
        dlock__conn_write(s->node, ebuf) != 0) {
        io_fail(s, rr->c, ebuf, "");
        return;
    }
    if (revents & (POLLIN | POLLERR | POLLHUP))
        read_node(rr, s);
}

/* Asks stop() whether the outcome is decided and, the first time it is,
 * brings the deadline forward to the end of the grace. */
static void check_stop(round_run *rr)
{
    int64_t t, grace;

    if (rr->stopped || rr->stop == NULL || !rr->stop(rr->res, rr->c->n, rr->stop_arg))
        return;
    t = dlock_now_ms();
    grace = t - rr->start;
    /* Decided - but give the other nodes as long again as the deciding
     * replies took (at least 2 ms). A healthy node that is merely a little
     * slower answers within that and stays in step; without the grace it
     * would fall one reply behind each round and never catch up. A paused
     * node costs only the grace, and only until its breaker opens. */
    rr->stopped = 1;
    if (grace < 2)
        grace = 2;
    if (t + grace < rr->deadline)
        rr->deadline = t + grace;
}

/* Whether the nodes of `maybe` could still decide the round if each of them
 * answered yes (an integer 1 is a yes to every stop rule). */
static int could_decide(const round_run *rr, uint32_t maybe)
{
    static const redisReply yes = {.type = REDIS_REPLY_INTEGER, .integer = 1};
    dlock__result hyp[DLOCK_MAX_NODES];

    if (maybe == 0 || rr->stopped || rr->stop == NULL)
        return 0;
    /* A shallow copy: stop() only reads it, and nothing here is freed. */
    memcpy(hyp, rr->res, rr->c->n * sizeof(hyp[0]));
    for (size_t i = 0; i < rr->c->n; i++) {
        if (maybe & (1u << i)) {
            hyp[i].status = DLOCK__R_REPLY;
            hyp[i].reply = (redisReply *)&yes;
        }
    }
    return rr->stop(hyp, rr->c->n, rr->stop_arg);
}

static uint32_t slots_with(const round_run *rr, slot_role role, int waiting)
{
    uint32_t m = 0;

    for (size_t i = 0; i < rr->c->n; i++) {
        if (rr->slot[i].role == role && (!waiting || rr->slot[i].waiting))
            m |= 1u << i;
    }
    return m;
}

/* The round ran out of healthy answers without a decision that the skipped
 * nodes could still make. For release and extend a wrong "unavailable"
 * costs the caller a lock it still holds (the watchdog gives up on it), so
 * the skipped nodes are asked after all, once, with a fresh timeout: a node
 * that recovered answers at once. An undecided acquire is not worth a wait
 * on a sick node: its caller retries. Returns 1 when it sent. */
static int give_second_chance(round_run *rr)
{
    uint32_t skipped = slots_with(rr, SLOT_SKIPPED, 0);
    int sent = 0, connecting = 0;

    if (rr->second_chance || rr->stop != dlock__quorum_of_ones ||
        !could_decide(rr, skipped | slots_with(rr, SLOT_OPTIONAL, 1)))
        return 0;
    rr->second_chance = 1;
    for (size_t i = 0; i < rr->c->n; i++) {
        round_slot *s = &rr->slot[i];

        if (!(skipped & (1u << i)))
            continue;
        dlock__results_clear(s->res, 1);
        s->role = SLOT_WAITED;
        send_slot(rr, s);
        sent |= s->waiting;
        connecting |= s->waiting && s->node->state == DLOCK__CONNECTING;
    }
    rr->deadline = dlock_now_ms() + rr->c->command_timeout_ms +
                   (connecting ? rr->c->connect_timeout_ms : 0);
    return sent;
}

/* Whether the round still waits: for a WAITED node's answer, or an
 * OPTIONAL node's answer that could still decide it. */
static int still_waiting(round_run *rr)
{
    if (slots_with(rr, SLOT_WAITED, 1) != 0)
        return 1;
    if (could_decide(rr, slots_with(rr, SLOT_OPTIONAL, 1)))
        return 1;
    return give_second_chance(rr);
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

        if (s->waiting && (s->role == SLOT_WAITED || s->role == SLOT_OPTIONAL)) {
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

        if (!s->waiting || s->node->state != DLOCK__CONNECTING ||
            now < dlock__conn_connect_deadline(rr->c, s->node))
            continue;
        dlock__conn_expire(rr->c, s->node, now);
        s->res->status = DLOCK__R_DOWN;
        dlock__detailf(s->res->detail, "%s", s->node->breaker.detail);
        s->waiting = 0;
    }
}

/* Step 2: one poll() over every node whose answer is due (plus the
 * background I/O of the others), until no answer the round waits for is
 * due or the deadline passed. */
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
        if (!still_waiting(rr) || now >= rr->deadline)
            return;
        wake = rr->deadline;
        k = poll_set(rr, pfd, idx, &wake);
        rc = dlock__poll(pfd, k, (int)(wake - now), ebuf, sizeof(ebuf));
        if (rc == 0)
            continue;
        if (rc < 0) {
            for (size_t j = 0; j < k; j++) {
                round_slot *s = &rr->slot[idx[j]];
                if (s->waiting)
                    io_fail(s, rr->c, "poll: ", ebuf);
            }
            return;
        }
        for (size_t j = 0; j < k; j++) {
            round_slot *s = &rr->slot[idx[j]];

            if (s->waiting && (s->role == SLOT_WAITED || s->role == SLOT_OPTIONAL))
                serve(rr, s, pfd[j].revents);
            else
                dlock__conn_service(rr->c, s->node, pfd[j].revents);
        }
        check_stop(rr);
    }
}

/* Step 3: a node whose answer is still due owes it - the connection is
 * kept, and whoever reads its stream next discards the answer. If the round
 * was decided without it that costs nothing, unless the node falls too far
 * behind; if the round waited for it until the deadline it timed out. Both
 * open its breaker. */
static void finish(round_run *rr)
{
    for (size_t i = 0; i < rr->c->n; i++) {
        round_slot *s = &rr->slot[i];
        dlock__node *node = s->node;
        int behind;

        if (!s->waiting)
            continue;
        if (s->role == SLOT_WAITED && !rr->stopped && node->state == DLOCK__CONNECTING) {
            /* Needed, and still not connected: nothing was sent. */
            dlock__node_close(node);
            s->res->status = DLOCK__R_DOWN;
            dlock__detailf(s->res->detail, "connect not done within the round");
            dlock__breaker_trip(rr->c, node, DLOCK_ERR_UNREACHABLE, s->res->detail);
            continue;
        }
        behind = dlock__conn_owe(node);
        if (s->role == SLOT_OPTIONAL || rr->stopped) {
            s->res->status = DLOCK__R_PENDING;
            dlock__detailf(s->res->detail, "no reply yet (round decided)");
            if (behind && !node->breaker.open) {
                char why[DLOCK__DETAIL_LEN];
                dlock__detailf(why, "%u replies behind", node->stale);
                dlock__breaker_trip(rr->c, node, DLOCK_ERR_TIMEOUT, why);
            }
            continue;
        }
        s->res->status = DLOCK__R_TIMEOUT;
        dlock__detailf(s->res->detail, "timeout after %d ms", rr->c->command_timeout_ms);
        dlock__breaker_trip(rr->c, node, DLOCK_ERR_TIMEOUT, s->res->detail);
    }
}

/* Sends one command to the nodes of mask and collects the replies.
 *
 * Why one poll() over all nodes: the distlock page asks to "multiplex" the
 * SETs so the time to reach a majority - and thus the window in which two
 * clients split the votes - does not grow with N; the round costs the
 * slowest node's round trip, bounded by command_timeout_ms, not the sum.
 *
 * Nothing waits outside that poll: a node without a connection is
 * connected in the same loop (the command queued behind the connect), and
 * a node whose breaker is open is skipped (choose_roles), so a sick
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
    int connecting = 0;

    mask = round_open(c, mask, res, &guard);
    memset(&rr, 0, sizeof(rr));
    rr.c = c;
    rr.res = res;
    rr.argc = argc;
    rr.argv = argv;
    rr.argvlen = argvlen;
    rr.stop = stop;
    rr.stop_arg = stop_arg;
    for (size_t i = 0; i < c->n; i++) {
        rr.slot[i].node = &c->nodes[i];
        rr.slot[i].res = &res[i];
    }
    choose_roles(&rr, mask, reach);
    for (size_t i = 0; i < c->n; i++) {
        round_slot *s = &rr.slot[i];

        if (s->role == SLOT_WAITED || s->role == SLOT_OPTIONAL) {
            send_slot(&rr, s);
            connecting |= s->role == SLOT_WAITED && s->node->state == DLOCK__CONNECTING;
        }
    }
    rr.start = dlock_now_ms();
    /* A node the round needs that is still connecting gets its connect
     * time on top of the command time, as a blocking connect would. */
    rr.deadline = rr.start + c->command_timeout_ms + (connecting ? c->connect_timeout_ms : 0);
    /* Never past the calling thread's deadline plus one command timeout
     * (dlock__call_deadline_ms): a hanging connect or a round after the
     * deadline must not stretch the call. The timeout is taken off the
     * round's deadline, not added to the call's: a call deadline within
     * one command timeout of INT64_MAX would overflow. */
    if (dlock__call_deadline_ms != INT64_MAX &&
        rr.deadline - c->command_timeout_ms > dlock__call_deadline_ms)
        rr.deadline = dlock__call_deadline_ms + c->command_timeout_ms;
    collect(&rr);
    finish(&rr);
    dlock__sigpipe_restore(&guard);
    return rr.stopped;
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
    mask = round_open(c, mask, res, &guard);
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
