/* router.c - the route table: exact paths plus /api/v1/coupon/<id>, method
 * checks (405 with Allow), 404 for the rest, and dispatch to the handlers. */
#include "http/router.h"

#include <string.h>

#include "http/reply.h"
#include "http/routes.h"

#define COUPON_PREFIX "/api/v1/coupon/"

typedef struct route_def {
    route_id id;
    const char *path;  /* exact path; NULL for the /api/v1/coupon/<id> pattern */
    const char *name;  /* metric label */
    const char *allow; /* methods served, as the Allow header lists them */
    int (*handler)(request *rq);
    int needs_worker;  /* checks out a db/lock slot around the handler */
    /* For a handler that offloads (request.h): answers on the call after
     * the resume. NULL: the handler always answers at once. */
    int (*resumed)(request *rq);
} route_def;

/* HEAD is served wherever GET is (MHD sends the headers without the body);
 * a claim is never HEAD because HEAD must not change state. */
static const route_def ROUTES[ROUTE__COUNT] = {
    {ROUTE_PAGE, "/", "/", "GET, HEAD", route_page, 1, NULL},
    /* The claim's slot serves the sold-out peek only: the claim itself runs
     * on a claim worker with that worker's own slot (claim/claimq.h). */
    {ROUTE_CLAIM, "/api/v1/coupon/add", "/api/v1/coupon/add", "GET, POST", route_claim, 1, route_claim_resumed},
    {ROUTE_COUPON_GET, NULL, "/api/v1/coupon/{id}", "GET, HEAD", route_coupon_get, 1, NULL},
    {ROUTE_COUPON_LIST, "/api/v1/coupon", "/api/v1/coupon", "GET, HEAD", route_coupon_list, 1, NULL},
    /* Creating a coupon takes no lock: one insert, bounded by --db-busy-ms. */
    {ROUTE_ADMIN_CREATE, "/api/v1/admin/coupon", "/api/v1/admin/coupon", "POST", route_admin_create, 1, NULL},
    /* No slot: /healthz answers from the health prober's last result (core/prober.h). */
    {ROUTE_HEALTH, "/healthz", "/healthz", "GET, HEAD", route_health, 0, NULL},
    {ROUTE_METRICS, "/metrics", "/metrics", "GET, HEAD", route_metrics, 0, NULL},
    /* POST only: a bundle changes state, and the contract gives it no GET. */
    {ROUTE_BUNDLE, "/api/v1/coupon/bundle", "/api/v1/coupon/bundle", "POST", route_bundle, 1, route_bundle_resumed},
    {ROUTE_UNMATCHED, NULL, "unmatched", NULL, NULL, 0, NULL},
};

static int method_in(const char *method, const char *allow)
{
    size_t mlen = strlen(method);
    const char *p = allow;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == mlen && strncmp(p, method, mlen) == 0)
            return 1;
        p = end ? end + 2 : NULL; /* skip ", " */
    }
    return 0;
}

void router_match(const char *url, const char *method, route_match *m)
{
    memset(m, 0, sizeof *m);
    m->id = ROUTE_UNMATCHED;
    for (size_t i = 0; i < ROUTE__COUNT; i++) {
        if (ROUTES[i].path != NULL && strcmp(url, ROUTES[i].path) == 0) {
            m->id = ROUTES[i].id;
            break;
        }
    }
    /* Exact paths first: "/api/v1/coupon/add" is the claim, not coupon "add". */
    if (m->id == ROUTE_UNMATCHED && strncmp(url, COUPON_PREFIX, sizeof COUPON_PREFIX - 1) == 0 &&
        strchr(url + sizeof COUPON_PREFIX - 1, '/') == NULL) {
        m->id = ROUTE_COUPON_GET;
        m->tail = url + sizeof COUPON_PREFIX - 1;
    }
    m->allow = ROUTES[m->id].allow;
    m->method_ok = m->id != ROUTE_UNMATCHED && method_in(method, m->allow);
}

const char *router_route_name(route_id id)
{
    if ((unsigned)id >= ROUTE__COUNT)
        return "unmatched";
    return ROUTES[id].name;
}

int router_dispatch(request *rq)
{
    const route_def *def = &ROUTES[rq->route.id];
    int ret;

    if (rq->route.id == ROUTE_UNMATCHED)
        return reply_error(rq, MHD_HTTP_NOT_FOUND, API_ROUTE, "no such route");
    if (!rq->route.method_ok)
        /* The method is not echoed: it is the client's raw bytes, and the
         * Allow header already says what would work. */
        return reply_error(rq, MHD_HTTP_METHOD_NOT_ALLOWED, API_ROUTE, "method not allowed here (allowed: %s)",
                           def->allow);
    if (def->needs_worker)
        rq->w = pool_checkout(rq->app->pool);
    ret = def->handler(rq);
    pool_return(rq->app->pool, rq->w);
    rq->w = NULL;
    /* A handler that failed before queueing (out of memory) still owes the
     * client an answer: the last resort is a plain 500. An offloaded one
     * answers on its next call (router_resumed). */
    if (!rq->replied && !rq->offloaded && ret == MHD_YES)
        ret = reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "internal error");
    return ret;
}

int router_resumed(request *rq)
{
    const route_def *def = &ROUTES[rq->route.id];
    int ret = def->resumed != NULL ? def->resumed(rq) : MHD_YES;

    if (!rq->replied && ret == MHD_YES)
        ret = reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "internal error");
    return ret;
}
