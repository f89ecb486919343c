/* setnx.c - recipe `setnx` (seed 000):
 *
 *     SETNX lock token      -> 1: ours
 *     ... critical section ...
 *     DEL lock
 *
 * FLAW: no TTL. A holder that dies before its DEL (a crash, kill -9, a
 * deploy) keeps the lock for ever: every later claim waits out --lock-wait
 * and gets 1005. STUCK until an operator deletes the key. Fix: a TTL set in
 * the same command (SET NX PX), libdlock. */
#include "claim/recipes/recipe.h"

static dlock_err lock(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len)
{
    redisReply *r = recipe_command(w, cfg, detail, len, "SETNX %s %s", key, token);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int won = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
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

const strategy strategy_setnx = {
    .name = "setnx",
    .summary = "seed 000: SETNX, release DEL, no TTL (a dead holder keeps it: stuck)",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = claim,
    .health = recipe_health,
};
