/* attacks.c - the attacks on the HTTP edge, each a test against real processes
 * (one coupon-server, three redis-servers; the attackers speak from other
 * loopback addresses, 127.0.0.x and 127.0.1.x):
 *   - a dribble from 2 addresses (40 connections each: a 7.7 KB head of a
 *     chunked POST, then its body a byte per segment, for 8 s): /healthz
 *     answers within 1 s during it and after;
 *   - a pretty-printed JSON body (line feeds in the body) is served;
 *   - a request pipelined behind a POST refused 431 is answered;
 *   - a keep-alive client beside slow heads and slow bodies from 5
 *     addresses gets at least 9 of 10 answers on its connection;
 *   - the right admin token beside 48 addresses guessing wrong is served
 *     every time;
 *   - with the store write-locked and 2 of 3 Redis nodes stopped, /healthz
 *     says 503 with the lock down within one probe interval (and a little),
 *     not after the store probe's wait. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sqlite3.h>
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

const app_suite_plan app_plan = {.db_name = "attacks.db", .nredis = 3, .nservers = 0};
TestSuite(app_attacks, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

static const char HEALTHZ[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/* /healthz on a fresh connection from 127.0.0.1: the ms its answer took,
 * or -1 when none came within 3 s. */
static int64_t healthz_ms(const server_proc *s)
{
    char answer[4096];
    int64_t t0 = test_now_ms();
    int st = raw_exchange(s, HEALTHZ, sizeof HEALTHZ - 1, answer, sizeof answer, 3000);
    return st == 0 ? -1 : test_now_ms() - t0;
}

/* A non-blocking connection from src with Nagle off (every send is one
 * segment), or -1. */
static int dribble_connect(const server_proc *s, const char *src)
{
    int fd = raw_connect(s, src, 2000), one = 1;
    if (fd >= 0 && (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0 ||
                    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

enum { DRIBBLE_ADDRS = 2, DRIBBLE_PER_ADDR = 40, DRIBBLE_CONNS = DRIBBLE_ADDRS * DRIBBLE_PER_ADDR };

typedef struct dribble {
    const server_proc *srv;
    atomic_int stop;
    long reopened, bytes;
    char head[8192];
    size_t head_len;
} dribble;

static int dribble_open(dribble *d, int i)
{
    char src[32];
    snprintf(src, sizeof src, "127.0.0.%d", 2 + i % DRIBBLE_ADDRS);
    int fd = dribble_connect(d->srv, src);
    if (fd >= 0 && raw_send_all(fd, d->head, d->head_len) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void *dribble_main(void *arg)
{
    dribble *d = arg;
    int fds[DRIBBLE_CONNS];
    for (int i = 0; i < DRIBBLE_CONNS; i++)
        fds[i] = dribble_open(d, i);
    while (!atomic_load(&d->stop)) {
        for (int i = 0; i < DRIBBLE_CONNS; i++) {
            if (fds[i] < 0) {
                fds[i] = dribble_open(d, i);
                d->reopened++;
                continue;
            }
            ssize_t w = send(fds[i], "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w == 1) {
                d->bytes++;
            } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                close(fds[i]); /* cut by the server: reopened on the next pass */
                fds[i] = -1;
            }
        }
    }
    for (int i = 0; i < DRIBBLE_CONNS; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    return NULL;
}

Test(app_attacks, dribble_from_two_addresses_leaves_healthz_answering)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    dribble *d = calloc(1, sizeof *d);
    cr_assert_not_null(d);
    d->srv = &g_app.srv[0];
    /* A chunked POST whose head is 7.7 KB (under --max-header-bytes), its
     * body one chunk of 16 KiB declared, then sent a byte at a time. */
    int n = snprintf(d->head, sizeof d->head,
                     "POST /api/v1/coupon/add?coupon_id=1&user_id=drip HTTP/1.1\r\nHost: x\r\n"
                     "Transfer-Encoding: chunked\r\nX-Pad: ");
    memset(d->head + n, 'p', 7700 - (size_t)n);
    n = 7700;
    n += snprintf(d->head + n, sizeof d->head - (size_t)n, "\r\n\r\n4000\r\n");
    d->head_len = (size_t)n;
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, dribble_main, d), 0);
    int64_t t0 = test_now_ms(), worst = 0;
    int probes = 0, late = 0;
    while (test_now_ms() - t0 < 8000) {
        int64_t ms = healthz_ms(&g_app.srv[0]);
        probes++;
        if (ms < 0 || ms > 1000)
            late++;
        if (ms < 0 || ms > worst)
            worst = ms < 0 ? 3000 : ms;
        test_sleep_ms(200);
    }
    atomic_store(&d->stop, 1);
    pthread_join(t, NULL);
    int64_t after[3];
    for (int i = 0; i < 3; i++) {
        after[i] = healthz_ms(&g_app.srv[0]);
        test_sleep_ms(100);
    }
    fprintf(stderr, "dribble: %ld bytes sent, %ld reopens; /healthz during: %d of %d late, worst %lld ms; after: %lld, %lld, %lld ms\n",
            d->bytes, d->reopened, late, probes, (long long)worst, (long long)after[0], (long long)after[1],
            (long long)after[2]);
    free(d);
    cr_assert_eq(late, 0, "/healthz during the dribble: %d of %d probes late (over 1 s or none), worst %lld ms", late,
                 probes, (long long)worst);
    for (int i = 0; i < 3; i++)
        cr_assert(after[i] >= 0 && after[i] <= 1000, "/healthz after the dribble: %lld ms (-1: none)",
                  (long long)after[i]);
}

/* A body is the client's: line feeds inside a JSON body are not the
 * head's business. */
Test(app_attacks, pretty_printed_json_body_is_served)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    static const char BODY[] = "{\n  \"name\": \"pretty\",\n  \"stock\": 3,\n  \"per_user_limit\": 1\n}\n";
    char req[1024], answer[4096];
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " APP_TOKEN
                     "\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     sizeof BODY - 1, BODY);
    int st = raw_exchange(&g_app.srv[0], req, (size_t)n, answer, sizeof answer, 5000);
    cr_assert_eq(st, 201, "a pretty-printed JSON body: %d\n%s", st, answer);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon WHERE name = 'pretty'"), 1);
}

/* A POST refused for its head (431: over --max-header-bytes, within what
 * libmicrohttpd holds) with a GET pipelined behind it on the same
 * connection: both are answered, in order. */
Test(app_attacks, request_pipelined_behind_a_431_is_answered)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    char *req = malloc(16384), answer[8192];
    cr_assert_not_null(req);
    int n = snprintf(req, 16384, "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', 9000);
    n += 9000;
    n += snprintf(req + n, 16384 - (size_t)n, "\r\nContent-Length: 2\r\n\r\n{}%s", HEALTHZ);
    int fd = raw_connect(&g_app.srv[0], NULL, 3000);
    cr_assert_geq(fd, 0);
    cr_assert_eq(raw_send_all(fd, req, (size_t)n), 0);
    free(req);
    int closed = 0;
    size_t got = raw_read_answer(fd, answer, sizeof answer, 5000, &closed);
    cr_assert_eq(raw_status_of(answer), 431, "the POST: %s", answer);
    cr_assert_not_null(strstr(answer, "\"code\":1009"), "%s", answer);
    /* The second answer may have come in the same read. */
    const char *second = strstr(answer + 12, "HTTP/1.1 ");
    char more[8192] = "";
    if (second == NULL && !closed) {
        raw_read_answer(fd, more, sizeof more, 5000, &closed);
        second = more;
    }
    close(fd);
    cr_assert(second != NULL && raw_status_of(second) == 200, "the pipelined GET got no answer (%zu bytes, closed %d): %s%s",
              got, closed, answer, more);
}

/* One keep-alive connection asks once a second, ten times, while 5
 * addresses hold what they can with slow heads and slow bodies: answered
 * at least 9 times on that connection (a reconnect counts as a miss). */
Test(app_attacks, keepalive_client_beside_slow_heads_and_bodies, .timeout = 90)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 0);
    slow_attack *a[2];
    pthread_t t[2];
    for (int k = 0; k < 2; k++) {
        a[k] = calloc(1, sizeof *a[k]);
        cr_assert_not_null(a[k]);
        a[k]->srv = &g_app.srv[0];
        a[k]->kind = k == 0 ? SLOW_HEAD : SLOW_BODY;
        a[k]->first_addr = 2;
        a[k]->addrs = 5;
        a[k]->per_addr = 110;
        cr_assert_eq(pthread_create(&t[k], NULL, slow_attack_main, a[k]), 0);
    }
    char req[256], answer[4096], last[512] = "";
    int n = snprintf(req, sizeof req, "GET /api/v1/coupon/%lld HTTP/1.1\r\nHost: x\r\n\r\n", id);
    test_sleep_ms(1000); /* the attackers are in */
    int fd = raw_connect(&g_app.srv[0], NULL, 3000), answered = 0;
    for (int i = 0; i < 10; i++) {
        if (i > 0)
            test_sleep_ms(1000);
        int closed = 0;
        answer[0] = '\0';
        if (fd >= 0 && raw_send_all(fd, req, (size_t)n) == 0)
            raw_read_answer(fd, answer, sizeof answer, 3000, &closed);
        if (raw_status_of(answer) == 200) {
            answered++;
        } else {
            snprintf(last, sizeof last, "request %d: %.200s (closed %d)", i, answer, closed);
            closed = 1;
        }
        if (closed) { /* lost: a new connection for the next one */
            if (fd >= 0)
                close(fd);
            fd = raw_connect(&g_app.srv[0], NULL, 3000);
        }
    }
    if (fd >= 0)
        close(fd);
    int open_now = atomic_load(&a[0]->open) + atomic_load(&a[1]->open);
    for (int k = 0; k < 2; k++) {
        atomic_store(&a[k]->stop, 1);
        pthread_join(t[k], NULL);
        free(a[k]);
    }
    fprintf(stderr, "keep-alive client: %d of 10 answers beside %d slow connections\n", answered, open_now);
    cr_assert_geq(answered, 9, "the keep-alive client got %d of 10 answers (attackers: %d open); last miss: %s",
                  answered, open_now, last);
}

enum { GUESSERS = 48, GUESS_THREADS = 4 };

typedef struct guesser {
    const server_proc *srv;
    int first; /* its addresses: 127.0.1.(first + 1) ... */
    atomic_int *stop;
    long guesses, answered;
} guesser;

static void *guesser_main(void *arg)
{
    guesser *g = arg;
    char src[32], answer[2048];
    for (int i = 0; !atomic_load(g->stop); i++) {
        snprintf(src, sizeof src, "127.0.1.%d", g->first + 1 + i % (GUESSERS / GUESS_THREADS));
        g->guesses++;
        if (raw_admin_post(g->srv, src, "wrong-token-0123456789", answer, sizeof answer) != 0)
            g->answered++;
    }
    return NULL;
}

Test(app_attacks, right_admin_token_beside_48_guessing_addresses, .timeout = 90)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    atomic_int stop;
    atomic_init(&stop, 0);
    guesser gs[GUESS_THREADS];
    pthread_t th[GUESS_THREADS];
    for (int k = 0; k < GUESS_THREADS; k++) {
        gs[k] = (guesser){.srv = &g_app.srv[0], .first = k * (GUESSERS / GUESS_THREADS), .stop = &stop};
        cr_assert_eq(pthread_create(&th[k], NULL, guesser_main, &gs[k]), 0);
    }
    test_sleep_ms(1000); /* the guessers have spent every budget by now */
    int served = 0;
    char answer[2048], last[512] = "";
    for (int i = 0; i < 9; i++) {
        int st = raw_admin_post(&g_app.srv[0], "127.0.0.2", APP_TOKEN, answer, sizeof answer);
        if (st == 201)
            served++;
        else
            snprintf(last, sizeof last, "attempt %d: %d %.200s", i, st, answer);
        test_sleep_ms(300);
    }
    atomic_store(&stop, 1);
    long guesses = 0, answered = 0;
    for (int k = 0; k < GUESS_THREADS; k++) {
        pthread_join(th[k], NULL);
        guesses += gs[k].guesses;
        answered += gs[k].answered;
    }
    fprintf(stderr, "admin: %d of 9 served beside %ld wrong guesses (%ld answered) from %d addresses\n", served,
            guesses, answered, GUESSERS);
    cr_assert_eq(served, 9, "the right token was served %d of 9 times; %s", served, last);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 9);
}

/* data.<key> of a /healthz answer as a string, into out ("" when absent). */
static void health_field(const char *answer, const char *key, char *out, size_t cap)
{
    const char *json = strstr(answer, "\r\n\r\n");
    json_t *root = json != NULL ? json_loads(json + 4, 0, NULL) : NULL;
    json_t *v = json_object_get(json_object_get(root, "data"), key);
    snprintf(out, cap, "%s", json_is_string(v) ? json_string_value(v) : "");
    json_decref(root);
}

Test(app_attacks, healthz_shows_the_lost_quorum_while_the_store_probe_waits)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    char answer[4096], lock_s[32] = "";
    cr_assert_eq(raw_exchange(&g_app.srv[0], HEALTHZ, sizeof HEALTHZ - 1, answer, sizeof answer, 3000), 200, "%s",
                 answer);
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(g_app.db, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK, "%s", sqlite3_errmsg(db));
    cr_assert_eq(redis_pause(&g_app.redis[1]), 0);
    cr_assert_eq(redis_pause(&g_app.redis[2]), 0);
    int64_t t0 = test_now_ms(), seen = -1;
    int st = 0;
    while (test_now_ms() - t0 < 8000) {
        st = raw_exchange(&g_app.srv[0], HEALTHZ, sizeof HEALTHZ - 1, answer, sizeof answer, 3000);
        health_field(answer, "lock", lock_s, sizeof lock_s);
        if (st == 503 && strcmp(lock_s, "down") == 0) {
            seen = test_now_ms() - t0;
            break;
        }
        test_sleep_ms(50);
    }
    cr_assert_eq(sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    cr_assert_eq(redis_resume(&g_app.redis[1]), 0);
    cr_assert_eq(redis_resume(&g_app.redis[2]), 0);
    fprintf(stderr, "healthz: 503 with the lock down after %lld ms (-1: never in 8 s)\n", (long long)seen);
    /* One probe interval (500 ms) and a PING round's timeouts, with room
     * for a loaded machine; the store probe alone waits --db-busy-ms (5 s). */
    cr_assert(seen >= 0 && seen <= 2000, "/healthz showed the lost quorum after %lld ms (-1: not in 8 s); last: %d %s",
              (long long)seen, st, answer);
}
