/* recipe.h - the seeds' lock recipes, the ways people copy from blog posts,
 * each runnable as a --strategy so its flaw can be shown on the coupon sale.
 *
 * WRONG ON PURPOSE. These are not part of libdlock and are not installed:
 * libdlock is the one right way. Each recipe file says which seed it comes
 * from, what it gets wrong and which fault shows it (docs/recipes.md).
 *
 * Every recipe runs the same critical section as `none` and `redlock`
 * (claim/section.h) with no fence (a recipe has no fencing token): only its
 * lock stands between the load and an oversell. */
#ifndef APP_RECIPE_H
#define APP_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "claim/strategy.h"

typedef struct recipe {
    /* One attempt to take `key`: DLOCK_OK taken, DLOCK_ERR_TAKEN held by
     * someone else, DLOCK_ERR_UNREACHABLE / DLOCK_ERR_PROTOCOL on a Redis
     * failure (detail says which). token: this claim's random value; a
     * recipe that stores something else ignores it. */
    dlock_err (*lock)(worker *w, const app_config *cfg, const char *key, const char *token, char *detail,
                      size_t len);
    /* Gives the lock back; failures are ignored, as in the seeds. */
    void (*unlock)(worker *w, const app_config *cfg, const char *key, const char *token);
    /* lock() calls fault_lock_acquired() itself, between its commands. */
    int crashes_inside;
} recipe;

/* The claim under a recipe's lock: retry lock() every --lock-retry-ms until
 * --lock-wait, the section without a fence, unlock(). */
claim_result recipe_claim(const recipe *r, worker *w, const app_config *cfg, int64_t coupon_id,
                          const char *user_id, claim_out *out);
/* PING over the slot's connection: the health of a one-node recipe. */
lock_health recipe_health(worker *w, size_t *nodes_up, size_t *nodes);

/* One command on the slot's connection, connecting first if needed, to the
 * first --redis address that accepts (the failover recipe's "client finds
 * the new master"). The reply (free with freeReplyObject), or NULL with
 * detail on an I/O error (the connection is dropped, the next call
 * reconnects) or a Redis error reply. */
redisReply *recipe_command(worker *w, const app_config *cfg, char *detail, size_t len, const char *fmt, ...);
/* Like recipe_command, for callers that ignore the outcome (unlock). */
void recipe_command_quiet(worker *w, const app_config *cfg, const char *fmt, ...);
/* The wall clock in ms as this server believes it: CLOCK_REALTIME plus
 * --clock-offset-ms (a clock running ahead). Only setnx-getset reads it. */
int64_t recipe_wall_ms(const app_config *cfg);

#endif /* APP_RECIPE_H */
