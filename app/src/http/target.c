/* target.c - the screen of a request's raw target (target.h). */
#include "http/target.h"

#include <stdio.h>
#include <string.h>

#include "http/params.h"

/* A query argument's name, percent-decoded ('+' is a space) into out
 * (truncated to cap - 1: two names that agree on their first 63 bytes
 * count as one, which only refuses more). */
static void decode_name(const char *p, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        if (p[i] == '%' && i + 2 < n && http_hex_digit(p[i + 1]) >= 0 && http_hex_digit(p[i + 2]) >= 0) {
            out[o++] = (char)(http_hex_digit(p[i + 1]) * 16 + http_hex_digit(p[i + 2]));
            i += 2;
        } else {
            out[o++] = p[i] == '+' ? ' ' : p[i];
        }
    }
    out[o] = '\0';
}

int target_screen(const char *t, char *why, size_t whylen)
{
    size_t n = strlen(t);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c <= 0x20 || c >= 0x7f) {
            snprintf(why, whylen, "a space, control or non-ASCII byte in the request target");
            return -1;
        }
        if (t[i] == '#') {
            snprintf(why, whylen, "the request target carries a fragment ('#')");
            return -1;
        }
        if (t[i] == '%' && (i + 2 >= n || http_hex_digit(t[i + 1]) < 0 || http_hex_digit(t[i + 2]) < 0)) {
            snprintf(why, whylen, "malformed percent escape in the request target");
            return -1;
        }
    }
    const char *q = strchr(t, '?');
    const char *nul = strstr(t, "%00");
    if (nul != NULL && (q == NULL || nul < q)) {
        snprintf(why, whylen, "%%00 (an encoded NUL) in the request path");
        return -1;
    }
    if (q == NULL)
        return 0;
    char names[TARGET_MAX_ARGS][64]; /* the names seen so far, decoded */
    size_t count = 0;
    const char *end = t + n;
    for (const char *a = q + 1; a < end;) {
        const char *amp = memchr(a, '&', (size_t)(end - a));
        const char *stop = amp != NULL ? amp : end;
        if (stop > a) { /* "&&" and a trailing '&' carry no argument */
            const char *eq = memchr(a, '=', (size_t)(stop - a));
            if (count == TARGET_MAX_ARGS) {
                snprintf(why, whylen, "too many query arguments (limit %d)", TARGET_MAX_ARGS);
                return -1;
            }
            decode_name(a, (size_t)((eq != NULL ? eq : stop) - a), names[count], sizeof names[count]);
            /* The first %00 lies in one argument: name it. */
            if (nul != NULL && nul >= a && nul < stop) {
                snprintf(why, whylen, "%%00 (an encoded NUL) in query parameter '%.40s'", names[count]);
                return -1;
            }
            for (size_t j = 0; j < count; j++)
                if (strcmp(names[j], names[count]) == 0) {
                    snprintf(why, whylen, "duplicate query parameter '%.40s'", names[count]);
                    return -1;
                }
            count++;
        }
        a = stop + 1;
    }
    return 0;
}
