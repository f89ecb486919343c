/* http1.c - the HTTP/1.1 wire format of the load: the target (host, port,
 * path prefix) of a base URL, the claim request, and an incremental response
 * parser (status line, headers, Content-Length / chunked / until-close body,
 * keep-alive). libcurl connects and carries the bytes (CONNECT_ONLY); this
 * file only frames them, so a request costs a send and a recv instead of a
 * whole curl transfer. */
#include "loadtest.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int lt_target_parse(const char *base_url, lt_target *t, char *err, size_t errlen)
{
    int rc = -1;
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *path = NULL;
    size_t n;
    memset(t, 0, sizeof *t);
    if (u == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (curl_url_set(u, CURLUPART_URL, base_url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
        /* CURLU_DEFAULT_PORT: "http://h" still needs "h:80" in the Host line. */
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
        snprintf(err, errlen, "--url: cannot parse '%s'", base_url);
        goto out;
    }
    if ((size_t)snprintf(t->url, sizeof t->url, "%s", base_url) >= sizeof t->url ||
        (size_t)snprintf(t->host, sizeof t->host, "%s:%s", host, port) >= sizeof t->host ||
        (size_t)snprintf(t->path, sizeof t->path, "%s", path) >= sizeof t->path) {
        snprintf(err, errlen, "--url: '%s' is too long", base_url);
        goto out;
    }
    /* The claim path is appended to the prefix: "/" + "/api" would double the slash. */
    n = strlen(t->path);
    while (n > 0 && t->path[n - 1] == '/')
        t->path[--n] = '\0';
    rc = 0;
out:
    curl_free(path);
    curl_free(port);
    curl_free(host);
    curl_url_cleanup(u);
    return rc;
}

int lt_http_format_claim(char *buf, size_t cap, const lt_target *t, int use_get, int64_t coupon_id,
                         const char *user)
{
    /* user ids are [A-Za-z0-9_.:-] (validated prefix + digits): no escaping needed. */
    int n = snprintf(buf, cap,
                     "%s %s/api/v1/coupon/add?coupon_id=%" PRId64 "&user_id=%s HTTP/1.1\r\n"
                     "Host: %s\r\n"
                     "User-Agent: coupon-loadtest\r\n"
                     "%s"
                     "\r\n",
                     use_get ? "GET" : "POST", t->path, coupon_id, user, t->host,
                     /* An empty POST says so: without a length the server would wait for a body. */
                     use_get ? "" : "Content-Length: 0\r\n");
    return (n < 0 || (size_t)n >= cap) ? -1 : n;
}

/* Offset just past the first "\r\n\r\n" at or after from, or 0 if absent. */
static size_t find_head_end(const char *buf, size_t len, size_t from)
{
    for (size_t i = from; i + 3 < len; i++) {
        const char *p = memchr(buf + i, '\r', len - 3 - i);
        if (p == NULL)
            return 0;
        i = (size_t)(p - buf);
        if (p[1] == '\n' && p[2] == '\r' && p[3] == '\n')
            return i + 4;
    }
    return 0;
}

/* Case-insensitive search of word in [v, v+n): for "close", "chunked", "keep-alive". */
static int has_token(const char *v, size_t n, const char *word)
{
    size_t w = strlen(word);
    for (size_t i = 0; i + w <= n; i++)
        if (strncasecmp(v + i, word, w) == 0)
            return 1;
    return 0;
}

static void keep_body(char *body, size_t cap, size_t *have, const char *src, size_t n)
{
    size_t room = cap > *have ? cap - *have : 0;
    memcpy(body + *have, src, n < room ? n : room);
    *have += n < room ? n : room;
}

/* Decode a chunked body starting at pos. 1 = complete (*end set), 0 = more
 * bytes needed, -1 = malformed. */
static int parse_chunked(const char *buf, size_t len, size_t pos, char *body, size_t cap, size_t *kept,
                         size_t *total, size_t *end)
{
    for (;;) {
        const char *eol = pos < len ? memchr(buf + pos, '\n', len - pos) : NULL;
        uint64_t size = 0;
        size_t digits = 0, i = pos;
        if (eol == NULL)
            return 0;
        while (i < (size_t)(eol - buf)) {
            char c = buf[i];
            int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                                    : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                                           : -1;
            if (d < 0)
                break;
            /* 15 hex digits is far beyond any reply; more would overflow. */
            if (++digits > 15)
                return -1;
            size = size * 16 + (uint64_t)d;
            i++;
        }
        if (digits == 0 ||
            (buf[i] != ';' && buf[i] != '\r' && buf[i] != '\n' && buf[i] != ' ' && buf[i] != '\t'))
            return -1;
        pos = (size_t)(eol - buf) + 1;
        if (size == 0) {
            /* Trailer lines, then the empty line that ends the message. */
            for (;;) {
                const char *nl = pos < len ? memchr(buf + pos, '\n', len - pos) : NULL;
                if (nl == NULL)
                    return 0;
                if ((size_t)(nl - buf) == pos || ((size_t)(nl - buf) == pos + 1 && buf[pos] == '\r')) {
                    *end = (size_t)(nl - buf) + 1;
                    return 1;
                }
                pos = (size_t)(nl - buf) + 1;
            }
        }
        if (len - pos < size + 2)
            return 0;
        keep_body(body, cap, kept, buf + pos, (size_t)size);
        *total += (size_t)size;
        pos += (size_t)size;
        if (buf[pos] != '\r' || buf[pos + 1] != '\n')
            return -1;
        pos += 2;
    }
}

int lt_http_parse(const char *buf, size_t len, int eof, char *body, size_t body_cap, lt_http_resp *out)
{
    size_t pos = 0;
    memset(out, 0, sizeof *out);
    for (;;) {
        size_t head_end = find_head_end(buf, len, pos);
        size_t line_end, i;
        int64_t content_length = -1;
        int chunked = 0, status, keep_alive;
        const char *s = buf + pos;

        if (head_end == 0)
            return 0;
        /* "HTTP/1.x NNN" */
        if (head_end - pos < 14 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') ||
            s[8] != ' ' || s[9] < '1' || s[9] > '5' || s[10] < '0' || s[10] > '9' || s[11] < '0' ||
            s[11] > '9' || (s[12] != ' ' && s[12] != '\r'))
            return -1;
        status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
        /* HTTP/1.1 keeps the connection unless told otherwise; 1.0 closes unless told. */
        keep_alive = s[7] == '1';
        line_end = (size_t)((const char *)memchr(s, '\n', head_end - pos) - buf) + 1;

        for (i = line_end; i + 2 < head_end;) {
            const char *line = buf + i;
            const char *nl = memchr(line, '\n', head_end - i);
            const char *colon = memchr(line, ':', (size_t)(nl - line));
            const char *v;
            size_t vlen;
            if (colon == NULL)
                return -1;
            v = colon + 1;
            while (v < nl && (*v == ' ' || *v == '\t'))
                v++;
            vlen = (size_t)(nl - v);
            while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
                vlen--;
            if ((size_t)(colon - line) == 14 && strncasecmp(line, "content-length", 14) == 0) {
                int64_t cl = 0;
                if (vlen == 0 || vlen > 15)
                    return -1;
                for (size_t k = 0; k < vlen; k++) {
                    if (v[k] < '0' || v[k] > '9')
                        return -1;
                    cl = cl * 10 + (v[k] - '0');
                }
                /* Two different lengths is how request smuggling starts: refuse. */
                if (content_length >= 0 && content_length != cl)
                    return -1;
                content_length = cl;
            } else if ((size_t)(colon - line) == 17 && strncasecmp(line, "transfer-encoding", 17) == 0) {
                if (has_token(v, vlen, "chunked"))
                    chunked = 1;
            } else if ((size_t)(colon - line) == 10 && strncasecmp(line, "connection", 10) == 0) {
                if (has_token(v, vlen, "close"))
                    keep_alive = 0;
                else if (has_token(v, vlen, "keep-alive"))
                    keep_alive = 1;
            }
            i = (size_t)(nl - buf) + 1;
        }

        /* 1xx are interim: the real answer follows in the same stream. */
        if (status < 200) {
            pos = head_end;
            continue;
        }
        out->status = status;
        out->keep_alive = keep_alive;
        if (status == 204 || status == 304) {
            out->consumed = head_end;
            return 1;
        }
        if (chunked) {
            size_t end = 0, total = 0, kept = 0;
            int r = parse_chunked(buf, len, head_end, body, body_cap, &kept, &total, &end);
            if (r <= 0)
                return r;
            out->body_len = kept;
            out->consumed = end;
            return 1;
        }
        if (content_length >= 0) {
            if ((uint64_t)(len - head_end) < (uint64_t)content_length)
                return 0;
            keep_body(body, body_cap, &out->body_len, buf + head_end, (size_t)content_length);
            out->consumed = head_end + (size_t)content_length;
            return 1;
        }
        /* No length at all: the body runs until the server closes. */
        if (!eof)
            return 0;
        keep_body(body, body_cap, &out->body_len, buf + head_end, len - head_end);
        out->keep_alive = 0;
        out->consumed = len;
        return 1;
    }
}
