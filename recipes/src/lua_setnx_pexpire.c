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
#include "recipes_internal.h"

static const char LOCK_LUA[] = "local s = redis.call('setnx', KEYS[1], ARGV[1]) "
                               "if s == 1 then redis.call('pexpire', KEYS[1], ARGV[2]) end return s";
static recipe_result lock(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len)
{
    redisReply *r = rconn_command(c, detail, len, "EVAL %s 1 %s %s %u", LOCK_LUA, key, hold->token, p->ttl_ms);
    if (r == NULL)
        return RECIPE_ERROR;
    int won = reply_is_one(r);
    freeReplyObject(r);
    return won ? RECIPE_LOCKED : RECIPE_TAKEN;
}

static void unlock(recipe_conn *c, const recipe_params *p, const char *key, const recipe_hold *hold)
{
    (void)p;
    rconn_command_quiet(c, "EVAL %s 1 %s %s", RECIPE_UNLOCK_LUA, key, hold->token);
}

const recipe recipe_lua_setnx_pexpire = {
    .name = "lua-setnx-pexpire",
    .seed = "000",
    .summary = "Lua SETNX + PEXPIRE, token release, no fence (oversells past the TTL)",
    .lock = lock,
    .unlock = unlock,
    .calls_between = 0,
};
