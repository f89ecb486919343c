/* fuzz_target.c - the screen of a request's raw target
 * (app/src/http/target.c) on any bytes a client sends as one. It never
 * reads past the string. What it lets through keeps its promises: no
 * fragment, no %00, every escape whole, at most TARGET_MAX_ARGS arguments
 * and no name twice (checked here again, the slow way). A refusal says why. */
#include <string.h>

#include "fuzz.h"
#include "http/params.h"
#include "http/target.h"

/* The n-th argument's name, raw, into out (NUL-terminated); 0 when there is none. */
static int nth_name(const char *q, size_t nth, char *out, size_t cap)
{
    size_t i = 0;
    for (const char *a = q; *a != '\0';) {
        size_t len = strcspn(a, "&");
        if (len > 0 && i++ == nth) {
            size_t nl = strcspn(a, "=&");
            nl = nl < len ? nl : len;
            nl = nl < cap - 1 ? nl : cap - 1;
            memcpy(out, a, nl);
            out[nl] = '\0';
            return 1;
        }
        a += len + (a[len] == '&');
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *t = malloc(size + 1), why[160];
    if (t == NULL)
        return 0;
    memcpy(t, data, size);
    t[size] = '\0';
    why[0] = '\0';
    if (target_screen(t, why, sizeof why) != 0) {
        FUZZ_CHECK(why[0] != '\0');
    } else {
        size_t n = strlen(t);
        FUZZ_CHECK(strchr(t, '#') == NULL);
        for (size_t i = 0; i < n; i++)
            if (t[i] == '%') {
                FUZZ_CHECK(i + 2 < n && http_hex_digit(t[i + 1]) >= 0 && http_hex_digit(t[i + 2]) >= 0);
                FUZZ_CHECK(!(t[i + 1] == '0' && t[i + 2] == '0'));
            }
        const char *q = strchr(t, '?');
        char a[64], b[64];
        /* Undecoded names must differ too (decoded ones differ, a stronger claim). */
        for (size_t i = 0; q != NULL && nth_name(q + 1, i, a, sizeof a); i++) {
            FUZZ_CHECK(i < TARGET_MAX_ARGS);
            for (size_t j = 0; j < i && nth_name(q + 1, j, b, sizeof b); j++)
                FUZZ_CHECK(strlen(a) >= 63 || strcmp(a, b) != 0);
        }
    }
    free(t);
    return 0;
}
