/* del_no_token.c - recipe `del-no-token` (seed 001, "false deletion"):
 *
 *     SET lock token NX PX ttl   -> OK: ours
 *     ... critical section ...
 *     DEL lock                   (whoever holds it now)
 *
 * FLAW: the release does not check the token. When A's work outlives the
 * TTL, B takes the lock; A finishes and DELs B's lock; C takes it while B
 * is still inside: three holders overlap, each pair sells from one read:
 * OVERSOLD (trigger: --fault-pause-ms past the TTL). Fix: a token-checked
 * release script, and a fence for the overlap itself (libdlock). */
#include "recipes_internal.h"

static recipe_result lock(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len)
{
    return rconn_lock_command(c, detail, len, reply_is_status, "SET %s %s NX PX %u", key, hold->token, p->ttl_ms);
}

const recipe recipe_del_no_token = {
    .name = "del-no-token",
    .seed = "001",
    .summary = "SET NX PX, release by plain DEL (deletes the next holder's lock)",
    .lock = lock,
    .unlock = recipe_unlock_del, /* the flaw: plain DEL, no token check */
    .calls_between = 0,
};
