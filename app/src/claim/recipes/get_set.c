/* get_set.c - recipe `get-set` (seed 000, the first naive attempt):
 *
 *     GET lock              -> nil?  then  SET lock token PX ttl
 *     ... critical section ...
 *     DEL lock
 *
 * FLAW: the check and the set are two commands. Two clients both GET nil
 * between each other's GET and SET, both SET, both enter the section: an
 * oversell with no fault at all, only concurrency. Fix: one atomic
 * SET NX PX (libdlock). */
#include "claim/recipes/recipe.h"

static dlock_err lock(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len)
{
    redisReply *r = recipe_command(w, cfg, detail, len, "GET %s", key);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int free_ = r->type == REDIS_REPLY_NIL;
    freeReplyObject(r);
    if (!free_)
        return DLOCK_ERR_TAKEN;
    /* The window: someone else may be right here too. */
    r = recipe_command(w, cfg, detail, len, "SET %s %s PX %u", key, token, cfg->lock_ttl_ms);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    freeReplyObject(r);
    return DLOCK_OK;
}

static void unlock(worker *w, const app_config *cfg, const char *key, const char *token)
{
    (void)token;
    recipe_command_quiet(w, cfg, "DEL %s", key);
}

static const recipe R = {lock, unlock, 0};

static claim_result claim(worker *w, const app_config *cfg, int64_t id, const char *user, claim_out *out)
{
    return recipe_claim(&R, w, cfg, id, user, out);
}

const strategy strategy_get_set = {
    .name = "get-set",
    .summary = "seed 000: GET, then SET if empty (oversells with no fault)",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = claim,
    .health = recipe_health,
};
