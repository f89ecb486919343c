/* target.h - the screen of a request's raw target, run from libmicrohttpd's
 * URI log callback (MHD_OPTION_URI_LOG_CALLBACK) before it splits and
 * decodes the query. Pure: a string in, a verdict out (fuzzed alone).
 *
 * libmicrohttpd 0.9.75 keeps the first of two arguments with one name, and
 * a proxy in front may keep the last, so a duplicate is refused. So are:
 *   - a %00 (a decoded NUL would cut a value short);
 *   - a fragment, and a broken escape;
 *   - a byte that is not visible ASCII (0.9.75 reads "GET /a b HTTP/1.1"
 *     as the target "/a b");
 *   - more than TARGET_MAX_ARGS arguments (each costs libmicrohttpd a
 *     record from its per-connection pool, and about a thousand fill it). */
#ifndef APP_TARGET_H
#define APP_TARGET_H

#include <stddef.h>

#define TARGET_MAX_ARGS 64 /* query arguments (the API reads two) */

/* 0 when target (NUL-terminated, as the client sent it) may be served;
 * -1 with a one-line reason in why (for a 400 / 1001). */
int target_screen(const char *target, char *why, size_t whylen);

#endif /* APP_TARGET_H */
