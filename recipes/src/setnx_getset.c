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
#include "recipes_internal.h"

#include <inttypes.h>
#include <stdlib.h>

static int64_t reply_ms(const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING)
        return strtoll(r->str, NULL, 10);
    return 0; /* nil: no holder */
}

static recipe_result lock(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len)
{
    int64_t now = recipe_wall_ms(p);
    int64_t expiry = now + (int64_t)p->ttl_ms + 1;
    redisReply *r = rconn_command(c, detail, len, "SETNX %s %" PRId64, key, expiry);
    if (r == NULL)
        return RECIPE_ERROR;
    int won = reply_is_one(r);
    freeReplyObject(r);
    if (won) {
        hold->expiry_ms = expiry;
        return RECIPE_LOCKED;
    }
    r = rconn_command(c, detail, len, "GET %s", key);
    if (r == NULL)
        return RECIPE_ERROR;
    int64_t held_until = reply_ms(r);
    freeReplyObject(r);
    if (held_until >= now) /* judged by OUR clock: the flaw */
        return RECIPE_TAKEN;
    r = rconn_command(c, detail, len, "GETSET %s %" PRId64, key, expiry);
    if (r == NULL)
        return RECIPE_ERROR;
    int64_t old = reply_ms(r);
    freeReplyObject(r);
    /* Another taker's GETSET came first: its value is in the future. */
    if (old >= now)
        return RECIPE_TAKEN;
    hold->expiry_ms = expiry;
    return RECIPE_LOCKED;
}

static void unlock(recipe_conn *c, const recipe_params *p, const char *key, const recipe_hold *hold)
{
    /* "Only if not yet expired", judged by our own clock again. */
    if (recipe_wall_ms(p) < hold->expiry_ms)
        rconn_command_quiet(c, "DEL %s", key);
}

const recipe recipe_setnx_getset = {
    .name = "setnx-getset",
    .seed = "003",
    .summary = "SETNX with an expiry timestamp, GETSET takeover (trusts the clocks)",
    .lock = lock,
    .unlock = unlock,
    .calls_between = 0,
};
