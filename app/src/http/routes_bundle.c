/* routes_bundle.c - POST /api/v1/coupon/bundle?user_id=U&coupon_ids=A,B,...:
 * one unit of every listed coupon for the user, or nothing (claim/bundle.h).
 * Validation and the sold-out fast path here, on the HTTP thread; the
 * bundle itself on a claim worker, like a single claim. */
#include "http/routes.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "claim/bundle.h"
#include "claim/stock_view.h"
#include "core/log.h"
#include "core/metrics.h"
#include "http/params.h"
#include "http/reply.h"

/* The longest coupon_ids value worth reading: 16 ids of 19 digits and commas. */
#define IDS_TEXT_MAX (BUNDLE_MAX * 20)

/* "A,B,C" into ids: 2..BUNDLE_MAX positive distinct ids. 0, or -1 with the
 * reason in why. */
static int parse_ids(const char *text, int64_t *ids, size_t *n, char *why, size_t whylen)
{
    char buf[IDS_TEXT_MAX + 2];
    char *save = NULL;
    size_t len = strnlen(text, sizeof buf);

    *n = 0;
    if (len >= sizeof buf) {
        snprintf(why, whylen, "invalid coupon_ids: at most %d ids", BUNDLE_MAX);
        return -1;
    }
    memcpy(buf, text, len + 1);
    /* strtok_r would merge ",," and skip a trailing ",": say so instead. */
    if (len == 0 || buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,") != NULL) {
        snprintf(why, whylen, "invalid coupon_ids: a comma-separated list of positive integers");
        return -1;
    }
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int64_t id;
        if (*n == BUNDLE_MAX) {
            snprintf(why, whylen, "invalid coupon_ids: at most %d ids", BUNDLE_MAX);
            return -1;
        }
        if (parse_coupon_id(tok, &id) != 0) {
            snprintf(why, whylen, "invalid coupon_ids: a comma-separated list of positive integers");
            return -1;
        }
        for (size_t i = 0; i < *n; i++) {
            if (ids[i] == id) {
                snprintf(why, whylen, "invalid coupon_ids: coupon %" PRId64 " listed twice", id);
                return -1;
            }
        }
        ids[(*n)++] = id;
    }
    if (*n < BUNDLE_MIN) {
        snprintf(why, whylen, "invalid coupon_ids: at least %d ids", BUNDLE_MIN);
        return -1;
    }
    return 0;
}

static json_t *ids_json(const int64_t *ids, size_t n, const unsigned char *only)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr != NULL && i < n; i++) {
        if (only != NULL && !only[i])
            continue;
        if (json_array_append_new(arr, json_integer((json_int_t)ids[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

static int reply_sold_out(request *rq, const int64_t *ids, size_t n, const unsigned char *which)
{
    const claim_outcome *o = claim_outcome_of(CLAIM_SOLD_OUT);
    json_t *data = json_pack("{s:o*}", "sold_out", ids_json(ids, n, which));

    if (data == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    return reply_json(rq, o->http, o->code, o->msg, data);
}

static int reply_bundle_ok(request *rq, const bundle_job *job)
{
    json_t *recs = json_array(), *fences = json_array();
    for (size_t i = 0; recs != NULL && fences != NULL && i < job->n; i++) {
        if (json_array_append_new(recs, json_integer((json_int_t)job->record_ids[i])) != 0 ||
            json_array_append_new(fences, json_integer((json_int_t)job->fences[i])) != 0) {
            json_decref(recs);
            recs = NULL;
        }
    }
    /* "o*": steals each, and a NULL member makes the pack fail (freeing the others). */
    json_t *data = json_pack("{s:o*,s:s,s:o*,s:o*}", "coupon_ids", ids_json(job->ids, job->n, NULL), "user_id",
                             job->base.user_id, "record_ids", recs, "fences", fences);
    if (data == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    return reply_json(rq, MHD_HTTP_OK, API_OK, "ok", data);
}

static void bundle_done(claim_job *job)
{
    request *rq = job->ctx;
    struct MHD_Connection *conn = rq->conn;
    MHD_resume_connection(conn);
}

int route_bundle(request *rq)
{
    const app_config *cfg = rq->app->cfg;
    const char *uid = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "user_id");
    const char *list = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, "coupon_ids");
    bundle_job *job = &rq->bundle;
    unsigned char sold_out[BUNDLE_MAX] = {0};
    int any_sold_out = 0;
    char why[128];

    bundle_job_init(job);
    if (uid == NULL)
        return reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM, "missing parameter user_id");
    if (!valid_user_id(uid))
        return reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM,
                           "invalid user_id: must be 1-64 characters of [A-Za-z0-9_.:-]");
    if (list == NULL)
        return reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM, "missing parameter coupon_ids");
    if (parse_ids(list, job->ids, &job->n, why, sizeof why) != 0)
        return reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM, "%s", why);

    /* The single claim's fast path (routes_coupon.c), over every id, from
     * the same stock view: a sold-out coupon means the bundle cannot
     * succeed, and so does an unknown id. */
    for (size_t i = 0; i < job->n; i++) {
        stock_answer a = stock_view_ask(rq->w->db, job->ids[i]);
        if (a == STOCK_NOT_FOUND) {
            metrics_bundle(CLAIM_NOT_FOUND);
            return reply_error(rq, MHD_HTTP_NOT_FOUND, API_NO_COUPON, "no such coupon: %" PRId64, job->ids[i]);
        }
        if (a == STOCK_SOLD_OUT)
            any_sold_out = sold_out[i] = 1;
    }
    if (any_sold_out) {
        metrics_bundle(CLAIM_SOLD_OUT);
        return reply_sold_out(rq, job->ids, job->n, sold_out);
    }

    snprintf(job->base.user_id, sizeof job->base.user_id, "%s", uid); /* valid_user_id: at most 64 */
    /* From the arrival, like a claim: the claim queue's wait counts too. */
    job->base.deadline_us = rq->t0_us + (int64_t)cfg->lock_wait_ms * 1000;
    job->base.done = bundle_done;
    job->base.ctx = rq;
    /* It waits in its first coupon's lane, after the claims of that coupon before it. */
    job->base.coupon_id = job->ids[0];
    rq->offloaded = 1;
    /* Suspended before a worker can see the job (routes_coupon.c's reason). */
    MHD_suspend_connection(rq->conn);
    claimq_submit_result sr = claimq_submit(rq->app->claims, &job->base);
    if (sr != CLAIMQ_QUEUED) {
        job->base.result = CLAIM_OVERLOAD;
        snprintf(job->base.out.detail, sizeof job->base.out.detail, "%s",
                 sr == CLAIMQ_FULL ? "the claim queue is full" : "server stopping");
        MHD_resume_connection(rq->conn);
    }
    return MHD_YES;
}

int route_bundle_resumed(request *rq)
{
    const bundle_job *job = &rq->bundle;
    claim_result r = job->base.result;

    metrics_bundle(r);
    if (r == CLAIM_OK)
        return reply_bundle_ok(rq, job);
    if (r == CLAIM_SOLD_OUT)
        return reply_sold_out(rq, job->ids, job->n, job->sold_out);
    if (r == CLAIM_ERROR || r == CLAIM_DB_BUSY || r == CLAIM_LOCK_UNAVAILABLE)
        log_event_line(r == CLAIM_ERROR ? LOG_ERROR : LOG_WARN,
                       r == CLAIM_LOCK_UNAVAILABLE ? LOG_EV_LOCK_ERROR : LOG_EV_DB_ERROR, "bundle: %s: %s",
                       claim_outcome_of(r)->label, job->base.out.detail);
    /* Status, code, Retry-After and msg from the one outcome table. */
    return reply_outcome(rq, r, r == CLAIM_USER_LIMIT ? job->base.user_id : job->base.out.detail);
}
