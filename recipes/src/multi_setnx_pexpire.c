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
#include "recipes_internal.h"

static recipe_result lock(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len)
{
    redisReply *r = rconn_command(c, detail, len, "MULTI");
    if (r == NULL)
        return RECIPE_ERROR;
    freeReplyObject(r);
    /* Queued: each answers +QUEUED; EXEC answers both results. */
    r = rconn_command(c, detail, len, "SETNX %s %s", key, hold->token);
    if (r != NULL) {
        freeReplyObject(r);
        r = rconn_command(c, detail, len, "PEXPIRE %s %u", key, p->ttl_ms);
    }
    if (r == NULL) {
        rconn_command_quiet(c, "DISCARD");
        return RECIPE_ERROR;
    }
    freeReplyObject(r);
    r = rconn_command(c, detail, len, "EXEC");
    if (r == NULL)
        return RECIPE_ERROR;
    int won = r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
              r->element[0]->integer == 1;
    freeReplyObject(r);
    return won ? RECIPE_LOCKED : RECIPE_TAKEN;
}

const recipe recipe_multi_setnx_pexpire = {
    .name = "multi-setnx-pexpire",
    .seed = "000",
    .summary = "MULTI SETNX PEXPIRE EXEC (losers re-arm the TTL: stuck after a crash)",
    .lock = lock,
    .unlock = recipe_unlock_del,
    .calls_between = 0,
};
