/* worker.c - the load: worker threads, each driving its share of keep-alive
 * connections on its own epoll set. Each connection is a libcurl easy handle
 * in CONNECT_ONLY mode: curl connects (timeouts, proxies off) and owns the
 * socket; requests and replies go through curl_easy_send/curl_easy_recv and
 * are framed by http1.c.
 *
 * Why not a curl transfer per request: measured on this project's 2-core
 * machine, curl's per-transfer work cost ~35 us of CPU per request (one
 * blocking easy_perform per thread: ~55 us) against wrk's ~14 us, and on
 * cores shared with the server that CPU is taken from the server: the tester
 * became the bottleneck at ~65 % of wrk's rate (loadtest/README.md). */
#include "loadtest.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define OUT_CAP 1024       /* one claim request: ~200 bytes, host and path at most 255 */
#define IN_CAP 8192        /* one reply: ~250 bytes; a larger one is an error */
#define BODY_CAP 1024      /* the code is near the start of the body */
#define SCAN_EVERY_NS 10000000 /* request-timeout scan every 10 ms */

typedef struct lt_conn {
    CURL *easy;              /* CONNECT_ONLY handle owning the socket; NULL = closed */
    curl_socket_t fd;
    const lt_target *target;
    int busy;                /* a request is in flight */
    int want_out;            /* EPOLLOUT registered: part of the request is unsent */
    int64_t t0;              /* first byte of the request handed to the kernel */
    int64_t deadline;        /* t0 + --timeout-ms */
    size_t out_len, out_sent, in_len;
    char out[OUT_CAP];
    char in[IN_CAP];
    char body[BODY_CAP];
} lt_conn;

typedef struct lt_loop {
    lt_worker *w;
    int epfd;
    uint64_t rng;
    unsigned busy;           /* connections with a request in flight */
} lt_loop;

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static void count_error(lt_worker *w, CURLcode rc)
{
    w->stats.errors++;
    w->stats.errors_by_curl[(unsigned)rc < LT_CURL_SLOTS ? (unsigned)rc : LT_CURL_SLOTS - 1]++;
    atomic_store_explicit(&w->errors, w->stats.errors, memory_order_relaxed);
    atomic_store_explicit(&w->done, w->stats.answered + w->stats.errors, memory_order_relaxed);
}

static void count_reply(lt_worker *w, const lt_conn *c, const lt_http_resp *r, int64_t t1)
{
    w->stats.answered++;
    cm_hist_record(&w->stats.hist, (uint64_t)((t1 - c->t0) / 1000));
    if (r->status >= 0 && r->status < LT_STATUS_SLOTS)
        w->stats.by_status[r->status]++;
    else
        w->stats.status_other++;
    lt_stats_add_code(&w->stats, lt_scan_code(c->body, r->body_len), 1);
    atomic_store_explicit(&w->done, w->stats.answered + w->stats.errors, memory_order_relaxed);
}

static void conn_close(lt_loop *lp, lt_conn *c)
{
    if (c->easy != NULL) {
        /* Out of the set before curl closes the fd, whose number may be reused at once. */
        (void)epoll_ctl(lp->epfd, EPOLL_CTL_DEL, c->fd, NULL);
        curl_easy_cleanup(c->easy);
    }
    c->easy = NULL;
    c->fd = CURL_SOCKET_BAD;
    c->want_out = 0;
    c->in_len = 0;
    if (c->busy) {
        c->busy = 0;
        lp->busy--;
    }
}

/* Connect with curl (blocking, bounded by --connect-timeout-ms). */
static CURLcode conn_open(lt_loop *lp, lt_conn *c)
{
    const lt_options *opt = lp->w->run->opt;
    struct epoll_event ev;
    CURLcode rc;
    c->easy = curl_easy_init();
    if (c->easy == NULL)
        return CURLE_OUT_OF_MEMORY;
    if ((rc = curl_easy_setopt(c->easy, CURLOPT_URL, c->target->url)) != CURLE_OK ||
        (rc = curl_easy_setopt(c->easy, CURLOPT_CONNECT_ONLY, 1L)) != CURLE_OK ||
        (rc = curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L)) != CURLE_OK ||
        /* An http_proxy in the environment must not reroute loopback load. */
        (rc = curl_easy_setopt(c->easy, CURLOPT_PROXY, "")) != CURLE_OK ||
        (rc = curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT_MS, opt->connect_timeout_ms)) != CURLE_OK ||
        (rc = curl_easy_setopt(c->easy, CURLOPT_TCP_NODELAY, 1L)) != CURLE_OK ||
        (rc = curl_easy_perform(c->easy)) != CURLE_OK ||
        (rc = curl_easy_getinfo(c->easy, CURLINFO_ACTIVESOCKET, &c->fd)) != CURLE_OK)
        goto fail;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN;
    ev.data.ptr = c;
    if (epoll_ctl(lp->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        rc = CURLE_COULDNT_CONNECT;
        goto fail;
    }
    return CURLE_OK;
fail:
    curl_easy_cleanup(c->easy);
    c->easy = NULL;
    c->fd = CURL_SOCKET_BAD;
    return rc;
}

static int set_out_interest(lt_loop *lp, lt_conn *c, int want)
{
    struct epoll_event ev;
    if (c->want_out == want)
        return 0;
    memset(&ev, 0, sizeof ev);
    ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
    ev.data.ptr = c;
    if (epoll_ctl(lp->epfd, EPOLL_CTL_MOD, c->fd, &ev) != 0)
        return -1;
    c->want_out = want;
    return 0;
}

/* Send what is left of the request; a full socket buffer waits for EPOLLOUT. */
static CURLcode conn_flush(lt_loop *lp, lt_conn *c)
{
    while (c->out_sent < c->out_len) {
        size_t n = 0;
        CURLcode rc = curl_easy_send(c->easy, c->out + c->out_sent, c->out_len - c->out_sent, &n);
        if (rc == CURLE_AGAIN)
            return set_out_interest(lp, c, 1) == 0 ? CURLE_OK : CURLE_SEND_ERROR;
        if (rc != CURLE_OK)
            return rc;
        c->out_sent += n;
    }
    return set_out_interest(lp, c, 0) == 0 ? CURLE_OK : CURLE_SEND_ERROR;
}

/* Give c its next request, if there is one. A request that fails before it
 * is sent (connect refused, send error) is counted and the next ticket tried,
 * so a dead server drains the tickets instead of hanging the run. */
static void conn_next(lt_loop *lp, lt_conn *c)
{
    lt_worker *w = lp->w;
    lt_run *run = w->run;
    const lt_options *opt = run->opt;
    const char *prefix = opt->user_prefix != NULL ? opt->user_prefix
                         : opt->users > 0         ? "u"
                                                  : run->user_tag;
    char user[LT_USER_MAX + 1];

    for (;;) {
        uint64_t ticket;
        int len;
        CURLcode rc;

        if (atomic_load_explicit(&run->stop, memory_order_relaxed))
            return;
        if (run->deadline_ns != 0 && cm_now_ns() >= run->deadline_ns)
            return;
        /* One shared ticket counter splits --requests exactly, and a slow
         * connection simply takes fewer tickets instead of finishing last. */
        ticket = atomic_fetch_add_explicit(&run->next_ticket, 1, memory_order_relaxed);
        if (opt->requests != 0 && ticket >= opt->requests)
            return;
        if (opt->users > 0)
            snprintf(user, sizeof user, "%s%" PRIu64, prefix, splitmix64(&lp->rng) % opt->users);
        else
            snprintf(user, sizeof user, "%s%" PRIu64, prefix, ticket);
        len = lt_http_format_claim(c->out, sizeof c->out, c->target, opt->use_get, opt->coupon_id, user);
        if (len < 0) {
            count_error(w, CURLE_URL_MALFORMAT);
            continue;
        }
        c->out_len = (size_t)len;
        c->out_sent = 0;
        c->in_len = 0;
        if (c->easy == NULL && (rc = conn_open(lp, c)) != CURLE_OK) {
            count_error(w, rc);
            continue;
        }
        c->t0 = cm_now_ns();
        c->deadline = c->t0 + (int64_t)opt->timeout_ms * 1000000;
        c->busy = 1;
        lp->busy++;
        if ((rc = conn_flush(lp, c)) != CURLE_OK) {
            count_error(w, rc);
            conn_close(lp, c);
            continue;
        }
        return;
    }
}

/* A request ended without a reply: count it, drop the connection, go on. */
static void conn_fail(lt_loop *lp, lt_conn *c, CURLcode rc)
{
    count_error(lp->w, rc);
    conn_close(lp, c);
    conn_next(lp, c);
}

static void conn_readable(lt_loop *lp, lt_conn *c)
{
    int eof = 0;
    for (;;) {
        lt_http_resp resp;
        size_t n = 0;
        int r;
        CURLcode rc;

        if (c->in_len == IN_CAP) {
            if (c->busy)
                conn_fail(lp, c, CURLE_WEIRD_SERVER_REPLY);
            else
                conn_close(lp, c);
            return;
        }
        rc = curl_easy_recv(c->easy, c->in + c->in_len, IN_CAP - c->in_len, &n);
        if (rc == CURLE_AGAIN)
            return;
        if (rc != CURLE_OK) {
            if (c->busy)
                conn_fail(lp, c, rc);
            else
                conn_close(lp, c);
            return;
        }
        if (n == 0)
            eof = 1;
        c->in_len += n;
        if (!c->busy) {
            /* An idle keep-alive connection closed by the server (or talking
             * out of turn): drop it; the next request reconnects. */
            conn_close(lp, c);
            return;
        }
        r = lt_http_parse(c->in, c->in_len, eof, c->body, sizeof c->body, &resp);
        if (r < 0) {
            conn_fail(lp, c, CURLE_WEIRD_SERVER_REPLY);
            return;
        }
        if (r == 0) {
            if (eof)
                conn_fail(lp, c, c->in_len == 0 ? CURLE_GOT_NOTHING : CURLE_PARTIAL_FILE);
            /* Incomplete: read on; the next recv says CURLE_AGAIN when drained. */
            if (eof)
                return;
            continue;
        }
        count_reply(lp->w, c, &resp, cm_now_ns());
        c->busy = 0;
        lp->busy--;
        /* We never pipeline, so bytes beyond this reply are a protocol error. */
        if (!resp.keep_alive || eof || resp.consumed != c->in_len)
            conn_close(lp, c);
        c->in_len = 0;
        conn_next(lp, c);
        return;
    }
}

static void scan_timeouts(lt_loop *lp, lt_conn *conns, unsigned n, int64_t now)
{
    for (unsigned i = 0; i < n; i++)
        if (conns[i].busy && now >= conns[i].deadline)
            conn_fail(lp, &conns[i], CURLE_OPERATION_TIMEDOUT);
}

static void *worker_main(void *arg)
{
    lt_worker *w = arg;
    const lt_run *run = w->run;
    const lt_options *opt = run->opt;
    lt_loop lp = {.w = w, .epfd = -1, .busy = 0};
    lt_conn *conns = NULL;
    struct epoll_event evs[64];
    int64_t last_scan;

    /* Each thread its own PRNG stream: rand() is shared state (a data race and a
     * lock), and equal seeds per thread would make them draw the same users. */
    lp.rng = run->seed ^ ((uint64_t)(w->index + 1) * UINT64_C(0xD1B54A32D192ED03));
    lp.epfd = epoll_create1(EPOLL_CLOEXEC);
    conns = calloc(w->n_conns, sizeof *conns);
    if (lp.epfd < 0 || conns == NULL) {
        snprintf(w->err, sizeof w->err, "worker %u: out of memory or file descriptors", w->index);
        w->failed = 1;
        goto out;
    }
    for (unsigned i = 0; i < w->n_conns; i++) {
        /* Round-robin over the URLs by global connection number, so every
         * server gets its share even with fewer threads than URLs. */
        conns[i].target = &run->targets[(w->first_conn + i) % opt->n_urls];
        conns[i].fd = CURL_SOCKET_BAD;
    }
    for (unsigned i = 0; i < w->n_conns; i++)
        conn_next(&lp, &conns[i]);
    last_scan = cm_now_ns();
    while (lp.busy > 0) {
        /* Bounded wait: request timeouts are checked at least every 10 ms. */
        int n = epoll_wait(lp.epfd, evs, (int)(sizeof evs / sizeof evs[0]), 10);
        int64_t now;
        if (n < 0 && errno != EINTR) {
            snprintf(w->err, sizeof w->err, "worker %u: epoll_wait: %s", w->index, strerror(errno));
            w->failed = 1;
            /* Our tickets are not coming back: stop the others too rather than
             * report a run that silently did less than asked. */
            atomic_store(&w->run->stop, 1);
            goto out;
        }
        for (int i = 0; i < n; i++) {
            lt_conn *c = evs[i].data.ptr;
            if (c->easy == NULL)
                continue;
            if ((evs[i].events & EPOLLOUT) && c->busy && c->out_sent < c->out_len) {
                CURLcode rc = conn_flush(&lp, c);
                if (rc != CURLE_OK) {
                    conn_fail(&lp, c, rc);
                    continue;
                }
            }
            if (evs[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_readable(&lp, c);
        }
        now = cm_now_ns();
        if (now - last_scan >= SCAN_EVERY_NS) {
            scan_timeouts(&lp, conns, w->n_conns, now);
            last_scan = now;
        }
    }
out:
    for (unsigned i = 0; conns != NULL && i < w->n_conns; i++)
        conn_close(&lp, &conns[i]);
    free(conns);
    if (lp.epfd >= 0)
        close(lp.epfd);
    return NULL;
}

int lt_workers_start(lt_run *run, lt_worker **out, char *err, size_t errlen)
{
    int rc = -1;
    unsigned n = run->opt->threads;
    unsigned conns = run->opt->connections, first = 0;
    lt_worker *w = calloc(n, sizeof *w);
    *out = NULL;
    if (w == NULL) {
        snprintf(err, errlen, "out of memory for %u workers", n);
        goto out;
    }
    for (unsigned i = 0; i < n; i++) {
        w[i].index = i;
        /* Connections split as evenly as they go: the first conns % n get one more. */
        w[i].n_conns = conns / n + (i < conns % n ? 1 : 0);
        w[i].first_conn = first;
        first += w[i].n_conns;
        w[i].run = run;
        lt_stats_init(&w[i].stats);
        atomic_init(&w[i].done, 0);
        atomic_init(&w[i].errors, 0);
    }
    for (unsigned i = 0; i < n; i++) {
        int e = pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
        if (e != 0) {
            snprintf(err, errlen, "cannot start worker thread %u of %u: %s", i + 1, n, strerror(e));
            atomic_store(&run->stop, 1);
            lt_workers_join(w, n);
            goto out;
        }
        w[i].started = 1;
    }
    *out = w;
    w = NULL;
    rc = 0;
out:
    lt_workers_free(w);
    return rc;
}

void lt_workers_join(lt_worker *w, unsigned n)
{
    if (w == NULL)
        return;
    for (unsigned i = 0; i < n; i++) {
        if (w[i].started) {
            pthread_join(w[i].tid, NULL);
            w[i].started = 0;
        }
    }
}

void lt_workers_free(lt_worker *w)
{
    free(w);
}
