/* recipes_internal.h - what the recipe files share: the connection's
 * command helpers, the wall clock, the token-checked release script. */
#ifndef SEED_RECIPES_INTERNAL_H
#define SEED_RECIPES_INTERNAL_H

#include <hiredis/hiredis.h>

#include "seed_recipes.h"

struct recipe_conn {
    char **addrs;       /* owned copies */
    size_t n_addrs;
    int connect_ms;
    int command_ms;
    redisContext *ctx;  /* NULL until the first command, and after an I/O error */
};

/* One command, connecting first if needed. The reply (freeReplyObject), or
 * NULL with detail on an I/O error (the connection is dropped) or an error
 * reply. */
redisReply *rconn_command(recipe_conn *c, char *detail, size_t len, const char *fmt, ...);
/* The same, for callers that ignore the outcome (unlock). */
void rconn_command_quiet(recipe_conn *c, const char *fmt, ...);
/* 1 when r is the integer 1 (SETNX or a script said "won"), else 0. */
int reply_is_one(const redisReply *r);
/* 1 when r is a status (+OK: SET ... NX won; nil when it lost), else 0. */
int reply_is_status(const redisReply *r);
/* One lock command, judged by won(): LOCKED or TAKEN, ERROR with detail
 * when no reply came. The recipe's own commands stay in its file. */
recipe_result rconn_lock_command(recipe_conn *c, char *detail, size_t len, int (*won)(const redisReply *),
                                 const char *fmt, ...);

/* The two releases the seeds use, shared by several recipes. Failures are
 * ignored, as in the seeds. */
/* Plain DEL: deletes the key whoever holds it now (seed 001's "false deletion"). */
void recipe_unlock_del(recipe_conn *c, const recipe_params *p, const char *key, const recipe_hold *hold);
/* The token-checked script (RECIPE_UNLOCK_LUA): deletes only our own lock. */
void recipe_unlock_token(recipe_conn *c, const recipe_params *p, const char *key, const recipe_hold *hold);

/* CLOCK_REALTIME in ms plus p->clock_offset_ms: the clock a client believes. */
int64_t recipe_wall_ms(const recipe_params *p);

/* The seeds' release: delete only if the value is still our token. */
#define RECIPE_UNLOCK_LUA                                     \
    "if redis.call('get', KEYS[1]) == ARGV[1] then "          \
    "return redis.call('del', KEYS[1]) else return 0 end"

#define RECIPE_LIST(X)     \
    X(get_set)             \
    X(setnx)               \
    X(multi_setnx_pexpire) \
    X(lua_setnx_pexpire)   \
    X(setnx_expire)        \
    X(del_no_token)        \
    X(setnx_getset)        \
    X(failover)

#define RECIPE_DECLARE(x) extern const recipe recipe_##x;
RECIPE_LIST(RECIPE_DECLARE)
#undef RECIPE_DECLARE

#endif /* SEED_RECIPES_INTERNAL_H */
