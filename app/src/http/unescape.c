/* unescape.c - percent-decoding that never produces a NUL (unescape.h). */
#include "http/unescape.h"

#include "http/params.h"

size_t http_unescape(void *cls, struct MHD_Connection *conn, char *s)
{
    char *out = s;

    (void)cls;
    (void)conn;
    for (const char *in = s; *in != '\0';) {
        int hi = in[0] == '%' ? http_hex_digit(in[1]) : -1;
        int lo = hi >= 0 ? http_hex_digit(in[2]) : -1;
        /* A malformed escape is kept as it is, as libmicrohttpd does; so is
         * %00 (see the header). */
        if (lo < 0 || (hi == 0 && lo == 0)) {
            *out++ = *in++;
            continue;
        }
        *out++ = (char)(hi * 16 + lo);
        in += 3;
    }
    *out = '\0';
    return (size_t)(out - s);
}
