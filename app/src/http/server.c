/* server.c - the listen socket, the accept front in front of the
 * libmicrohttpd daemon (accept.h), the daemon's thread pool and limits,
 * body accumulation with our own body and header limits, and the graceful
 * stop. */
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
#include <sys/un.h>
#include <unistd.h>

#include "http/accept.h"
#include "http/reply.h"
#include "http/router.h"
#include "http/unescape.h"
#include "common.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/prober.h"

/* MHD's own per-connection memory pool: it holds the request head whole
 * (its read buffer starts at half the pool). Heads over --max-header-bytes
 * never reach MHD (the accept front answers them 431 in JSON), so four
 * times that limit is headroom enough; no larger, because libmicrohttpd
 * 0.9.75 zeroes the pool's free part between two requests of a kept-alive
 * connection (256 KiB was 12% of a worker's time on the sold-out path). */
#define MHD_POOL_MIN_BYTES (64 * 1024)
/* Query arguments a request may carry: the API reads two, and each one costs
 * MHD a header record from the pool above (about 1000 of them used to fill
 * it, and the request then got no answer at all). */
#define MAX_QUERY_ARGS 64
/* After the claim queue stopped: how long its last answers (refusals and
 * the claims that were running) get to go out before the daemon stops. */
#define STOP_ANSWER_MS 1000

struct server {
    struct MHD_Daemon *daemon;
    app *app;
    front *front; /* accepts, screens and hands requests to the daemon */
};

typedef struct header_count {
    size_t bytes;
} header_count;

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    header_count *hc = cls;
    (void)kind;
    /* "Key: value\r\n" */
    hc->bytes += strlen(key) + (value != NULL ? strlen(value) : 0) + 4;
    return MHD_YES;
}

/* Request line + headers, as the client sent them (near enough: MHD has
 * already split and unescaped them, which only ever shortens). */
typedef struct named_count {
    const char *name;
    size_t n;
} named_count;

static enum MHD_Result count_named(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    named_count *c = cls;
    (void)kind;
    (void)value;
    if (c->name == NULL || (key != NULL && strcasecmp(key, c->name) == 0))
        c->n++;
    return MHD_YES;
}

/* How many values of kind the request carries named name (NULL: any). */
static size_t values_named(struct MHD_Connection *conn, enum MHD_ValueKind kind, const char *name)
{
    named_count c = {name, 0};
    (void)MHD_get_connection_values(conn, kind, count_named, &c);
    return c.n;
}

static size_t request_head_bytes(struct MHD_Connection *conn, const char *url, const char *method)
{
    header_count hc = {strlen(method) + strlen(url) + 12};
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &hc);
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, count_header, &hc);
    return hc.bytes;
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
 * and its own 413/431), so reply.c and the router need not know metrics.
 * Not in the completed callback: that runs after the last byte is sent, and
 * a client that scrapes /metrics the moment it has its answer must find
 * the answer counted. */
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

/* libmicrohttpd's own messages (a socket error, a connection it dropped)
 * go through the same logger as ours, so stderr keeps one line format. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    /* Every connection libmicrohttpd gets is a UNIX socketpair from the
     * accept front (accept.h): its TCP options (TCP_NODELAY, TCP_CORK, and
     * the "push" that uncorks) fail there, harmlessly (no Nagle on a UNIX
     * socket), on every connection, and would flood the class's rate limit. */
    if (strncmp(fmt, "Setting %s option to %s state failed", 36) == 0 ||
        strncmp(fmt, "Failed to push the data from buffers", 36) == 0)
        return;
    log_event_vline(LOG_WARN, LOG_EV_HTTPD, fmt, ap);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    app *a = cls;
    request *rq = *con_cls;
    const app_config *cfg = a->cfg;
    (void)version;

    if (rq == NULL) {
        /* First call: headers only. */
        rq = calloc(1, sizeof *rq);
        if (rq == NULL)
            return MHD_NO;
        rq->app = a;
        rq->conn = conn;
        rq->method = method;
        rq->url = url;
        rq->code = -1;
        rq->t0_us = cm_now_us();
        *con_cls = rq;
        atomic_fetch_add(&a->in_flight, 1);
        router_match(url, method, &rq->route);
        if (request_head_bytes(conn, url, method) > cfg->max_header)
            return counted(rq, reply_error(rq, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE, API_TOO_LARGE,
                                           "request headers too large (limit %zu bytes)", cfg->max_header));
        if (values_named(conn, MHD_GET_ARGUMENT_KIND, NULL) > MAX_QUERY_ARGS)
            return counted(rq, reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM,
                                           "too many query arguments (limit %d)", MAX_QUERY_ARGS));
        /* Request smuggling: a body framed two ways (or by two lengths) may be
         * read one way here and another way by a proxy in front. Refused. */
        size_t lengths = values_named(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (lengths > 1 ||
            (lengths == 1 && values_named(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING) > 0))
            return counted(rq, reply_error(rq, MHD_HTTP_BAD_REQUEST, API_BAD_PARAM,
                                           "conflicting Content-Length / Transfer-Encoding headers"));
        /* Refuse a declared oversized body before reading it (and before
         * MHD sends "100 Continue" for it). */
        long long cl = content_length(conn);
        if (cl >= 0 && (unsigned long long)cl > cfg->max_body)
            return counted(rq, reply_error(rq, MHD_HTTP_CONTENT_TOO_LARGE, API_TOO_LARGE,
                                           "request body too large (limit %zu bytes)", cfg->max_body));
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        int r = rq->replied ? 0 : append_body(rq, upload_data, *upload_data_size, cfg->max_body);
        *upload_data_size = 0;
        /* A body with no declared length (chunked) that passes the limit:
         * the connection is closed at once. Reading the rest first (to
         * answer 413 in sync) let a slow sender hold the connection for as
         * long as it liked (48 KiB at 4 KiB/s: 12 s), and libmicrohttpd
         * 0.9.75 cannot send an answer before the body has been read (it
         * treats that as an application error and closes anyway). */
        if (r != 0 || rq->body_too_large)
            return MHD_NO;
        return MHD_YES;
    }
    if (rq->replied)
        return MHD_YES;
    /* Called again after the resume of an offloaded request: its work is
     * done (request.h), only the answer is left to queue. */
    if (rq->offloaded)
        return counted(rq, router_resumed(rq));
    if (rq->body_too_large)
        return counted(rq, reply_error(rq, MHD_HTTP_CONTENT_TOO_LARGE, API_TOO_LARGE,
                                       "request body too large (limit %zu bytes)", cfg->max_body));
    return counted(rq, router_dispatch(rq));
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    app *a = cls;
    request *rq = *con_cls;
    (void)toe;
    (void)conn;
    if (rq == NULL)
        return;
    free(rq->body);
    free(rq);
    *con_cls = NULL;
    atomic_fetch_sub(&a->in_flight, 1);
}

/* The server's listen socket on ai, non-blocking (the accept front's
 * loop reads it); -1 with errbuf naming the address and the reason. */
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

/* The daemon's own listen socket, which nothing can connect to: a UNIX
 * socket whose path is removed right after listen(2). libmicrohttpd
 * 0.9.75 runs a thread pool only with a listen socket
 * (MHD_USE_NO_LISTEN_SOCKET ignores the pool), and every connection must
 * come through the accept front (MHD_add_connection) instead. -1 on failure. */
static int unreachable_listen_socket(void)
{
    char dir[] = "/tmp/coupon-server.XXXXXX";
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (mkdtemp(dir) == NULL)
        return -1;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/l", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1) != 0)) {
        close(fd);
        fd = -1;
    }
    (void)unlink(sa.sun_path);
    (void)rmdir(dir);
    return fd;
}

int server_start(app *a, server **out, int *port_out, char *errbuf, size_t errlen)
{
    int result = -1;
    server *s = NULL;
    struct addrinfo hints, *ai = NULL;
    char port_s[16];
    const app_config *cfg = a->cfg;
    int lfd = -1, dummy = -1, prober_on = 0;

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
    if (prober_start(a, errbuf, errlen) != 0)
        goto out;
    prober_on = 1;
    dummy = unreachable_listen_socket();
    s = calloc(1, sizeof *s);
    if (s == NULL || dummy < 0) {
        snprintf(errbuf, errlen, s == NULL ? "out of memory" : "cannot make the HTTP library's listen socket");
        goto out;
    }
    s->app = a;
    /* AUTO picks epoll on Linux. ITC lets MHD_quiesce_daemon wake the
     * pool threads so they stop accepting at once, MHD_add_connection wake
     * the pool thread it gives a connection to, and a claim worker wake
     * the pool thread of the connection it resumes. SUSPEND_RESUME: claims
     * wait on claim workers with their connection suspended (claimq.h). */
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    size_t pool_bytes = 4 * cfg->max_header > MHD_POOL_MIN_BYTES ? 4 * cfg->max_header : MHD_POOL_MIN_BYTES;
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, a,
        /* First, or MHD's messages about the options go to its own stderr logger. */
        MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTEN_SOCKET, (MHD_socket)dummy,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)cfg->threads,
        MHD_OPTION_CONNECTION_LIMIT, cfg->max_connections,
        /* One address cannot take every slot: the rest stay free for
         * other clients (the front caps what it holds the same way). */
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->max_conn_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, cfg->conn_timeout_s,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, pool_bytes,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, a,
        /* Our decoding: %00 must not cut a parameter short (unescape.h). */
        MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, NULL,
        MHD_OPTION_END);
    if (s->daemon == NULL) {
        snprintf(errbuf, errlen, "cannot start the HTTP library's daemon");
        goto out;
    }
    dummy = -1; /* the daemon's now; MHD_quiesce_daemon gives it back */
    /* From here the front owns lfd on every path. */
    int frc = front_start(a, lfd, s->daemon, &s->front, errbuf, errlen);
    lfd = -1;
    if (frc != 0)
        goto out;
    *port_out = port;
    *out = s;
    s = NULL;
    result = 0;
out:
    if (ai != NULL)
        freeaddrinfo(ai);
    if (lfd >= 0)
        close(lfd);
    if (dummy >= 0)
        close(dummy);
    if (s != NULL && s->daemon != NULL)
        MHD_stop_daemon(s->daemon);
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
     * while requests already handed over go on being served (their
     * answers relayed by the front). Connections waiting for a request
     * are closed: none reached a handler. */
    front_quiesce(s->front);
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
    /* The front sends what libmicrohttpd answered (bounded likewise). */
    for (int waited = 0; waited < STOP_ANSWER_MS && front_busy(s->front); waited += 10)
        (void)cm_sleep_ms(10);
    front_stop(s->front);
    MHD_stop_daemon(s->daemon);
    prober_stop();
    free(s);
}
