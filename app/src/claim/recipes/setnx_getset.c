/* setnx_getset.c - recipe `setnx-getset` (seed 003):
 *
 *     SETNX lock <now + ttl + 1>            -> 1: ours
 *     else GET lock -> t; if t < now:
 *         GETSET lock <now + ttl + 1> -> old; old < now: ours (taken over)
 *     ... critical section ...
 *     DEL lock  if now < our expiry
 *
 * FLAW: the expiry is a wall-clock time written by one client and judged
 * by another's clock. A server whose clock runs ahead (--clock-offset-ms)
 * sees a live lock as expired and takes it over while its holder is still
 * inside: two holders, one read: OVERSOLD. Fix: let Redis keep the time
 * (PX, a TTL on Redis's own clock), as libdlock does; never trust clients'
 * clocks to agree. */
#include "claim/recipes/recipe.h"

#include <inttypes.h>
#include <stdlib.h>

/* Our expiry, per slot: a slot runs one claim at a time. */
static _Thread_local int64_t my_expiry;

static int64_t reply_ms(const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING)
        return strtoll(r->str, NULL, 10);
    return 0; /* nil: no holder */
}

static dlock_err lock(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len)
{
    (void)token;
    int64_t now = recipe_wall_ms(cfg);
    int64_t expiry = now + (int64_t)cfg->lock_ttl_ms + 1;
    redisReply *r = recipe_command(w, cfg, detail, len, "SETNX %s %" PRId64, key, expiry);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int won = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
    freeReplyObject(r);
    if (won) {
        my_expiry = expiry;
        return DLOCK_OK;
    }
    r = recipe_command(w, cfg, detail, len, "GET %s", key);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int64_t held_until = reply_ms(r);
    freeReplyObject(r);
    if (held_until >= now) /* judged by OUR clock: the flaw */
        return DLOCK_ERR_TAKEN;
    r = recipe_command(w, cfg, detail, len, "GETSET %s %" PRId64, key, expiry);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int64_t old = reply_ms(r);
    freeReplyObject(r);
    /* Another taker's GETSET came first: its value is in the future. */
    if (old >= now)
        return DLOCK_ERR_TAKEN;
    my_expiry = expiry;
    return DLOCK_OK;
}

static void unlock(worker *w, const app_config *cfg, const char *key, const char *token)
{
    (void)token;
    if (recipe_wall_ms(cfg) < my_expiry)
        recipe_command_quiet(w, cfg, "DEL %s", key);
}

static const recipe R = {lock, unlock, 0};

static claim_result claim(worker *w, const app_config *cfg, int64_t id, const char *user, claim_out *out)
{
    return recipe_claim(&R, w, cfg, id, user, out);
}

const strategy strategy_setnx_getset = {
    .name = "setnx-getset",
    .summary = "seed 003: SETNX with an expiry timestamp, GETSET takeover (trusts the clocks)",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = claim,
    .health = recipe_health,
};
