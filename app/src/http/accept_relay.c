/* accept_relay.c - the accept front's relay (accept.h): a screened request
 * goes to libmicrohttpd over a fresh socketpair, its answer comes back on
 * it and goes out to the client, whose connection stays alive when it
 * asked for that. Runs on the front's thread. */
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

void relay_pair_close(front *f, fconn *c)
{
    if (c->pair_fd < 0)
        return;
    (void)epoll_ctl(f->epfd, EPOLL_CTL_DEL, c->pair_fd, NULL);
    close(c->pair_fd);
    c->pair_fd = -1;
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

/* libmicrohttpd closed its end: the answer is whole (every answer says
 * "Connection: close" to it, reply.c). Out it goes to the client. */
static void answer_whole(front *f, fconn *c)
{
    static const char CONTINUE[] = "HTTP/1.1 100 Continue\r\n\r\n";
    relay_pair_close(f, c);
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
    if (c->keep_alive)
        drop_header(c, "Connection: close\r\n");
    c->state = C_SENDING;
    c->state_ms = cm_now_ms();
    relay_client_send(f, c);
}

void relay_pair_event(front *f, fconn *c)
{
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
            answer_whole(f, c);
            return;
        }
        c->out_len += (size_t)r;
    }
}

/* The whole request (len bytes, screened) is read from the client and
 * written to a socketpair whose other end libmicrohttpd gets, with the
 * client's address (its per-address limit and the admin back-off see the
 * client). The answer comes back on the pair (pair_event). */
void relay_start(front *f, fconn *c, int keep_alive, size_t len)
{
    int sv[2];
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
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        front_conn_close(f, c);
        return;
    }
    /* At most the head and body limits' worth: a socketpair's buffer
     * (over 200 KiB on Linux) takes it in one write. */
    ssize_t w = send(sv[0], f->scratch, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w != (ssize_t)len) {
        close(sv[0]);
        close(sv[1]);
        front_conn_close(f, c);
        return;
    }
    c->pair_fd = sv[0];
    /* The pair's epoll tag: the fconn's address with its low bit set
     * (an fconn is malloc'd, so that bit is otherwise 0). */
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = (void *)((uintptr_t)c | 1u)};
    if (epoll_ctl(f->epfd, EPOLL_CTL_ADD, sv[0], &ev) != 0) {
        close(sv[1]);
        front_conn_close(f, c);
        return;
    }
    /* libmicrohttpd closes sv[1] itself when it refuses it (its limits);
     * the pair then reads EOF with no answer, and the client is closed. */
    if (MHD_add_connection(f->daemon, sv[1], (const struct sockaddr *)&c->addr, c->addrlen) != MHD_YES)
        log_event_line(LOG_WARN, LOG_EV_HTTPD, "a screened request was refused by the HTTP library: %s",
                       strerror(errno));
    c->keep_alive = keep_alive;
    c->state = C_RELAYING;
    c->state_ms = cm_now_ms();
}
