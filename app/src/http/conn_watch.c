/* conn_watch.c - the connection deadlines and their sweeper (conn_watch.h). */
#include "http/conn_watch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "common.h"
#include "core/log.h"
#include "http/conn_cap.h"

/* How often deadlines are checked: a late connection is cut at most this
 * much after its deadline. */
#define SWEEP_MS 100
/* The body rate is measured from this long after the head's end. */
#define BODY_GRACE_MS 1000
/* The send rate is measured over periods this long while the client owes
 * acknowledgements: each must see --min-send-rate * SEND_PERIOD_MS bytes
 * acknowledged (the first too: a client's receive buffer, filled at once,
 * then buys no more time than one period). */
#define SEND_PERIOD_MS 2000

typedef enum phase {
    PH_HEAD = 0, /* waiting for a whole head */
    PH_BODY,     /* head whole, its body coming */
    PH_SERVING   /* whole: being served or answered */
} phase;

struct watched {
    watched *prev, *next; /* the list, under g.mu */
    int fd;
    int cut;                  /* shut down by the sweeper (under g.mu) */
    atomic_int phase;
    atomic_llong since_ms;    /* accept, or the previous answer */
    atomic_llong head_ms;     /* when the head was whole (PH_BODY) */
    atomic_ullong body_bytes; /* body bytes so far (PH_BODY) */
    int64_t send_ms;          /* the send period's start; 0: owes nothing (sweeper only) */
    uint64_t send_acked;      /* bytes the client had acknowledged then */
    int capped;               /* counted by conn_cap under key */
    unsigned char key[PEER_KEY_LEN];
};

static struct {
    pthread_mutex_t mu; /* the list and the cut flags */
    pthread_t thread;
    int started;
    atomic_int stop;
    watched *head;
    int64_t head_timeout_ms, request_timeout_ms;
    unsigned min_rate, min_send_rate, head_s, request_s;
    atomic_uint cut_head, cut_request, cut_rate, cut_send; /* since the last log line */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int too_slow(int64_t now, const watched *w)
{
    int64_t body_ms = now - (int64_t)atomic_load(&w->head_ms) - BODY_GRACE_MS;
    return g.min_rate > 0 && body_ms > 0 &&
           (double)atomic_load(&w->body_bytes) < (double)g.min_rate * (double)body_ms / 1000.0;
}

void conn_watch_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                       enum MHD_ConnectionNotificationCode code)
{
    (void)cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ai = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        if (ci == NULL)
            return; /* no descriptor to watch: libmicrohttpd's idle timeout bounds it */
        watched *w = calloc(1, sizeof *w);
        int cap = w != NULL ? conn_cap_enter(ai != NULL ? ai->client_addr : NULL, w->key) : -1;
        *socket_context = cap >= 0 ? w : NULL;
        if (cap < 0) {
            /* Its client is at its cap (or no memory to watch it): closed
             * unanswered, as libmicrohttpd's own cap does, once it reads
             * the end of file. */
            free(w);
            (void)shutdown(ci->connect_fd, SHUT_RDWR);
            return;
        }
        w->capped = cap;
        w->fd = ci->connect_fd;
        atomic_init(&w->phase, PH_HEAD);
        atomic_init(&w->since_ms, cm_now_ms());
        pthread_mutex_lock(&g.mu);
        w->next = g.head;
        if (g.head != NULL)
            g.head->prev = w;
        g.head = w;
        pthread_mutex_unlock(&g.mu);
        return;
    }
    watched *w = *socket_context;
    if (w == NULL)
        return;
    /* libmicrohttpd closes the descriptor only after this returns: once
     * unlinked under the mutex, the sweeper can no longer touch it. */
    pthread_mutex_lock(&g.mu);
    if (w->prev != NULL)
        w->prev->next = w->next;
    else
        g.head = w->next;
    if (w->next != NULL)
        w->next->prev = w->prev;
    pthread_mutex_unlock(&g.mu);
    if (w->capped)
        conn_cap_leave(w->key);
    free(w);
    *socket_context = NULL;
}

watched *conn_watch_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

void conn_watch_head_done(watched *w, int body_expected)
{
    if (w == NULL)
        return;
    atomic_store(&w->body_bytes, 0);
    atomic_store(&w->head_ms, cm_now_ms());
    atomic_store(&w->phase, body_expected ? PH_BODY : PH_SERVING);
}

int conn_watch_body(watched *w, size_t n)
{
    if (w == NULL)
        return 0;
    atomic_fetch_add(&w->body_bytes, n);
    if (!too_slow(cm_now_ms(), w))
        return 0;
    atomic_fetch_add(&g.cut_rate, 1);
    return -1;
}

void conn_watch_serving(watched *w)
{
    if (w != NULL)
        atomic_store(&w->phase, PH_SERVING);
}

void conn_watch_next(watched *w)
{
    if (w == NULL)
        return;
    atomic_store(&w->since_ms, cm_now_ms());
    atomic_store(&w->phase, PH_HEAD);
}

/* 1 when w's client acknowledged less than --min-send-rate over a whole
 * period while it owed bytes (under g.mu). The kernel's counts, not
 * libmicrohttpd's: bytes not yet acknowledged (SIOCOUTQ) and bytes
 * acknowledged so far (TCP_INFO), so it holds whatever w is doing (an
 * answer stuck in libmicrohttpd, or one handed to the kernel and not read)
 * and however the connection was opened. */
static int too_slow_reader(int64_t now, watched *w)
{
    int outq = 0;
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (g.min_send_rate == 0 || ioctl(w->fd, SIOCOUTQ, &outq) != 0)
        return 0;
    if (outq <= 0) {
        w->send_ms = 0; /* owes nothing: the client reads */
        return 0;
    }
    memset(&ti, 0, sizeof ti);
    if (getsockopt(w->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return 0;
    if (w->send_ms == 0 || ti.tcpi_bytes_acked < w->send_acked) {
        w->send_ms = now;
        w->send_acked = ti.tcpi_bytes_acked;
        return 0;
    }
    if (now - w->send_ms < SEND_PERIOD_MS)
        return 0;
    if ((ti.tcpi_bytes_acked - w->send_acked) * 1000 < (uint64_t)g.min_send_rate * (uint64_t)(now - w->send_ms))
        return 1;
    w->send_ms = now; /* a whole period at the rate: the next one starts */
    w->send_acked = ti.tcpi_bytes_acked;
    return 0;
}

/* Cuts every connection past a deadline (under g.mu). */
static void sweep(int64_t now)
{
    for (watched *w = g.head; w != NULL; w = w->next) {
        int ph = atomic_load(&w->phase);
        int64_t age = now - (int64_t)atomic_load(&w->since_ms);
        atomic_uint *why = NULL;
        if (w->cut)
            continue;
        /* Every phase: an answer may be stuck in libmicrohttpd (serving)
         * or handed to the kernel and unread while the next head is due. */
        if (too_slow_reader(now, w))
            why = &g.cut_send;
        else if (ph == PH_SERVING)
            continue; /* its answer may take as long as the claim's own deadlines */
        else if (age >= g.request_timeout_ms)
            why = &g.cut_request;
        else if (ph == PH_HEAD && g.head_timeout_ms > 0 && age >= g.head_timeout_ms)
            why = &g.cut_head;
        else if (ph == PH_BODY && too_slow(now, w))
            why = &g.cut_rate;
        if (why == NULL)
            continue;
        /* Bytes still queued for the client (a reader too slow, or one cut
         * for its next head): reset, not a graceful close whose FIN would
         * wait behind them, keeping the socket in the kernel for minutes
         * and the client unaware it was closed. */
        if (w->send_ms != 0) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            (void)setsockopt(w->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        /* libmicrohttpd reads end-of-file and closes the connection itself
         * (its close notification then frees w); closing the descriptor
         * here instead would pull it from under its owner. */
        if (shutdown(w->fd, SHUT_RDWR) == 0 || errno == ENOTCONN) {
            w->cut = 1;
            atomic_fetch_add(why, 1);
        }
    }
}

static void *sweeper_main(void *arg)
{
    int64_t logged_ms = 0;
    (void)arg;
    /* A stop waits at most one sweep. */
    while (!atomic_load(&g.stop)) {
        (void)cm_sleep_ms(SWEEP_MS);
        int64_t now = cm_now_ms();
        pthread_mutex_lock(&g.mu);
        sweep(now);
        pthread_mutex_unlock(&g.mu);
        if (now - logged_ms < 1000)
            continue;
        /* One line a second at most, with the counts since the last one. */
        unsigned h = atomic_exchange(&g.cut_head, 0), r = atomic_exchange(&g.cut_request, 0),
                 b = atomic_exchange(&g.cut_rate, 0), s = atomic_exchange(&g.cut_send, 0),
                 c = conn_cap_refused_take();
        if (h + r + b + s + c > 0) {
            logged_ms = now;
            log_event_line(LOG_WARN, LOG_EV_CONN_CUT,
                           "closed connections: %u head past %u s, %u request past %u s, %u body under %u B/s, "
                           "%u answer read under %u B/s, %u over the per-address cap",
                           h, g.head_s, r, g.request_s, b, g.min_rate, s, g.min_send_rate, c);
        }
    }
    return NULL;
}

int conn_watch_start(const app_config *cfg, char *errbuf, size_t errlen)
{
    g.head_s = cfg->header_timeout_s;
    g.request_s = cfg->request_timeout_s;
    g.head_timeout_ms = (int64_t)cfg->header_timeout_s * 1000;
    g.request_timeout_ms = (int64_t)cfg->request_timeout_s * 1000;
    g.min_rate = cfg->min_body_rate;
    g.min_send_rate = cfg->min_send_rate;
    atomic_store(&g.stop, 0);
    if (conn_cap_start(cfg->max_conn_per_ip, cfg->max_connections, errbuf, errlen) != 0)
        return -1;
    if (pthread_create(&g.thread, NULL, sweeper_main, NULL) != 0) {
        snprintf(errbuf, errlen, "cannot start the connection sweeper");
        conn_cap_stop();
        return -1;
    }
    g.started = 1;
    return 0;
}

void conn_watch_stop(void)
{
    if (!g.started)
        return;
    atomic_store(&g.stop, 1);
    pthread_join(g.thread, NULL);
    conn_cap_stop();
    g.started = 0;
}
