/* lua_setnx_pexpire.c - recipe `lua-setnx-pexpire` (seed 000's fix):
 *
 *     EVAL "if setnx(k, token) == 1 then pexpire(k, ttl) end"   -> 1: ours
 *     ... critical section ...
 *     EVAL "if get(k) == token then del(k) end"
 *
 * Sound as a lease: atomic set-with-TTL, token-checked release. FLAW: no
 * fencing token. When the holder's work outlives the TTL (a GC pause, a
 * SIGSTOP: --fault-pause-ms), the next holder gets the lock and reads the
 * same stock; the old holder wakes and writes from its stale read, and
 * nothing at the store can refuse it: OVERSOLD. Fix: a fence checked by the
 * store (libdlock + --fence full). */
#include "claim/recipes/recipe.h"

static const char LOCK_LUA[] = "local s = redis.call('setnx', KEYS[1], ARGV[1]) "
                               "if s == 1 then redis.call('pexpire', KEYS[1], ARGV[2]) end return s";
static const char UNLOCK_LUA[] = "if redis.call('get', KEYS[1]) == ARGV[1] then "
                                 "return redis.call('del', KEYS[1]) else return 0 end";

static dlock_err lock(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len)
{
    redisReply *r = recipe_command(w, cfg, detail, len, "EVAL %s 1 %s %s %u", LOCK_LUA, key, token, cfg->lock_ttl_ms);
    if (r == NULL)
        return DLOCK_ERR_UNREACHABLE;
    int won = r->type == REDIS_REPLY_INTEGER && r->integer == 1;
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

const strategy strategy_lua_setnx_pexpire = {
    .name = "lua-setnx-pexpire",
    .summary = "seed 000: Lua SETNX + PEXPIRE, token release, no fence (oversells past the TTL)",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = claim,
    .health = recipe_health,
};
