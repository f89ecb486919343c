/* router.h - the route table: path + method -> handler, Allow lists, metric labels. */
#ifndef APP_ROUTER_H
#define APP_ROUTER_H

typedef enum route_id {
    ROUTE_PAGE = 0,     /* GET / */
    ROUTE_CLAIM,        /* POST|GET /api/v1/coupon/add */
    ROUTE_COUPON_GET,   /* GET /api/v1/coupon/<id> */
    ROUTE_COUPON_LIST,  /* GET /api/v1/coupon */
    ROUTE_ADMIN_CREATE, /* POST /api/v1/admin/coupon */
    ROUTE_HEALTH,       /* GET /healthz */
    ROUTE_METRICS,      /* GET /metrics */
    ROUTE_BUNDLE,       /* POST /api/v1/coupon/bundle */
    ROUTE_UNMATCHED,    /* anything else: 404 */
    ROUTE__COUNT
} route_id;

typedef struct route_match {
    route_id id;
    int method_ok;     /* 0: the path exists but not for this method (405) */
    const char *allow; /* static Allow header value for the path */
    const char *tail;  /* ROUTE_COUPON_GET: the text after "/api/v1/coupon/" (borrowed from url) */
} route_match;

void router_match(const char *url, const char *method, route_match *m);
/* Metric label: the route pattern, e.g. "/api/v1/coupon/{id}". */
const char *router_route_name(route_id id);

struct request;
/* Runs the matched handler (or the 404/405 reply) and queues its response. */
int router_dispatch(struct request *rq);
/* The call after an offloaded handler's resume: queues the route's answer. */
int router_resumed(struct request *rq);

#endif /* APP_ROUTER_H */
