/* page_pacer.c - the page suite's relay (page_pacer.h): an acceptor thread
 * and one thread per connection, each relaying one request through libcurl
 * (http_request) and closing. Every wait is bounded by a poll of 100 ms
 * that also watches the stop flag, so page_pacer_stop ends everything,
 * even a connection Chromium opened ahead of need and never used. */
#include "page_pacer.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "procs.h"

/* A page load and ten polls of three fetches take about 35 connections. */
#define PACER_MAX_CONNS 256
#define PACER_HEAD_MAX 8192
/* A request head not complete by then is dropped. */
#define PACER_HEAD_TIMEOUT_MS 30000

typedef struct pacer_conn {
    page_pacer *p;
    int fd;
    pthread_t th;
} pacer_conn;

struct page_pacer {
    int listen_fd;
    atomic_int stop;
    pthread_t acceptor;
    char upstream[128];
    page_pacer_hook hook;
    void *user;
    pthread_mutex_t hook_mu; /* one hook call at a time */
    size_t n_conns;          /* written by the acceptor only; read by stop after joining it */
    pacer_conn conns[PACER_MAX_CONNS];
};

/* 1 when fd is readable, 0 when stopping or timed out, -1 on error. */
static int wait_readable(page_pacer *p, int fd, int64_t deadline_ms)
{
    while (!atomic_load(&p->stop) && test_now_ms() < deadline_ms) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, 100);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return -1;
    }
    return 0;
}

/* MSG_NOSIGNAL: Chromium may close first; that must not SIGPIPE the suite. */
static int send_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, buf, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Reads one request head (up to the blank line) into head; 0, or -1. */
static int read_head(page_pacer *p, int fd, char *head, size_t len)
{
    size_t n = 0;
    int64_t deadline = test_now_ms() + PACER_HEAD_TIMEOUT_MS;
    head[0] = '\0';
    while (strstr(head, "\r\n\r\n") == NULL) {
        if (n + 1 >= len || wait_readable(p, fd, deadline) != 1)
            return -1;
        ssize_t r = recv(fd, head + n, len - 1 - n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        n += (size_t)r;
        head[n] = '\0';
    }
    return 0;
}

static void relay_one(page_pacer *p, int fd)
{
    char head[PACER_HEAD_MAX], method[16], path[1024], url[1200], top[512];
    http_reply r;

    if (read_head(p, fd, head, sizeof head) != 0 || sscanf(head, "%15s %1023s", method, path) != 2)
        return;
    if (strcmp(path, "/metrics") == 0 && p->hook != NULL) {
        pthread_mutex_lock(&p->hook_mu);
        p->hook(p->user);
        pthread_mutex_unlock(&p->hook_mu);
    }
    int n = snprintf(url, sizeof url, "%s%s", p->upstream, path);
    if (n < 0 || (size_t)n >= sizeof url || http_request(method, url, NULL, NULL, &r) != 0) {
        static const char bad[] = "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)send_all(fd, bad, sizeof bad - 1);
        return;
    }
    n = snprintf(top, sizeof top,
                 "HTTP/1.1 %ld Relayed\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                 "Cache-Control: no-store\r\nConnection: close\r\n\r\n",
                 r.status, r.content_type[0] ? r.content_type : "application/octet-stream", r.body_len);
    if (n > 0 && (size_t)n < sizeof top && send_all(fd, top, (size_t)n) == 0)
        (void)send_all(fd, r.body, r.body_len);
    http_reply_free(&r);
}

static void *serve_conn(void *arg)
{
    pacer_conn *c = arg;
    relay_one(c->p, c->fd);
    close(c->fd);
    return NULL;
}

static void *accept_loop(void *arg)
{
    page_pacer *p = arg;
    while (!atomic_load(&p->stop)) {
        struct pollfd pfd = {.fd = p->listen_fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        int fd = accept(p->listen_fd, NULL, NULL);
        if (fd < 0)
            continue;
        if (p->n_conns == PACER_MAX_CONNS) {
            /* The page then shows a failed poll, and the suite says so. */
            fprintf(stderr, "page_pacer: more than %d connections; refusing\n", PACER_MAX_CONNS);
            close(fd);
            continue;
        }
        pacer_conn *c = &p->conns[p->n_conns];
        c->p = p;
        c->fd = fd;
        if (pthread_create(&c->th, NULL, serve_conn, c) != 0) {
            fprintf(stderr, "page_pacer: cannot start a connection thread\n");
            close(fd);
            continue;
        }
        p->n_conns++;
    }
    return NULL;
}

int page_pacer_start(const char *upstream, page_pacer_hook hook, void *user, page_pacer **out, char *url,
                     size_t url_len)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    page_pacer *p = calloc(1, sizeof *p);

    *out = NULL;
    if (p == NULL || strlen(upstream) >= sizeof p->upstream) {
        fprintf(stderr, "page_pacer: out of memory or upstream too long\n");
        free(p);
        return -1;
    }
    strcpy(p->upstream, upstream);
    p->hook = hook;
    p->user = user;
    pthread_mutex_init(&p->hook_mu, NULL);
    /* Port 0 on the socket we keep: no window in which another process
     * could take the port between choosing it and listening on it. */
    p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
        listen(p->listen_fd, 64) != 0 || getsockname(p->listen_fd, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "page_pacer: cannot listen on 127.0.0.1: %s\n", strerror(errno));
        goto fail;
    }
    if (pthread_create(&p->acceptor, NULL, accept_loop, p) != 0) {
        fprintf(stderr, "page_pacer: cannot start the acceptor thread\n");
        goto fail;
    }
    snprintf(url, url_len, "http://127.0.0.1:%d", ntohs(sa.sin_port));
    *out = p;
    return 0;
fail:
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    pthread_mutex_destroy(&p->hook_mu);
    free(p);
    return -1;
}

void page_pacer_stop(page_pacer *p)
{
    if (p == NULL)
        return;
    atomic_store(&p->stop, 1);
    pthread_join(p->acceptor, NULL);
    for (size_t i = 0; i < p->n_conns; i++)
        pthread_join(p->conns[i].th, NULL);
    close(p->listen_fd);
    pthread_mutex_destroy(&p->hook_mu);
    free(p);
}
