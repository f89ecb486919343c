/* routes_health.c - GET /healthz (DB and lock quorum) and GET /metrics. */
#include "http/routes.h"

#include <stdio.h>

#include "core/metrics.h"
#include "http/reply.h"

int route_health(request *rq)
{
    size_t up = 0, nodes = 0;
    int db_ok = db_ping(rq->w->db) == DB_OK;
    lock_health lh = rq->app->strat->health(rq->app->strat, rq->w, &up, &nodes);
    const char *lock_s = lh == LOCK_HEALTH_OK ? "ok" : lh == LOCK_HEALTH_DOWN ? "down" : "unused";
    int healthy = db_ok && lh != LOCK_HEALTH_DOWN;

    json_t *data = json_pack("{s:s,s:s,s:I,s:I,s:s}", "db", db_ok ? "ok" : "down", "lock", lock_s, "nodes_up",
                             (json_int_t)up, "nodes", (json_int_t)nodes, "strategy", rq->app->strat->name);
    if (data == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    if (healthy)
        return reply_json(rq, MHD_HTTP_OK, API_OK, "ok", data);
    /* 503 keeps load balancers away; 1006 is the contract's "a service we
     * depend on is unavailable", and data names which one. */
    char msg[128];
    if (!db_ok && lh == LOCK_HEALTH_DOWN)
        snprintf(msg, sizeof msg, "database down; lock service down (%zu of %zu nodes up)", up, nodes);
    else if (!db_ok)
        snprintf(msg, sizeof msg, "database down");
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
