/* http_client.c - one-shot HTTP requests with libcurl for the suites, with
 * the body, status, Retry-After and Content-Type captured. */
#include "procs.h"

#include <ctype.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HTTP_TIMEOUT_MS 10000L

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static int g_curl_ok;

static void curl_init_once(void)
{
    /* curl_global_init is not thread-safe: run it once before any handle. */
    g_curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

typedef struct body_buf {
    char *p;
    size_t len, cap;
    int oom;
} body_buf;

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
    body_buf *b = user;
    size_t n = size * nmemb;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return 0; /* makes curl fail the transfer with a write error */
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

/* Copies the value of header `name` (case-insensitive) from line into dst, trimmed. */
static void grab_header(const char *line, size_t n, const char *name, char *dst, size_t dstlen)
{
    size_t nl = strlen(name);
    if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1;
    const char *end = line + n;
    while (v < end && isspace((unsigned char)*v))
        v++;
    while (end > v && isspace((unsigned char)end[-1]))
        end--;
    size_t len = (size_t)(end - v);
    if (len >= dstlen)
        len = dstlen - 1;
    memcpy(dst, v, len);
    dst[len] = '\0';
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *user)
{
    http_reply *r = user;
    size_t n = size * nmemb;
    grab_header(data, n, "Retry-After", r->retry_after, sizeof r->retry_after);
    grab_header(data, n, "Content-Type", r->content_type, sizeof r->content_type);
    grab_header(data, n, "X-Content-Type-Options", r->nosniff, sizeof r->nosniff);
    grab_header(data, n, "Cache-Control", r->cache_control, sizeof r->cache_control);
    grab_header(data, n, "Content-Security-Policy", r->csp, sizeof r->csp);
    return n;
}

int http_request(const char *method, const char *url, const char *body,
                 const char *const *headers, http_reply *out)
{
    int result = -1;
    CURL *h = NULL;
    struct curl_slist *hl = NULL;
    body_buf b = {0};
    CURLcode rc;

    if (!out) {
        fprintf(stderr, "http_request: NULL reply\n");
        return -1;
    }
    memset(out, 0, sizeof *out);
    if (!method || !url) {
        fprintf(stderr, "http_request: NULL method or url\n");
        goto out;
    }
    pthread_once(&g_curl_once, curl_init_once);
    if (!g_curl_ok) {
        fprintf(stderr, "http_request: curl_global_init failed\n");
        goto out;
    }
    h = curl_easy_init();
    if (!h) {
        fprintf(stderr, "http_request: curl_easy_init failed\n");
        goto out;
    }
    for (size_t i = 0; headers && headers[i]; i++) {
        struct curl_slist *nl = curl_slist_append(hl, headers[i]);
        if (!nl) {
            fprintf(stderr, "http_request: out of memory\n");
            goto out;
        }
        hl = nl;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    /* A proxy from the environment must never see loopback test traffic. */
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    /* No SIGALRM-based DNS timeouts: suites call this from several threads. */
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, HTTP_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, HTTP_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, out);
    if (hl)
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    }
    rc = curl_easy_perform(h);
    if (rc != CURLE_OK) {
        fprintf(stderr, "http_request: %s %s: %s\n", method, url,
                b.oom ? "out of memory" : curl_easy_strerror(rc));
        out->status = 0;
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    result = 0;
out:
    /* The body is always a string (maybe empty) so suites can strstr it
     * even after a transport error. */
    if (!b.p)
        b.p = calloc(1, 1);
    out->body = b.p;
    out->body_len = b.p ? b.len : 0;
    curl_slist_free_all(hl);
    if (h)
        curl_easy_cleanup(h);
    return result;
}

void http_reply_free(http_reply *r)
{
    if (!r)
        return;
    free(r->body);
    r->body = NULL;
    r->body_len = 0;
}
