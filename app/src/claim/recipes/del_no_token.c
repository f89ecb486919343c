/* del_no_token.c - recipe `del-no-token` (seed 001, "false deletion"):
 *
 *     SET lock token NX PX ttl   -> OK: ours
 *     ... critical section ...
 *     DEL lock                   (whoever holds it now)
 *
 * FLAW: the release does not check the token. When A's work outlives the
 * TTL, B takes the lock; A finishes and DELs B's lock; C takes it while B
 * is still inside: three holders overlap, each pair sells from one read:
 * OVERSOLD (trigger: --fault-pause-ms past the TTL). Fix: a token-checked
 * release script, and a fence for the overlap itself (libdlock). */
#include "claim/recipes/recipe.h"

static dlock_err lock(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len)
{
    redisReply *r = recipe_command(w, cfg, detail, len, "SET %s %s NX PX %u", key, token, cfg->lock_ttl_ms);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int won = r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    return won ? DLOCK_OK : DLOCK_ERR_TAKEN;
}

static void unlock(worker *w, const app_config *cfg, const char *key, const char *token)
{
    (void)token; /* the flaw: not compared */
    recipe_command_quiet(w, cfg, "DEL %s", key);
}

static const recipe R = {lock, unlock, 0};

static claim_result claim(worker *w, const app_config *cfg, int64_t id, const char *user, claim_out *out)
{
    return recipe_claim(&R, w, cfg, id, user, out);
}

const strategy strategy_del_no_token = {
    .name = "del-no-token",
    .summary = "seed 001: SET NX PX, release by plain DEL (deletes the next holder's lock)",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = claim,
    .health = recipe_health,
};
