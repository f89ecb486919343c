/* server.c - libmicrohttpd serving the listen socket: its thread pool and
 * limits, the hooks that keep the deadlines (conn_watch.h) and screen the
 * raw target (target.h), body accumulation with our own body and header
 * limits, and the graceful stop. libmicrohttpd alone accepts and parses.
 * What it refuses before any callback gets its own status and page
 * (docs/reliability.md lists them): a request line or header it cannot
 * parse, a head past its memory pool, a broken chunked framing, or bytes
 * that are not HTTP at all (closed without an answer). Everything the
 * application answers is the contract's JSON. */
#include "http/server.h"

#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/conn_watch.h"
#include "http/reply.h"
#include "http/router.h"
#include "http/target.h"
#include "http/unescape.h"
#include "common.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/prober.h"

/* MHD's own per-connection memory pool: it holds the request head whole
 * (its read buffer starts at half the pool). A head over --max-header-bytes
 * is answered 431 in JSON as long as it fits. Four times that limit leaves
 * room for that, and no more: libmicrohttpd 0.9.75 zeroes the pool's free
 * part between two requests of a kept-alive connection (256 KiB was 12% of
 * a worker's time on the sold-out path). */
#define MHD_POOL_MIN_BYTES (64 * 1024)
/* After the claim queue stopped: how long its last answers (refusals and
 * the claims that were running) get to go out before the daemon stops. */
#define STOP_ANSWER_MS 1000

struct server {
    struct MHD_Daemon *daemon;
    app *app;
    int watching; /* conn_watch started */
};

/* What on_head needs of the header lines, in one pass. */
typedef struct head_facts {
    size_t lengths, encodings, hosts; /* Content-Length, Transfer-Encoding, Host lines */
    const char *encoding;             /* the (last) Transfer-Encoding value */
    int bad_name;                     /* a name with a blank in it */
    int bad_byte;                     /* a control byte (a lone CR too) in a name or value */
} head_facts;

/* 1 when s[0..n) holds a byte no header may (RFC 9110 5.5: no CTL but
 * HTAB): libmicrohttpd 0.9.75 keeps a lone CR or \x01 in a value, which a
 * proxy or log reading the same bytes may split or show differently. */
static int has_control_byte(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return 1;
    }
    return 0;
}

static enum MHD_Result note_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                   const char *value, size_t value_size)
{
    head_facts *f = cls;
    (void)kind;
    if (key == NULL)
        return MHD_YES;
    if (has_control_byte(key, key_size) || (value != NULL && has_control_byte(value, value_size)))
        f->bad_byte = 1;
    /* "Transfer-Encoding : chunked" is no Transfer-Encoding to
     * libmicrohttpd, which reads the body by a Content-Length beside it;
     * a proxy that trims the name reads it chunked. */
    if (strpbrk(key, " \t") != NULL)
        f->bad_name = 1;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
        f->lengths++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
        f->hosts++;
    else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->encodings++;
        f->encoding = value;
    }
    return MHD_YES;
}

/* -1 when absent or unparsable (MHD itself rejects a malformed one). */
static long long content_length(struct MHD_Connection *conn)
{
    const char *v = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    char *end = NULL;
    if (v == NULL || v[0] < '0' || v[0] > '9')
        return -1;
    long long n = strtoll(v, &end, 10);
    return *end == '\0' ? n : -1;
}

static int append_body(request *rq, const char *data, size_t n, size_t max)
{
    if (rq->body_too_large || n > max - rq->body_len) {
        rq->body_too_large = 1; /* the caller closes the connection */
        return 0;
    }
    if (rq->body_len + n + 1 > rq->body_cap) {
        size_t cap = rq->body_cap ? rq->body_cap : 512;
        while (cap < rq->body_len + n + 1)
            cap *= 2;
        char *p = realloc(rq->body, cap);
        if (p == NULL)
            return -1;
        rq->body = p;
        rq->body_cap = cap;
    }
    memcpy(rq->body + rq->body_len, data, n);
    rq->body_len += n;
    rq->body[rq->body_len] = '\0';
    return 0;
}

/* Every answered request is counted here, right after its response was
 * queued: the server is the one place that sees every reply (the router's
 * and its own 400/413/431), so reply.c and the router need not know
 * metrics. Not in the completed callback: that runs after the last byte is
 * sent, and a client that scrapes /metrics the moment it has its answer
 * must find the answer counted. */
_Static_assert(ROUTE__COUNT <= METRICS_MAX_ROUTES, "metrics has a counter row per route");

static enum MHD_Result counted(request *rq, int ret)
{
    if (rq->replied) {
        int64_t took = cm_now_us() - rq->t0_us;
        metrics_request((unsigned)rq->route.id, router_route_name(rq->route.id), rq->status, took);
        access_log_line(rq->method, rq->url, rq->status, rq->code, took);
    }
    return (enum MHD_Result)ret;
}

/* libmicrohttpd's own messages go through the same logger as ours, so
 * stderr keeps one line format. A refused connection (the connection
 * limit, the per-address limit, accept(2) out of descriptors) has a class
 * of its own: at most one line a second, with the count of the others,
 * and never hiding the other messages. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    static const char *const REFUSED[] = {"Server reached connection limit", "Error accepting connection",
                                          "Hit process or system resource limit"};
    log_event ev = LOG_EV_HTTPD;
    (void)cls;
    for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++)
        if (strncmp(fmt, REFUSED[i], strlen(REFUSED[i])) == 0)
            ev = LOG_EV_CONN_REFUSED;
    log_event_vline(LOG_WARN, ev, fmt, ap);
}

/* MHD_OPTION_URI_LOG_CALLBACK: called once per request with the raw target
 * (query included, nothing decoded yet), before libmicrohttpd splits the
 * query into arguments. The request's state starts here (it becomes the
 * handler's *con_cls), with the screen's verdict. */
static void *on_target(void *cls, const char *uri, struct MHD_Connection *conn)
{
    request *rq = calloc(1, sizeof *rq);
    (void)cls;
    (void)conn;
    if (rq == NULL || uri == NULL)
        return rq; /* no target at all: libmicrohttpd refuses the version itself */
    rq->raw_end = uri + strlen(uri);
    if (target_screen(uri, rq->refuse_msg, sizeof rq->refuse_msg) != 0) {
        rq->refuse_status = MHD_HTTP_BAD_REQUEST;
        rq->refuse_code = API_BAD_PARAM;
        /* Refused anyway: its query is emptied in place (the buffer is
         * libmicrohttpd's writable read buffer; its '?' was found before
         * this call), so libmicrohttpd does not spend its pool on the
         * arguments: about a thousand filled it and got its own 431 page. */
        char *q = strchr((char *)(uintptr_t)uri, '?');
        if (q != NULL)
            q[1] = '\0';
    }
    return rq;
}

/* The handler's first call: the head is whole. 1 when it was answered
 * (refused before its body: the connection then closes). */
static int on_head(request *rq, struct MHD_Connection *conn, const char *url, const char *method,
                   const char *version, int *ret)
{
    const app_config *cfg = rq->app->cfg;
    long long cl = content_length(conn);
    head_facts f = {0, 0, 0, NULL, 0, 0};
    (void)MHD_get_connection_values_n(conn, MHD_HEADER_KIND, note_header, &f);
    const union MHD_ConnectionInfo *hs = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);

    rq->started = 1;
    rq->conn = conn;
    rq->method = method;
    rq->url = url;
    rq->code = -1;
    rq->t0_us = cm_now_us();
    atomic_fetch_add(&rq->app->in_flight, 1);
    router_match(url, method, &rq->route);
    rq->watch = conn_watch_of(conn);
    conn_watch_head_done(rq->watch, cl > 0 || f.encodings > 0);
    /* Request smuggling: a body framed two ways (two lengths, a length and
     * a coding, two codings, a coding other than a lone "chunked", which
     * libmicrohttpd reads until the close) may be read one way here and
     * another way by a proxy in front. Refused at once: where this body
     * ends is the very question, so the connection closes after. */
    if (f.lengths > 1 || (f.lengths == 1 && f.encodings > 0) || f.encodings > 1 || f.bad_name ||
        (f.encodings == 1 && (f.encoding == NULL || strcasecmp(f.encoding, "chunked") != 0))) {
        *ret = counted(rq, reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM,
                                       "ambiguous body framing (Content-Length / Transfer-Encoding headers)"));
        return 1;
    }
    /* A declared oversized body is refused before it is read (and before
     * MHD sends "100 Continue" for it); the connection closes after. */
    if (cl >= 0 && (unsigned long long)cl > cfg->max_body) {
        *ret = counted(rq, reply_error(rq, MHD_HTTP_CONTENT_TOO_LARGE, API_TOO_LARGE,
                                       "request body too large (limit %zu bytes)", cfg->max_body));
        return 1;
    }
    if (rq->refuse_status != 0)
        return 0;
    /* A NUL in the target: libmicrohttpd hands on the C string, cut at the
     * NUL ("user_id=a\0evil" would be the user "a"), so the URI callback saw
     * it cut too. Its version, the next field of the same request line, then
     * does not start right after the end that callback saw. */
    if (rq->raw_end != NULL && version != rq->raw_end + 1) {
        rq->refuse_status = MHD_HTTP_BAD_REQUEST;
        rq->refuse_code = API_BAD_PARAM;
        snprintf(rq->refuse_msg, sizeof rq->refuse_msg, "NUL byte in the request target");
    } else if (f.bad_byte) {
        rq->refuse_status = MHD_HTTP_BAD_REQUEST;
        rq->refuse_code = API_BAD_PARAM;
        snprintf(rq->refuse_msg, sizeof rq->refuse_msg, "control byte in a header line");
    } else if (f.hosts != 1 && (f.hosts > 1 || strcmp(version, MHD_HTTP_VERSION_1_1) == 0)) {
        rq->refuse_status = MHD_HTTP_BAD_REQUEST;
        rq->refuse_code = API_BAD_PARAM;
        snprintf(rq->refuse_msg, sizeof rq->refuse_msg, f.hosts == 0 ? "missing Host header" : "more than one Host header");
    } else if (hs != NULL && hs->header_size > cfg->max_header) {
        rq->refuse_status = MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE;
        rq->refuse_code = API_TOO_LARGE;
        snprintf(rq->refuse_msg, sizeof rq->refuse_msg, "request headers too large (limit %zu bytes)",
                 cfg->max_header);
    }
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    app *a = cls;
    request *rq = *con_cls;
    const app_config *cfg = a->cfg;
    int ret = MHD_NO;

    if (rq == NULL)
        return MHD_NO; /* out of memory in on_target: close */
    if (!rq->started) {
        rq->app = a;
        return on_head(rq, conn, url, method, version, &ret) ? (enum MHD_Result)ret : MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        /* Slower than --min-body-rate: closed now (conn_watch.h). */
        if (conn_watch_body(rq->watch, n) != 0)
            return MHD_NO;
        /* A refused request's body is read and dropped, within the limit. */
        int r = rq->replied ? 0 : append_body(rq, upload_data, n, cfg->max_body);
        /* A body with no declared length (chunked) that passes the limit:
         * the connection is closed at once. Reading the rest first (to
         * answer 413 in sync) let a slow sender hold the connection for as
         * long as it liked, and libmicrohttpd 0.9.75 cannot send an answer
         * before the body has been read (it treats that as an application
         * error and closes anyway). */
        return r != 0 || rq->body_too_large ? MHD_NO : MHD_YES;
    }
    conn_watch_serving(rq->watch);
    if (rq->replied)
        return MHD_YES;
    /* Called again after the resume of an offloaded request: its work is
     * done (request.h), only the answer is left to queue. */
    if (rq->offloaded)
        return counted(rq, router_resumed(rq));
    if (rq->body_too_large)
        return counted(rq, reply_error(rq, MHD_HTTP_CONTENT_TOO_LARGE, API_TOO_LARGE,
                                       "request body too large (limit %zu bytes)", cfg->max_body));
    /* Answered now, after the body: an answer queued in the first call
     * makes libmicrohttpd close the connection after it, and a request
     * pipelined behind this one would be lost. */
    if (rq->refuse_status != 0)
        return counted(rq, reply_error(rq, rq->refuse_status, rq->refuse_code, "%s", rq->refuse_msg));
    return counted(rq, router_dispatch(rq));
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    app *a = cls;
    request *rq = *con_cls;
    (void)toe;
    /* The next request's head has --header-timeout-s from now. */
    conn_watch_next(conn_watch_of(conn));
    if (rq == NULL)
        return;
    if (rq->started)
        atomic_fetch_sub(&a->in_flight, 1);
    free(rq->body);
    free(rq);
    *con_cls = NULL;
}

/* The server's listen socket on ai, non-blocking (libmicrohttpd's pool
 * threads all wait on it); -1 with errbuf naming the address and the reason. */
/* The prober's lock probe: the strategy's health (core/ knows no strategy). */
static lock_health strategy_health(const void *ctx, worker *w, size_t *nodes_up, size_t *nodes,
                                   uint32_t *up_mask)
{
    const strategy *st = ctx;

    return st->health(st, w, nodes_up, nodes, up_mask);
}

static int listen_on(const struct addrinfo *ai, const app_config *cfg, char *errbuf, size_t errlen)
{
    char hostport[320];
    int one = 1;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);

    config_format_hostport(cfg->listen_host, cfg->listen_port, hostport, sizeof hostport);
    if (fd < 0) {
        snprintf(errbuf, errlen, "cannot listen on %s: %s", hostport, strerror(errno));
        return -1;
    }
    /* A restart may bind while the previous run's connections linger. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        snprintf(errbuf, errlen, "cannot listen on %s: %s", hostport, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int server_start(app *a, server **out, int *port_out, char *errbuf, size_t errlen)
{
    int result = -1;
    server *s = NULL;
    struct addrinfo hints, *ai = NULL;
    char port_s[16];
    const app_config *cfg = a->cfg;
    int lfd = -1, prober_on = 0;

    *out = NULL;
    *port_out = 0;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(port_s, sizeof port_s, "%d", cfg->listen_port);
    int gai = getaddrinfo(cfg->listen_host, port_s, &hints, &ai);
    if (gai != 0) {
        snprintf(errbuf, errlen, "cannot resolve listen host '%s': %s", cfg->listen_host, gai_strerror(gai));
        goto out;
    }
    lfd = listen_on(ai, cfg, errbuf, errlen);
    if (lfd < 0) {
        result = SERVER_ERR_BIND;
        goto out;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(lfd, (struct sockaddr *)&bound, &blen) != 0) {
        snprintf(errbuf, errlen, "cannot read the bound port: %s", strerror(errno));
        goto out;
    }
    int port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
    /* Health is known before the first request can ask for it. */
    if (prober_start(cfg, a->strat->uses_lock, strategy_health, a->strat, errbuf, errlen) != 0)
        goto out;
    prober_on = 1;
    s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(errbuf, errlen, "out of memory");
        goto out;
    }
    s->app = a;
    if (conn_watch_start(cfg, errbuf, errlen) != 0)
        goto out;
    s->watching = 1;
    /* AUTO picks epoll on Linux. ITC lets MHD_quiesce_daemon wake the
     * pool threads so they stop accepting at once, and a claim worker wake
     * the pool thread of the connection it resumes. SUSPEND_RESUME: claims
     * wait on claim workers with their connection suspended (claimq.h). */
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    size_t pool_bytes = 4 * cfg->max_header > MHD_POOL_MIN_BYTES ? 4 * cfg->max_header : MHD_POOL_MIN_BYTES;
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, a,
        /* First, or MHD's messages about the options go to its own stderr logger. */
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)lfd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
        MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
        /* No MHD_OPTION_PER_IP_CONNECTION_LIMIT: the per-client cap is
         * conn_cap.h's (an IPv6 /64 as one client, a trusted proxy exempt). */
        /* Idle: a client that stops reading its answer, or stops mid-body
         * with --min-body-rate off. The head's deadline is conn_watch's. */
        MHD_OPTION_CONNECTION_TIMEOUT, cfg->conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool_bytes,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
        MHD_OPTION_NOTIFY_CONNECTION, conn_watch_notify, NULL,
        MHD_OPTION_URI_LOG_CALLBACK, on_target, NULL,
        /* Not strict: in 0.9.75 strict mode adds only two refusals. One is
         * a space in the target (the target screen refuses it in JSON), the
         * other HTTP/1.1 without Host (on_head does, in JSON; strict mode's
         * own page has its head written twice). It refuses none of bare LF
         * line ends, folded lines or control bytes in a value
         * (docs/coupon-service.md, "What libmicrohttpd answers itself"). */
        MHD_OPTION_STRICT_FOR_CLIENT, (int)0,
        /* Our decoding: %00 must not cut a parameter short (unescape.h). */
        MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL,
        MHD_OPTION_END);
    if (s->daemon == NULL) {
        snprintf(errbuf, errlen, "cannot start the HTTP library's daemon");
        goto out;
    }
    lfd = -1; /* the daemon's now; MHD_quiesce_daemon gives it back */
    *port_out = port;
    *out = s;
    s = NULL;
    result = 0;
out:
    if (ai != NULL)
        freeaddrinfo(ai);
    if (lfd >= 0)
        close(lfd);
    if (s != NULL && s->watching)
        conn_watch_stop();
    if (result != 0 && prober_on)
        prober_stop();
    free(s);
    return result;
}

/* Waits up to ms until no request is in flight. */
static void wait_drained(app *a, int ms)
{
    for (int waited = 0; waited < ms; waited += 10) {
        if (atomic_load(&a->in_flight) == 0)
            break;
        (void)cm_sleep_ms(10);
    }
}

void server_stop(server *s)
{
    if (s == NULL)
        return;
    atomic_store(&s->app->stopping, 1);
    /* Stop accepting first: new connections are refused by the kernel
     * while requests already accepted go on being served. */
    MHD_socket lfd = MHD_quiesce_daemon(s->daemon);
    if (lfd != MHD_INVALID_SOCKET)
        close(lfd);
    /* Drain: MHD_stop_daemon would close connections whose answer is still
     * being computed or sent; wait (bounded) until none is in flight. */
    wait_drained(s->app, s->app->cfg->shutdown_grace_ms);
    /* Claims still queued past the grace are answered 503 without running;
     * the running ones finish (nothing half-written), and their workers
     * are joined: MHD must not be stopped with a connection suspended, nor
     * a worker resume a connection of a stopped daemon. */
    claimq_stop(s->app->claims);
    /* The answers just resumed go out (bounded: a client that does not
     * read is not waited for). */
    wait_drained(s->app, STOP_ANSWER_MS);
    MHD_stop_daemon(s->daemon);
    conn_watch_stop();
    prober_stop();
    free(s);
}
