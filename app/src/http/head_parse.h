/* head_parse.h - the strict screen of an HTTP/1 request head, and of a
 * chunked body's framing, run by the accept front (accept.h) on the bytes
 * it peeked before libmicrohttpd sees any of them. Pure functions on a
 * buffer: no I/O, no allocation, no MHD (the fuzz harness links them alone).
 *
 * What passes is a subset of what libmicrohttpd 0.9.75 parses the same
 * way, so nothing it would answer with its own HTML page reaches it:
 *   request line  METHOD SP origin-form SP HTTP/1.0|HTTP/1.1 CRLF; any other
 *                 HTTP/d.d is 505, anything else 400; the target is visible
 *                 ASCII, starts with '/' (or is "*"), has no '#', its
 *                 percent escapes are whole, its query has at most
 *                 HEAD_MAX_ARGS arguments and no name twice (a duplicate is
 *                 read one way here and another way by a proxy);
 *   header lines  token ':' value CRLF: no space before the colon, no
 *                 folded line, no control byte but HTAB in a value;
 *   NUL or a bare CR or LF anywhere in the head: 400;
 *   framing       one Content-Length of plain digits (no sign, no space),
 *                 or one Transfer-Encoding exactly "chunked" (HTTP/1.1
 *                 only), never both; a declared body over the limit is 413;
 *   Host          exactly one on HTTP/1.1;
 *   Expect        none or "100-continue".
 * A head over the limit is 431 (414 when the request line alone is). */
#ifndef APP_HEAD_PARSE_H
#define APP_HEAD_PARSE_H

#include <stddef.h>

#define HEAD_MAX_ARGS 64  /* query arguments (the API reads two) */
#define HEAD_MAX_FIELDS 100 /* header lines */

typedef enum head_status {
    HEAD_INCOMPLETE = 0, /* no blank line yet, and nothing wrong so far */
    HEAD_OK = 1,         /* a whole, valid head: see head_info */
    HEAD_BAD = 2         /* refused: status, code and msg say how to answer */
} head_status;

typedef struct head_info {
    size_t head_len;          /* bytes through the blank line (HEAD_OK) */
    long long content_length; /* -1: none */
    int chunked;              /* Transfer-Encoding: chunked */
    int expect_continue;      /* Expect: 100-continue */
    int keep_alive;           /* HTTP/1.1 without "Connection: close" (or 1.0 with "keep-alive") */
    /* The request line's method and target, within the buffer (for the
     * access log of a refused request; 0 when not found). */
    size_t method_len, target_off, target_len;
    unsigned status; /* HEAD_BAD: 400, 413, 414, 431 or 505 */
    int code;        /* HEAD_BAD: the contract's code (1001 or 1009) */
    char msg[128];   /* HEAD_BAD: the answer's msg */
} head_info;

/* Screens buf[0, n): the bytes received so far. max_head bounds the whole
 * head (request line included), max_body a declared Content-Length. */
head_status head_parse(const char *buf, size_t n, size_t max_head, size_t max_body, head_info *out);

typedef enum chunk_status {
    CHUNK_INCOMPLETE = 0,
    CHUNK_DONE = 1,     /* *used: the body's bytes, last chunk and blank line included */
    CHUNK_BAD = 2,      /* malformed framing (or trailers, which are refused): 400 */
    CHUNK_TOO_LARGE = 3 /* the data passed max_body: 413 */
} chunk_status;

/* Screens a chunked body's bytes so far: chunk sizes in hex (at most 8
 * digits), optional extensions, CRLF after every size and every chunk,
 * "0" CRLF CRLF at the end. */
chunk_status chunked_scan(const char *buf, size_t n, size_t max_body, size_t *used);

#endif /* APP_HEAD_PARSE_H */
