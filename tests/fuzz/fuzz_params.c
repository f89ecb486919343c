/* fuzz_params.c - the claim's parameters as a hostile client sends them:
 * coupon_id, user_id, the form body reader (app/src/http/params.c) and the
 * URL's percent-decoding (app/src/http/unescape.c).
 * Input: the bytes are a form body, and also (up to the first NUL) a
 * candidate coupon_id and user_id. */
#include <inttypes.h>
#include <string.h>

#include "fuzz.h"
#include "http/params.h"
#include "http/unescape.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[256];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = '\0';

    int64_t id = 0;
    if (parse_coupon_id(s, &id) == 0) {
        /* Accepted only as a positive decimal that prints back as itself
         * (leading zeros aside). */
        char back[32];
        FUZZ_CHECK(id > 0);
        snprintf(back, sizeof back, "%" PRId64, id);
        const char *digits = s;
        while (digits[0] == '0' && digits[1] != '\0')
            digits++;
        FUZZ_CHECK(strcmp(back, digits) == 0);
    }
    if (valid_user_id(s)) {
        size_t len = strlen(s);
        FUZZ_CHECK(len >= 1 && len <= 64);
        FUZZ_CHECK(strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.:-") == len);
    }

    /* The URL decoding: never longer, never a NUL inside what it returns. */
    char dec[sizeof s];
    memcpy(dec, s, n + 1);
    size_t before = strlen(dec);
    size_t after = http_unescape(NULL, NULL, dec);
    FUZZ_CHECK(after <= before);
    FUZZ_CHECK(strlen(dec) == after);

    /* The body is not NUL-terminated: form_lookup must stay inside len. */
    char *body = malloc(size > 0 ? size : 1);
    if (body == NULL)
        return 0;
    memcpy(body, data, size);
    static const char *const keys[] = {"coupon_id", "user_id", "", "a"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        char out[65];
        memset(out, 'X', sizeof out);
        int rc = form_lookup(body, size, keys[k], out, sizeof out);
        FUZZ_CHECK(rc >= -1 && rc <= 1);
        if (rc == 1) {
            /* Terminated inside the caller's buffer, never past it. */
            FUZZ_CHECK(memchr(out, '\0', sizeof out) != NULL);
        }
    }
    free(body);
    return 0;
}
