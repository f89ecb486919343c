/* strategy.h - the claim strategy interface (claim + lock health) and its results;
 * the registry of strategies is strategies.h.
 *
 * A strategy turns "give user U one coupon C" into store (and lock) calls.
 * The sold-out fast path is not here: routes_coupon.c runs it once, before
 * any strategy, so every strategy gets it and none can skip it. */
#ifndef APP_STRATEGY_H
#define APP_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#include "outcome.h"
#include "core/config.h"
#include "core/prober.h"
#include "core/workers.h"

typedef struct claim_out {
    db_claim rec;      /* record id and stock left, on CLAIM_OK */
    uint64_t fence;    /* the lock's fencing token; 0 without a lock */
    char detail[192];  /* why, on failure (library / store detail) */
} claim_out;

struct recipe;

/* One claim of a batch: its user, and where its answer goes. */
typedef struct claim_item {
    const char *user_id;
    int64_t queued_us;    /* when it was queued (cm_now_us), for the lock-wait histogram */
    claim_result result;  /* set by the strategy */
    claim_out *out;       /* zeroed before the strategy runs; the strategy fills it */
} claim_item;

/* Claims of one coupon that one worker runs together, oldest first (a
 * single claim is a batch of one). */
typedef struct claim_batch {
    int64_t coupon_id;
    /* The oldest claim's deadline (CLOCK_MONOTONIC, common.h's cm_now_us):
     * its arrival + --lock-wait, so time spent queued counts against the
     * same bound; the others arrived later and have at least as long. */
    int64_t deadline_us;
    size_t n;
    claim_item item[CONFIG_MAX_BATCH];
    /* What the strategy's prepare left for its claim (redlock: the coupon's
     * lock), or prepare_err (a dlock_err) when it could not; NULL and 0
     * without a prepare. */
    void *prepared;
    int prepare_err;
    int prepare_busy; /* with prepare_err: the coupon is held elsewhere (contention, not a failure) */
} claim_batch;

/* The most coupons strategy.claim_each takes in one round. */
#define STRATEGY_ROUND_MAX 16

/* strategy.stock_falls */
#define STOCK_FALLS_ALWAYS 1
#define STOCK_FALLS_FENCED 2

typedef struct strategy {
    const char *name;
    const char *summary;  /* one line for --help */
    int uses_lock;        /* nonzero: worker slots get a dlock_client */
    int default_threads;  /* --threads when not given: what this strategy runs best with */
    int default_claim_workers; /* --claim-workers when not given; 0: as many as --threads */
    /* When its claims can only lower a coupon's stock, so that a 0 is final
     * (claim/stock_view.h):
     *   STOCK_FALLS_ALWAYS;
     *   STOCK_FALLS_FENCED: under --fence full only (with less, a holder
     *     whose lease ran out can write back the higher stock it read);
     *   0: never (no lock, or a recipe's). */
    int stock_falls;
    /* Optional: readies the coupon for its next batch before the batch is
     * gathered (redlock: takes its lock, trying until deadline_us; one try
     * when that has passed), so that claims that come during the wait join
     * that batch. Sets b->prepared, or b->prepare_err (and prepare_busy);
     * claim then gets the batch (n may be 0). */
    void (*prepare)(const struct strategy *self, worker *w, const app_config *cfg, int64_t coupon_id,
                    int64_t deadline_us, claim_batch *b);
    /* Sets every item's result and out, and lets go of what prepare took;
     * never calls back into the queue. */
    void (*claim)(const struct strategy *self, worker *w, const app_config *cfg, claim_batch *b);
    /* Optional: the batches of 1..STRATEGY_ROUND_MAX coupons at once, no
     * prepare, each with n > 0 (redlock: one lock round for all). Answers
     * every batch as claim does, except one whose coupon is held elsewhere:
     * that one gets prepare_busy and no answer, for the queue to put back. */
    void (*claim_each)(const struct strategy *self, worker *w, const app_config *cfg, claim_batch *const *bs,
                       size_t n);
    /* nodes_up / nodes for the health report (0 / 0 when unused); bit i of
     * *up_mask set when the i-th --redis node answered. */
    lock_health (*health)(const struct strategy *self, worker *w, size_t *nodes_up, size_t *nodes,
                          uint32_t *up_mask);
    const struct recipe *recipe; /* the seed recipe it runs (strategy_recipe.c), else NULL */
} strategy;

/* The seeds' recipes as strategies (strategy_recipe.c): the i-th, NULL
 * past the end. The registry (strategies.h) lists them after its own. */
const strategy *strategy_recipe_at(size_t i);
/* Health for strategies that use no lock. */
lock_health strategy_no_lock_health(const strategy *self, worker *w, size_t *nodes_up, size_t *nodes,
                                    uint32_t *up_mask);

#endif /* APP_STRATEGY_H */
