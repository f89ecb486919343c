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
/* 1 when r is the integer 1 (SETNX won), else 0. */
int reply_is_one(const redisReply *r);

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
