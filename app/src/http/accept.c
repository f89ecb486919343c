/* accept.c - the accept front (accept.h): the epoll loop, the slots and
 * who makes room, the screen of each connection's request, its deadlines,
 * and the hand-over (the relay itself: accept_relay.c). */
/* accept4 is a GNU extension (glibc declares it under _GNU_SOURCE). */
#define _GNU_SOURCE
#include "http/accept.h"
#include "http/accept_internal.h"

#include <errno.h>
#include <stddef.h>
#include <strings.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "core/log.h"
#include "core/metrics.h"
#include "http/head_parse.h"
#include "http/proxy_proto.h"
#include "http/reply.h"
#include "http/router.h"

/* How often deadlines are checked: a late connection is closed at most
 * this much after its deadline. */
#define SWEEP_MS 100
/* The body rate is measured from this long after the head's end. */
#define BODY_GRACE_MS 1000
/* After accept(2) ran out of descriptors: how long the listen socket rests. */
#define ACCEPT_PAUSE_MS 100
/* Connections accepted per turn of the loop. */
#define ACCEPT_BATCH 64


/* The epoll tags of the two descriptors that are not connections. */
static char TAG_LISTEN, TAG_WAKE;

static void addr_key(const struct sockaddr_storage *sa, unsigned char key[16])
{
    memset(key, 0, 16);
    if (sa->ss_family == AF_INET)
        memcpy(key, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    else if (sa->ss_family == AF_INET6)
        memcpy(key, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

/* The counter of key; when there is none, NULL, or with create a new one
 * at 0 (NULL when out of memory). */
static addr_count *addr_get(front *f, const unsigned char key[16], int create)
{
    uint32_t h = 2166136261u; /* FNV-1a over the exact address: no two share an entry */
    for (int i = 0; i < 16; i++)
        h = (h ^ key[i]) * 16777619u;
    addr_count **b = &f->buckets[h % ADDR_BUCKETS];
    for (addr_count *e = *b; e != NULL; e = e->next)
        if (memcmp(e->key, key, 16) == 0)
            return e;
    if (!create)
        return NULL;
    addr_count *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    memcpy(e->key, key, 16);
    e->next = *b;
    *b = e;
    return e;
}

static void addr_release(front *f, addr_count *ac)
{
    if (ac == NULL || --ac->count > 0)
        return;
    uint32_t h = 2166136261u;
    for (int i = 0; i < 16; i++)
        h = (h ^ ac->key[i]) * 16777619u;
    for (addr_count **p = &f->buckets[h % ADDR_BUCKETS]; *p != NULL; p = &(*p)->next)
        if (*p == ac) {
            *p = ac->next;
            free(ac);
            return;
        }
}

/* c leaves its address's list (the count is addr_release's). */
static void addr_unlink(fconn *c)
{
    if (c->aprev != NULL)
        c->aprev->anext = c->anext;
    else
        c->ac->oldest = c->anext;
    if (c->anext != NULL)
        c->anext->aprev = c->aprev;
    else
        c->ac->newest = c->aprev;
    c->aprev = c->anext = NULL;
}

/* c joins ac, newest, and counts in it. */
static void addr_link(fconn *c, addr_count *ac)
{
    c->ac = ac;
    ac->count++;
    c->aprev = ac->newest;
    c->anext = NULL;
    if (ac->newest != NULL)
        ac->newest->anext = c;
    else
        ac->oldest = c;
    ac->newest = c;
}

/* Takes c out of the list, the address count and epoll; the descriptor is
 * the caller's to close or hand over. */
static void detach(front *f, fconn *c)
{
    (void)epoll_ctl(f->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        f->oldest = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        f->newest = c->prev;
    f->held--;
    addr_unlink(c);
    addr_release(f, c->ac);
}

/* The connection to close when the front is full: the oldest of the
 * address that holds the most. A client that holds one connection (a
 * normal one) is never the victim while an address holds more, however
 * fast the others reconnect; among equals the oldest goes (the idle and
 * the slow are the old ones). */
static fconn *victim(front *f)
{
    /* Idle kept-alive connections first (answered, nothing sent since),
     * oldest first: they cost a slot and serve no one now. */
    for (fconn *c = f->oldest; c != NULL; c = c->next)
        if (c->state == C_READING && c->served > 0 && c->body_seen == 0 && c->head_ms == 0 && c->linger_until_ms == 0)
            return c;
    addr_count *most = NULL;
    for (size_t i = 0; i < ADDR_BUCKETS; i++)
        for (addr_count *e = f->buckets[i]; e != NULL; e = e->next)
            if (e->oldest != NULL &&
                (most == NULL || e->count > most->count ||
                 (e->count == most->count && e->oldest->accepted_ms < most->oldest->accepted_ms)))
                most = e;
    /* The oldest of that address whose request is not with libmicrohttpd. */
    for (fconn *c = most != NULL ? most->oldest : NULL; c != NULL; c = c->anext)
        if (c->state == C_READING)
            return c;
    for (fconn *c = f->oldest; c != NULL; c = c->next)
        if (c->state == C_READING)
            return c;
    return NULL;
}

/* c is freed after the batch (front.gone). */
static void bury(front *f, fconn *c)
{
    c->gone = 1;
    c->next = f->gone;
    f->gone = c;
}


void front_conn_close(front *f, fconn *c)
{
    detach(f, c);
    relay_pair_close(f, c);
    close(c->fd);
    free(c->out);
    c->out = NULL;
    bury(f, c);
}

static void free_gone(front *f)
{
    while (f->gone != NULL) {
        fconn *c = f->gone;
        f->gone = c->next;
        free(c);
    }
}

/* Reads and drops what the socket holds (at most a few buffers' worth);
 * 1 when the peer has closed its side. */
int front_drain(int fd)
{
    char buf[16384];
    for (int i = 0; i < 16; i++) {
        ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (r == 0)
            return 1;
        if (r < 0)
            return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
    }
    return 0;
}

/* The request line's method and target for the access log of a refused
 * request, from the peeked bytes ("-" when there is none). */
static void log_refused(const head_info *h, const char *buf, unsigned status, int code, int64_t took_us)
{
    char method[24] = "-", target[512] = "-";
    if (h->method_len > 0 && h->method_len < sizeof method) {
        memcpy(method, buf, h->method_len);
        method[h->method_len] = '\0';
    }
    if (h->target_len > 0) {
        size_t n = h->target_len < sizeof target - 1 ? h->target_len : sizeof target - 1;
        memcpy(target, buf + h->target_off, n);
        target[n] = '\0';
    }
    metrics_request(ROUTE_UNMATCHED, router_route_name(ROUTE_UNMATCHED), status, took_us);
    access_log_line(method, target, status, code, took_us);
}

/* Answers c with status / code / msg in the contract's JSON and lingers
 * (LINGER_MS) for the client to read it. */
static void answer(front *f, fconn *c, const head_info *h, unsigned status, int code, const char *msg)
{
    char out[1024];
    size_t n = reply_format_raw(status, code, msg, out, sizeof out);
    log_refused(h, f->scratch, status, code, (cm_now_ms() - c->accepted_ms) * 1000);
    int eof = front_drain(c->fd);
    /* A small answer into an empty send buffer: one send is enough; if it
     * is not, the client was not reading, and is closed at the linger's end. */
    if (n > 0)
        (void)send(c->fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)shutdown(c->fd, SHUT_WR);
    if (eof) {
        front_conn_close(f, c);
        return;
    }
    c->linger_until_ms = cm_now_ms() + LINGER_MS;
}

static void hand_over(front *f, fconn *c)
{
    detach(f, c);
    /* The untouched socket, every byte of the request still in it, and the
     * client's address (for the per-address limit and the admin back-off).
     * MHD closes the socket itself when it refuses it (its own limits). */
    if (MHD_add_connection(f->daemon, c->fd, (const struct sockaddr *)&c->addr, c->addrlen) != MHD_YES)
        log_event_line(LOG_WARN, LOG_EV_HTTPD, "a screened connection was refused by the HTTP library: %s",
                       strerror(errno));
    bury(f, c);
}

/* c's PROXY header (pi, whole in the socket) is read off, and its client
 * address becomes c's: c moves to that address's count (and its cap).
 * 0, or -1 when c was closed. */
static int proxy_take(front *f, fconn *c, const proxy_info *pi)
{
    char hdr[PROXY_MAX_HEADER];
    ssize_t r;
    do
        r = recv(c->fd, hdr, pi->len, MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r != (ssize_t)pi->len) { /* the bytes peeked are in the socket: only a reset gets here */
        front_conn_close(f, c);
        return -1;
    }
    c->proxy_pending = 0;
    if (pi->local) /* the proxy's own check: its address stands */
        return 0;
    unsigned char key[16];
    addr_key(&pi->src, key);
    addr_count *ac = addr_get(f, key, 0);
    if (ac == c->ac)
        return 0;
    if (ac != NULL && f->app->cfg->max_conn_per_ip > 0 && ac->count >= f->app->cfg->max_conn_per_ip) {
        f->refused_ip++;
        front_conn_close(f, c);
        return -1;
    }
    ac = addr_get(f, key, 1);
    if (ac == NULL) {
        front_conn_close(f, c);
        return -1;
    }
    addr_unlink(c);
    addr_release(f, c->ac);
    c->addr = pi->src;
    c->addrlen = pi->srclen;
    addr_link(c, ac);
    return 0;
}

/* Looks at what c has sent so far, and answers, hands over or waits. */
void front_conn_look(front *f, fconn *c, uint32_t events)
{
    const app_config *cfg = f->app->cfg;
    ssize_t r = recv(c->fd, f->scratch, f->scratch_cap, MSG_PEEK | MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (r <= 0) { /* closed (or reset) before a whole request: nothing to answer */
        front_conn_close(f, c);
        return;
    }
    size_t n = (size_t)r;
    head_info h;
    proxy_info pi;
    proxy_status ps = proxy_parse((const unsigned char *)f->scratch, n, &pi);
    if (c->proxy_pending) {
        if (ps == PROXY_INCOMPLETE) {
            if (events & EPOLLRDHUP)
                front_conn_close(f, c);
            return; /* the head deadline bounds the wait (sweep) */
        }
        if (ps != PROXY_OK) {
            memset(&h, 0, sizeof h);
            f->refused_proxy++;
            answer(f, c, &h, 400, API_BAD_PARAM,
                   ps == PROXY_NONE ? "a connection from a trusted proxy must open with a PROXY protocol header"
                                    : pi.why);
            return;
        }
        if (proxy_take(f, c, &pi) != 0)
            return;
        front_conn_look(f, c, events); /* the request after the header, if it is there */
        return;
    }
    /* The header believed only from a trusted proxy: from anyone else it
     * is a client claiming someone else's address. */
    if (ps == PROXY_OK || ps == PROXY_BAD) {
        memset(&h, 0, sizeof h);
        f->refused_proxy++;
        answer(f, c, &h, 400, API_BAD_PARAM, "PROXY protocol header from an address not in --trusted-proxy");
        return;
    }
    head_status st = head_parse(f->scratch, n, cfg->max_header, cfg->max_body, &h);
    if (st == HEAD_BAD) {
        answer(f, c, &h, h.status, h.code, h.msg);
        return;
    }
    /* The peer closed its side before its request was whole: it never will be. */
    if (st == HEAD_INCOMPLETE) {
        if (events & EPOLLRDHUP)
            front_conn_close(f, c);
        return;
    }
    if (c->head_ms == 0)
        c->head_ms = cm_now_ms();
    size_t body = n - h.head_len;
    c->body_seen = body;
    if (h.chunked) {
        size_t used = 0;
        chunk_status cs = chunked_scan(f->scratch + h.head_len, body, cfg->max_body, &used);
        if (cs == CHUNK_BAD) {
            answer(f, c, &h, 400, API_BAD_PARAM, "malformed chunked body");
            return;
        }
        if (cs == CHUNK_TOO_LARGE || (cs == CHUNK_INCOMPLETE && n == f->scratch_cap)) {
            char msg[96];
            snprintf(msg, sizeof msg, "request body too large (limit %zu bytes)", cfg->max_body);
            answer(f, c, &h, 413, API_TOO_LARGE, msg);
            return;
        }
        if (cs == CHUNK_DONE) {
            relay_start(f, c, h.keep_alive, h.head_len + used);
            return;
        }
    } else if (h.content_length > 0 && (size_t)h.content_length > f->body_cap) {
        /* A body too large to peek (accept.h): the socket itself goes to
         * libmicrohttpd, which reads the body and closes after its answer. */
        hand_over(f, c);
        return;
    } else if (h.content_length <= 0 || body >= (size_t)h.content_length) {
        relay_start(f, c, h.keep_alive, h.head_len + (h.content_length > 0 ? (size_t)h.content_length : 0));
        return;
    }
    if (events & EPOLLRDHUP) {
        front_conn_close(f, c);
        return;
    }
    if (h.expect_continue && !c->continue_sent && body == 0) {
        static const char CONTINUE[] = "HTTP/1.1 100 Continue\r\n\r\n";
        c->continue_sent = 1;
        (void)send(c->fd, CONTINUE, sizeof CONTINUE - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
}

static void conn_event(front *f, fconn *c, uint32_t events)
{
    if (c->gone)
        return;
    if (c->linger_until_ms != 0) {
        if (front_drain(c->fd) || (events & (EPOLLHUP | EPOLLERR)))
            front_conn_close(f, c);
        return;
    }
    if (events & (EPOLLERR | EPOLLHUP)) {
        front_conn_close(f, c);
        return;
    }
    if (c->state == C_SENDING && (events & EPOLLOUT))
        relay_client_send(f, c);
    else if (c->state == C_READING && (events & (EPOLLIN | EPOLLRDHUP)))
        front_conn_look(f, c, events);
    /* C_RELAYING: bytes that come meanwhile (a pipelined request) wait in
     * the socket for answer_sent's look. */
}

static void accept_some(front *f)
{
    const app_config *cfg = f->app->cfg;
    /* A bounded batch: the connections accepted are looked at (their
     * requests screened and handed over) before the next batch, however
     * fast others connect. The listen socket is level-triggered: what is
     * left waiting comes back at the next epoll_wait. */
    for (int batch = 0; batch < ACCEPT_BATCH; batch++) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd = accept4(f->listen_fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            fconn *v = errno == EMFILE || errno == ENFILE ? victim(f) : NULL;
            if (v != NULL) {
                /* Out of descriptors: a connection makes room (victim()). */
                f->evicted++;
                front_conn_close(f, v);
                continue;
            }
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Nothing to close: rest instead of spinning on a level-triggered socket. */
                struct epoll_event ev = {.events = 0, .data.ptr = &TAG_LISTEN};
                (void)epoll_ctl(f->epfd, EPOLL_CTL_MOD, f->listen_fd, &ev);
                f->accept_paused_until_ms = cm_now_ms() + ACCEPT_PAUSE_MS;
            }
            return;
        }
        unsigned char key[16];
        addr_key(&sa, key);
        addr_count *ac = addr_get(f, key, 0);
        /* A proxy carries many clients: each is capped under its own
         * address once its PROXY header is read (proxy_take). */
        int trusted = f->n_trusted > 0 && proxy_cidrs_match(f->trusted, f->n_trusted, (const struct sockaddr *)&sa);
        if (!trusted && ac != NULL && cfg->max_conn_per_ip > 0 && ac->count >= cfg->max_conn_per_ip) {
            /* One address may not hold more than its share of the front. */
            f->refused_ip++;
            close(fd);
            continue;
        }
        /* Before the new connection's counter is taken: the victim may be
         * the last of that same address, whose counter then goes. */
        if (f->held >= cfg->max_connections) {
            fconn *v = victim(f);
            if (v == NULL) { /* every slot has a request in service: no room */
                close(fd);
                continue;
            }
            f->evicted++;
            front_conn_close(f, v);
        }
        ac = addr_get(f, key, 1);
        fconn *c = ac != NULL ? calloc(1, sizeof *c) : NULL;
        if (c == NULL) {
            if (ac != NULL) {
                ac->count++; /* addr_release frees the fresh, unused counter */
                addr_release(f, ac);
            }
            close(fd);
            continue;
        }
        c->fd = fd;
        c->pair_fd = -1;
        c->state = C_READING;
        c->addr = sa;
        c->addrlen = len;
        c->proxy_pending = trusted;
        c->ac = ac;
        ac->count++;
        c->accepted_ms = c->state_ms = cm_now_ms();
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET, .data.ptr = c};
        if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            addr_release(f, ac);
            close(fd);
            free(c);
            continue;
        }
        c->prev = f->newest;
        if (f->newest != NULL)
            f->newest->next = c;
        else
            f->oldest = c;
        f->newest = c;
        c->aprev = ac->newest;
        if (ac->newest != NULL)
            ac->newest->anext = c;
        else
            ac->oldest = c;
        ac->newest = c;
        f->held++;
    }
}

/* Closes every connection past one of its deadlines (accept.h). */
static void sweep(front *f, int64_t now)
{
    const app_config *cfg = f->app->cfg;
    int64_t head_ms = (int64_t)cfg->header_timeout_s * 1000;
    int64_t request_ms = (int64_t)cfg->request_timeout_s * 1000;
    for (fconn *c = f->oldest, *next; c != NULL; c = next) {
        next = c->next;
        int64_t age = now - c->accepted_ms;
        if (c->linger_until_ms != 0) {
            if (now >= c->linger_until_ms)
                front_conn_close(f, c);
            continue;
        }
        /* A client that does not read its answer: libmicrohttpd's idle
         * timeout, here. A request with libmicrohttpd is its to bound. */
        if (c->state == C_SENDING && now - c->state_ms >= (int64_t)cfg->conn_timeout_s * 1000) {
            front_conn_close(f, c);
            continue;
        }
        if (c->state != C_READING)
            continue;
        relay_pair_idle(f, c, now);
        /* Stopping: a connection waiting for a request gets none served. */
        if (f->quiesced) {
            front_conn_close(f, c);
            continue;
        }
        if (age >= request_ms) {
            f->cut_request++;
            front_conn_close(f, c);
        } else if (c->head_ms == 0 && head_ms > 0 && age >= head_ms) {
            f->cut_head++;
            front_conn_close(f, c);
        } else if (c->head_ms != 0 && cfg->min_body_rate > 0 && now - c->head_ms > BODY_GRACE_MS &&
                   (double)c->body_seen < (double)cfg->min_body_rate * (double)(now - c->head_ms - BODY_GRACE_MS) / 1000.0) {
            f->cut_rate++;
            front_conn_close(f, c);
        }
    }
    /* One line a second at most, with the counts since the last one. */
    if (f->cut_head + f->cut_request + f->cut_rate + f->evicted + f->refused_ip + f->refused_proxy > 0 && now - f->logged_ms >= 1000 &&
        log_enabled(LOG_WARN)) {
        f->logged_ms = now;
        log_event_line(LOG_WARN, LOG_EV_HTTPD,
                       "closed connections: %u head past %u s, %u request past %u s, %u body under %u B/s, "
                       "%u to make room, %u over the per-address cap, %u with a PROXY header refused",
                       f->cut_head, cfg->header_timeout_s, f->cut_request, cfg->request_timeout_s, f->cut_rate,
                       cfg->min_body_rate, f->evicted, f->refused_ip, f->refused_proxy);
        f->cut_head = f->cut_request = f->cut_rate = f->evicted = f->refused_ip = f->refused_proxy = 0;
    }
    if (f->accept_paused_until_ms != 0 && now >= f->accept_paused_until_ms && f->listen_fd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &TAG_LISTEN};
        (void)epoll_ctl(f->epfd, EPOLL_CTL_MOD, f->listen_fd, &ev);
        f->accept_paused_until_ms = 0;
    }
}

static void *front_main(void *arg)
{
    front *f = arg;
    struct epoll_event evs[256];
    int64_t next_sweep = cm_now_ms() + SWEEP_MS;

    for (;;) {
        int64_t now = cm_now_ms();
        int wait = next_sweep > now ? (int)(next_sweep - now) : 0;
        int n = epoll_wait(f->epfd, evs, 256, wait);
        if (__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE))
            break;
        for (int i = 0; i < n; i++) {
            void *tag = evs[i].data.ptr;
            if (tag == &TAG_LISTEN) {
                if (!f->quiesced)
                    accept_some(f);
            } else if (tag == &TAG_WAKE) {
                uint64_t v;
                (void)read(f->wake_fd, &v, sizeof v);
            } else if ((uintptr_t)tag & 1u) {
                fconn *c = (fconn *)((uintptr_t)tag & ~(uintptr_t)1u);
                if (!c->gone && c->pair_fd >= 0)
                    relay_pair_event(f, c);
            } else {
                conn_event(f, tag, evs[i].events);
            }
        }
        if (!f->quiesced && __atomic_load_n(&f->quiesce, __ATOMIC_ACQUIRE)) {
            /* Stop accepting: the kernel refuses new connections from here;
             * the sweep closes those waiting for a request. */
            (void)epoll_ctl(f->epfd, EPOLL_CTL_DEL, f->listen_fd, NULL);
            close(f->listen_fd);
            f->listen_fd = -1;
            f->quiesced = 1;
            next_sweep = 0;
        }
        now = cm_now_ms();
        if (now >= next_sweep) {
            sweep(f, now);
            next_sweep = now + SWEEP_MS;
        }
        free_gone(f);
        int busy = 0;
        for (fconn *c = f->oldest; c != NULL; c = c->next)
            busy += c->state != C_READING && c->linger_until_ms == 0;
        __atomic_store_n(&f->relaying, busy, __ATOMIC_RELEASE);
    }
    free_gone(f);
    return NULL;
}

int front_start(app *a, int listen_fd, struct MHD_Daemon *daemon, front **out, char *errbuf, size_t errlen)
{
    *out = NULL;
    front *f = calloc(1, sizeof *f);
    if (f == NULL) {
        close(listen_fd);
        snprintf(errbuf, errlen, "out of memory");
        return -1;
    }
    f->app = a;
    f->daemon = daemon;
    if (a->cfg->trusted_proxy != NULL &&
        proxy_cidrs_parse(a->cfg->trusted_proxy, f->trusted, &f->n_trusted, errbuf, errlen) != 0) {
        close(listen_fd);
        free(f);
        return -1;
    }
    f->listen_fd = listen_fd;
    f->wake_fd = -1;
    f->body_cap = a->cfg->max_body < FRONT_BODY_PEEK_MAX ? a->cfg->max_body : FRONT_BODY_PEEK_MAX;
    /* Head, body, and the chunked framing's overhead (a body whose framing
     * takes more than its data is refused 413 when it passes this). */
    f->scratch_cap = a->cfg->max_header + 2 * f->body_cap + 256;
    f->scratch = malloc(f->scratch_cap);
    f->epfd = epoll_create1(EPOLL_CLOEXEC);
    f->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = &TAG_LISTEN};
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &TAG_WAKE};
    if (f->scratch == NULL || f->epfd < 0 || f->wake_fd < 0 ||
        epoll_ctl(f->epfd, EPOLL_CTL_ADD, listen_fd, &lev) != 0 ||
        epoll_ctl(f->epfd, EPOLL_CTL_ADD, f->wake_fd, &wev) != 0 ||
        pthread_create(&f->thread, NULL, front_main, f) != 0) {
        snprintf(errbuf, errlen, "cannot start the accept thread: %s", strerror(errno));
        if (f->epfd >= 0)
            close(f->epfd);
        if (f->wake_fd >= 0)
            close(f->wake_fd);
        close(listen_fd);
        free(f->scratch);
        free(f);
        return -1;
    }
    *out = f;
    return 0;
}

void front_quiesce(front *f)
{
    if (f == NULL)
        return;
    __atomic_store_n(&f->quiesce, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(f->wake_fd, &one, sizeof one) != (ssize_t)sizeof one) {
        /* Only on overflow: the loop is awake anyway within SWEEP_MS. */
    }
}

int front_busy(front *f)
{
    return f != NULL && __atomic_load_n(&f->relaying, __ATOMIC_ACQUIRE) > 0;
}

void front_stop(front *f)
{
    if (f == NULL)
        return;
    __atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(f->wake_fd, &one, sizeof one) != (ssize_t)sizeof one) {
        /* An eventfd write fails only on overflow: the loop is awake anyway
         * within SWEEP_MS, when it reads stop. */
    }
    pthread_join(f->thread, NULL);
    /* New connections are refused by the kernel from here. */
    if (f->listen_fd >= 0)
        close(f->listen_fd);
    while (f->oldest != NULL)
        front_conn_close(f, f->oldest);
    free_gone(f);
    for (size_t i = 0; i < ADDR_BUCKETS; i++)
        while (f->buckets[i] != NULL) {
            addr_count *e = f->buckets[i];
            f->buckets[i] = e->next;
            free(e);
        }
    close(f->epfd);
    close(f->wake_fd);
    free(f->scratch);
    free(f);
}
