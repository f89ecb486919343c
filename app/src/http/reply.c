/* reply.c - builds and queues every response. */
#include "http/reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Seconds a client should wait before retrying a 503: a held coupon lock is
 * released within milliseconds and a Redis failover or a busy DB takes about
 * a second, so 1 s spreads retries without idling clients for long. */
#define RETRY_AFTER_S 1u

/* The page's code is inline (no external script can be swapped in), it
 * polls this server only, and it may not be framed. */
#define HTML_CSP                                                                                \
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "              \
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
/* JSON and metrics are data: nothing in them may run or be framed. */
#define DATA_CSP "default-src 'none'; frame-ancestors 'none'"

static const char ERROR_FALLBACK[] = "{\"code\":1500,\"msg\":\"out of memory\",\"data\":null}";

/* retry_after: seconds for a Retry-After header, 0 for none. */
static int queue(request *rq, unsigned status, unsigned retry_after, const char *content_type, char *body,
                 size_t len)
{
    char retry_text[16];
    int ret = MHD_NO;
    struct MHD_Response *resp = NULL;

    if (body != NULL) {
        /* MUST_FREE: MHD owns the malloc'd body from here and frees it with
         * free() after sending; the local pointer is dropped right away so no
         * path frees it twice. */
        resp = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
        if (resp == NULL)
            free(body);
        body = NULL;
    }
    if (resp == NULL) {
        /* Out of memory somewhere above: a static 500 body, which MHD must not free. */
        status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        content_type = "application/json";
        resp = MHD_create_response_from_buffer(sizeof ERROR_FALLBACK - 1, (void *)ERROR_FALLBACK,
                                               MHD_RESPMEM_PERSISTENT);
        if (resp == NULL)
            goto out;
    }
    if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) != MHD_YES)
        goto out;
    /* Hardening on every answer: browsers must not guess another type from
     * the bytes (a user_id that looks like HTML), nothing is cached (stock
     * changes every millisecond), and the page may only run its own inline
     * code and talk to this server. */
    int html = strncmp(content_type, "text/html", 9) == 0;
    if (MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff") != MHD_YES ||
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") != MHD_YES ||
        MHD_add_response_header(resp, "Content-Security-Policy", html ? HTML_CSP : DATA_CSP) != MHD_YES)
        goto out;
    snprintf(retry_text, sizeof retry_text, "%u", retry_after);
    if (retry_after > 0 && MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, retry_text) != MHD_YES)
        goto out;
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED && rq->route.allow != NULL &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, rq->route.allow) != MHD_YES)
        goto out;
    if (status == MHD_HTTP_UNAUTHORIZED &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer") != MHD_YES)
        goto out;
    /* Stopping: the client should not send another request on this
     * connection (server_stop closes it after the drain). */
    if (atomic_load(&rq->app->stopping) &&
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close") != MHD_YES)
        goto out;
    ret = MHD_queue_response(rq->conn, status, resp);
    if (ret == MHD_YES) {
        rq->replied = 1;
        rq->status = status; /* counted by the server once the handler returns */
    }
out:
    /* MHD keeps its own reference once queued; ours ends here on every path. */
    if (resp != NULL)
        MHD_destroy_response(resp);
    return ret;
}

int reply_text(request *rq, unsigned status, const char *content_type, char *body, size_t len)
{
    return queue(rq, status, status == MHD_HTTP_SERVICE_UNAVAILABLE ? RETRY_AFTER_S : 0, content_type, body, len);
}

static int envelope(request *rq, unsigned status, unsigned retry_after, int code, const char *msg, json_t *data)
{
    char *text = NULL;
    json_t *env = json_object();
    json_t *m = json_string(msg);

    /* A message carrying invalid UTF-8 (library detail text) must not turn
     * a precise error into a 500. */
    if (m == NULL)
        m = json_string("error detail unavailable");
    if (data == NULL)
        data = json_null();
    if (env == NULL) {
        json_decref(m);
        json_decref(data);
        goto out;
    }
    /* All three calls always run (| not ||) because json_object_set_new
     * steals its value even when it fails: each value is consumed exactly once. */
    int rc = json_object_set_new(env, "code", json_integer(code));
    rc |= json_object_set_new(env, "msg", m);
    rc |= json_object_set_new(env, "data", data);
    if (rc != 0)
        goto out;
    text = json_dumps(env, JSON_COMPACT);
out:
    json_decref(env);
    rq->code = code; /* for the access log; -1 (no envelope) otherwise */
    return queue(rq, status, retry_after, "application/json", text, text != NULL ? strlen(text) : 0);
}

/* The contract: every 503 tells the client when to come back. */
int reply_json(request *rq, unsigned status, int code, const char *msg, json_t *data)
{
    return envelope(rq, status, status == MHD_HTTP_SERVICE_UNAVAILABLE ? RETRY_AFTER_S : 0, code, msg, data);
}

int reply_error(request *rq, unsigned status, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return reply_json(rq, status, code, msg, NULL);
}

int reply_outcome(request *rq, claim_result r, const char *detail)
{
    const claim_outcome *o = claim_outcome_of(r);
    char msg[512];

    /* Rows whose detail is lock or store text answer their fixed message
     * only (outcome.h); the caller logs the detail. */
    if (o->detail && detail != NULL && detail[0] != '\0')
        snprintf(msg, sizeof msg, "%s: %s", o->msg, detail);
    else
        snprintf(msg, sizeof msg, "%s", o->msg);
    return envelope(rq, o->http, o->retry_after ? RETRY_AFTER_S : 0, o->code, msg, NULL);
}

int reply_error_retry(request *rq, unsigned status, int code, unsigned retry_s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return envelope(rq, status, retry_s, code, msg, NULL);
}
