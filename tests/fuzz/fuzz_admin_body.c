/* fuzz_admin_body.c - the admin API's JSON body (app/src/http/admin_body.c):
 * whatever the bytes, no crash, no leak, and an accepted body is exactly
 * what the store may take. */
#include <string.h>

#include "fuzz.h"
#include "http/admin_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    admin_coupon_body b;
    char msg[256];
    msg[0] = '\0';
    if (admin_coupon_body_parse((const char *)data, size, &b, msg, sizeof msg) == 0) {
        size_t len = strnlen(b.name, sizeof b.name);
        FUZZ_CHECK(len >= 1 && len <= DB_NAME_MAX);
        FUZZ_CHECK(b.stock >= 0);
        FUZZ_CHECK(b.per_user_limit >= 0);
    } else {
        /* A refusal always says why. */
        FUZZ_CHECK(msg[0] != '\0');
    }
    return 0;
}
