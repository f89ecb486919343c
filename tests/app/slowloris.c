/* slowloris.c - a handful of addresses try to lock everyone out. 5 source
 * addresses (127.0.0.2-6) hold 1,100 connections, more than the server's
 * 1,024 slots, with slow request heads, slow bodies, or slow keep-alive
 * traffic (a valid request every 20 s per connection). They reopen every
 * connection the server closes (250 ms later). Meanwhile a normal client
 * from 127.0.0.1 asks for a coupon once a second, ten times. With the
 * server's defaults it must get at least 9 answers within 15 s of the
 * attack's start. */
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
#include "slow_conns.h"

const app_suite_plan app_plan = {.db_name = "slowloris.db", .nredis = 1, .nservers = 0};
TestSuite(app_slowloris, .init = app_suite_init, .fini = app_suite_fini, .timeout = 90);

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

static void run_attack(slow_kind kind, const char *name)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 0);
    slow_attack *a = calloc(1, sizeof *a);
    cr_assert_not_null(a);
    a->srv = &g_app.srv[0];
    a->kind = kind;
    a->first_addr = 2;
    a->addrs = 5;
    a->per_addr = 220;
    pthread_t t;
    int64_t t0 = test_now_ms();
    cr_assert_eq(pthread_create(&t, NULL, slow_attack_main, a), 0);
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
    /* The server is still whole after the attack: /healthz 200 within 5 s
     * (on shared cores the attack can starve Redis past a probe's 200 ms
     * timeout, and the prober then says so until its next probe). */
    long status = 0;
    for (int64_t until = test_now_ms() + 5000; status != 200 && test_now_ms() < until;) {
        http_reply r;
        app_request(&g_app.srv[0], "GET", "/healthz", NULL, NULL, &r);
        status = r.status;
        http_reply_free(&r);
        if (status != 200)
            test_sleep_ms(200);
    }
    cr_assert_eq(status, 200, "healthz after the attack: %ld", status);
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
