/* request.h - the per-request state that libmicrohttpd carries between
 * calls of the access handler. */
#ifndef APP_REQUEST_H
#define APP_REQUEST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>

#include "app.h"
#include "claim/bundle.h"
#include "claim/claimq.h"
#include "http/router.h"

typedef struct request {
    app *app;
    int started;        /* the handler's first call happened (in_flight counts it) */
    struct watched *watch; /* the connection's deadlines (conn_watch.h), or NULL */
    /* The raw target's end as the URI log callback saw it: the handler
     * checks that the version follows right after it (server.c). */
    const char *raw_end;
    /* A refusal decided before the body (the target's screen, the head's
     * size): answered after the body is read, so that the connection
     * stays in step for a pipelined request. 0: none. */
    unsigned refuse_status;
    int refuse_code;
    char refuse_msg[160];
    struct MHD_Connection *conn;
    const char *method; /* borrowed from MHD, valid until completion */
    const char *url;    /* the path, borrowed from MHD likewise */
    route_match route;
    char *body;         /* accumulated upload, NUL-terminated; owned */
    size_t body_len;
    size_t body_cap;
    int body_too_large; /* the upload passed max_body: the rest was dropped */
    int replied;        /* a response is queued */
    unsigned status;    /* its HTTP status, once replied */
    int code;           /* its envelope's code, -1 for a reply without one (/metrics, the page) */
    int64_t t0_us;      /* arrival (the headers' first call), CLOCK_MONOTONIC */
    worker *w;          /* slot checked out for the handler, else NULL */
    /* Offloaded: the handler handed its work to the claim queue (job) and
     * suspended the connection; the job's done callback resumes it, and
     * MHD then calls the handler again, which answers from job. */
    int offloaded;
    claim_job job;
    bundle_job bundle;  /* the same for a bundle (routes_bundle.c) */
} request;

#endif /* APP_REQUEST_H */
