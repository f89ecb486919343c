/* strategy.c - the strategy registry, and the store-status mapping the
 * section-running strategies share. */
#include "claim/strategy.h"

#include <stdio.h>
#include <string.h>

/* Every strategy, once, by the name of its `const strategy strategy_<x>` in
 * claim/strategy_<x>.c; --strategy, its help and its error message all read
 * this list, then the seeds' recipes (one strategy each, strategy_recipe.c,
 * from the recipes library's own registry). Adding a strategy is its file
 * plus one line here; adding a recipe, its file plus one line in recipes/. */
#define STRATEGIES(X)      \
    X(redlock)             \
    X(none)                \
    X(atomic)

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
    return i < N_STRATEGIES ? REGISTRY[i] : strategy_recipe_at(i - N_STRATEGIES);
}

const strategy *strategy_by_name(const char *name)
{
    const strategy *s;
    for (size_t i = 0; (s = strategy_at(i)) != NULL; i++)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

const char *strategy_names(char *buf, size_t len)
{
    size_t off = 0;

    if (len == 0)
        return "";
    buf[0] = '\0';
    const strategy *s;
    for (size_t i = 0; (s = strategy_at(i)) != NULL && off < len; i++) {
        int n = snprintf(buf + off, len - off, "%s%s", i ? ", " : "", s->name);
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

lock_health strategy_no_lock_health(const strategy *self, worker *w, size_t *nodes_up, size_t *nodes,
                                    uint32_t *up_mask)
{
    (void)self;
    (void)w;
    *up_mask = 0;
    *nodes_up = 0;
    *nodes = 0;
    return LOCK_HEALTH_UNUSED;
}
