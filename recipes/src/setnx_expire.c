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
#include "recipes_internal.h"


static recipe_result lock(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len)
{
    redisReply *r = rconn_command(c, detail, len, "SETNX %s %s", key, hold->token);
    if (r == NULL)
        return RECIPE_ERROR;
    int won = reply_is_one(r);
    freeReplyObject(r);
    if (!won)
        return RECIPE_TAKEN;
    /* The crash between the two commands. */
    if (p->between != NULL)
        p->between(p->between_arg);
    unsigned ttl_s = (p->ttl_ms + 999) / 1000;
    r = rconn_command(c, detail, len, "EXPIRE %s %u", key, ttl_s);
    if (r != NULL)
        freeReplyObject(r);
    /* The recipe goes on even if EXPIRE failed: it holds the lock. */
    return RECIPE_LOCKED;
}

static void unlock(recipe_conn *c, const recipe_params *p, const char *key, const recipe_hold *hold)
{
    (void)p;
    rconn_command_quiet(c, "EVAL %s 1 %s %s", RECIPE_UNLOCK_LUA, key, hold->token);
}

const recipe recipe_setnx_expire = {
    .name = "setnx-expire",
    .seed = "001",
    .summary = "SETNX then EXPIRE, two commands (dies between: stuck)",
    .lock = lock,
    .unlock = unlock,
    .calls_between = 1,
};
