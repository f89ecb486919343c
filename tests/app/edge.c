/* edge.c - the HTTP edge as a hostile client tries it, over raw sockets:
 *   - many query arguments;
 *   - a body framed two ways;
 *   - a chunked body past the limit sent slowly;
 *   - one address holding connections open (slowloris);
 *   - headers dripped a byte at a time past --header-timeout-s;
 *   - the connections run short beside kept-alive clients. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"
#include "raw_conn.h"

const app_suite_plan app_plan = {.db_name = "edge.db", .nredis = 1, .nservers = 0};
TestSuite(app_edge, .init = app_suite_init, .fini = app_suite_fini, .timeout = 60);

/* One raw request on a fresh connection; the answer's status (0 when none
 * came within 3 s). */
static int raw_status(const server_proc *s, const char *req, char *answer, size_t cap)
{
    return raw_exchange(s, req, strlen(req), answer, cap, 3000);
}

Test(app_edge, many_query_arguments_get_an_answer)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    /* 200 short arguments: under the header limit, over the argument cap.
     * Before, about 1000 filled libmicrohttpd's pool and got no answer. */
    char req[4096], answer[2048];
    int n = snprintf(req, sizeof req, "POST /api/v1/coupon/add?coupon_id=1&user_id=u");
    for (int i = 0; i < 200; i++)
        n += snprintf(req + n, sizeof req - (size_t)n, "&a%d=1", i);
    snprintf(req + n, sizeof req - (size_t)n, " HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    cr_assert_eq(raw_status(&g_app.srv[0], req, answer, sizeof answer), 400, "%s", answer);
    cr_assert_not_null(strstr(answer, "\"code\":1001"), "%s", answer);
    cr_assert_not_null(strstr(answer, "too many query arguments"), "%s", answer);
}

Test(app_edge, body_framed_two_ways_is_refused)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 0);
    char req[512], answer[2048];
    snprintf(req, sizeof req,
             "POST /api/v1/coupon/add?coupon_id=%lld&user_id=u1 HTTP/1.1\r\nHost: x\r\n"
             "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
             id);
    cr_assert_eq(raw_status(&g_app.srv[0], req, answer, sizeof answer), 400, "%s", answer);
    cr_assert_not_null(strstr(answer, "Content-Length / Transfer-Encoding"), "%s", answer);
    snprintf(req, sizeof req,
             "POST /api/v1/coupon/add?coupon_id=%lld&user_id=u2 HTTP/1.1\r\nHost: x\r\n"
             "Content-Length: 0\r\nContent-Length: 7\r\n\r\n",
             id);
    cr_assert_eq(raw_status(&g_app.srv[0], req, answer, sizeof answer), 400, "%s", answer);
    app_coupon_state st;
    app_expect_db(g_app.db, id, 5, 0, &st);
}

Test(app_edge, slow_chunked_body_past_the_limit_is_cut_at_the_limit)
{
    APP_SETUP_OK();
    /* Limit 4 KiB; 1 KiB chunks every 200 ms: the limit is passed on the
     * fifth chunk (about 0.8 s in). The server must close then, not read
     * the 40 chunks the sender would go on with (8 s). */
    app_env_server_up(&g_app, 0, "--max-body-bytes", "4096", NULL);
    int fd = raw_connect(&g_app.srv[0], NULL, 3000);
    cr_assert_geq(fd, 0);
    const char *head = "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " APP_TOKEN
                       "\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    cr_assert_eq(raw_send_all(fd, head, strlen(head)), 0);
    char chunk[1100];
    int n = snprintf(chunk, sizeof chunk, "400\r\n");
    memset(chunk + n, 'a', 1024);
    memcpy(chunk + n + 1024, "\r\n", 2);
    size_t chunk_len = (size_t)n + 1026;
    int64_t t0 = test_now_ms(), closed_at = -1;
    for (int i = 0; i < 40 && closed_at < 0; i++) {
        if (raw_send_all(fd, chunk, chunk_len) != 0) {
            closed_at = test_now_ms() - t0;
            break;
        }
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 200) > 0) {
            char b[256];
            if (recv(fd, b, sizeof b, 0) <= 0)
                closed_at = test_now_ms() - t0;
        }
    }
    close(fd);
    cr_assert_geq(closed_at, 0, "the server read the whole oversized body");
    cr_assert_lt(closed_at, 3000, "closed only after %lld ms", (long long)closed_at);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 0);
}

/* Slowloris from one address: it holds as many connections as it can, each
 * dripping a header byte now and then. With --max-connections-per-ip below
 * --max-connections, a client from another address is still served. */
Test(app_edge, one_address_cannot_take_every_connection, .timeout = 60)
{
    APP_SETUP_OK();
    enum { ATTACK = 60 };
    app_env_server_up(&g_app, 0, "--max-connections", "50", "--max-connections-per-ip", "40", NULL);
    int fds[ATTACK];
    int held = 0;
    for (int i = 0; i < ATTACK; i++) {
        fds[i] = raw_connect(&g_app.srv[0], "127.0.0.2", 3000);
        if (fds[i] >= 0 && raw_send_all(fds[i], "GET /healthz HTTP/1.1\r\nX-Drip: ", 31) == 0)
            held++;
    }
    cr_assert_geq(held, 40, "the attacker could not even open its share (%d)", held);
    /* Let the server accept (and refuse past the per-address cap). */
    test_sleep_ms(300);
    for (int i = 0; i < ATTACK; i++)
        if (fds[i] >= 0)
            (void)raw_send_all(fds[i], "a", 1);
    /* A normal client from 127.0.0.1 gets its answer. */
    char answer[4096];
    int64_t t0 = test_now_ms();
    int status = raw_status(&g_app.srv[0], "GET /api/v1/coupon HTTP/1.1\r\nHost: x\r\n\r\n", answer, sizeof answer);
    int64_t took = test_now_ms() - t0;
    for (int i = 0; i < ATTACK; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    cr_assert_eq(status, 200, "normal client got %d after %lld ms: %s", status, (long long)took, answer);
}

/* Drips a header a byte every 200 ms (never idle long enough for the
 * 30 s idle timeout) for at most limit_ms; the ms after which the server
 * closed the connection, or -1 when it kept it open. */
static int64_t drip_header(const server_proc *s, int64_t limit_ms)
{
    int fd = raw_connect(s, NULL, 3000);
    cr_assert_geq(fd, 0, "connect: %s", strerror(errno));
    cr_assert_eq(raw_send_all(fd, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Drip: ", 40), 0);
    int64_t t0 = test_now_ms(), closed_at = -1;
    while (closed_at < 0 && test_now_ms() - t0 < limit_ms) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 200) > 0) {
            char b[256];
            if (recv(fd, b, sizeof b, 0) <= 0)
                closed_at = test_now_ms() - t0;
        } else if (raw_send_all(fd, "a", 1) != 0) {
            closed_at = test_now_ms() - t0;
        }
    }
    close(fd);
    return closed_at;
}

/* libmicrohttpd's timeout is an idle one, reset by every byte: without a
 * deadline of our own a header dripped a byte at a time is read forever.
 * The head's deadline counts from the accept; 0 leaves only
 * --request-timeout-s (10 s by default). */
Test(app_edge, header_dripped_past_the_deadline_is_cut, .timeout = 60)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--header-timeout-s", "1", NULL);
    app_env_server_up(&g_app, 1, "--header-timeout-s", "0", NULL);
    int64_t cut = drip_header(&g_app.srv[0], 6000);
    cr_assert_geq(cut, 900, "cut after %lld ms, before the 1 s deadline", (long long)cut);
    cr_assert_lt(cut, 3000, "header deadline 1 s, but the connection lasted %lld ms (-1: never cut)", (long long)cut);
    /* With the deadline off, the same drip goes on (MHD's idle timeout
     * never fires): the cut above is the deadline's, not MHD's. */
    cr_assert_eq(drip_header(&g_app.srv[1], 2500), -1, "cut without a deadline");
    /* Keep-alive: the deadline counts from the previous answer, so a
     * connection whose requests come 0.7 s apart lives past 1 s; and every
     * request on it is parsed afresh: a fourth one that is not HTTP/1.x
     * gets libmicrohttpd's 505, and the close. */
    int fd = raw_connect(&g_app.srv[0], NULL, 3000);
    cr_assert_geq(fd, 0);
    const char *req = "GET /api/v1/coupon HTTP/1.1\r\nHost: x\r\n\r\n";
    for (int i = 0; i < 3; i++) {
        char answer[4096];
        int closed = 0;
        if (i > 0)
            test_sleep_ms(700);
        cr_assert_eq(raw_send_all(fd, req, strlen(req)), 0, "request %d: the connection is gone", i);
        raw_read_answer(fd, answer, sizeof answer, 3000, &closed);
        cr_assert(strncmp(answer, "HTTP/1.1 200", 12) == 0, "request %d: %s", i, answer);
        cr_assert_null(strstr(answer, "Connection: close"), "request %d: %s", i, answer);
    }
    const char *bad = "GET /api/v1/coupon HTTP/2.5\r\nHost: x\r\n\r\n";
    char answer[4096];
    int closed = 0;
    cr_assert_eq(raw_send_all(fd, bad, strlen(bad)), 0);
    raw_read_answer(fd, answer, sizeof answer, 3000, &closed);
    cr_assert(strncmp(answer, "HTTP/1.1 505", 12) == 0, "%s", answer);
    close(fd);
}

/* When the connections run short, nobody is closed to make room: a new
 * connection past --max-connections is refused, and the kept-alive
 * clients already served go on being served on their connections (the
 * accept front closed the idle kept-alive ones first). */
Test(app_edge, kept_alive_clients_are_not_evicted_when_full, .timeout = 60)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--max-connections", "4", "--max-connections-per-ip", "0", "--threads", "2", NULL);
    const char *req = "GET /api/v1/coupon HTTP/1.1\r\nHost: x\r\n\r\n";
    char answer[4096];
    int closed = 0, kept[2], extra[8];
    for (int i = 0; i < 2; i++) {
        kept[i] = raw_connect(&g_app.srv[0], NULL, 3000);
        cr_assert_geq(kept[i], 0);
        cr_assert_eq(raw_send_all(kept[i], req, strlen(req)), 0);
        raw_read_answer(kept[i], answer, sizeof answer, 3000, &closed);
        cr_assert(strncmp(answer, "HTTP/1.1 200", 12) == 0, "%s", answer);
    }
    /* More connections than are left, each with half a request. */
    for (int i = 0; i < 8; i++) {
        extra[i] = raw_connect(&g_app.srv[0], NULL, 1000);
        if (extra[i] >= 0)
            (void)raw_send_all(extra[i], req, 20);
    }
    test_sleep_ms(300);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(raw_send_all(kept[i], req, strlen(req)), 0, "kept-alive client %d: its connection is gone", i);
        closed = 0;
        raw_read_answer(kept[i], answer, sizeof answer, 3000, &closed);
        cr_assert(strncmp(answer, "HTTP/1.1 200", 12) == 0, "kept-alive client %d: %s", i, answer);
        close(kept[i]);
    }
    for (int i = 0; i < 8; i++)
        if (extra[i] >= 0)
            close(extra[i]);
}
