/* strategy.c - the strategy registry and the store-status mapping they share. */
#include "claim/strategy.h"

#include <stdio.h>
#include <string.h>

static const strategy *const ALL[] = {&strategy_redlock, &strategy_none, &strategy_atomic};

const strategy *strategy_by_name(const char *name)
{
    for (size_t i = 0; i < sizeof ALL / sizeof ALL[0]; i++)
        if (strcmp(ALL[i]->name, name) == 0)
            return ALL[i];
    return NULL;
}

const char *strategy_names(void)
{
    return "redlock, none, atomic-sql";
}

claim_result claim_from_db(db_status st)
{
    switch (st) {
    case DB_OK: return CLAIM_OK;
    case DB_NOT_FOUND: return CLAIM_NOT_FOUND;
    case DB_SOLD_OUT: return CLAIM_SOLD_OUT;
    case DB_USER_LIMIT: return CLAIM_USER_LIMIT;
    case DB_STALE_FENCE: return CLAIM_STALE_FENCE;
    case DB_BUSY: return CLAIM_DB_BUSY;
    case DB_INVALID: return CLAIM_INVALID;
    case DB_ERROR: return CLAIM_ERROR;
    }
    return CLAIM_ERROR;
}

claim_result claim_from_req(worker *w, const db_claim_req *req, claim_out *out)
{
    if (req->status == DB_OK) {
        out->rec = req->claim;
    } else if (req->status == DB_SOLD_OUT || req->status == DB_USER_LIMIT) {
        /* Decided in memory from the read: the store's message may be another claim's. */
        snprintf(out->detail, sizeof out->detail, "%s", db_status_str(req->status));
    } else {
        snprintf(out->detail, sizeof out->detail, "%s", db_errmsg(w->db));
    }
    return claim_from_db(req->status);
}

const char *claim_result_name(claim_result r)
{
    switch (r) {
    case CLAIM_OK: return "ok";
    case CLAIM_NOT_FOUND: return "not_found";
    case CLAIM_SOLD_OUT: return "sold_out";
    case CLAIM_USER_LIMIT: return "user_limit";
    case CLAIM_LOCK_TIMEOUT: return "lock_timeout";
    case CLAIM_STALE_FENCE: return "stale_fence";
    case CLAIM_LOCK_UNAVAILABLE: return "lock_unavailable";
    case CLAIM_DB_BUSY: return "db_busy";
    case CLAIM_INVALID: return "invalid";
    case CLAIM_ERROR: return "error";
    case CLAIM__COUNT: break;
    }
    return "error";
}

lock_health strategy_no_lock_health(worker *w, size_t *nodes_up, size_t *nodes)
{
    (void)w;
    *nodes_up = 0;
    *nodes = 0;
    return LOCK_HEALTH_UNUSED;
}
