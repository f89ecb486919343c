/* failover.c - recipe `failover` (seed 002's warning about replication):
 *
 *     --redis MASTER,REPLICA       (the replica: redis-server --replicaof)
 *     SET lock token NX PX ttl     on the first address that answers
 *     ... critical section ...
 *     EVAL "if get(k) == token then del(k) end"
 *
 * A correct single-instance lock, made "highly available" the usual way.
 * FLAW: replication is asynchronous. The master acknowledges our SET and
 * dies before the replica has it; the replica is promoted without the key,
 * and the next client gets the lock while we still hold it: OVERSOLD.
 * Fix: Redlock over independent masters (and a fence), libdlock. */
#include "recipes_internal.h"

static recipe_result lock(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len)
{
    /* A replica not yet promoted refuses the write (READONLY): unavailable. */
    return rconn_lock_command(c, detail, len, reply_is_status, "SET %s %s NX PX %u", key, hold->token, p->ttl_ms);
}

const recipe recipe_failover = {
    .name = "failover",
    .seed = "002",
    .summary = "one master with an async replica promoted on failure (the key is lost)",
    .lock = lock,
    .unlock = recipe_unlock_token,
    .calls_between = 0,
};
