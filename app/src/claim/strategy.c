/* strategy.c - the strategy registry, and the store-status mapping the
 * section-running strategies share. */
#include "claim/strategy.h"

#include <stdio.h>
#include <string.h>

/* Every strategy, once, by the name of its `const strategy strategy_<x>` in
 * claim/strategy_<x>.c; --strategy, its help and its error message all read
 * this list. Adding a strategy is its file plus one line here. */
#define STRATEGIES(X)      \
    X(redlock)             \
    X(none)                \
    X(atomic)              \
    /* the seeds' recipes, wrong on purpose (claim/recipes/) */ \
    X(get_set)             \
    X(setnx)               \
    X(multi_setnx_pexpire) \
    X(lua_setnx_pexpire)   \
    X(setnx_expire)        \
    X(del_no_token)        \
    X(setnx_getset)        \
    X(failover)

#define STRATEGY_DECLARE(x) extern const strategy strategy_##x;
STRATEGIES(STRATEGY_DECLARE)
#undef STRATEGY_DECLARE

static const strategy *const REGISTRY[] = {
#define STRATEGY_ENTRY(x) &strategy_##x,
    STRATEGIES(STRATEGY_ENTRY)
#undef STRATEGY_ENTRY
};
#define N_STRATEGIES (sizeof REGISTRY / sizeof REGISTRY[0])

const strategy *strategy_at(size_t i)
{
    return i < N_STRATEGIES ? REGISTRY[i] : NULL;
}

const strategy *strategy_by_name(const char *name)
{
    for (size_t i = 0; i < N_STRATEGIES; i++)
        if (strcmp(REGISTRY[i]->name, name) == 0)
            return REGISTRY[i];
    return NULL;
}

const char *strategy_names(char *buf, size_t len)
{
    size_t off = 0;

    if (len == 0)
        return "";
    buf[0] = '\0';
    for (size_t i = 0; i < N_STRATEGIES && off < len; i++) {
        int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", REGISTRY[i]->name);
        if (n < 0)
            break;
        off += (size_t)n;
    }
    return buf;
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

lock_health strategy_no_lock_health(worker *w, size_t *nodes_up, size_t *nodes)
{
    (void)w;
    *nodes_up = 0;
    *nodes = 0;
    return LOCK_HEALTH_UNUSED;
}
