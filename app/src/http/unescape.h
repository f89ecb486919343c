/* unescape.h - the percent-decoding of the URL path and query arguments,
 * handed to libmicrohttpd (MHD_OPTION_UNESCAPE_CALLBACK). */
#ifndef APP_UNESCAPE_H
#define APP_UNESCAPE_H

#include <stddef.h>

struct MHD_Connection;

/* Decodes %XX in place like libmicrohttpd's own, except %00: a decoded NUL
 * would end the C string, so "nul%00evil" would be read as the user "nul"
 * and "coupon/1%00junk" as coupon 1. %00 stays undecoded instead, and the
 * parameter checks refuse the '%' (1001 / 1008). Returns the new length. */
size_t http_unescape(void *cls, struct MHD_Connection *conn, char *s);

#endif /* APP_UNESCAPE_H */
