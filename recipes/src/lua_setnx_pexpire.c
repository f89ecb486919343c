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
    return rconn_lock_command(c, detail, len, reply_is_one, "EVAL %s 1 %s %s %u", LOCK_LUA, key, hold->token,
                              p->ttl_ms);
}

const recipe recipe_lua_setnx_pexpire = {
    .name = "lua-setnx-pexpire",
    .seed = "000",
    .summary = "Lua SETNX + PEXPIRE, token release, no fence (oversells past the TTL)",
    .lock = lock,
    .unlock = recipe_unlock_token,
    .calls_between = 0,
};
