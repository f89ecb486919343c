/* strategy_none.c - the critical section with no lock around it (and so no
 * fence to check). Oversells on purpose: it is the race the lock exists for,
 * shown on the very code the lock strategies run. */
#include "claim/strategy.h"

#include <string.h>

#include "claim/section.h"

/* Each claim its own section, as one request each would run it: a batch
 * must not hide the race between them. */
static void none_claim(const strategy *self, worker *w, const app_config *cfg, claim_batch *b)
{
    (void)self;
    for (size_t i = 0; i < b->n; i++) {
        db_claim_req req;

        memset(&req, 0, sizeof req);
        req.user_id = b->item[i].user_id;
        (void)section_run(w, cfg, b->coupon_id, DB_FENCE_OFF, 0, &req, 1);
        b->item[i].result = claim_from_req(w, &req, b->item[i].out);
    }
}

const strategy strategy_none = {
    .name = "none",
    .summary = "the same section with no lock: oversells, on purpose",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = none_claim,
    .health = strategy_no_lock_health,
};
