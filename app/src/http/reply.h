/* reply.h - every response: the JSON envelope {code, msg, data}, the contract's
 * code -> HTTP status mapping, Retry-After / Allow / WWW-Authenticate headers. */
#ifndef APP_REPLY_H
#define APP_REPLY_H

#include <stddef.h>

#include <jansson.h>

#include "http/request.h"

enum api_code {
    API_OK = 0,
    API_BAD_PARAM = 1001,
    API_NO_COUPON = 1002,
    API_SOLD_OUT = 1003,
    API_USER_LIMIT = 1004,
    API_LOCK_TIMEOUT = 1005,
    API_UNAVAILABLE = 1006,
    API_AUTH = 1007,
    API_ROUTE = 1008,
    API_TOO_LARGE = 1009,
    API_LEASE_LOST = 1010, /* the fence refused a holder whose lease ended: nothing applied */
    API_INTERNAL = 1500
};

/* Queue {"code", "msg", "data"} with the given status. Steals data (may be
 * NULL: JSON null) on every path. Returns an MHD_Result (MHD_YES/MHD_NO). */
int reply_json(request *rq, unsigned status, int code, const char *msg, json_t *data);
/* An error envelope with data null; msg is printf-formatted. 503 replies get
 * Retry-After, 401 gets WWW-Authenticate, 405 gets Allow (from rq->route). */
int reply_error(request *rq, unsigned status, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A non-JSON body (the page, /metrics). Takes body (malloc'd) on every path. */
int reply_text(request *rq, unsigned status, const char *content_type, char *body, size_t len);

#endif /* APP_REPLY_H */
