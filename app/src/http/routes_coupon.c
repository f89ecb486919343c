/* routes_coupon.c - the claim endpoint (validation, the sold-out fast path,
 * the strategy call, the reply from the outcome table) and the coupon read
 * endpoints. */
#include "http/routes.h"

#include <inttypes.h>

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "claim/stock_view.h"
#include "common.h"
#include "core/metrics.h"
#include "http/params.h"
#include "core/log.h"
#include "http/reply.h"

#define USER_ID_RULE "1-64 characters of [A-Za-z0-9_.:-]"

json_t *coupon_to_json(const db_coupon *c)
{
    return json_pack("{s:I,s:s,s:I,s:I,s:I,s:I}", "coupon_id", (json_int_t)c->id, "name", c->name, "total",
                     (json_int_t)c->total, "stock", (json_int_t)c->stock, "issued", (json_int_t)c->issued,
                     "per_user_limit", (json_int_t)c->per_user_limit);
}

int reply_db_error(request *rq, db_status st)
{
    claim_result r = claim_from_db(st);
    /* The store's message helps only where the request or the server is at
     * fault; "no such coupon" and "database busy" say it all. */
    int detailed = r == CLAIM_INVALID || r == CLAIM_ERROR;
    if (r == CLAIM_ERROR || r == CLAIM_DB_BUSY)
        log_event_line(r == CLAIM_ERROR ? LOG_ERROR : LOG_WARN, LOG_EV_DB_ERROR, "%s %s: %s", rq->method, rq->url,
                       db_errmsg(rq->w->db));
    return reply_outcome(rq, r, detailed ? db_errmsg(rq->w->db) : NULL);
}

static int body_is_form(request *rq)
{
    const char *ct = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    static const char FORM[] = "application/x-www-form-urlencoded";
    /* No Content-Type: a bare "coupon_id=1&user_id=u" body is still a form. */
    return ct == NULL || strncasecmp(ct, FORM, sizeof FORM - 1) == 0;
}

/* The query string wins; a urlencoded POST body fills what it lacks.
 * *out is NULL when absent; a malformed body value yields "" (invalid). */
static void lookup_param(request *rq, const char *key, char *buf, size_t buflen, const char **out)
{
    *out = MHD_lookup_connection_value(rq->conn, MHD_GET_ARGUMENT_KIND, key);
    if (*out != NULL || rq->body_len == 0 || !body_is_form(rq))
        return;
    int r = form_lookup(rq->body, rq->body_len, key, buf, buflen);
    if (r == 1)
        *out = buf;
    else if (r < 0)
        *out = "";
}

static int reply_claim_ok(request *rq, int64_t coupon_id, const char *user_id, const claim_out *out)
{
    json_t *data = json_pack("{s:I,s:s,s:I,s:I,s:I}", "coupon_id", (json_int_t)coupon_id, "user_id", user_id,
                             "record_id", (json_int_t)out->rec.record_id, "stock", (json_int_t)out->rec.stock,
                             "fence", (json_int_t)out->fence);
    if (data == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    return reply_json(rq, MHD_HTTP_OK, API_OK, "ok", data);
}

/* The answer to a finished claim (or one refused before it ran), on the
 * HTTP thread: metrics, the operator log, and the outcome table's reply. */
static int reply_claim(request *rq, claim_result r, const claim_out *out, int64_t coupon_id, const char *uid)
{
    metrics_claim(r);
    if (r == CLAIM_OK)
        return reply_claim_ok(rq, coupon_id, uid, out);
    if (r == CLAIM_SOLD_OUT)
        metrics_sold_out(0);
    /* What an operator must act on, once a second per kind at most (log.h). */
    if (r == CLAIM_ERROR || r == CLAIM_DB_BUSY)
        log_event_line(r == CLAIM_ERROR ? LOG_ERROR : LOG_WARN, LOG_EV_DB_ERROR, "claim on coupon %" PRId64 ": %s: %s",
                       coupon_id, claim_outcome_of(r)->label, out->detail);
    else if (r == CLAIM_LOCK_UNAVAILABLE)
        log_event_line(LOG_WARN, LOG_EV_LOCK_ERROR, "claim on coupon %" PRId64 ": lock service unavailable: %s",
                       coupon_id, out->detail);
    /* Status, code, Retry-After and msg come from the one outcome table
     * (outcome.h). Only the rows about the request itself carry a
     * detail (which user, which parameter); lock and store text was logged
     * above and stays out of the reply. */
    char detail[sizeof out->detail + 96];
    if (r == CLAIM_USER_LIMIT)
        snprintf(detail, sizeof detail, "user_id %s", uid);
    else
        snprintf(detail, sizeof detail, "%s", out->detail);
    return reply_outcome(rq, r, detail);
}

/* A claim refused before it reached a strategy (bad parameters, the
 * sold-out fast path): counted and answered by its row of the outcome
 * table like any other claim, so coupon_claims_total sees every claim. */
static int reply_refused(request *rq, claim_result r, const char *detail)
{
    metrics_claim(r);
    if (r == CLAIM_SOLD_OUT)
        metrics_sold_out(1);
    return reply_outcome(rq, r, detail);
}

/* The claim job's done callback, on a claim worker: wakes the connection.
 * MHD then calls the access handler again (route_claim_resumed). The
 * connection is read before the resume: from the resume on, the HTTP
 * thread may answer and free the request (and the job in it). */
static void claim_done(claim_job *job)
{
    request *rq = job->ctx;
    struct MHD_Connection *conn = rq->conn;
    job->done_us = cm_now_us(); /* before the resume: after it the job may be gone */
    MHD_resume_connection(conn);
}

/* Validation and the sold-out fast path run here, on the HTTP thread. The
 * claim itself (the lock wait and the store write) runs on a claim worker
 * (claim/claimq.h) while the connection is suspended. So a claim waiting
 * for the lock never holds a thread that serves reads, /healthz and
 * /metrics. */
int route_claim(request *rq)
{
    const app_config *cfg = rq->app->cfg;
    char cid_buf[64], uid_buf[128];
    const char *cid = NULL, *uid = NULL;
    int64_t coupon_id = 0;

    lookup_param(rq, "coupon_id", cid_buf, sizeof cid_buf, &cid);
    lookup_param(rq, "user_id", uid_buf, sizeof uid_buf, &uid);
    if (cid == NULL)
        return reply_refused(rq, CLAIM_INVALID, "missing coupon_id");
    if (parse_coupon_id(cid, &coupon_id) != 0)
        return reply_refused(rq, CLAIM_INVALID, "coupon_id must be a positive integer");
    if (uid == NULL)
        return reply_refused(rq, CLAIM_INVALID, "missing user_id");
    if (!valid_user_id(uid))
        return reply_refused(rq, CLAIM_INVALID, "user_id must be " USER_ID_RULE);

    /* The sold-out fast path, the only one, before any strategy and so
     * before the lock: this keeps a sold-out flash sale from queueing every
     * late request on one Redis key (and in the claim queue). The stock
     * view answers it from what this server's claims already learned, with
     * a store round trip only when nothing fresh is known. When it may say
     * "sold out" or "not found" without the lock is claim/stock_view.h's
     * (stock only falls; a stale positive just sends the request on to the
     * strategy, which re-checks inside its transaction). */
    switch (stock_view_ask(rq->w->db, coupon_id)) {
    case STOCK_NOT_FOUND:
        return reply_refused(rq, CLAIM_NOT_FOUND, NULL);
    case STOCK_SOLD_OUT:
        return reply_refused(rq, CLAIM_SOLD_OUT, NULL);
    case STOCK_GO_ON:
        break;
    }

    claim_job *job = &rq->job;
    memset(job, 0, sizeof *job);
    job->coupon_id = coupon_id;
    snprintf(job->user_id, sizeof job->user_id, "%s", uid); /* valid_user_id: at most CLAIMQ_USER_MAX */
    /* Fixed at the request's arrival: the time it waits in the claim queue
     * is part of --lock-wait, which bounds the whole answer. */
    job->deadline_us = rq->t0_us + (int64_t)cfg->lock_wait_ms * 1000;
    job->done = claim_done;
    job->ctx = rq;
    job->queued_us = cm_now_us();
    metrics_stage_us(STAGE_HTTP_IN, job->queued_us - rq->t0_us);
    rq->offloaded = 1;
    /* Suspended before the job is visible to a worker: a worker may finish
     * it at once, and resuming a connection that is not suspended is
     * undefined in MHD. */
    MHD_suspend_connection(rq->conn);
    claimq_submit_result sr = claimq_submit(rq->app->claims, job);
    if (sr != CLAIMQ_QUEUED) {
        /* Refused at once, without waiting: the answer goes out on the
         * handler's next call, like any other (MHD answers only from the
         * handler, and this connection is suspended now). */
        job->result = CLAIM_OVERLOAD;
        if (sr == CLAIMQ_FULL)
            snprintf(job->out.detail, sizeof job->out.detail, "%d claims are waiting already (--claim-queue)",
                     cfg->claim_queue);
        else
            snprintf(job->out.detail, sizeof job->out.detail, "server stopping");
        MHD_resume_connection(rq->conn);
    }
    return MHD_YES;
}

int route_claim_resumed(request *rq)
{
    const claim_job *job = &rq->job;
    int64_t t = cm_now_us();
    if (job->done_us > 0)
        metrics_stage_us(STAGE_RESUME, t - job->done_us);
    int ret = reply_claim(rq, job->result, &job->out, job->coupon_id, job->user_id);
    metrics_stage_us(STAGE_REPLY, cm_now_us() - t);
    return ret;
}

int route_coupon_get(request *rq)
{
    int64_t id = 0;
    db_coupon c;

    if (parse_coupon_id(rq->route.tail, &id) != 0)
        return reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM,
                           "invalid coupon_id: must be a positive integer");
    db_status st = db_get_coupon(rq->w->db, id, &c);
    if (st != DB_OK)
        return reply_db_error(rq, st);
    json_t *data = coupon_to_json(&c);
    if (data == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    return reply_json(rq, MHD_HTTP_OK, API_OK, "ok", data);
}

int route_coupon_list(request *rq)
{
    int ret = MHD_NO;
    db_coupon *list = NULL;
    size_t n = 0;
    json_t *arr = NULL;

    db_status st = db_list_coupons(rq->w->db, &list, &n);
    if (st != DB_OK) {
        ret = reply_db_error(rq, st);
        goto out;
    }
    arr = json_array();
    if (arr == NULL)
        goto oom;
    for (size_t i = 0; i < n; i++)
        if (json_array_append_new(arr, coupon_to_json(&list[i])) != 0)
            goto oom;
    ret = reply_json(rq, MHD_HTTP_OK, API_OK, "ok", arr);
    arr = NULL; /* stolen by reply_json */
    goto out;
oom:
    ret = reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
out:
    json_decref(arr);
    free(list);
    return ret;
}
