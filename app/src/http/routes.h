/* routes.h - the request handlers, one per route; each queues exactly one response. */
#ifndef APP_ROUTES_H
#define APP_ROUTES_H

#include <jansson.h>

#include "coupon_db.h"

#include "http/request.h"

int route_page(request *rq);          /* routes_page.c */
int route_claim(request *rq);         /* routes_coupon.c: validates, then offloads (request.h) */
int route_claim_resumed(request *rq); /* routes_coupon.c: answers the offloaded claim */
int route_bundle(request *rq);         /* routes_bundle.c: validates, then offloads */
int route_bundle_resumed(request *rq); /* routes_bundle.c: answers the offloaded bundle */
int route_coupon_get(request *rq);    /* routes_coupon.c */
int route_coupon_list(request *rq);   /* routes_coupon.c */
int route_admin_create(request *rq);  /* routes_admin.c */
int route_health(request *rq);        /* routes_health.c */
int route_metrics(request *rq);       /* routes_health.c */

/* The coupon object of the API: {coupon_id, name, total, stock, issued,
 * per_user_limit}. New reference, NULL on out-of-memory. */
json_t *coupon_to_json(const db_coupon *c);
/* Replies for a store failure outside a claim: BUSY -> 503/1006, NOT_FOUND
 * -> 404/1002, INVALID -> 400/1001, else 500/1500. */
int reply_db_error(request *rq, db_status st);

#endif /* APP_ROUTES_H */
