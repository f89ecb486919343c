/* fuzz_http1.c - coupon-loadtest's HTTP/1 response parser
 * (loadtest/src/http1.c) on whatever a broken or hostile server sends:
 * never reads past the buffer, never claims more than it was given. */
#include <string.h>

#include "fuzz.h"
#include "loadtest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy: ASan catches any read one past the input. */
    char *buf = malloc(size > 0 ? size : 1);
    if (buf == NULL)
        return 0;
    memcpy(buf, data, size);
    for (int eof = 0; eof <= 1; eof++) {
        char body[64];
        lt_http_resp r;
        memset(&r, 0, sizeof r);
        int rc = lt_http_parse(buf, size, eof, body, sizeof body, &r);
        FUZZ_CHECK(rc >= -1 && rc <= 1);
        if (rc == 1) {
            FUZZ_CHECK(r.consumed <= size);
            FUZZ_CHECK(r.body_len <= sizeof body);
            FUZZ_CHECK(r.status >= 200 && r.status <= 599);
        }
    }
    free(buf);
    return 0;
}
