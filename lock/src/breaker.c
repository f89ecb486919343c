/* breaker.c - the circuit breaker of each node. A node whose connection
 * failed, timed out or fell too many replies behind (conn.c, rounds.c) is
 * tripped: new acquires and extends skip it (a missing vote is always
 * safe). So a paused, tarpitted or dead minority costs the healthy majority
 * nothing. It takes part again once it has answered everything it owed,
 * or, without a connection, when its probe is due: a reconnect that rides
 * along with a round. */
#include "dlock_internal.h"

/* Probe delays of an open breaker: a DOWN node is reconnected no sooner than
 * this after it failed, doubling per failed probe up to the ceiling, with
 * half of it random so that many clients do not reconnect in step. */
#define DLOCK__PROBE_BASE_MS 100
#define DLOCK__PROBE_MAX_MS 2000

/* Opens node's breaker, or, when it is open already (a probe failed),
 * doubles the delay before the next probe. */
void dlock__breaker_trip(dlock_client *c, dlock__node *node, dlock_err code, const char *detail)
{
    dlock__breaker *b = &node->breaker;
    int64_t now = dlock_now_ms();

    if (!b->open) {
        b->open = 1;
        b->backoff_ms = DLOCK__PROBE_BASE_MS;
    } else if (b->backoff_ms < DLOCK__PROBE_MAX_MS) {
        b->backoff_ms *= 2;
        if (b->backoff_ms > DLOCK__PROBE_MAX_MS)
            b->backoff_ms = DLOCK__PROBE_MAX_MS;
    }
    b->code = code;
    dlock__detailf(b->detail, "%s", detail);
    b->probe_at_ms = now + dlock__rng_range(c, b->backoff_ms / 2, b->backoff_ms);
}

/* The node answered everything it was sent: it takes part again. */
void dlock__breaker_heard(dlock__node *node)
{
    node->breaker.open = 0;
    node->breaker.backoff_ms = 0;
}

/* A tripped node without a connection may be tried again (a reconnect that
 * rides along with a round, never waited for by it). A tripped node that is
 * connected needs no probe: it is heard again when it has drained what it
 * owes. */
int dlock__breaker_probe_due(const dlock__node *node, int64_t now)
{
    return node->breaker.open && node->state == DLOCK__DOWN && now >= node->breaker.probe_at_ms;
}
