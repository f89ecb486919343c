/* params.h - request parameter checks (coupon_id, user_id) and the
 * application/x-www-form-urlencoded body reader. */
#ifndef APP_PARAMS_H
#define APP_PARAMS_H

#include <stddef.h>
#include <stdint.h>

/* A positive decimal integer that fits int64: digits only (no sign, blanks
 * or trailing junk), no overflow. 0 on success, -1 otherwise. */
int parse_coupon_id(const char *s, int64_t *out);
/* 1..64 characters of [A-Za-z0-9_.:-]. Nonzero when valid. */
int valid_user_id(const char *s);
/* The value of one hex digit, or -1 (percent-decoding here and in unescape.c). */
int http_hex_digit(char c);
/* Finds key in a form body and percent-decodes its first value into out.
 * 1 found, 0 absent, -1 malformed (bad %XX, NUL) or longer than outlen-1. */
int form_lookup(const char *body, size_t len, const char *key, char *out, size_t outlen);

#endif /* APP_PARAMS_H */
