/* worker.c - the load: worker threads, each driving its share of keep-alive
 * connections on its own epoll set. Each connection is a libcurl easy handle
 * in CONNECT_ONLY mode: curl connects (timeouts, proxies off) and owns the
 * socket; requests and replies go through curl_easy_send/curl_easy_recv and
 * are framed by http1.c.
 *
 * Why not a curl transfer per request: measured on this project's 2-core
 * machine, curl's per-transfer work cost ~35 us of CPU per request (one
 * blocking easy_perform per thread: ~55 us) against wrk's ~14 us. On cores
 * shared with the server, that CPU is taken from the server: the tester
 * became the bottleneck at ~65 % of wrk's rate (loadtest/README.md). */
#include "loadtest.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define OUT_CAP 1024       /* one claim request: ~200 bytes, host and path at most 255 */
#define IN_CAP 8192        /* one reply: ~250 bytes; a larger one is an error */
#define BODY_CAP 1024      /* the code is near the start of the body */
#define SCAN_EVERY_NS 10000000 /* request-timeout scan every 10 ms */
#define MS 1000000LL
/* Reconnect back-off: 10 ms doubling to 1 s, each wait drawn from [d/2, d].
 * Without it a stopped server took ~57,000 refused connects in 2.5 s: the
 * tester spun on the cores the other servers needed, and the refusals
 * drained --requests as if they had been requests. */
#define BACKOFF_FIRST_NS (10 * MS)
#define BACKOFF_MAX_NS (1000 * MS)

typedef struct lt_conn {
    CURL *easy;              /* CONNECT_ONLY handle owning the socket; NULL = closed */
    curl_socket_t fd;
    const lt_target *target;
    int busy;                /* a request is in flight */
    int held;                /* a ticket is taken and its request formatted, not yet sent */
    int waiting;             /* parked until wake_at (counted in lt_loop.waiting) */
    int gave_up;             /* could not connect for --give-up-ms: out of the run */
    int warm;                /* the request in flight started in the warm-up */
    int want_out;            /* EPOLLOUT registered: part of the request is unsent */
    int64_t wake_at;         /* the scheduled send time, or the next reconnect */
    int64_t sched;           /* --rate: the held ticket's scheduled send time; 0 = closed loop */
    unsigned fails;          /* connects failed in a row */
    int64_t failing_since;   /* when the first of them failed */
    int64_t t0;              /* latency origin: the scheduled time (--rate), else the send */
    int64_t deadline;        /* send + --timeout-ms */
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
    unsigned waiting;        /* connections parked until their wake_at */
    int no_pwait2;           /* the kernel lacks epoll_pwait2: ms timeouts */
} lt_loop;

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static unsigned curl_slot(CURLcode rc)
{
    return (unsigned)rc < LT_CURL_SLOTS ? (unsigned)rc : LT_CURL_SLOTS - 1;
}

static void publish(lt_worker *w)
{
    atomic_store_explicit(&w->done, w->stats.answered + w->stats.errors + w->warm.answered + w->warm.errors,
                          memory_order_relaxed);
    atomic_store_explicit(&w->errors, w->stats.errors + w->warm.errors, memory_order_relaxed);
    atomic_store_explicit(&w->connect_failures, w->stats.connect_failures, memory_order_relaxed);
}

/* A request that was sent and got no answer (reset, timeout, garbage). */
static void count_error(lt_worker *w, const lt_conn *c, CURLcode rc, int64_t now)
{
    lt_stats *st = c->warm ? &w->warm : &w->stats;
    st->errors++;
    st->errors_by_curl[curl_slot(rc)]++;
    if (w->timeline != NULL)
        (void)lt_timeline_error(w->timeline, now - w->run->start_ns); /* a loss is counted inside */
    publish(w);
}

static void count_reply(lt_worker *w, const lt_conn *c, const lt_http_resp *r, int64_t t1)
{
    lt_stats *st = c->warm ? &w->warm : &w->stats;
    long code = lt_scan_code(c->body, r->body_len);
    uint64_t us = (uint64_t)((t1 - c->t0) / 1000);
    st->answered++;
    cm_hist_record(&st->hist, us);
    cm_hist_record(&st->by_outcome[lt_outcome_of(r->status, code)], us);
    if (r->status >= 0 && r->status < LT_STATUS_SLOTS)
        st->by_status[r->status]++;
    else
        st->status_other++;
    lt_stats_add_code(st, code, 1);
    if (w->timeline != NULL)
        (void)lt_timeline_answer(w->timeline, t1 - w->run->start_ns, r->status, code, us);
    publish(w);
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
    lp->w->stats.connect_attempts++;
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

static int run_over(const lt_run *run, int64_t now)
{
    return atomic_load_explicit(&run->stop, memory_order_relaxed) ||
           (run->deadline_ns != 0 && now >= run->deadline_ns);
}

static void park(lt_loop *lp, lt_conn *c, int64_t until)
{
    if (!c->waiting) {
        c->waiting = 1;
        lp->waiting++;
    }
    c->wake_at = until;
}

/* A ticket dropped unsent: its connection gave up, or the run ended while
 * it waited for a reconnect. It reached no server, so it is no error; it is
 * counted as unsent when it was due (an open-loop ticket whose time had not
 * come when Ctrl-C stopped the run was simply never asked for). */
static void drop_ticket(lt_loop *lp, lt_conn *c, int64_t now)
{
    if (c->held && c->sched <= now)
        lp->w->stats.unsent++;
    c->held = 0;
}

/* Take the next ticket into c and format its request: 1, or 0 when the run
 * has no more (--requests handed out, the deadline or a stop reached). */
static int take_ticket(lt_loop *lp, lt_conn *c, int64_t now)
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
        /* Open loop: the deadline is checked against the due time below, so
         * the requests due before it all go out even when the tester or the
         * server lags behind; the closed loop stops at the deadline itself. */
        if (opt->rate > 0 ? atomic_load_explicit(&run->stop, memory_order_relaxed) : run_over(run, now))
            return 0;
        /* One shared ticket counter splits --requests exactly, and a slow
         * connection simply takes fewer tickets instead of finishing last. */
        ticket = atomic_fetch_add_explicit(&run->next_ticket, 1, memory_order_relaxed);
        if (opt->requests != 0 && ticket >= opt->requests)
            return 0;
        c->sched = 0;
        if (opt->rate > 0) {
            /* Open loop: ticket k is due at start + k/R whatever the
             * server did with the earlier ones (coordinated omission). */
            c->sched = run->start_ns + (int64_t)((double)ticket * 1e9 / opt->rate);
            if (run->deadline_ns != 0 && c->sched >= run->deadline_ns)
                return 0;
        }
        if (opt->users > 0)
            snprintf(user, sizeof user, "%s%" PRIu64, prefix, splitmix64(&lp->rng) % opt->users);
        else
            snprintf(user, sizeof user, "%s%" PRIu64, prefix, ticket);
        len = lt_http_format_claim(c->out, sizeof c->out, c->target, opt->use_get, opt->coupon_id, user);
        if (len < 0) {
            /* Cannot happen with parsed URLs (OUT_CAP fits the longest);
             * counted, not sent, so a bug here shows in the report. */
            w->stats.unsent++;
            continue;
        }
        c->out_len = (size_t)len;
        c->held = 1;
        return 1;
    }
}

/* The wait before reconnect number `fails`: [d/2, d], d = 10 ms * 2^(fails-1)
 * up to 1 s. The jitter keeps connections that failed together from
 * reconnecting in lockstep; the floor bounds the attempts. */
static int64_t backoff_ns(lt_loop *lp, unsigned fails)
{
    int64_t d = BACKOFF_FIRST_NS;
    for (unsigned i = 1; i < fails && d < BACKOFF_MAX_NS; i++)
        d *= 2;
    if (d > BACKOFF_MAX_NS)
        d = BACKOFF_MAX_NS;
    return d / 2 + (int64_t)(splitmix64(&lp->rng) % (uint64_t)(d / 2 + 1));
}

/* A connect failed: back off, or give the connection up after --give-up-ms
 * of failures in a row. */
static void connect_failed(lt_loop *lp, lt_conn *c, CURLcode rc, int64_t now)
{
    lt_worker *w = lp->w;
    w->stats.connect_failures++;
    w->stats.connect_by_curl[curl_slot(rc)]++;
    publish(w);
    if (c->fails++ == 0)
        c->failing_since = now;
    if (now - c->failing_since >= w->run->opt->give_up_ms * MS) {
        c->gave_up = 1;
        w->stats.gave_up++;
        drop_ticket(lp, c, now);
        return;
    }
    park(lp, c, now + backoff_ns(lp, c->fails));
}

/* Drive c until it has a request in flight, is parked (a scheduled send
 * time, a reconnect back-off), or the run has nothing more for it. */
static void conn_next(lt_loop *lp, lt_conn *c)
{
    lt_worker *w = lp->w;
    const lt_run *run = w->run;

    for (;;) {
        int64_t now = cm_now_ns();
        CURLcode rc;
        if (c->gave_up)
            return;
        if (!c->held && !take_ticket(lp, c, now))
            return;
        if (c->easy == NULL) {
            /* Connect before the scheduled time, not at it: the send then
             * goes out on time. */
            rc = conn_open(lp, c);
            now = cm_now_ns();
            if (rc != CURLE_OK) {
                connect_failed(lp, c, rc, now);
                return;
            }
            c->fails = 0;
        }
        if (c->sched > now) {
            park(lp, c, c->sched);
            return;
        }
        c->held = 0;
        c->t0 = c->sched != 0 ? c->sched : now;
        c->warm = run->warmup_end_ns != 0 && c->t0 < run->warmup_end_ns;
        c->deadline = now + (int64_t)run->opt->timeout_ms * MS;
        c->out_sent = 0;
        c->in_len = 0;
        c->busy = 1;
        lp->busy++;
        if ((rc = conn_flush(lp, c)) != CURLE_OK) {
            count_error(w, c, rc, cm_now_ns());
            conn_close(lp, c);
            continue;
        }
        return;
    }
}

/* A request ended without a reply: count it, drop the connection, go on. */
static void conn_fail(lt_loop *lp, lt_conn *c, CURLcode rc)
{
    count_error(lp->w, c, rc, cm_now_ns());
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

/* Wake the parked connections whose time has come; when the run is over,
 * all of them, dropping what they held. */
static void wake_due(lt_loop *lp, lt_conn *conns, unsigned n, int64_t now)
{
    int over = run_over(lp->w->run, now);
    for (unsigned i = 0; i < n; i++) {
        lt_conn *c = &conns[i];
        if (!c->waiting || (!over && now < c->wake_at))
            continue;
        c->waiting = 0;
        lp->waiting--;
        /* A send due before the deadline still goes out (as in the closed
         * loop, where a ticket taken is sent); a reconnect in back-off does
         * not, nor anything after a stop (Ctrl-C). */
        if (over && (c->fails > 0 || atomic_load_explicit(&lp->w->run->stop, memory_order_relaxed))) {
            drop_ticket(lp, c, now);
            continue;
        }
        conn_next(lp, c);
    }
}

/* How long epoll may sleep: until the first parked connection is due, at
 * most 10 ms (the timeout scan and the stop flag). */
static int64_t sleep_ns(const lt_loop *lp, const lt_conn *conns, unsigned n, int64_t now)
{
    int64_t best = SCAN_EVERY_NS;
    for (unsigned i = 0; lp->waiting > 0 && i < n; i++) {
        if (conns[i].waiting) {
            int64_t d = conns[i].wake_at - now;
            if (d < best)
                best = d > 0 ? d : 0;
        }
    }
    return best;
}

/* epoll with a nanosecond timeout: a send scheduled at t must not leave at
 * t + 1 ms because epoll_wait rounds to milliseconds, since that delay
 * counts in the open loop's latency. */
static int wait_events(lt_loop *lp, struct epoll_event *evs, int max, int64_t timeout_ns)
{
    if (!lp->no_pwait2) {
        struct timespec ts = {.tv_sec = (time_t)(timeout_ns / 1000000000),
                              .tv_nsec = (long)(timeout_ns % 1000000000)};
        int n = epoll_pwait2(lp->epfd, evs, max, &ts, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        lp->no_pwait2 = 1; /* kernels before 5.11 */
    }
    return epoll_wait(lp->epfd, evs, max, (int)((timeout_ns + MS - 1) / MS));
}

static void *worker_main(void *arg)
{
    lt_worker *w = arg;
    const lt_run *run = w->run;
    const lt_options *opt = run->opt;
    lt_loop lp = {.w = w, .epfd = -1};
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
         * server gets its share even with fewer threads than URLs; --route
         * coupon sends the one coupon's claims all to its URL instead. */
        size_t u = opt->route == LT_ROUTE_COUPON ? lt_route_coupon(opt->coupon_id, opt->n_urls)
                                                 : (w->first_conn + i) % opt->n_urls;
        conns[i].target = &run->targets[u];
        conns[i].fd = CURL_SOCKET_BAD;
    }
    for (unsigned i = 0; i < w->n_conns; i++)
        conn_next(&lp, &conns[i]);
    last_scan = cm_now_ns();
    while (lp.busy > 0 || lp.waiting > 0) {
        /* Bounded wait: request timeouts are checked at least every 10 ms. */
        int n = wait_events(&lp, evs, (int)(sizeof evs / sizeof evs[0]),
                            sleep_ns(&lp, conns, w->n_conns, cm_now_ns()));
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
        if (lp.waiting > 0)
            wake_due(&lp, conns, w->n_conns, now);
        if (now - last_scan >= SCAN_EVERY_NS) {
            scan_timeouts(&lp, conns, w->n_conns, now);
            last_scan = now;
        }
    }
out:
    for (unsigned i = 0; conns != NULL && i < w->n_conns; i++) {
        drop_ticket(&lp, &conns[i], cm_now_ns());
        conn_close(&lp, &conns[i]);
    }
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
        /* w is calloc'd: thousands of threads must not fault in every
         * histogram page up front. */
        lt_stats_init_zeroed(&w[i].stats);
        lt_stats_init_zeroed(&w[i].warm);
        atomic_init(&w[i].done, 0);
        atomic_init(&w[i].errors, 0);
        atomic_init(&w[i].connect_failures, 0);
        if (run->opt->timeline_path != NULL && (w[i].timeline = lt_timeline_new()) == NULL) {
            snprintf(err, errlen, "out of memory for the timeline");
            goto out;
        }
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
    lt_workers_free(w, n);
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

void lt_workers_free(lt_worker *w, unsigned n)
{
    for (unsigned i = 0; w != NULL && i < n; i++)
        lt_timeline_free(w[i].timeline);
    free(w);
}
