/* head_parse.c - the strict screen of a request head and of chunked
 * framing (head_parse.h). */
#include "http/head_parse.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api.h"
#include "http/params.h"

static head_status bad(head_info *out, unsigned status, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static head_status bad(head_info *out, unsigned status, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->msg, sizeof out->msg, fmt, ap);
    va_end(ap);
    out->status = status;
    out->code = code;
    return HEAD_BAD;
}

/* RFC 9110 tchar: the bytes of a method or a field name. */
static int is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        return 1;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* A query argument's name, percent-decoded ('+' is a space) into out
 * (truncated to cap - 1: names that long are not the API's anyway, and two
 * that agree on their first 63 bytes count as the same). */
static size_t decode_name(const char *p, size_t n, char *out, size_t cap)
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
    return o;
}

/* The target: origin-form (or "*"), visible ASCII (checked by the caller),
 * whole percent escapes, no fragment, at most HEAD_MAX_ARGS query
 * arguments, no argument name twice. */
static head_status check_target(const char *t, size_t n, head_info *out)
{
    if (n == 1 && t[0] == '*')
        return HEAD_OK;
    if (t[0] != '/')
        return bad(out, 400, API_BAD_PARAM, "the request target must be a path starting with '/'");
    for (size_t i = 0; i < n; i++) {
        if (t[i] == '#')
            return bad(out, 400, API_BAD_PARAM, "the request target carries a fragment ('#')");
        if (t[i] == '%' && (i + 2 >= n || http_hex_digit(t[i + 1]) < 0 || http_hex_digit(t[i + 2]) < 0))
            return bad(out, 400, API_BAD_PARAM, "malformed percent escape in the request target");
    }
    const char *q = memchr(t, '?', n);
    if (q == NULL)
        return HEAD_OK;
    /* Names seen so far, decoded: at most HEAD_MAX_ARGS of 64 bytes. */
    char names[HEAD_MAX_ARGS][64];
    size_t count = 0;
    const char *end = t + n;
    for (const char *a = q + 1; a < end;) {
        const char *amp = memchr(a, '&', (size_t)(end - a));
        const char *stop = amp != NULL ? amp : end;
        if (stop > a) { /* "&&" and a trailing '&' carry no argument */
            const char *eq = memchr(a, '=', (size_t)(stop - a));
            const char *name_end = eq != NULL ? eq : stop;
            if (count == HEAD_MAX_ARGS)
                return bad(out, 400, API_BAD_PARAM, "too many query arguments (limit %d)", HEAD_MAX_ARGS);
            decode_name(a, (size_t)(name_end - a), names[count], sizeof names[count]);
            for (size_t j = 0; j < count; j++)
                if (strcmp(names[j], names[count]) == 0)
                    return bad(out, 400, API_BAD_PARAM, "duplicate query parameter '%.40s'", names[count]);
            count++;
        }
        a = stop + 1;
    }
    return HEAD_OK;
}

/* The request line [p, p+n) without its CRLF. */
static head_status request_line(const char *p, size_t n, int *http11, head_info *out)
{
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)p[i]))
        i++;
    out->method_len = i;
    if (i == 0 || i > 16 || i == n || p[i] != ' ')
        return bad(out, 400, API_BAD_PARAM, "malformed request line");
    size_t t0 = ++i;
    while (i < n && (unsigned char)p[i] > 0x20 && (unsigned char)p[i] < 0x7f)
        i++;
    out->target_off = t0;
    out->target_len = i - t0;
    if (i == t0)
        return bad(out, 400, API_BAD_PARAM, "malformed request line");
    /* HTTP/0.9 ("GET /path", no version) is not spoken here. */
    if (i == n || p[i] != ' ')
        return bad(out, 400, API_BAD_PARAM, "malformed request line (no HTTP version, or a control byte)");
    const char *v = p + i + 1;
    size_t vn = n - i - 1;
    if (vn != 8 || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' || v[7] > '9')
        return bad(out, 400, API_BAD_PARAM, "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return bad(out, 505, API_BAD_PARAM, "HTTP version not supported (HTTP/1.0 and HTTP/1.1 are)");
    *http11 = v[7] == '1';
    return check_target(p + t0, i - t0, out);
}

/* Whether the field name [p, p+n) is name (case-insensitive). */
static int name_is(const char *p, size_t n, const char *name)
{
    return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

/* The value of a field whose value must be one plain token: leading OWS
 * was skipped; trailing OWS (legal elsewhere) is refused here, where
 * libmicrohttpd 0.9.75 and a proxy in front may trim differently. */
static int has_trailing_ws(const char *v, size_t n)
{
    return n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t');
}

head_status head_parse(const char *buf, size_t n, size_t max_head, size_t max_body, head_info *out)
{
    memset(out, 0, sizeof *out);
    out->content_length = -1;
    size_t scan = n < max_head ? n : max_head;
    /* Bytes no head may carry, looked for first so that a NUL is refused
     * the moment it arrives, complete head or not. */
    for (size_t i = 0; i < scan; i++) {
        if (buf[i] == '\0')
            return bad(out, 400, API_BAD_PARAM, "NUL byte in the request head");
        if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r'))
            return bad(out, 400, API_BAD_PARAM, "bare LF in the request head (lines end with CRLF)");
        if (buf[i] == '\r' && i + 1 < scan && buf[i + 1] != '\n')
            return bad(out, 400, API_BAD_PARAM, "bare CR in the request head");
    }
    const char *first_crlf = NULL;
    for (size_t i = 0; i + 1 < scan; i++)
        if (buf[i] == '\r') {
            first_crlf = buf + i;
            break;
        }
    size_t head_len = 0;
    for (size_t i = 0; i + 3 < scan; i++)
        if (memcmp(buf + i, "\r\n\r\n", 4) == 0) {
            head_len = i + 4;
            break;
        }
    if (head_len == 0) {
        if (n < max_head)
            return HEAD_INCOMPLETE;
        if (first_crlf == NULL)
            return bad(out, 414, API_TOO_LARGE, "request target too long (the head's limit is %zu bytes)", max_head);
        return bad(out, 431, API_TOO_LARGE, "request headers too large (limit %zu bytes)", max_head);
    }
    /* The request line. */
    int http11 = 0;
    size_t line_len = (size_t)(first_crlf - buf);
    head_status st = request_line(buf, line_len, &http11, out);
    if (st != HEAD_OK)
        return st;
    /* The header lines, up to the blank one. */
    size_t hosts = 0, lengths = 0, encodings = 0, fields = 0;
    int conn_close = 0, conn_keep = 0;
    const char *end = buf + head_len - 2; /* the blank line's CRLF */
    for (const char *l = first_crlf + 2; l < end;) {
        const char *cr = memchr(l, '\r', (size_t)(end - l));
        size_t ln = (size_t)(cr - l); /* cr exists: the head ends with CRLF CRLF */
        if (++fields > HEAD_MAX_FIELDS)
            return bad(out, 431, API_TOO_LARGE, "too many header fields (limit %d)", HEAD_MAX_FIELDS);
        if (l[0] == ' ' || l[0] == '\t')
            return bad(out, 400, API_BAD_PARAM, "folded header line");
        size_t k = 0;
        while (k < ln && is_tchar((unsigned char)l[k]))
            k++;
        if (k == 0 || k == ln || l[k] != ':')
            return bad(out, 400, API_BAD_PARAM, "malformed header line (a name, then ':' with no space before it)");
        const char *v = l + k + 1;
        size_t vn = ln - k - 1;
        while (vn > 0 && (*v == ' ' || *v == '\t')) {
            v++;
            vn--;
        }
        for (size_t j = 0; j < vn; j++) {
            unsigned char c = (unsigned char)v[j];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return bad(out, 400, API_BAD_PARAM, "control byte in a header value");
        }
        if (name_is(l, k, "Host")) {
            hosts++;
        } else if (name_is(l, k, "Content-Length")) {
            if (++lengths > 1)
                return bad(out, 400, API_BAD_PARAM, "more than one Content-Length header");
            if (vn == 0 || vn > 18 || has_trailing_ws(v, vn))
                return bad(out, 400, API_BAD_PARAM, "malformed Content-Length");
            long long cl = 0;
            for (size_t j = 0; j < vn; j++) {
                if (v[j] < '0' || v[j] > '9')
                    return bad(out, 400, API_BAD_PARAM, "malformed Content-Length");
                cl = cl * 10 + (v[j] - '0');
            }
            out->content_length = cl;
        } else if (name_is(l, k, "Transfer-Encoding")) {
            /* One coding, exactly "chunked", in one header line: a list
             * ("gzip, chunked"), an unknown coding ("xchunked") or a
             * second line ("identity") is read differently by different
             * parsers, which is how requests are smuggled. */
            if (++encodings > 1)
                return bad(out, 400, API_BAD_PARAM, "more than one Transfer-Encoding header");
            if (vn != 7 || strncasecmp(v, "chunked", 7) != 0)
                return bad(out, 400, API_BAD_PARAM, "unsupported Transfer-Encoding (only a lone 'chunked' is)");
            out->chunked = 1;
        } else if (name_is(l, k, "Connection")) {
            /* Its tokens, comma-separated, case-insensitive. */
            for (size_t j = 0; j < vn;) {
                while (j < vn && (v[j] == ' ' || v[j] == '\t' || v[j] == ','))
                    j++;
                size_t t = j;
                while (j < vn && v[j] != ',' && v[j] != ' ' && v[j] != '\t')
                    j++;
                if (j - t == 5 && strncasecmp(v + t, "close", 5) == 0)
                    conn_close = 1;
                else if (j - t == 10 && strncasecmp(v + t, "keep-alive", 10) == 0)
                    conn_keep = 1;
            }
        } else if (name_is(l, k, "Expect")) {
            if (vn != 12 || strncasecmp(v, "100-continue", 12) != 0)
                return bad(out, 400, API_BAD_PARAM, "unsupported Expect (only '100-continue' is)");
            out->expect_continue = 1;
        }
        l = cr + 2;
    }
    if (lengths > 0 && encodings > 0)
        return bad(out, 400, API_BAD_PARAM, "conflicting Content-Length / Transfer-Encoding headers");
    if (encodings > 0 && !http11)
        return bad(out, 400, API_BAD_PARAM, "Transfer-Encoding on an HTTP/1.0 request");
    if (http11 && hosts != 1)
        return bad(out, 400, API_BAD_PARAM, hosts == 0 ? "missing Host header" : "more than one Host header");
    if (hosts > 1)
        return bad(out, 400, API_BAD_PARAM, "more than one Host header");
    if (out->content_length >= 0 && (unsigned long long)out->content_length > max_body)
        return bad(out, 413, API_TOO_LARGE, "request body too large (limit %zu bytes)", max_body);
    out->keep_alive = !conn_close && (http11 || conn_keep);
    out->head_len = head_len;
    return HEAD_OK;
}

chunk_status chunked_scan(const char *buf, size_t n, size_t max_body, size_t *used)
{
    size_t i = 0, total = 0;
    *used = 0;
    for (;;) {
        /* chunk-size: 1 to 8 hex digits. */
        size_t size = 0, digits = 0;
        while (i < n && http_hex_digit(buf[i]) >= 0) {
            if (++digits > 8)
                return CHUNK_BAD;
            size = size * 16 + (size_t)http_hex_digit(buf[i]);
            i++;
        }
        if (i == n)
            return CHUNK_INCOMPLETE;
        if (digits == 0)
            return CHUNK_BAD;
        /* chunk-ext: ';' then visible bytes, spaces or tabs, to the CRLF. */
        if (buf[i] == ';') {
            while (i < n && buf[i] != '\r') {
                unsigned char c = (unsigned char)buf[i];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                    return CHUNK_BAD;
                i++;
            }
        }
        if (i + 2 > n)
            return CHUNK_INCOMPLETE;
        if (buf[i] != '\r' || buf[i + 1] != '\n')
            return CHUNK_BAD;
        i += 2;
        if (size == 0) {
            /* The last chunk: no trailer fields, just the blank line. */
            if (i + 2 > n)
                return CHUNK_INCOMPLETE;
            if (buf[i] != '\r' || buf[i + 1] != '\n')
                return CHUNK_BAD;
            *used = i + 2;
            return CHUNK_DONE;
        }
        if (size > max_body - total)
            return CHUNK_TOO_LARGE;
        total += size;
        if (n - i < size + 2)
            return CHUNK_INCOMPLETE;
        i += size;
        if (buf[i] != '\r' || buf[i + 1] != '\n')
            return CHUNK_BAD;
        i += 2;
    }
}
