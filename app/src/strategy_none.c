/* strategy_none.c - no lock: read stock, pause, write stock-1. Oversells on
 * purpose, to show the race the lock exists for. */
#include "strategy.h"

#include <stdio.h>

static claim_result none_claim(worker *w, const app_config *cfg, int64_t coupon_id, const char *user_id,
                               claim_out *out)
{
    out->fence = 0;
    db_status st = db_claim_unsafe(w->db, coupon_id, user_id, cfg->unsafe_delay_us, &out->rec);
    if (st != DB_OK)
        snprintf(out->detail, sizeof out->detail, "%s", db_errmsg(w->db));
    return claim_from_db(st);
}

const strategy strategy_none = {
    .name = "none",
    .uses_lock = 0,
    .claim = none_claim,
    .health = strategy_no_lock_health,
};
