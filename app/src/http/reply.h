/* reply.h - every response: the JSON envelope {code, msg, data} and the
 * Retry-After / Allow / WWW-Authenticate headers. */
#ifndef APP_REPLY_H
#define APP_REPLY_H

#include <stddef.h>

#include <jansson.h>

#include "api.h"
#include "outcome.h"
#include "http/request.h"

/* Queue {"code", "msg", "data"} with the given status. Steals data (may be
 * NULL: JSON null) on every path. Returns an MHD_Result (MHD_YES/MHD_NO). */
int reply_json(request *rq, unsigned status, int code, const char *msg, json_t *data);
/* An error envelope with data null; msg is printf-formatted. 503 replies get
 * Retry-After, 401 gets WWW-Authenticate, 405 gets Allow (from rq->route). */
int reply_error(request *rq, unsigned status, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same with a Retry-After of retry_s seconds (0: none), whatever the status. */
int reply_error_retry(request *rq, unsigned status, int code, unsigned retry_s, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The row of the claim outcome table (outcome.h) as an error reply: its
 * status, code, Retry-After and msg. ": detail" is added when detail is
 * neither NULL nor empty and the row lets a reply carry it (lock and store
 * rows do not: their detail is for the log). */
int reply_outcome(request *rq, claim_result r, const char *detail);
/* A non-JSON body (the page, /metrics). Takes body (malloc'd) on every path. */
int reply_text(request *rq, unsigned status, const char *content_type, char *body, size_t len);

#endif /* APP_REPLY_H */
