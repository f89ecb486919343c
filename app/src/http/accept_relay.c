/* accept_relay.c - the accept front's relay (accept.h): a screened request
 * goes to libmicrohttpd over the client connection's socketpair (made at
 * its first request, kept while the client keeps its connection alive and
 * is not idle long), its answer comes back on it, whole at the end its
 * Content-Length gives, and goes out to the client. libmicrohttpd only
 * ever reads what the front writes: one screened request at a time, the
 * next one only after the answer to the last. Runs on the front's thread. */
#include "http/accept_internal.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"
#include "core/log.h"
#include "http/head_parse.h"

void relay_pair_close(front *f, fconn *c)
{
    if (c->pair_fd < 0)
        return;
    (void)epoll_ctl(f->epfd, EPOLL_CTL_DEL, c->pair_fd, NULL);
    close(c->pair_fd);
    c->pair_fd = -1;
}

/* How long a pair may idle: PAIR_IDLE_MS, and at most half libmicrohttpd's
 * idle timeout, so it never closes a pair just as a request goes in. */
static int64_t pair_idle_limit_ms(const front *f)
{
    int64_t half = (int64_t)f->app->cfg->conn_timeout_s * 500;
    return half < PAIR_IDLE_MS ? half : PAIR_IDLE_MS;
}

void relay_pair_idle(front *f, fconn *c, int64_t now)
{
    if (c->pair_fd >= 0 && c->state == C_READING && now - c->state_ms >= pair_idle_limit_ms(f))
        relay_pair_close(f, c);
}

/* The answer is out: a kept-alive connection waits for its next request
 * (its deadlines count from now), any other is closed after the client
 * has read the answer. */
static void answer_sent(front *f, fconn *c)
{
    free(c->out);
    c->out = NULL;
    c->out_len = c->out_cap = c->out_off = 0;
    c->served++;
    if (!c->keep_alive) {
        (void)shutdown(c->fd, SHUT_WR);
        c->linger_until_ms = cm_now_ms() + LINGER_MS;
        if (front_drain(c->fd))
            front_conn_close(f, c);
        return;
    }
    c->state = C_READING;
    c->state_ms = c->accepted_ms = cm_now_ms();
    c->head_ms = 0;
    c->body_seen = 0;
    c->continue_sent = 0;
    /* A pipelined request may be in the socket already: edge-triggered
     * epoll will not report it again. */
    front_conn_look(f, c, 0);
}

void relay_client_send(front *f, fconn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t w = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return; /* EPOLLOUT brings us back */
        if (w <= 0) {
            front_conn_close(f, c);
            return;
        }
        c->out_off += (size_t)w;
    }
    answer_sent(f, c);
}

/* Removes the first header line named name (with its CRLF) from the head
 * of the answer in c->out. */
static void drop_header(fconn *c, const char *line)
{
    size_t ln = strlen(line);
    char *end = NULL;
    for (size_t i = 0; i + 3 < c->out_len; i++)
        if (memcmp(c->out + i, "\r\n\r\n", 4) == 0) {
            end = c->out + i + 2;
            break;
        }
    if (end == NULL)
        return;
    for (char *p = c->out; p != NULL && p < end;) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            return;
        p = nl + 1;
        if ((size_t)(end - p) >= ln && strncasecmp(p, line, ln) == 0) {
            memmove(p, p + ln, c->out_len - (size_t)(p + ln - c->out));
            c->out_len -= ln;
            return;
        }
    }
}

/* The answer in c->out is whole: out it goes to the client. */
static void answer_out(front *f, fconn *c)
{
    static const char CONTINUE[] = "HTTP/1.1 100 Continue\r\n\r\n";
    /* The client had its "100 Continue" from us already. */
    if (c->continue_sent && c->out_len >= sizeof CONTINUE - 1 &&
        memcmp(c->out, CONTINUE, sizeof CONTINUE - 1) == 0) {
        memmove(c->out, c->out + sizeof CONTINUE - 1, c->out_len - (sizeof CONTINUE - 1));
        c->out_len -= sizeof CONTINUE - 1;
    }
    if (c->out_len == 0 || strncmp(c->out, "HTTP/1.", c->out_len < 7 ? c->out_len : 7) != 0) {
        front_conn_close(f, c); /* no answer at all: nothing to relay */
        return;
    }
    /* While stopping, every connection closes after its answer. */
    if (atomic_load(&f->app->stopping) || f->quiesced)
        c->keep_alive = 0;
    /* libmicrohttpd says close when the client asked for it (it closes
     * its end then) or when it was handed a raw socket (reply.c): the
     * client's connection is the front's to keep. */
    if (c->keep_alive)
        drop_header(c, "Connection: close\r\n");
    c->state = C_SENDING;
    c->state_ms = cm_now_ms();
    relay_client_send(f, c);
}

/* Where the header named name (with its colon) starts in the head
 * [p, end), or NULL. */
static const char *find_header(const char *p, const char *end, const char *name)
{
    size_t ln = strlen(name);
    for (const char *q = p; q != NULL && q < end;) {
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        if (nl == NULL)
            return NULL;
        q = nl + 1;
        if ((size_t)(end - q) > ln && strncasecmp(q, name, ln) == 0)
            return q + ln;
    }
    return NULL;
}

/* How much of c->out the answer takes: its length once it is whole, 0
 * while it is not, (size_t)-1 when only the pair's end can end it (no
 * Content-Length, no chunked framing: never from reply.c, whose answers
 * have one). A 1xx interim head goes out with the final answer. */
static size_t answer_end(fconn *c)
{
    for (;;) {
        const char *p = c->out + c->ans_off;
        size_t n = c->out_len - c->ans_off;
        const char *hend = NULL;
        for (size_t i = 0; i + 3 < n; i++)
            if (memcmp(p + i, "\r\n\r\n", 4) == 0) {
                hend = p + i + 4;
                break;
            }
        if (hend == NULL)
            return 0;
        if (n < 12 || strncmp(p, "HTTP/1.", 7) != 0)
            return (size_t)-1; /* not an answer: the EOF path refuses it */
        unsigned status = (unsigned)(p[9] - '0') * 100 + (unsigned)(p[10] - '0') * 10 + (unsigned)(p[11] - '0');
        size_t head = c->ans_off + (size_t)(hend - p);
        if (status >= 100 && status < 200) {
            c->ans_off = head; /* "100 Continue": the final answer follows */
            continue;
        }
        /* Answers without a body whatever their headers say (RFC 9112 6.3). */
        if (c->head_request || status == 204 || status == 304)
            return head;
        const char *te = find_header(p, hend, "Transfer-Encoding:");
        if (te != NULL) {
            size_t used = 0;
            chunk_status cs = chunked_scan(c->out + head, c->out_len - head, ANSWER_MAX, &used);
            if (cs == CHUNK_DONE)
                return head + used;
            return cs == CHUNK_INCOMPLETE ? 0 : (size_t)-1;
        }
        const char *cl = find_header(p, hend, "Content-Length:");
        if (cl == NULL)
            return (size_t)-1;
        while (*cl == ' ' || *cl == '\t')
            cl++;
        char *stop = NULL;
        unsigned long long len = strtoull(cl, &stop, 10);
        if (stop == cl || len > ANSWER_MAX)
            return (size_t)-1;
        return c->out_len - head >= len ? head + (size_t)len : 0;
    }
}

void relay_pair_event(front *f, fconn *c)
{
    if (c->state != C_RELAYING) {
        /* An idle pair: libmicrohttpd closed it (its idle timeout, or after
         * an answer that said close). The next request gets a new one. */
        relay_pair_close(f, c);
        return;
    }
    for (;;) {
        if (c->out_cap - c->out_len < 16384) {
            size_t cap = c->out_cap ? c->out_cap * 2 : 32768;
            char *p = cap <= ANSWER_MAX ? realloc(c->out, cap) : NULL;
            if (p == NULL) {
                front_conn_close(f, c);
                return;
            }
            c->out = p;
            c->out_cap = cap;
        }
        ssize_t r = recv(c->pair_fd, c->out + c->out_len, c->out_cap - c->out_len, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r <= 0) {
            /* The pair's end: whole only when nothing else ends it. */
            size_t end = answer_end(c);
            relay_pair_close(f, c);
            if (end != (size_t)-1 || c->out_len == 0)
                front_conn_close(f, c); /* cut short, or no answer: nothing whole to relay */
            else {
                c->keep_alive = 0; /* its length is its end: the client's too */
                answer_out(f, c);
            }
            return;
        }
        c->out_len += (size_t)r;
        size_t end = answer_end(c);
        if (end == 0 || end == (size_t)-1)
            continue;
        if (end != c->out_len) {
            /* More than one answer to one request: libmicrohttpd and the
             * front disagree on the framing; neither connection is safe. */
            front_conn_close(f, c);
            return;
        }
        /* The answer is whole; libmicrohttpd closes its end of the pair
         * when its answer said close (the pair's next event then closes ours). */
        answer_out(f, c);
        return;
    }
}

/* A new socketpair for c, its other end handed to libmicrohttpd with the
 * client's address (its per-address limit and the admin back-off see the
 * client); 0, or -1 when there is none. */
static int pair_open(front *f, fconn *c)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return -1;
    /* The pair's epoll tag: the fconn's address with its low bit set
     * (an fconn is malloc'd, so that bit is otherwise 0). */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = (void *)((uintptr_t)c | 1u)};
    if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, sv[0], &ev) != 0) {
        close(sv[0]);
        close(sv[1]);
        return -1;
    }
    c->pair_fd = sv[0];
    /* libmicrohttpd closes sv[1] itself when it refuses it (its limits);
     * the pair then reads EOF with no answer, and the client is closed. */
    if (MHD_add_connection(f->daemon, sv[1], (const struct sockaddr *)&c->addr, c->addrlen) != MHD_YES)
        log_event_line(LOG_WARN, LOG_EV_HTTPD, "a screened request was refused by the HTTP library: %s",
                       strerror(errno));
    return 0;
}

/* The whole request (len bytes, screened) is read from the client and
 * written to c's socketpair (a new one at the connection's first request
 * or after the last was closed). The answer comes back on the pair
 * (pair_event). */
void relay_start(front *f, fconn *c, int keep_alive, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t r = recv(c->fd, f->scratch + got, len - got, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) { /* the bytes peeked are in the socket: only a reset gets here */
            front_conn_close(f, c);
            return;
        }
        got += (size_t)r;
    }
    c->head_request = len >= 5 && memcmp(f->scratch, "HEAD ", 5) == 0;
    /* At most the head and body limits' worth: a socketpair's buffer
     * (over 200 KiB on Linux) takes it in one write, libmicrohttpd having
     * read the last request whole before it answered. */
    for (int fresh = 0; fresh < 2; fresh++) {
        if (c->pair_fd < 0 && pair_open(f, c) != 0)
            break;
        ssize_t w = send(c->pair_fd, f->scratch, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w == (ssize_t)len) {
            c->keep_alive = keep_alive;
            c->state = C_RELAYING;
            c->state_ms = cm_now_ms();
            c->ans_off = 0;
            return;
        }
        /* A kept pair libmicrohttpd closed meanwhile (EPIPE: it read none
         * of this request): once more on a new one. */
        relay_pair_close(f, c);
        if (w >= 0 || (errno != EPIPE && errno != ECONNRESET))
            break;
    }
    front_conn_close(f, c);
}
