/* routes_admin.c - POST /api/v1/admin/coupon: bearer-token check in constant
 * time, the body (admin_body.c), coupon creation. */
#include "http/routes.h"

#include <string.h>
#include <strings.h>

#include "http/admin_body.h"
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

/* 0 when authorised; otherwise the reply is queued and *ret holds its result. */
static int check_auth(request *rq, int *ret)
{
    const char *token = rq->app->cfg->admin_token;
    if (token == NULL) {
        *ret = reply_error(rq, MHD_HTTP_FORBIDDEN, API_AUTH, "admin endpoints are disabled (no --admin-token)");
        return -1;
    }
    const char *auth = MHD_lookup_connection_value(rq->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (auth == NULL) {
        *ret = reply_error(rq, MHD_HTTP_UNAUTHORIZED, API_AUTH, "missing admin token (Authorization: Bearer <token>)");
        return -1;
    }
    if (strncasecmp(auth, "Bearer ", 7) != 0) {
        *ret = reply_error(rq, MHD_HTTP_UNAUTHORIZED, API_AUTH,
                           "malformed Authorization header (expected Bearer <token>)");
        return -1;
    }
    const char *given = auth + 7;
    while (*given == ' ')
        given++;
    if (!token_equal(given, token)) {
        *ret = reply_error(rq, MHD_HTTP_UNAUTHORIZED, API_AUTH, "wrong admin token");
        return -1;
    }
    return 0;
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
    json_t *data = coupon_to_json(&c);
    if (data == NULL)
        return reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
    return reply_json(rq, MHD_HTTP_CREATED, API_OK, "created", data);
}
