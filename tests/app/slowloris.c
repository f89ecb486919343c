/* slowloris.c - a handful of addresses try to lock everyone out: 5 source
 * addresses (127.0.0.2-6) hold 1,100 connections, more than the server's
 * 1,024 slots, with slow request heads, slow bodies, or slow keep-alive
 * traffic (a valid request every 20 s per connection), reopening every
 * connection the server closes (250 ms later). Meanwhile a normal client from 127.0.0.1
 * asks for a coupon once a second, ten times: with the server's defaults
 * it must get at least 9 answers within 15 s of the attack's start. */
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

#include <criterion/criterion.h>

#include "app_util.h"
#include "raw_conn.h"

const app_suite_plan app_plan = {.db_name = "slowloris.db", .nredis = 1, .nservers = 0};
TestSuite(app_slowloris, .init = app_suite_init, .fini = app_suite_fini, .timeout = 90);

enum { ADDRS = 5, PER_ADDR = 220, SLOTS = ADDRS * PER_ADDR };

typedef enum attack_kind { SLOW_HEAD, SLOW_BODY, SLOW_KEEPALIVE } attack_kind;

typedef struct slot {
    int fd;
    int64_t next_ms; /* when this connection sends its next bytes */
    int opened;      /* its opening went out */
    int64_t reopen_ms; /* closed: when it reconnects */
} slot;

typedef struct attack {
    const server_proc *srv;
    attack_kind kind;
    atomic_int stop;
    atomic_int open;     /* connections currently open */
    atomic_long opened;  /* connections opened in all (reopens included) */
    slot slots[SLOTS];
} attack;

/* A non-blocking connection from 127.0.0.(2+addr), or -1. */
static int attack_connect(const attack *a, int addr)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002u + (uint32_t)addr)};
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
static const char *opening(attack_kind k)
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
static const char *drip(attack_kind k, int64_t *period_ms)
{
    *period_ms = k == SLOW_HEAD ? 1000 : k == SLOW_BODY ? 2000 : 20000;
    return k == SLOW_KEEPALIVE ? opening(k) : "a";
}

/* A closed connection is reopened REOPEN_MS later: the attacker keeps
 * every slot it can, at the pace of a slow client, not in a hot loop (a
 * reconnect flood is a CPU flood, another test's subject; here it would
 * only measure which of the two processes gets the shared cores). */
#define REOPEN_MS 250

static void slot_close(attack *a, slot *s)
{
    close(s->fd);
    s->fd = -1;
    s->reopen_ms = test_now_ms() + REOPEN_MS;
    atomic_fetch_sub(&a->open, 1);
}

static void *attack_main(void *arg)
{
    attack *a = arg;
    static struct pollfd pfd[SLOTS];
    int64_t period;
    const char *d = drip(a->kind, &period);

    for (int i = 0; i < SLOTS; i++)
        a->slots[i].fd = -1;
    while (!atomic_load(&a->stop)) {
        int64_t now = test_now_ms();
        for (int i = 0; i < SLOTS; i++) {
            slot *s = &a->slots[i];
            if (s->fd < 0) {
                if (now < s->reopen_ms)
                    continue;
                s->fd = attack_connect(a, i % ADDRS);
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
        for (int i = 0; i < SLOTS; i++)
            pfd[i] = (struct pollfd){a->slots[i].fd, POLLIN, 0};
        if (poll(pfd, SLOTS, 50) > 0) {
            for (int i = 0; i < SLOTS; i++) {
                if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                    continue;
                char buf[4096];
                ssize_t r = recv(pfd[i].fd, buf, sizeof buf, MSG_DONTWAIT);
                if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
                    slot_close(a, &a->slots[i]);
            }
        }
    }
    for (int i = 0; i < SLOTS; i++)
        if (a->slots[i].fd >= 0)
            slot_close(a, &a->slots[i]);
    return NULL;
}

/* The normal client: one request a second from 127.0.0.1, ten times, from
 * 1 s after the attack's start; an answer counts when it is a 200 that
 * came within 15 s of the attack's start. */
static int normal_client(const server_proc *srv, long long id, int64_t attack_t0, char *last, size_t cap)
{
    char req[256];
    int n = snprintf(req, sizeof req, "GET /api/v1/coupon/%lld HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", id);
    int answered = 0;
    last[0] = '\0';
    for (int i = 0; i < 10; i++) {
        int64_t at = attack_t0 + 1000 + 1000 * i;
        while (test_now_ms() < at)
            test_sleep_ms(at - test_now_ms());
        int64_t left = attack_t0 + 15000 - test_now_ms();
        /* Each request may take up to 3 s (less near the end): a hung one
         * must not eat the next ones' turns. */
        int timeout = (int)(left < 3000 ? left : 3000);
        if (timeout <= 0)
            break;
        char answer[4096];
        int status = raw_exchange(srv, req, (size_t)n, answer, sizeof answer, timeout);
        if (status == 200 && test_now_ms() <= attack_t0 + 15000)
            answered++;
        else
            snprintf(last, cap, "request %d: status %d after the attack's %lld ms: %.200s", i, status,
                     (long long)(test_now_ms() - attack_t0), answer);
    }
    return answered;
}

static void run_attack(attack_kind kind, const char *name)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 0);
    attack *a = calloc(1, sizeof *a);
    cr_assert_not_null(a);
    a->srv = &g_app.srv[0];
    a->kind = kind;
    pthread_t t;
    int64_t t0 = test_now_ms();
    cr_assert_eq(pthread_create(&t, NULL, attack_main, a), 0);
    char last[512];
    int answered = normal_client(&g_app.srv[0], id, t0, last, sizeof last);
    int open_now = atomic_load(&a->open);
    atomic_store(&a->stop, 1);
    pthread_join(t, NULL);
    long opened = atomic_load(&a->opened);
    free(a);
    fprintf(stderr, "slowloris %s: the normal client got %d of 10 answers; attacker had %d connections open at the end, %ld opened in all\n",
            name, answered, open_now, opened);
    cr_assert_geq(answered, 9, "%s: the normal client got %d of 10 answers (attacker: %d open, %ld opened); last miss: %s",
                  name, answered, open_now, opened, last);
    /* The server is still whole after the attack. */
    http_reply r;
    app_request(&g_app.srv[0], "GET", "/healthz", NULL, NULL, &r);
    cr_assert_eq(r.status, 200, "healthz after the attack: %ld", r.status);
    http_reply_free(&r);
}

Test(app_slowloris, slow_heads_do_not_lock_out_a_normal_client)
{
    run_attack(SLOW_HEAD, "slow heads");
}

Test(app_slowloris, slow_bodies_do_not_lock_out_a_normal_client)
{
    run_attack(SLOW_BODY, "slow bodies");
}

Test(app_slowloris, slow_keepalive_traffic_does_not_lock_out_a_normal_client)
{
    run_attack(SLOW_KEEPALIVE, "slow keep-alive");
}
