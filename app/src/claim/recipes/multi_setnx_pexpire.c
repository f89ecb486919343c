/* multi_setnx_pexpire.c - recipe `multi-setnx-pexpire` (seed 000, "endless TTL"):
 *
 *     MULTI
 *     SETNX lock token
 *     PEXPIRE lock ttl
 *     EXEC                  -> [1, 1]: ours
 *     ... critical section ...
 *     DEL lock
 *
 * FLAW: PEXPIRE runs whatever SETNX answered, so every loser re-arms the
 * TTL of the winner's key. After a holder dies, the waiting claims keep
 * pushing the expiry forward; as long as claims keep coming, the key never
 * expires: STUCK. Fix: set the TTL only when the set succeeded, in one
 * command (SET NX PX). */
#include "claim/recipes/recipe.h"

static dlock_err lock(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len)
{
    redisReply *r = recipe_command(w, cfg, detail, len, "MULTI");
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    freeReplyObject(r);
    /* Queued: each answers +QUEUED; EXEC answers both results. */
    r = recipe_command(w, cfg, detail, len, "SETNX %s %s", key, token);
    if (r != NULL) {
        freeReplyObject(r);
        r = recipe_command(w, cfg, detail, len, "PEXPIRE %s %u", key, cfg->lock_ttl_ms);
    }
    if (r == NULL) {
        recipe_command_quiet(w, cfg, "DISCARD");
        return DLOCK_ERR_UNREACHABLE;
    }
    freeReplyObject(r);
    r = recipe_command(w, cfg, detail, len, "EXEC");
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int won = r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
              r->element[0]->integer == 1;
    freeReplyObject(r);
    return won ? DLOCK_OK : DLOCK_ERR_TAKEN;
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

const strategy strategy_multi_setnx_pexpire = {
    .name = "multi-setnx-pexpire",
    .summary = "seed 000: MULTI SETNX PEXPIRE EXEC (losers re-arm the TTL: stuck after a crash)",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = claim,
    .health = recipe_health,
};
