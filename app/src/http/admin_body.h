/* admin_body.h - the admin API's JSON body for a new coupon, parsed and
 * checked without touching the request, the store or the network (so it can
 * be fuzzed alone: tests/fuzz/fuzz_admin_body.c). */
#ifndef APP_ADMIN_BODY_H
#define APP_ADMIN_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

typedef struct admin_coupon_body {
    char name[DB_NAME_MAX + 1]; /* 1..DB_NAME_MAX bytes, no NUL inside */
    int64_t stock;              /* >= 0 */
    int64_t per_user_limit;     /* >= 0, 0 = unlimited; default 1 */
} admin_coupon_body;

/* {"name": string, "stock": int >= 0, "per_user_limit": int >= 0}. 0 and
 * *out filled, or -1 with a one-line reason for the client in msg (out is
 * then unspecified). */
int admin_coupon_body_parse(const char *body, size_t len, admin_coupon_body *out, char *msg, size_t msglen);

#endif /* APP_ADMIN_BODY_H */
