/* strategy_recipe.c - the seeds' lock recipes (recipes/, wrong on purpose)
 * as strategies: lock with the recipe, retrying every --lock-retry-ms until
 * --lock-wait; the same critical section as every strategy, with no fence
 * (no recipe hands one out); unlock. Only the recipe's lock stands between
 * the load and an oversell, so its flaw shows on the sale (docs/recipes.md). */
#include "claim/strategy.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "seed_recipes.h"

#include "claim/fault.h"
#include "claim/section.h"
#include "common.h"
#include "core/metrics.h"

/* The recipe's failures as the lock errors the outcome table knows: taken
 * is contention (1005), an error is the lock service unavailable (1006). */
static dlock_err as_lock_error(recipe_result r)
{
    return r == RECIPE_TAKEN ? DLOCK_ERR_TAKEN : DLOCK_ERR_UNREACHABLE;
}

/* setnx-expire's crash point, between its two commands. */
static void crash_between(void *arg)
{
    fault_lock_acquired((const app_config *)arg);
}

static void slot_conn_free(void *conn)
{
    recipe_conn_free(conn);
}

static recipe_conn *slot_conn(worker *w, const app_config *cfg)
{
    /* Opened on the slot's first claim, freed by pool_free (workers.h). */
    if (w->conn == NULL) {
        w->conn = recipe_conn_new((const char *const *)cfg->redis, cfg->n_redis, cfg->redis_connect_ms,
                                  cfg->redis_timeout_ms);
        w->conn_free = slot_conn_free;
    }
    return w->conn;
}

/* One claim: lock with the recipe, the section, unlock. */
static claim_result recipe_one(const strategy *self, worker *w, const app_config *cfg, int64_t coupon_id,
                               const char *user_id, int64_t deadline_us, claim_out *out)
{
    const recipe *rc = self->recipe;
    recipe_params p = {cfg->lock_ttl_ms, (int64_t)cfg->clock_offset_ms, crash_between, (void *)cfg};
    recipe_hold hold;
    db_claim_req req;
    lock_error_kind kind;
    char key[64];

    out->fence = 0;
    recipe_conn *c = slot_conn(w, cfg);
    if (c == NULL) {
        snprintf(out->detail, sizeof out->detail, "out of memory");
        return CLAIM_ERROR;
    }
    snprintf(key, sizeof key, "lock:coupon:%lld", (long long)coupon_id);
    memset(&hold, 0, sizeof hold);
    recipe_new_token(&hold);

    int64_t t0 = cm_now_us();
    recipe_result got;
    for (;;) {
        got = rc->lock(c, &p, key, &hold, out->detail, sizeof out->detail);
        if (got != RECIPE_TAKEN || cm_now_us() >= deadline_us)
            break;
        (void)cm_sleep_ms((uint32_t)cfg->lock_retry_ms); /* bounded by the deadline above */
    }
    metrics_lock_wait_us(cm_now_us() - t0);
    if (got != RECIPE_LOCKED) {
        if (got == RECIPE_TAKEN)
            snprintf(out->detail, sizeof out->detail, "held by another client");
        claim_result res = claim_from_lock(as_lock_error(got), &kind);
        metrics_lock_error(kind);
        return res;
    }
    metrics_lock_acquired();
    if (!rc->calls_between)
        fault_lock_acquired(cfg);

    memset(&req, 0, sizeof req);
    req.user_id = user_id;
    /* No fence: the store cannot tell a stale holder from a current one. */
    (void)section_run(w, cfg, coupon_id, DB_FENCE_OFF, 0, &req, 1);
    rc->unlock(c, &p, key, &hold);
    return claim_from_req(w, &req, out);
}

/* A lock per claim, as one request each would take it: the recipe's flaw
 * shows per acquisition. Each claim gets at least one attempt. */
static void recipe_claim(const strategy *self, worker *w, const app_config *cfg, claim_batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        b->item[i].result = recipe_one(self, w, cfg, b->coupon_id, b->item[i].user_id, b->deadline_us, b->item[i].out);
}

static lock_health recipe_health(const strategy *self, worker *w, size_t *nodes_up, size_t *nodes,
                                 uint32_t *up_mask)
{
    char detail[128];
    (void)self;
    *up_mask = 0;
    /* A recipe knows one node: the first --redis address that answers. */
    *nodes = 1;
    *nodes_up = 0;
    recipe_conn *c = slot_conn(w, w->cfg);
    if (c == NULL || recipe_conn_ping(c, detail, sizeof detail) != 0)
        return LOCK_HEALTH_DOWN;
    *nodes_up = 1;
    *up_mask = 1;
    return LOCK_HEALTH_OK;
}

/* One strategy per recipe of the library's registry, built once. */
#define MAX_RECIPES 32
static strategy strategies[MAX_RECIPES];
static char summaries[MAX_RECIPES][160];
static size_t n_strategies;
static pthread_once_t built = PTHREAD_ONCE_INIT;

static void build(void)
{
    for (size_t i = 0; i < MAX_RECIPES && recipe_at(i) != NULL; i++) {
        const recipe *rc = recipe_at(i);
        snprintf(summaries[i], sizeof summaries[i], "seed %s: %s", rc->seed, rc->summary);
        strategies[i] = (strategy){
            .name = rc->name,
            .summary = summaries[i],
            .uses_lock = 0,
            .default_threads = 32,
            .claim = recipe_claim,
            .health = recipe_health,
            .recipe = rc,
        };
        n_strategies = i + 1;
    }
}

const strategy *strategy_recipe_at(size_t i)
{
    pthread_once(&built, build);
    return i < n_strategies ? &strategies[i] : NULL;
}
