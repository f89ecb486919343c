/* routes_admin.c - POST /api/v1/admin/coupon: the back-off by client
 * address (behind a trusted proxy, the one its X-Forwarded-For names:
 * peer.h), the bearer token compared in constant time, the body
 * (admin_body.c), coupon creation. */
#include "http/routes.h"

#include <string.h>
#include <strings.h>

#include "claim/stock_view.h"
#include "common.h"
#include "http/admin_body.h"
#include "http/admin_guard.h"
#include "http/peer.h"
#include "http/reply.h"

/* Compares in time that depends only on the length of the guess, never on
 * how many leading bytes match or on the secret's length, so response
 * timing cannot be used to discover the token byte by byte. The secret is
 * indexed modulo its length so the loop always runs over the whole guess. */
static int token_equal(const char *given, const char *expected)
{
    size_t gl = strlen(given), el = strlen(expected);
    volatile unsigned char diff = (unsigned char)(gl != el);

    for (size_t i = 0; i < gl; i++)
        diff |= (unsigned char)((unsigned char)given[i] ^ (unsigned char)expected[i % el]);
    return diff == 0;
}

/* Counts the request's Authorization headers. */
static enum MHD_Result count_auth(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    (void)value;
    if (key != NULL && strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION) == 0)
        (*(unsigned *)cls)++;
    return MHD_YES;
}

/* The token of "Bearer <token>", parsed strictly: the scheme exactly once and
 * in one header, one space, then token68 characters (RFC 6750) only. A NUL
 * inside the header (its length differs from its strlen) is refused, so no
 * prefix of a header is ever compared. NULL with *why when malformed. */
static const char *bearer_token(request *rq, const char **why)
{
    unsigned headers = 0;
    const char *auth = NULL;
    size_t auth_len = 0;

    (void)MHD_get_connection_values(rq->conn, MHD_HEADER_KIND, count_auth, &headers);
    if (headers == 0) {
        *why = "missing admin token (Authorization: Bearer <token>)";
        return NULL;
    }
    if (headers > 1 || MHD_lookup_connection_value_n(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION,
                                                     strlen(MHD_HTTP_HEADER_AUTHORIZATION), &auth,
                                                     &auth_len) != MHD_YES ||
        auth == NULL || strlen(auth) != auth_len || strncmp(auth, "Bearer ", 7) != 0 || auth_len == 7 ||
        strspn(auth + 7, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=") != auth_len - 7) {
        *why = "malformed Authorization header (expected one header: Bearer <token>)";
        return NULL;
    }
    return auth + 7;
}

/* 0 when authorised; otherwise the reply is queued and *ret holds its result. */
static int check_auth(request *rq, int *ret)
{
    const char *token = rq->app->cfg->admin_token;
    struct sockaddr_storage buf;
    const struct sockaddr *addr = peer_client(rq->conn, &buf);
    const char *why = NULL;
    unsigned retry_s = 0;

    if (token == NULL) {
        *ret = reply_error(rq, MHD_HTTP_FORBIDDEN, API_AUTH, "admin endpoints are disabled (no --admin-token)");
        return -1;
    }
    /* The back-off before the token: while an address waits, the right
     * token is refused too, so a 429 does not mean "wrong" and the wait
     * bounds guessing (admin_guard.h). */
    if (admin_guard_check(addr, cm_now_ms(), &retry_s) != 0) {
        *ret = reply_error_retry(rq, MHD_HTTP_TOO_MANY_REQUESTS, API_AUTH, retry_s,
                                 "too many failed admin attempts from this address; retry in %u s", retry_s);
        return -1;
    }
    const char *given = bearer_token(rq, &why);
    if (given == NULL) {
        *ret = reply_error(rq, MHD_HTTP_UNAUTHORIZED, API_AUTH, "%s", why);
        return -1;
    }
    if (token_equal(given, token)) {
        admin_guard_succeeded(addr);
        return 0;
    }
    admin_guard_failed(addr, cm_now_ms());
    *ret = reply_error(rq, MHD_HTTP_UNAUTHORIZED, API_AUTH, "wrong admin token");
    return -1;
}

int route_admin_create(request *rq)
{
    int ret = MHD_NO;
    admin_coupon_body in;
    char msg[256];
    db_coupon c;

    if (check_auth(rq, &ret) != 0)
        return ret;
    if (admin_coupon_body_parse(rq->body, rq->body_len, &in, msg, sizeof msg) != 0)
        return reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM, "%s", msg);
    db_status st = db_create_coupon(rq->w->db, in.name, in.stock, in.per_user_limit, &c);
    if (st != DB_OK)
        return reply_db_error(rq, st);
    /* A new id (ids are never reused): nothing stale to invalidate, only
     * fresh knowledge for the fast path. */
    stock_view_learn(c.id, c.stock);
    json_t *data = coupon_to_json(&c);
    if (data == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    return reply_json(rq, MHD_HTTP_CREATED, API_OK, "created", data);
}
