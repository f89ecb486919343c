/* admin_body.c - the admin API's JSON body for a new coupon (admin_body.h). */
#include "http/admin_body.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

static int int_field(json_t *root, const char *key, json_int_t dflt, int required, int64_t *out)
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

int admin_coupon_body_parse(const char *body, size_t len, admin_coupon_body *out, char *msg, size_t msglen)
{
    json_error_t jerr;
    int rc = -1;

    memset(out, 0, sizeof *out);
    /* Duplicate keys are refused: {"stock":1,"stock":1000000} must not
     * depend on which one the parser happens to keep. "\u0000" is refused
     * too (jansson without JSON_ALLOW_NUL): a name cut at a NUL would be
     * stored as something other than what the admin sent. */
    json_t *root = json_loadb(body != NULL ? body : "", len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(msg, msglen, "invalid JSON body: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        return -1;
    }
    if (!json_is_object(root)) {
        snprintf(msg, msglen, "body must be a JSON object");
        goto out;
    }
    json_t *name = json_object_get(root, "name"); /* borrowed */
    if (name == NULL || !json_is_string(name)) {
        snprintf(msg, msglen, "%s", name == NULL ? "missing field name" : "name must be a string");
        goto out;
    }
    size_t name_len = json_string_length(name);
    if (name_len == 0 || name_len > DB_NAME_MAX || memchr(json_string_value(name), '\0', name_len) != NULL) {
        snprintf(msg, msglen, "name must be 1-%d bytes", DB_NAME_MAX);
        goto out;
    }
    memcpy(out->name, json_string_value(name), name_len + 1);
    if (int_field(root, "stock", 0, 1, &out->stock) != 0) {
        snprintf(msg, msglen, "stock must be an integer >= 0");
        goto out;
    }
    if (int_field(root, "per_user_limit", 1, 0, &out->per_user_limit) != 0) {
        snprintf(msg, msglen, "per_user_limit must be an integer >= 0 (0 = unlimited)");
        goto out;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}
