/* routes_admin.c - POST /api/v1/admin/coupon: bearer-token check in constant
 * time, JSON body validation, coupon creation. */
#include "http/routes.h"

#include <string.h>
#include <strings.h>

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

static int int_field(json_t *root, const char *key, json_int_t dflt, int required, json_int_t *out)
{
    json_t *v = json_object_get(root, key); /* borrowed */
    if (v == NULL) {
        *out = dflt;
        return required ? -1 : 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0)
        return -1;
    *out = json_integer_value(v);
    return 0;
}

int route_admin_create(request *rq)
{
    int ret = MHD_NO;
    json_t *root = NULL;
    json_error_t jerr;
    json_int_t stock = 0, limit = 1;
    db_coupon c;

    if (check_auth(rq, &ret) != 0)
        goto out;
    /* Duplicate keys are refused: {"stock":1,"stock":1000000} must not
     * depend on which one the parser happens to keep. */
    root = json_loadb(rq->body != NULL ? rq->body : "", rq->body_len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        ret = reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM, "invalid JSON body: %s (line %d, column %d)",
                          jerr.text, jerr.line, jerr.column);
        goto out;
    }
    if (!json_is_object(root)) {
        ret = reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM, "body must be a JSON object");
        goto out;
    }
    json_t *name = json_object_get(root, "name"); /* borrowed */
    if (name == NULL || !json_is_string(name)) {
        ret = reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM,
                          name == NULL ? "missing field name" : "name must be a string");
        goto out;
    }
    size_t name_len = json_string_length(name);
    if (name_len == 0 || name_len > DB_NAME_MAX) {
        ret = reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM, "name must be 1-%d bytes", DB_NAME_MAX);
        goto out;
    }
    if (int_field(root, "stock", 0, 1, &stock) != 0) {
        ret = reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM, "stock must be an integer >= 0");
        goto out;
    }
    if (int_field(root, "per_user_limit", 1, 0, &limit) != 0) {
        ret = reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM,
                          "per_user_limit must be an integer >= 0 (0 = unlimited)");
        goto out;
    }
    db_status st = db_create_coupon(rq->w->db, json_string_value(name), stock, limit, &c);
    if (st != DB_OK) {
        ret = reply_db_error(rq, st);
        goto out;
    }
    json_t *data = coupon_to_json(&c);
    if (data == NULL) {
        ret = reply_error(rq, MHD_HTTP_INTERNAL_SERVER_ERROR, API_INTERNAL, "out of memory");
        goto out;
    }
    ret = reply_json(rq, MHD_HTTP_CREATED, API_OK, "created", data);
out:
    json_decref(root);
    return ret;
}
