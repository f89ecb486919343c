/* params.c - strict parameter parsing for the claim and coupon routes. */
#include "http/params.h"

#include <string.h>

int parse_coupon_id(const char *s, int64_t *out)
{
    uint64_t v = 0;

    *out = 0;
    if (s == NULL || *s == '\0')
        return -1;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        unsigned d = (unsigned)(*p - '0');
        /* Reject before multiplying: "99999999999999999999" must not wrap
         * around to a valid-looking id. */
        if (v > ((uint64_t)INT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (v == 0)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int valid_user_id(const char *s)
{
    size_t n = 0;
    if (s == NULL)
        return 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '.' || c == ':' || c == '-';
        if (!ok || n >= 64)
            return 0;
    }
    return n >= 1;
}

int http_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes [s, s+n) ("+" is a space, %XX a byte) into out. */
static int decode(const char *s, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            if (i + 2 >= n)
                return -1;
            int hi = http_hex_digit(s[i + 1]);
            int lo = http_hex_digit(s[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            i += 2;
        }
        /* An embedded NUL would silently cut the value short. */
        if (c == '\0' || o + 1 >= outlen)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return 0;
}

int form_lookup(const char *body, size_t len, const char *key, char *out, size_t outlen)
{
    size_t klen = strlen(key);
    size_t i = 0;

    if (outlen == 0)
        return -1;
    out[0] = '\0';
    while (i < len) {
        size_t end = i;
        while (end < len && body[end] != '&')
            end++;
        const char *pair = body + i;
        size_t plen = end - i;
        const char *eq = memchr(pair, '=', plen);
        size_t nlen = eq ? (size_t)(eq - pair) : plen;
        if (nlen == klen && memcmp(pair, key, klen) == 0) {
            if (eq == NULL)
                return decode("", 0, out, outlen) == 0 ? 1 : -1;
            return decode(eq + 1, plen - nlen - 1, out, outlen) == 0 ? 1 : -1;
        }
        i = end + 1;
    }
    return 0;
}
