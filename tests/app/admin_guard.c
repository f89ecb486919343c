/* admin_guard.c - the admin back-off holds:
 *   - failures are kept per exact address: 127.0.0.9 and 127.0.1.102 once
 *     shared a record and, alternating, reset each other's count, so every
 *     wrong guess answered 401 and none 429;
 *   - a waiting address is refused every attempt, the right token too (a
 *     429 must not mean "wrong"), while another address is served;
 *   - there is no cap over all addresses: one guess from each of 200
 *     addresses (loopback owns the whole 127/8; the client socket is bound
 *     to each source address) is answered 401 each, and the real admin
 *     beside them is served;
 *   - an --admin-token shorter than 32 characters is refused at start
 *     (exit 2), from the command line and from the environment.
 * Real processes: one redis-server, one coupon-server per test. */
#define _GNU_SOURCE /* strcasestr */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "guard.db", .nredis = 1, .nservers = 0};
TestSuite(app_admin_guard, .init = app_suite_init, .fini = app_suite_fini, .timeout = 90);

/* The server's bounds (app/src/http/admin_guard.h, core/config.h),
 * restated as the contract the tests hold the server to. */
#define FREE_TRIES 5
#define MIN_TOKEN 32

typedef struct guess {
    long status;        /* 0: no answer */
    long long code;     /* the envelope's code, -1 if none */
    int retry_after;    /* the Retry-After header's seconds, -1 if none */
    char msg[160];
} guess;

/* POST /api/v1/admin/coupon with "Bearer <token>" on a fresh connection
 * from source address src to 127.0.0.1:port; the answer into *g. Every
 * step is bounded (5 s socket timeouts). */
static void admin_post(int port, const char *src, const char *token, guess *g)
{
    static const char body[] = "{\"name\":\"g\",\"stock\":1}";
    char req[512], buf[8192];
    size_t got = 0;
    struct sockaddr_in from = {.sin_family = AF_INET}, to = {.sin_family = AF_INET};
    struct timeval tv = {.tv_sec = 5};

    memset(g, 0, sizeof *g);
    g->code = -1;
    g->retry_after = -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    cr_assert_eq(inet_pton(AF_INET, src, &from.sin_addr), 1, "bad source address %s", src);
    cr_assert_eq(inet_pton(AF_INET, "127.0.0.1", &to.sin_addr), 1);
    to.sin_port = htons((uint16_t)port);
    cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    cr_assert_eq(setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
    /* The source address is the client's identity for the back-off. */
    cr_assert_eq(bind(fd, (struct sockaddr *)&from, sizeof from), 0, "bind %s: %s", src, strerror(errno));
    cr_assert_eq(connect(fd, (struct sockaddr *)&to, sizeof to), 0, "connect from %s: %s", src, strerror(errno));
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     token, sizeof body - 1, body);
    cr_assert(n > 0 && (size_t)n < sizeof req);
    cr_assert_eq(write(fd, req, (size_t)n), n, "write from %s: %s", src, strerror(errno));
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof buf - 1 - got);
        if (r <= 0)
            break; /* EOF (Connection: close), or the bounded timeout */
        got += (size_t)r;
        if (got == sizeof buf - 1)
            break;
    }
    close(fd);
    buf[got] = '\0';
    if (sscanf(buf, "HTTP/1.%*d %ld", &g->status) != 1)
        g->status = 0;
    const char *ra = strcasestr(buf, "\r\nRetry-After:");
    if (ra != NULL)
        g->retry_after = atoi(ra + strlen("\r\nRetry-After:"));
    const char *json = strstr(buf, "\r\n\r\n");
    json_t *root = json != NULL ? json_loads(json + 4, 0, NULL) : NULL;
    if (json_is_integer(json_object_get(root, "code")))
        g->code = json_integer_value(json_object_get(root, "code"));
    if (json_is_string(json_object_get(root, "msg")))
        snprintf(g->msg, sizeof g->msg, "%s", json_string_value(json_object_get(root, "msg")));
    json_decref(root);
}

static long long coupons(void)
{
    return app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon");
}

/* The pair that shared a slot of the old 256-slot table (FNV-1a of the
 * address, modulo 256: both 69), alternating: each must reach its own
 * wait after FREE_TRIES failures. */
Test(app_admin_guard, colliding_addresses_both_wait)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    const int port = g_app.srv[0].port;
    const char *pair[2] = {"127.0.0.9", "127.0.1.102"};
    guess g;

    for (int round = 0; round < FREE_TRIES + 2; round++) {
        for (int k = 0; k < 2; k++) {
            admin_post(port, pair[k], "wrong-token-0123456789", &g);
            if (round < FREE_TRIES) {
                cr_assert(g.status == 401 && g.code == 1007, "guess %d from %s: %ld / %lld, expected 401 / 1007",
                          round + 1, pair[k], g.status, g.code);
            } else {
                cr_assert(g.status == 429 && g.code == 1007 && g.retry_after >= 1,
                          "guess %d from %s: %ld / %lld (Retry-After %d), expected 429 / 1007 with Retry-After",
                          round + 1, pair[k], g.status, g.code, g.retry_after);
                cr_assert(strstr(g.msg, "this address") != NULL, "msg: %s", g.msg);
            }
        }
    }
    /* The back-off comes before the token: a waiting address is refused
     * the right token too, so its 429s say nothing about its guesses;
     * another address is served at once. */
    cr_assert_eq(coupons(), 0);
    admin_post(port, pair[0], APP_TOKEN, &g);
    cr_assert(g.status == 429 && g.code == 1007 && g.retry_after >= 1,
              "the right token from a waiting address: %ld / %lld (%s), expected 429", g.status, g.code, g.msg);
    const int wait_s = g.retry_after;
    admin_post(port, "127.0.0.1", APP_TOKEN, &g);
    cr_assert_eq(g.status, 201, "the right token from another address: %ld (%s)", g.status, g.msg);
    cr_assert_eq(coupons(), 1);
    /* After its wait the address may try again, and the right token is served. */
    test_sleep_ms((int64_t)wait_s * 1000 + 100);
    admin_post(port, pair[0], APP_TOKEN, &g);
    cr_assert_eq(g.status, 201, "the right token after the wait: %ld (%s)", g.status, g.msg);
    cr_assert_eq(coupons(), 2);
}

#define N_ADDRS 200
#define N_THREADS 4

typedef struct spray {
    int port;
    int first;           /* this thread's addresses: 127.0.2.<first + i> ... */
    int count;
    guess g[N_ADDRS];
} spray;

/* One wrong guess from each of this thread's addresses: none comes near
 * its own FREE_TRIES. */
static void *spray_main(void *arg)
{
    spray *s = arg;
    char src[32];
    for (int i = 0; i < s->count; i++) {
        int host = s->first + i; /* 0..199 over 127.0.2.1 - 127.0.2.200 */
        snprintf(src, sizeof src, "127.0.2.%d", host + 1);
        admin_post(s->port, src, "wrong-token-0123456789", &s->g[i]);
    }
    return NULL;
}

/* No cap over all addresses: a cap there would let guessers on many
 * addresses lock the admin out. Each address's single guess is a plain
 * 401, and the real admin, guessing beside them, is served. */
Test(app_admin_guard, many_addresses_never_lock_the_admin_out)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    static spray sp[N_THREADS];
    pthread_t th[N_THREADS];

    for (int t = 0; t < N_THREADS; t++) {
        sp[t].port = g_app.srv[0].port;
        sp[t].first = t * (N_ADDRS / N_THREADS);
        sp[t].count = N_ADDRS / N_THREADS;
        cr_assert_eq(pthread_create(&th[t], NULL, spray_main, &sp[t]), 0);
    }
    guess admin;
    admin_post(g_app.srv[0].port, "127.0.3.1", APP_TOKEN, &admin);
    for (int t = 0; t < N_THREADS; t++)
        cr_assert_eq(pthread_join(th[t], NULL), 0);
    cr_assert_eq(admin.status, 201, "the admin beside %d guessing addresses: %ld (%s)", N_ADDRS, admin.status,
                 admin.msg);
    for (int t = 0; t < N_THREADS; t++)
        for (int i = 0; i < sp[t].count; i++) {
            const guess *g = &sp[t].g[i];
            cr_assert(g->status == 401 && g->code == 1007, "a first guess answered %ld / %lld: %s", g->status,
                      g->code, g->msg);
        }
    cr_assert_eq(coupons(), 1);
}

/* A token shorter than MIN_TOKEN is refused at start: exit 2 and one line
 * that names the option, the bound and how to make a token. */
static void expect_short_token_refused(const char *const *argv, const char *name)
{
    char *out = NULL;
    int rc = run_command(argv, 10000, &out);
    cr_assert_eq(rc, 2, "a short token: exit %d, expected 2; output: %s", rc, out ? out : "");
    cr_assert(out != NULL && strstr(out, name) != NULL && strstr(out, "32") != NULL &&
                  strstr(out, "openssl rand") != NULL,
              "no line naming %s, the bound and how to make a token: %s", name, out ? out : "(none)");
    free(out);
}

Test(app_admin_guard, short_token_refused_at_start)
{
    APP_SETUP_OK();
    const char *bin = getenv("COUPON_SERVER_BIN");
    cr_assert_not_null(bin, "COUPON_SERVER_BIN is not set");
    static const char t31[] = "0123456789abcdef0123456789abcde", t32[] = "0123456789abcdef0123456789abcdef";
    cr_assert_eq(strlen(t31), MIN_TOKEN - 1);
    const char *argv_short[] = {bin, "--listen", "127.0.0.1:0", "--db", g_app.db, "--redis", g_app.redis[0].addr,
                                "--admin-token", t31, NULL};
    expect_short_token_refused(argv_short, "--admin-token");
    cr_assert_eq(setenv("COUPON_ADMIN_TOKEN", "secret", 1), 0);
    const char *argv_env[] = {bin, "--listen", "127.0.0.1:0", "--db", g_app.db, "--redis", g_app.redis[0].addr, NULL};
    expect_short_token_refused(argv_env, "COUPON_ADMIN_TOKEN");
    cr_assert_eq(unsetenv("COUPON_ADMIN_TOKEN"), 0);

    /* Exactly MIN_TOKEN: starts and serves admin with it. */
    app_server_up(&g_app.srv[0], "--db", g_app.db, "--redis", g_app.redis[0].addr, "--admin-token", t32, NULL);
    guess g;
    admin_post(g_app.srv[0].port, "127.0.0.1", t32, &g);
    cr_assert_eq(g.status, 201, "%ld (%s)", g.status, g.msg);
}
