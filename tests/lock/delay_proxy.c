/* delay_proxy.c - see delay_proxy.h. One thread accepts; each connection
 * gets one thread that polls both sockets (100 ms ticks, so a stop is seen
 * within one) and copies what arrives. Bounded: at most PROXY_CONNS
 * connections, every loop checks the stop flag. */
#define _GNU_SOURCE
#include "delay_proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define PROXY_CONNS 32
#define PROXY_PATTERN 256

typedef struct pconn {
    struct delay_proxy *p;
    int cfd, sfd;
    pthread_t th;
    int started;
} pconn;

struct delay_proxy {
    int lfd, port, upstream;
    atomic_int stop;
    pthread_t acceptor;
    pthread_mutex_t mu;
    char pattern[PROXY_PATTERN];
    size_t plen;
    int delay_ms;
    int held;
    atomic_int lag_ms;
    pconn conns[PROXY_CONNS];
    size_t nconns;
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int write_all(int fd, const char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Whether this chunk is to be held back (and for how long): once per arming. */
static int hold_for(struct delay_proxy *p, const char *buf, size_t n)
{
    int ms = 0;

    pthread_mutex_lock(&p->mu);
    if (p->plen > 0 && memmem(buf, n, p->pattern, p->plen) != NULL) {
        ms = p->delay_ms;
        p->plen = 0;
        p->held++;
    }
    pthread_mutex_unlock(&p->mu);
    return ms;
}

static long long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *relay(void *arg)
{
    pconn *pc = arg;
    char buf[16384], lagged[16384];
    size_t nlagged = 0; /* a chunk held back by the lag, sent before the next */
    long long lagged_at = 0;

    while (!atomic_load(&pc->p->stop)) {
        struct pollfd pfd[2] = {{pc->cfd, POLLIN, 0}, {pc->sfd, POLLIN, 0}};
        int lag = atomic_load(&pc->p->lag_ms), tick = 100, r;

        if (nlagged > 0) {
            long long left = lagged_at + lag - mono_ms();

            if (left <= 0) {
                if (write_all(pc->sfd, lagged, nlagged) != 0)
                    break;
                nlagged = 0;
            } else if (left < tick) {
                tick = (int)left;
            }
        }
        r = poll(pfd, 2, tick);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        if (pfd[0].revents) {
            ssize_t n = recv(pc->cfd, buf, sizeof buf, 0);
            int ms;

            if (n <= 0)
                break;
            /* The client's next chunk: the one held back goes first. */
            if (nlagged > 0 && write_all(pc->sfd, lagged, nlagged) != 0)
                break;
            nlagged = 0;
            /* Read again: a lag set while this thread sat in poll() must
             * hold the very chunk that woke it, not the one after. */
            lag = atomic_load(&pc->p->lag_ms);
            if (lag > 0) {
                memcpy(lagged, buf, (size_t)n);
                nlagged = (size_t)n;
                lagged_at = mono_ms();
                continue;
            }
            if ((ms = hold_for(pc->p, buf, (size_t)n)) > 0)
                sleep_ms(ms);
            if (write_all(pc->sfd, buf, (size_t)n) != 0)
                break;
        }
        if (pfd[1].revents) {
            ssize_t n = recv(pc->sfd, buf, sizeof buf, 0);

            if (n <= 0 || write_all(pc->cfd, buf, (size_t)n) != 0)
                break;
        }
    }
    shutdown(pc->cfd, SHUT_RDWR);
    shutdown(pc->sfd, SHUT_RDWR);
    return NULL;
}

static int connect_upstream(int port)
{
    struct sockaddr_in a = {0};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (fd < 0)
        return -1;
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void *acceptor(void *arg)
{
    struct delay_proxy *p = arg;

    while (!atomic_load(&p->stop)) {
        struct pollfd pfd = {p->lfd, POLLIN, 0};
        int cfd, sfd, one = 1;
        pconn *pc;

        if (poll(&pfd, 1, 100) <= 0)
            continue;
        cfd = accept4(p->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (cfd < 0)
            continue;
        (void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        sfd = connect_upstream(p->upstream);
        if (sfd < 0 || p->nconns == PROXY_CONNS) {
            close(cfd);
            if (sfd >= 0)
                close(sfd);
            continue;
        }
        pc = &p->conns[p->nconns];
        pc->p = p;
        pc->cfd = cfd;
        pc->sfd = sfd;
        if (pthread_create(&pc->th, NULL, relay, pc) != 0) {
            close(cfd);
            close(sfd);
            continue;
        }
        pc->started = 1;
        p->nconns++;
    }
    return NULL;
}

delay_proxy *delay_proxy_start(int upstream_port)
{
    struct delay_proxy *p = calloc(1, sizeof(*p));
    struct sockaddr_in a = {0};
    socklen_t alen = sizeof a;

    if (p == NULL)
        return NULL;
    p->upstream = upstream_port;
    pthread_mutex_init(&p->mu, NULL);
    p->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (p->lfd < 0 || bind(p->lfd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(p->lfd, 64) != 0 || getsockname(p->lfd, (struct sockaddr *)&a, &alen) != 0) {
        fprintf(stderr, "delay_proxy: cannot listen: %s\n", strerror(errno));
        if (p->lfd >= 0)
            close(p->lfd);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    p->port = ntohs(a.sin_port);
    if (pthread_create(&p->acceptor, NULL, acceptor, p) != 0) {
        fprintf(stderr, "delay_proxy: no thread\n");
        close(p->lfd);
        pthread_mutex_destroy(&p->mu);
        free(p);
        return NULL;
    }
    return p;
}

int delay_proxy_port(const delay_proxy *p)
{
    return p->port;
}

void delay_proxy_arm(delay_proxy *p, const char *pattern, size_t len, int delay_ms)
{
    pthread_mutex_lock(&p->mu);
    if (len > sizeof p->pattern)
        len = 0;
    memcpy(p->pattern, pattern, len);
    p->plen = len;
    p->delay_ms = delay_ms;
    pthread_mutex_unlock(&p->mu);
}

void delay_proxy_lag(delay_proxy *p, int max_ms)
{
    atomic_store(&p->lag_ms, max_ms > 0 ? max_ms : 0);
}

int delay_proxy_held(delay_proxy *p)
{
    int n;

    pthread_mutex_lock(&p->mu);
    n = p->held;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void delay_proxy_stop(delay_proxy *p)
{
    if (p == NULL)
        return;
    atomic_store(&p->stop, 1);
    pthread_join(p->acceptor, NULL);
    for (size_t i = 0; i < p->nconns; i++) {
        if (p->conns[i].started)
            pthread_join(p->conns[i].th, NULL);
        close(p->conns[i].cfd);
        close(p->conns[i].sfd);
    }
    close(p->lfd);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
