/* routes_health.c - GET /healthz (the store's writes and the lock quorum,
 * as the health prober last saw them: core/prober.h) and GET /metrics.
 * /healthz never waits on Redis or the store: data.age_ms says how old the
 * prober's result is (at most about --health-interval-ms, more while a
 * probe waits out a stopped node or a held write lock).
 *
 *   200 ok        the store takes writes and every lock node answers (or
 *                 one may still fail without losing the quorum);
 *   200 degraded  still serving, but the lock quorum has no spare node:
 *                 one more node down and claims stop; data.nodes_down
 *                 names the nodes that do not answer;
 *   503           the store refuses writes (read-only file, full disk, lock
 *                 held past the busy timeout, I/O error) or the quorum is
 *                 lost. data.db_error names the class of the store's
 *                 failure in fixed words (db_fault_str); its detail (the
 *                 file, SQLite's message) goes to the log only. */
#include "http/routes.h"

#include <stdio.h>

#include "core/log.h"
#include "core/metrics.h"
#include "core/prober.h"
#include "common.h"
#include "http/reply.h"

/* The --redis addresses whose bit is clear in up_mask. */
static json_t *nodes_down(const app_config *cfg, uint32_t up_mask, size_t nodes)
{
    json_t *a = json_array();
    for (size_t i = 0; a != NULL && i < nodes && i < cfg->n_redis; i++) {
        char shown[512]; /* never a redis:// password in a reply */
        if (!(up_mask & (UINT32_C(1) << i)) &&
            json_array_append_new(a, json_string(dlock_addr_shown(cfg->redis[i], shown, sizeof shown))) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int route_health(request *rq)
{
    const app_config *cfg = rq->app->cfg;
    health_state h;
    prober_last(&h);
    size_t up = h.nodes_up, nodes = h.nodes;
    lock_health lh = h.lock;
    int db_ok = h.db_ok;
    int64_t age = cm_now_ms() - h.at_ms;
    /* Degraded: more than one node, and exactly a quorum left. A single
     * instance never has a spare, so it is "ok" while it answers. */
    int degraded = lh == LOCK_HEALTH_OK && nodes > 1 && up == nodes / 2 + 1;
    const char *lock_s = lh == LOCK_HEALTH_DOWN ? "down" : lh == LOCK_HEALTH_UNUSED ? "unused"
                                                         : degraded ? "degraded" : "ok";
    int healthy = db_ok && lh != LOCK_HEALTH_DOWN;
    const char *status = !healthy ? "down" : degraded ? "degraded" : "ok";
    json_t *down = nodes_down(cfg, h.up_mask, nodes);
    json_t *data = down == NULL ? NULL
                                : json_pack("{s:s,s:s,s:s?,s:s,s:I,s:I,s:I,s:o,s:s,s:I}", "status", status, "db",
                                            db_ok ? "ok" : "down", "db_error",
                                            db_ok ? NULL : db_fault_str(h.db_fault), "lock", lock_s, "nodes_up", (json_int_t)up,
                                            "nodes", (json_int_t)nodes, "quorum",
                                            (json_int_t)(nodes > 0 ? nodes / 2 + 1 : 0), "nodes_down", down,
                                            "strategy", rq->app->strat->name, "age_ms", (json_int_t)age);
    if (data == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    if (healthy)
        return reply_json(rq, MHD_HTTP_OK, API_OK, status, data);
    /* 503 keeps load balancers away; 1006 is the contract's "a service we
     * depend on is unavailable", and data names which one. */
    char msg[256];
    if (!db_ok && lh == LOCK_HEALTH_DOWN)
        snprintf(msg, sizeof msg, "database refuses writes; lock service down (%zu of %zu nodes up)", up, nodes);
    else if (!db_ok)
        snprintf(msg, sizeof msg, "database refuses writes");
    else
        snprintf(msg, sizeof msg, "lock service down (%zu of %zu nodes up)", up, nodes);
    return reply_json(rq, MHD_HTTP_SERVICE_UNAVAILABLE, API_UNAVAILABLE, msg, data);
}

int route_metrics(request *rq)
{
    size_t len = 0;
    char *text = metrics_render(&len);
    if (text == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    return reply_text(rq, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, len);
}
