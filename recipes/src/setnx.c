/* setnx.c - recipe `setnx` (seed 000):
 *
 *     SETNX lock token      -> 1: ours
 *     ... critical section ...
 *     DEL lock
 *
 * FLAW: no TTL. A holder that dies before its DEL (a crash, kill -9, a
 * deploy) keeps the lock for ever: every later claim waits out --lock-wait
 * and gets 1005. STUCK until an operator deletes the key. Fix: a TTL set in
 * the same command (SET NX PX), libdlock. */
#include "recipes_internal.h"

static recipe_result lock(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len)
{
    (void)p; /* no TTL: the flaw */
    return rconn_lock_command(c, detail, len, reply_is_one, "SETNX %s %s", key, hold->token);
}

const recipe recipe_setnx = {
    .name = "setnx",
    .seed = "000",
    .summary = "SETNX, release DEL, no TTL (a dead holder keeps it: stuck)",
    .lock = lock,
    .unlock = recipe_unlock_del,
    .calls_between = 0,
};
