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
    recipe_result got = rconn_lock_command(c, detail, len, reply_is_one, "SETNX %s %s", key, hold->token);
    if (got != RECIPE_LOCKED)
        return got;
    /* The crash between the two commands. */
    if (p->between != NULL)
        p->between(p->between_arg);
    unsigned ttl_s = (p->ttl_ms + 999) / 1000;
    redisReply *r = rconn_command(c, detail, len, "EXPIRE %s %u", key, ttl_s);
    if (r != NULL)
        freeReplyObject(r);
    /* The recipe goes on even if EXPIRE failed: it holds the lock. */
    return RECIPE_LOCKED;
}

const recipe recipe_setnx_expire = {
    .name = "setnx-expire",
    .seed = "001",
    .summary = "SETNX then EXPIRE, two commands (dies between: stuck)",
    .lock = lock,
    .unlock = recipe_unlock_token,
    .calls_between = 1,
};
