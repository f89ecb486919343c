/* setnx_expire.c - recipe `setnx-expire` (seed 001, "time difference"):
 *
 *     SETNX lock token      -> 1: ours
 *     EXPIRE lock ttl_s     (a second command)
 *     ... critical section ...
 *     EVAL "if get(k) == token then del(k) end"
 *
 * FLAW: the two commands are not atomic. A holder that dies between them
 * (--fault-crash-after-lock fires right there) leaves a key with no TTL:
 * STUCK for ever. Fix: SET NX PX, one command. */
#include "claim/recipes/recipe.h"

#include "claim/fault.h"

static const char UNLOCK_LUA[] = "if redis.call('get', KEYS[1]) == ARGV[1] then "
                                 "return redis.call('del', KEYS[1]) else return 0 end";

static dlock_err lock(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len)
{
    redisReply *r = recipe_command(w, cfg, detail, len, "SETNX %s %s", key, token);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int won = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    if (!won)
        return DLOCK_ERR_TAKEN;
    /* The crash between the two commands. */
    fault_lock_acquired(cfg);
    unsigned ttl_s = (cfg->lock_ttl_ms + 999) / 1000;
    r = recipe_command(w, cfg, detail, len, "EXPIRE %s %u", key, ttl_s);
    if (r != NULL)
        freeReplyObject(r);
    /* The recipe goes on even if EXPIRE failed: it holds the lock. */
    return DLOCK_OK;
}

static void unlock(worker *w, const app_config *cfg, const char *key, const char *token)
{
    recipe_command_quiet(w, cfg, "EVAL %s 1 %s %s", UNLOCK_LUA, key, token);
}

static const recipe R = {lock, unlock, 1};

static claim_result claim(worker *w, const app_config *cfg, int64_t id, const char *user, claim_out *out)
{
    return recipe_claim(&R, w, cfg, id, user, out);
}

const strategy strategy_setnx_expire = {
    .name = "setnx-expire",
    .summary = "seed 001: SETNX then EXPIRE, two commands (dies between: stuck)",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = claim,
    .health = recipe_health,
};
