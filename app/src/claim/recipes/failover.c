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
#include "claim/recipes/recipe.h"

static const char UNLOCK_LUA[] = "if redis.call('get', KEYS[1]) == ARGV[1] then "
                                 "return redis.call('del', KEYS[1]) else return 0 end";

static dlock_err lock(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len)
{
    /* A replica not yet promoted refuses the write (READONLY): unavailable. */
    redisReply *r = recipe_command(w, cfg, detail, len, "SET %s %s NX PX %u", key, token, cfg->lock_ttl_ms);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int won = r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    return won ? DLOCK_OK : DLOCK_ERR_TAKEN;
}

static void unlock(worker *w, const app_config *cfg, const char *key, const char *token)
{
    recipe_command_quiet(w, cfg, "EVAL %s 1 %s %s", UNLOCK_LUA, key, token);
}

static const recipe R = {lock, unlock, 0};

static claim_result claim(worker *w, const app_config *cfg, int64_t id, const char *user, claim_out *out)
{
    return recipe_claim(&R, w, cfg, id, user, out);
}

const strategy strategy_failover = {
    .name = "failover",
    .summary = "seed 002: one master with an async replica promoted on failure (the key is lost)",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = claim,
    .health = recipe_health,
};
