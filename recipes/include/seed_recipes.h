/* seed_recipes.h - the lock recipes of the seeds (the blog posts people copy
 * from), each runnable so its flaw can be shown on the coupon sale.
 *
 * WRONG ON PURPOSE. This small internal library is not libdlock and is not
 * installed: libdlock is the one right way. Each recipe file says which seed
 * it comes from, what it gets wrong, which fault shows it and the fix
 * (docs/recipes.md). coupon-server runs each one as a --strategy around the
 * same critical section as `redlock`, with no fence (no recipe hands one out).
 *
 * Conventions: one recipe_conn per thread (not thread-safe); every network
 * call is bounded by the connection's timeouts; errors come back as
 * RECIPE_ERROR with a one-line detail. */
#ifndef SEED_RECIPES_H
#define SEED_RECIPES_H

#include <stddef.h>
#include <stdint.h>

/* A connection to the first of the given Redis addresses that accepts one
 * ("host:port", "[v6]:port", "unix:/path", libdlock's rules): the failover
 * recipe's "the client finds the new master". Opened lazily, dropped on any
 * I/O error and reopened by the next call. */
typedef struct recipe_conn recipe_conn;

/* NULL on out-of-memory. addrs are copied. */
recipe_conn *recipe_conn_new(const char *const *addrs, size_t n_addrs, int connect_ms, int command_ms);
void recipe_conn_free(recipe_conn *c); /* NULL ok */
/* PING: 0 when a node answered, else -1 with detail. */
int recipe_conn_ping(recipe_conn *c, char *detail, size_t len);

typedef enum recipe_result {
    RECIPE_LOCKED = 0, /* ours */
    RECIPE_TAKEN = 1,  /* held by someone else: retry later */
    RECIPE_ERROR = 2   /* Redis unreachable, timing out, or refusing (detail) */
} recipe_result;

typedef struct recipe_params {
    uint32_t ttl_ms;
    /* Added to the wall clock a recipe reads (setnx-getset): a clock ahead. */
    int64_t clock_offset_ms;
    /* Called by a recipe between its two lock commands (setnx-expire), the
     * place a crash hurts most; NULL: nothing. */
    void (*between)(void *arg);
    void *between_arg;
} recipe_params;

/* What a holder keeps between lock and unlock. */
typedef struct recipe_hold {
    char token[40];     /* random, per acquisition */
    int64_t expiry_ms;  /* setnx-getset: the wall-clock expiry it wrote */
} recipe_hold;

typedef struct recipe {
    const char *name;    /* the --strategy name, e.g. "setnx-expire" */
    const char *seed;    /* "000".."004": the article it comes from */
    const char *summary; /* one line: the recipe and its flaw */
    /* One attempt on key; hold->token is set by the caller. */
    recipe_result (*lock)(recipe_conn *c, const recipe_params *p, const char *key, recipe_hold *hold,
                          char *detail, size_t len);
    /* Gives the lock back; failures are ignored, as in the seeds. */
    void (*unlock)(recipe_conn *c, const recipe_params *p, const char *key, const recipe_hold *hold);
    /* lock() calls p->between itself (so the caller must not count its
     * acquisition again for a crash fault). */
    int calls_between;
} recipe;

/* The registry: every recipe once, by name; NULL past the end / unknown. */
const recipe *recipe_at(size_t i);
const recipe *recipe_by_name(const char *name);

/* A fresh random token (UUID v4 text) into hold->token. */
void recipe_new_token(recipe_hold *hold);

#endif /* SEED_RECIPES_H */
