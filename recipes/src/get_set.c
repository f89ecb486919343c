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
#include "recipes_internal.h"

static recipe_result lock(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len)
{
    redisReply *r = rconn_command(c, detail, len, "GET %s", key);
    if (r == NULL)
        return RECIPE_ERROR;
    int free_ = r->type == REDIS_REPLY_NIL;
    freeReplyObject(r);
    if (!free_)
        return RECIPE_TAKEN;
    /* The window: someone else may be right here too. */
    r = rconn_command(c, detail, len, "SET %s %s PX %u", key, hold->token, p->ttl_ms);
    if (r == NULL)
        return RECIPE_ERROR;
    freeReplyObject(r);
    return RECIPE_LOCKED;
}

const recipe recipe_get_set = {
    .name = "get-set",
    .seed = "000",
    .summary = "GET, then SET if empty (oversells with no fault)",
    .lock = lock,
    .unlock = recipe_unlock_del,
    .calls_between = 0,
};
