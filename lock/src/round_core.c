/* round_core.c - the rules of one round (round_core.h), shared by the
 * blocking driver (rounds.c) and the event-loop driver (async_round.c).
 * Nothing here reads a socket, waits or closes a connection. */
#include "round_core.h"

#include <string.h>

uint32_t dlock__rc_waiting(const dlock__round_core *r)
{
    uint32_t m = 0;

    for (size_t i = 0; i < r->c->n; i++)
        if (r->waiting[i])
            m |= 1u << i;
    return m;
}

static uint32_t slots_with(const dlock__round_core *r, dlock__slot_role role, int waiting)
{
    uint32_t m = 0;

    for (size_t i = 0; i < r->c->n; i++) {
        if (r->role[i] == role && (!waiting || r->waiting[i]))
            m |= 1u << i;
    }
    return m;
}

/* Which nodes of mask the round asks. A node whose breaker is open is
 * skipped: its vote is missing, which is always safe. It is asked anyway
 * when:
 * - the others cannot make a quorum without it: the call would fail
 *   anyway, so it is asked and waited for (how a single instance recovers);
 * - the round has no stop rule (PING, fence sync: every node is asked);
 * - the command must reach it (reach: a release where the acquire may have
 *   landed; it queues behind the commands already sent on the kept
 *   connection, in order);
 * - its probe is due (a reconnect that rides along). */
static void choose_roles(dlock__round_core *r, uint32_t mask, uint32_t reach)
{
    dlock_client *c = r->c;
    int64_t now = dlock_now_ms();
    uint32_t healthy = 0;
    int ask_all;

    for (size_t i = 0; i < c->n; i++) {
        if ((mask & (1u << i)) && !c->nodes[i].breaker.open)
            healthy |= 1u << i;
    }
    ask_all = r->stop == NULL || dlock__popcount(healthy) < c->quorum;
    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        dlock__result *res = &r->res[i];

        if (!(mask & (1u << i)))
            r->role[i] = DLOCK__SLOT_OUT;
        else if ((healthy & (1u << i)) || ask_all)
            r->role[i] = DLOCK__SLOT_WAITED;
        else if (((reach & (1u << i)) && node->state != DLOCK__DOWN) ||
                 dlock__breaker_probe_due(node, now))
            r->role[i] = DLOCK__SLOT_OPTIONAL;
        else
            r->role[i] = DLOCK__SLOT_SKIPPED;
        if (r->role[i] != DLOCK__SLOT_SKIPPED)
            continue;
        res->status = DLOCK__R_DOWN;
        res->skipped = node->breaker.code;
        dlock__detailf(res->detail, "circuit open: %s", node->breaker.detail);
    }
}

uint32_t dlock__rc_open(dlock__round_core *r, dlock_client *c, uint32_t mask, uint32_t reach,
                        dlock__result *res, dlock__stop_fn stop, void *stop_arg,
                        int64_t call_deadline_ms)
{
    memset(r, 0, sizeof(*r));
    r->c = c;
    r->res = res;
    r->stop = stop;
    r->stop_arg = stop_arg;
    r->call_deadline_ms = call_deadline_ms;
    mask &= dlock__all_nodes(c);
    for (size_t i = 0; i < c->n; i++) {
        if (mask & (1u << i))
            dlock__results_clear(&res[i], 1);
    }
    c->stats.round_trips++;
    choose_roles(r, mask, reach);
    return slots_with(r, DLOCK__SLOT_WAITED, 0) | slots_with(r, DLOCK__SLOT_OPTIONAL, 0);
}

void dlock__rc_sent(dlock__round_core *r, size_t i, int queued)
{
    r->waiting[i] = queued != 0;
}

void dlock__rc_start(dlock__round_core *r, int connecting)
{
    dlock_client *c = r->c;

    r->start = dlock_now_ms();
    r->deadline = r->start + c->command_timeout_ms + (connecting ? c->connect_timeout_ms : 0);
    /* Never past the call's deadline plus one command timeout: a hanging
     * connect or a round after the deadline must not stretch the call. The
     * timeout is taken off the round's deadline, not added to the call's:
     * a call deadline within one command timeout of INT64_MAX would
     * overflow. */
    if (r->call_deadline_ms != INT64_MAX &&
        r->deadline - c->command_timeout_ms > r->call_deadline_ms)
        r->deadline = r->call_deadline_ms + c->command_timeout_ms;
}

void dlock__rc_replied(dlock__round_core *r, size_t i)
{
    r->waiting[i] = 0;
    /* It answered this round's command, so everything before too. */
    dlock__breaker_heard(&r->c->nodes[i]);
}

void dlock__rc_failed(dlock__round_core *r, size_t i)
{
    r->waiting[i] = 0;
}

void dlock__rc_check_stop(dlock__round_core *r)
{
    int64_t t, grace;

    if (r->stopped || r->stop == NULL || !r->stop(r->res, r->c->n, r->stop_arg))
        return;
    t = dlock_now_ms();
    grace = t - r->start;
    /* Decided - but give the other nodes as long again as the deciding
     * replies took (at least 2 ms). A healthy node that is merely a little
     * slower answers within that and stays in step; without the grace it
     * would fall one reply behind each round and never catch up. A paused
     * node costs only the grace, and only until its breaker opens. */
    r->stopped = 1;
    if (grace < 2)
        grace = 2;
    if (t + grace < r->deadline)
        r->deadline = t + grace;
}

/* Whether the nodes of `maybe` could still decide the round if each of them
 * answered yes (an integer 1 is a yes to every stop rule). */
static int could_decide(const dlock__round_core *r, uint32_t maybe)
{
    static const redisReply yes = {.type = REDIS_REPLY_INTEGER, .integer = 1};
    dlock__result hyp[DLOCK_MAX_NODES];

    if (maybe == 0 || r->stopped || r->stop == NULL)
        return 0;
    /* A shallow copy: stop() only reads it, and nothing here is freed. */
    memcpy(hyp, r->res, r->c->n * sizeof(hyp[0]));
    for (size_t i = 0; i < r->c->n; i++) {
        if (maybe & (1u << i)) {
            hyp[i].status = DLOCK__R_REPLY;
            hyp[i].reply = (redisReply *)&yes;
        }
    }
    return r->stop(hyp, r->c->n, r->stop_arg);
}

/* Waiting for a WAITED node's answer, or an OPTIONAL node's answer that
 * could still decide the round. */
int dlock__rc_still_waiting(const dlock__round_core *r)
{
    if (slots_with(r, DLOCK__SLOT_WAITED, 1) != 0)
        return 1;
    return could_decide(r, slots_with(r, DLOCK__SLOT_OPTIONAL, 1));
}

/* For release and extend a wrong "unavailable" costs the caller a lock it
 * still holds (the watchdog gives up on it). So the skipped nodes are asked
 * after all, once, with a fresh timeout: a node that recovered answers at
 * once. An undecided acquire is not worth a wait on a sick node: its caller
 * retries. */
uint32_t dlock__rc_second_chance(dlock__round_core *r)
{
    uint32_t skipped = slots_with(r, DLOCK__SLOT_SKIPPED, 0);

    if (r->second_chance || r->stop != dlock__quorum_of_ones ||
        !could_decide(r, skipped | slots_with(r, DLOCK__SLOT_OPTIONAL, 1)))
        return 0;
    r->second_chance = 1;
    for (size_t i = 0; i < r->c->n; i++) {
        if (!(skipped & (1u << i)))
            continue;
        dlock__results_clear(&r->res[i], 1);
        r->role[i] = DLOCK__SLOT_WAITED;
    }
    return skipped;
}

int dlock__rc_waits(dlock__round_core *r, int (*send)(void *driver, uint32_t mask),
                    void *driver)
{
    uint32_t again;
    int connecting;

    if (dlock__rc_still_waiting(r))
        return 1;
    again = dlock__rc_second_chance(r);
    if (again == 0)
        return 0;
    connecting = send(driver, again);
    r->deadline = dlock_now_ms() + r->c->command_timeout_ms +
                  (connecting ? r->c->connect_timeout_ms : 0);
    return (dlock__rc_waiting(r) & again) != 0;
}

/* A node whose answer is still due owes it - the connection is kept, and
 * whoever reads its stream next discards the answer. If the round was
 * decided without it that costs nothing, unless the node falls too far
 * behind; if the round waited for it until the deadline it timed out. Both
 * open its breaker. */
uint32_t dlock__rc_finish(dlock__round_core *r)
{
    dlock_client *c = r->c;
    uint32_t close = 0;

    for (size_t i = 0; i < c->n; i++) {
        dlock__node *node = &c->nodes[i];
        dlock__result *res = &r->res[i];
        int behind;

        if (!r->waiting[i])
            continue;
        r->waiting[i] = 0;
        if (r->role[i] == DLOCK__SLOT_WAITED && !r->stopped && node->state == DLOCK__CONNECTING) {
            /* Needed, and still not connected: nothing was sent. */
            close |= 1u << i;
            res->status = DLOCK__R_DOWN;
            dlock__detailf(res->detail, "connect not done within the round");
            dlock__breaker_trip(c, node, DLOCK_ERR_UNREACHABLE, res->detail);
            continue;
        }
        behind = dlock__conn_owe(node);
        if (r->role[i] == DLOCK__SLOT_OPTIONAL || r->stopped) {
            res->status = DLOCK__R_PENDING;
            dlock__detailf(res->detail, "no reply yet (round decided)");
            if (behind && !node->breaker.open) {
                char why[DLOCK__DETAIL_LEN];
                dlock__detailf(why, "%u replies behind", node->stale);
                dlock__breaker_trip(c, node, DLOCK_ERR_TIMEOUT, why);
            }
            continue;
        }
        res->status = DLOCK__R_TIMEOUT;
        dlock__detailf(res->detail, "timeout after %d ms", c->command_timeout_ms);
        dlock__breaker_trip(c, node, DLOCK_ERR_TIMEOUT, res->detail);
    }
    return close;
}
