/* strategy_none.c - the critical section with no lock around it (and so no
 * fence to check). Oversells on purpose: it is the race the lock exists for,
 * shown on the very code the lock strategies run. */
#include "claim/strategy.h"

#include <string.h>

#include "claim/section.h"

static claim_result none_claim(const strategy *self, worker *w, const app_config *cfg, int64_t coupon_id,
                               const char *user_id, int64_t deadline_us, claim_out *out)
{
    (void)self;
    (void)deadline_us; /* no lock to wait for */
    db_claim_req req;

    memset(&req, 0, sizeof req);
    req.user_id = user_id;
    out->fence = 0;
    (void)section_run(w, cfg, coupon_id, DB_FENCE_OFF, 0, &req, 1);
    return claim_from_req(w, &req, out);
}

const strategy strategy_none = {
    .name = "none",
    .summary = "the same section with no lock: oversells, on purpose",
    .uses_lock = 0,
    .default_threads = 32,
    .claim = none_claim,
    .health = strategy_no_lock_health,
};
