/* slow_conns.c - the slow-client attacker (slow_conns.h). */
#include "slow_conns.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A non-blocking connection from 127.0.0.(first_addr + addr), or -1. */
static int attack_connect(const slow_attack *a, int addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000000u + (uint32_t)(a->first_addr + addr))};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    sa.sin_port = htons((uint16_t)a->srv->port);
    sa.sin_addr.s_addr = htonl(0x7f000001u);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The first bytes of a fresh connection. */
static const char *opening(slow_kind k)
{
    switch (k) {
    case SLOW_HEAD:
        return "GET /api/v1/coupon HTTP/1.1\r\nHost: x\r\nX-Drip: ";
    case SLOW_BODY:
        return "POST /api/v1/coupon/add?coupon_id=1&user_id=slow HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n";
    case SLOW_KEEPALIVE:
        return "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    }
    return "";
}

/* What a connection sends every period after the opening, and the period:
 * a header byte a second, a body byte every 2 s, a whole valid request
 * every 20 s (55 requests/s over all the connections). */
static const char *drip(slow_kind k, int64_t *period_ms)
{
    *period_ms = k == SLOW_HEAD ? 1000 : k == SLOW_BODY ? 2000 : 20000;
    return k == SLOW_KEEPALIVE ? opening(k) : "a";
}

/* A closed connection is reopened REOPEN_MS later: the attacker keeps
 * every slot it can, at the pace of a slow client, not in a hot loop. A
 * reconnect flood is a CPU flood, another test's subject; here it would
 * only measure which of the two processes gets the shared cores. */
#define REOPEN_MS 250

static void slot_close(slow_attack *a, slow_slot *s)
{
    close(s->fd);
    s->fd = -1;
    s->reopen_ms = test_now_ms() + REOPEN_MS;
    atomic_fetch_sub(&a->open, 1);
}

void *slow_attack_main(void *arg)
{
    slow_attack *a = arg;
    struct pollfd *pfd = calloc(SLOW_MAX_SLOTS, sizeof *pfd);
    int slots = a->addrs * a->per_addr;
    int64_t period;
    const char *d = drip(a->kind, &period);

    for (int i = 0; i < slots; i++)
        a->slots[i].fd = -1;
    while (pfd != NULL && !atomic_load(&a->stop)) {
        int64_t now = test_now_ms();
        for (int i = 0; i < slots; i++) {
            slow_slot *s = &a->slots[i];
            if (s->fd < 0) {
                if (now < s->reopen_ms)
                    continue;
                s->fd = attack_connect(a, i % a->addrs);
                if (s->fd < 0)
                    continue;
                atomic_fetch_add(&a->open, 1);
                atomic_fetch_add(&a->opened, 1);
                s->opened = 0;
                s->next_ms = now;
            }
            if (now >= s->next_ms) {
                const char *o = s->opened ? d : opening(a->kind);
                ssize_t w = send(s->fd, o, strlen(o), MSG_NOSIGNAL);
                if (w < 0 && errno != EAGAIN && errno != ENOTCONN) {
                    slot_close(a, s);
                    continue;
                }
                /* Not connected yet (EAGAIN, ENOTCONN): the opening goes
                 * out on a later pass. The first drips are spread over
                 * the period so that they do not all come at once. */
                if (w > 0 && !s->opened) {
                    s->opened = 1;
                    s->next_ms = now + period - (i % 20) * period / 20;
                } else if (w > 0) {
                    s->next_ms = now + period;
                }
            }
        }
        /* Answers are read and dropped; a close is seen here. */
        for (int i = 0; i < slots; i++)
            pfd[i] = (struct pollfd){a->slots[i].fd, POLLIN, 0};
        if (poll(pfd, slots, 50) > 0) {
            for (int i = 0; i < slots; i++) {
                if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                char buf[4096];
                ssize_t r = recv(pfd[i].fd, buf, sizeof buf, MSG_DONTWAIT);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                    slot_close(a, &a->slots[i]);
            }
        }
    }
    for (int i = 0; i < slots; i++)
        if (a->slots[i].fd >= 0)
            slot_close(a, &a->slots[i]);
    free(pfd);
    return NULL;
}

