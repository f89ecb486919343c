/* screen.c - the server's screen of each request (app/src/http/server.c,
 * target.c). Every byte sequence of the security re-test is refused and
 * changes nothing. What the server screens gets the contract's JSON (400 /
 * 1001, 413, 431 with Content-Type and the security headers). What
 * libmicrohttpd refuses before any callback gets its own status (or a
 * close). A valid request is still served. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"
#include "raw_conn.h"

const app_suite_plan app_plan = {.db_name = "screen.db", .nredis = 1, .nservers = 0};
TestSuite(app_screen, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

/* Sends n raw bytes on a fresh connection and asserts the answer: status,
 * the JSON envelope with code, the JSON Content-Type and the security
 * headers, and a body that says nothing of libmicrohttpd (no HTML). */
static void expect_refused(const char *what, const char *req, size_t n, int status, int code)
{
    char answer[8192], want[32];
    int got = raw_exchange(&g_app.srv[0], req, n, answer, sizeof answer, 5000);
    /* cr_expect: every case is tried and each failure listed. */
    cr_expect_eq(got, status, "%s: status %d, not %d: %s", what, got, status, answer);
    if (got != status)
        return;
    snprintf(want, sizeof want, "{\"code\":%d,", code);
    cr_expect_not_null(strstr(answer, want), "%s: no %s envelope: %s", what, want, answer);
    cr_expect_not_null(strstr(answer, "\r\nContent-Type: application/json\r\n"), "%s: %s", what, answer);
    cr_expect_not_null(strstr(answer, "\r\nX-Content-Type-Options: nosniff\r\n"), "%s: %s", what, answer);
    cr_expect_not_null(strstr(answer, "\r\nCache-Control: no-store\r\n"), "%s: %s", what, answer);
    cr_expect_not_null(strstr(answer, "\r\nContent-Security-Policy: "), "%s: %s", what, answer);
    cr_expect_null(strstr(answer, "<html"), "%s: an HTML page: %s", what, answer);
    /* One status line: the answer was not sent twice. */
    cr_expect_null(strstr(answer, "\nHTTP/1."), "%s: two status lines: %s", what, answer);
}

#define REFUSED(what, lit, status, code) expect_refused(what, lit, sizeof lit - 1, status, code)

/* Bytes libmicrohttpd refuses before any callback runs: its own status
 * and page (0: it closed without an answer), one of allowed; never a 2xx. */
static void expect_library(const char *what, const char *req, size_t n, int allowed_a, int allowed_b)
{
    char answer[8192];
    int got = raw_exchange(&g_app.srv[0], req, n, answer, sizeof answer, 5000);
    cr_expect(got == allowed_a || got == allowed_b, "%s: status %d, not %d or %d: %s", what, got, allowed_a,
              allowed_b, answer);
}

#define LIBRARY(what, lit, a, b) expect_library(what, lit, sizeof lit - 1, a, b)

Test(app_screen, malformed_requests_are_refused_and_change_nothing)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 0);
    cr_assert_eq(id, 1, "the requests below name coupon 1");
    /* Not HTTP, or not a version spoken here: libmicrohttpd's own answer
     * (docs/reliability.md lists them). */
    LIBRARY("garbage", "GARBAGE\r\n\r\n", 0, 400);
    LIBRARY("HTTP/0.9", "GET /api/v1/coupon/1\r\n\r\n", 400, 0);
    LIBRARY("HTTP/0.9 named", "GET /api/v1/coupon/1 HTTP/0.9\r\nHost: x\r\n\r\n", 505, 400);
    LIBRARY("HTTP/2.5", "GET /api/v1/coupon/1 HTTP/2.5\r\nHost: x\r\n\r\n", 505, 400);
    const char *lengths[] = {"-1", "abc", "+5", "5 ", "1 2", ""};
    for (size_t i = 0; i < sizeof lengths / sizeof lengths[0]; i++) {
        char req[256], what[64];
        int n = snprintf(req, sizeof req,
                         "POST /api/v1/coupon/add?coupon_id=1&user_id=cl%zu HTTP/1.1\r\nHost: x\r\n"
                         "Content-Length: %s\r\n\r\nhello",
                         i, lengths[i]);
        snprintf(what, sizeof what, "Content-Length '%s'", lengths[i]);
        expect_library(what, req, (size_t)n, 400, 0);
    }
    /* What the server screens itself: the contract's JSON. */
    REFUSED("NUL in the target", "POST /api/v1/coupon/add?coupon_id=1&user_id=nul2\0evil HTTP/1.1\r\nHost: x\r\n\r\n",
            400, 1001);
    REFUSED("space in the target", "GET /api/v1/coupon/1 x HTTP/1.1\r\nHost: x\r\n\r\n", 400, 1001);
    REFUSED("gzip, chunked", "POST /api/v1/coupon/add?coupon_id=1&user_id=te1 HTTP/1.1\r\nHost: x\r\n"
            "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 400, 1001);
    REFUSED("xchunked", "POST /api/v1/coupon/add?coupon_id=1&user_id=te2 HTTP/1.1\r\nHost: x\r\n"
            "Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n", 400, 1001);
    REFUSED("chunked then identity", "POST /api/v1/coupon/add?coupon_id=1&user_id=te3 HTTP/1.1\r\nHost: x\r\n"
            "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n", 400, 1001);
    REFUSED("space before the colon", "POST /api/v1/coupon/add?coupon_id=1&user_id=te4 HTTP/1.1\r\nHost: x\r\n"
            "Transfer-Encoding : chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400, 1001);
    REFUSED("CL and TE", "POST /api/v1/coupon/add?coupon_id=1&user_id=te5 HTTP/1.1\r\nHost: x\r\n"
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, 1001);
    REFUSED("no Host", "GET /api/v1/coupon/1 HTTP/1.1\r\n\r\n", 400, 1001);
    REFUSED("two Hosts", "GET /api/v1/coupon/1 HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400, 1001);
    REFUSED("duplicate parameter", "POST /api/v1/coupon/add?coupon_id=2&coupon_id=1&user_id=dup HTTP/1.1\r\n"
            "Host: x\r\nContent-Length: 0\r\n\r\n", 400, 1001);
    REFUSED("duplicate parameter, escaped", "POST /api/v1/coupon/add?coupon%5Fid=2&coupon_id=1&user_id=dup HTTP/1.1\r\n"
            "Host: x\r\nContent-Length: 0\r\n\r\n", 400, 1001);
    REFUSED("bad escape", "GET /api/v1/coupon/1?x=%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400, 1001);
    REFUSED("declared body too large", "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
            413, 1009);
    /* Heads over the limit (8192 bytes by default): a long header, a long target. */
    size_t big = 9000;
    char *req = malloc(big + 256);
    cr_assert_not_null(req);
    int n = snprintf(req, 256, "GET /api/v1/coupon/1 HTTP/1.1\r\nHost: x\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 4);
    expect_refused("head over the limit", req, (size_t)n + big + 4, 431, 1009);
    n = snprintf(req, 256, "GET /api/v1/coupon/1?x=");
    memset(req + n, 'a', big);
    memcpy(req + n + big, " HTTP/1.1\r\nHost: x\r\n\r\n", 22);
    expect_refused("target over the limit", req, (size_t)n + big + 22, 431, 1009);
    /* ~3,500 bare arguments: answered at once, in JSON (their query is
     * dropped before libmicrohttpd spends its pool on them). */
    n = snprintf(req, 256, "GET /api/v1/coupon/1?");
    for (int i = 0; i < 60; i++)
        n += snprintf(req + n, big + 256 - (size_t)n, "a%d&", i);
    n += snprintf(req + n, big + 256 - (size_t)n, "a0&a1 HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_refused("repeated bare arguments", req, (size_t)n, 400, 1001);
    n = snprintf(req, 256, "GET /api/v1/coupon/1?");
    while ((size_t)n < 7000)
        n += snprintf(req + n, big + 256 - (size_t)n, "a&");
    n += snprintf(req + n, big + 256 - (size_t)n, "b HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_refused("3,500 arguments", req, (size_t)n, 400, 1001);
    free(req);
    /* A chunked body past the limit: closed at once, without an answer
     * (libmicrohttpd 0.9.75 cannot answer before the body is read). */
    char chunked[20000];
    n = snprintf(chunked, sizeof chunked,
                 "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " APP_TOKEN
                 "\r\nTransfer-Encoding: chunked\r\n\r\n4400\r\n");
    memset(chunked + n, 'a', 0x4400);
    n += 0x4400;
    n += snprintf(chunked + n, sizeof chunked - (size_t)n, "\r\n0\r\n\r\n");
    expect_library("chunked body past the limit", chunked, (size_t)n, 0, 413);

    /* Nothing was claimed and no coupon created by any of them. */
    app_coupon_state st;
    app_expect_db(g_app.db, id, 5, 0, &st);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 1);
}

/* What libmicrohttpd 0.9.75 reads leniently and one parser alone reads
 * one way: a bare LF ending the lines, a folded header line. Served. */
Test(app_screen, lenient_framing_is_served)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    char answer[4096];
    static const char BARE_LF[] = "GET /healthz HTTP/1.1\nHost: x\nConnection: close\n\n";
    static const char FOLDED[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\nConnection: close\r\n\r\n";
    cr_assert_eq(raw_exchange(&g_app.srv[0], BARE_LF, sizeof BARE_LF - 1, answer, sizeof answer, 5000), 200, "%s",
                 answer);
    cr_assert_eq(raw_exchange(&g_app.srv[0], FOLDED, sizeof FOLDED - 1, answer, sizeof answer, 5000), 200, "%s",
                 answer);
}

Test(app_screen, valid_requests_are_served)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 0);
    char answer[8192];
    static const char CLAIM[] = "POST /api/v1/coupon/add?coupon_id=1&user_id=ok1 HTTP/1.1\r\nHost: x\r\n"
                                "Content-Length: 0\r\n\r\n";
    cr_assert_eq(raw_exchange(&g_app.srv[0], CLAIM, sizeof CLAIM - 1, answer, sizeof answer, 5000), 200, "%s", answer);
    static const char V10[] = "GET /api/v1/coupon/1 HTTP/1.0\r\n\r\n";
    cr_assert_eq(raw_exchange(&g_app.srv[0], V10, sizeof V10 - 1, answer, sizeof answer, 5000), 200, "%s", answer);
    /* A chunked admin body, in two chunks. */
    static const char CREATE[] = "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " APP_TOKEN
                                 "\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"nam\r\n11\r\ne\":\"b\",\"stock\":4}\r\n0\r\n\r\n";
    cr_assert_eq(raw_exchange(&g_app.srv[0], CREATE, sizeof CREATE - 1, answer, sizeof answer, 5000), 201, "%s", answer);
    /* A request whose body comes after the head, in a second send. */
    int fd = raw_connect(&g_app.srv[0], NULL, 5000);
    cr_assert_geq(fd, 0);
    static const char HEAD[] = "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " APP_TOKEN
                               "\r\nContent-Length: 22\r\n\r\n";
    cr_assert_eq(raw_send_all(fd, HEAD, sizeof HEAD - 1), 0);
    test_sleep_ms(300);
    cr_assert_eq(raw_send_all(fd, "{\"name\":\"c\",\"stock\":3}", 22), 0);
    int closed = 0;
    raw_read_answer(fd, answer, sizeof answer, 5000, &closed);
    close(fd);
    cr_assert_eq(raw_status_of(answer), 201, "%s", answer);
    app_coupon_state st;
    app_expect_db(g_app.db, id, 4, 1, &st);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 3);
}

/* A body slower than --min-body-rate is cut; one past --request-timeout-s
 * is cut; neither reaches a handler. */
Test(app_screen, slow_bodies_are_cut)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, "--min-body-rate", "100", "--request-timeout-s", "3", NULL);
    static const char HEAD[] = "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " APP_TOKEN
                               "\r\nContent-Length: 10000\r\n\r\n";
    /* 1 byte a second: under 100 B/s, cut after the 1 s grace (about 2 s). */
    int fd = raw_connect(&g_app.srv[0], NULL, 5000);
    cr_assert_geq(fd, 0);
    cr_assert_eq(raw_send_all(fd, HEAD, sizeof HEAD - 1), 0);
    int64_t t0 = test_now_ms(), cut = -1;
    while (cut < 0 && test_now_ms() - t0 < 8000) {
        char b[256];
        int closed = 0;
        raw_read_answer(fd, b, sizeof b, 1000, &closed);
        if (closed || raw_send_all(fd, "a", 1) != 0)
            cut = test_now_ms() - t0;
    }
    close(fd);
    cr_assert(cut >= 900 && cut < 4000, "a 1 B/s body under a 100 B/s floor was cut after %lld ms (-1: never)",
              (long long)cut);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 0);
}

/* The access log escapes what it writes: a path that decodes to spaces, a
 * quote and a line feed stays one line of six fields. */
Test(app_screen, access_log_escapes_what_it_writes)
{
    APP_SETUP_OK();
    char log_path[400];
    snprintf(log_path, sizeof log_path, "%s/access.log", g_app.dir);
    app_env_server_up(&g_app, 0, "--access-log", log_path, NULL);
    static const char REQ[] = "GET /api/v1/coupon/1%20200%200%22%0A2026-01-01T00:00:00.000Z%20GET%20/forged HTTP/1.1\r\n"
                              "Host: x\r\n\r\n";
    char answer[4096];
    int status = raw_exchange(&g_app.srv[0], REQ, sizeof REQ - 1, answer, sizeof answer, 5000);
    cr_assert(status >= 400 && status < 500, "%d: %s", status, answer);
    /* The line is written right after the answer is queued: bounded wait. */
    char *al = NULL;
    for (int i = 0; i < 50; i++) {
        free(al);
        al = app_slurp(log_path);
        if (al != NULL && strstr(al, "forged") != NULL)
            break;
        test_sleep_ms(50);
    }
    cr_assert_not_null(al);
    cr_assert_not_null(strstr(al, "/api/v1/coupon/1%20200%200%22%0A2026-01-01T00:00:00.000Z%20GET%20/forged"), "%s", al);
    size_t lines = 0, fields = 1;
    for (const char *c = al; *c != '\0'; c++) {
        if (*c == '\n')
            lines++;
        else if (*c == ' ' && lines == 0)
            fields++;
    }
    cr_assert_eq(lines, 1, "one request, one line:\n%s", al);
    cr_assert_eq(fields, 6, "time method path status code seconds:\n%s", al);
    free(al);
}

/* One request on a kept-alive connection: its answer's status (0 when
 * none came within timeout_ms), the answer in answer. */
static int kept_exchange(int fd, const char *req, char *answer, size_t cap, int timeout_ms)
{
    int closed = 0;
    if (raw_send_all(fd, req, strlen(req)) != 0)
        return 0;
    raw_read_answer(fd, answer, cap, timeout_ms, &closed);
    return raw_status_of(answer);
}

/* Requests one after the other on one kept-alive connection: each is
 * screened (a duplicate parameter gets the JSON 400 and the connection goes
 * on), a HEAD answer (no body after its Content-Length) does not stall the
 * next, and a request after a pause is served. */
Test(app_screen, kept_alive_requests_are_each_screened)
{
    APP_SETUP_OK();
    app_env_server_up(&g_app, 0, NULL);
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 0);
    cr_assert_eq(id, 1, "the requests below name coupon 1");
    int fd = raw_connect(&g_app.srv[0], NULL, 5000);
    cr_assert_geq(fd, 0);
    char answer[8192];
    static const char CLAIM1[] = "POST /api/v1/coupon/add?coupon_id=1&user_id=k1 HTTP/1.1\r\nHost: x\r\n"
                                 "Content-Length: 0\r\n\r\n";
    static const char CLAIM2[] = "POST /api/v1/coupon/add?coupon_id=1&user_id=k2 HTTP/1.1\r\nHost: x\r\n"
                                 "Content-Length: 0\r\n\r\n";
    static const char GET[] = "GET /api/v1/coupon/1 HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char HEAD[] = "HEAD /api/v1/coupon/1 HTTP/1.1\r\nHost: x\r\n\r\n";
    /* Back to back: the pair is kept between them. */
    cr_assert_eq(kept_exchange(fd, CLAIM1, answer, sizeof answer, 5000), 200, "%s", answer);
    cr_assert_eq(kept_exchange(fd, GET, answer, sizeof answer, 5000), 200, "%s", answer);
    cr_assert_null(strstr(answer, "Connection: close"), "%s", answer);
    /* raw_read_answer waits for the declared body a HEAD answer has not:
     * a short wait, and then the status line alone must be there. */
    int head_status = kept_exchange(fd, HEAD, answer, sizeof answer, 1000);
    cr_assert(head_status != 0, "HEAD: no answer: %s", answer);
    cr_assert_null(strstr(answer, "{\""), "HEAD: a body came: %s", answer);
    cr_assert_eq(kept_exchange(fd, GET, answer, sizeof answer, 5000), 200, "after HEAD: %s", answer);
    cr_assert_null(strstr(answer, "\nHTTP/1."), "two answers in one: %s", answer);
    /* A duplicate parameter (libmicrohttpd would take the first) right
     * after a served claim: refused in JSON, only the served claim counts,
     * and the connection goes on (the refusal waited for the body). */
    cr_assert_eq(kept_exchange(fd, CLAIM2, answer, sizeof answer, 5000), 200, "%s", answer);
    static const char DUP[] = "POST /api/v1/coupon/add?coupon_id=2&coupon_id=1&user_id=k3 HTTP/1.1\r\n"
                              "Host: x\r\nContent-Length: 0\r\n\r\n";
    cr_assert_eq(kept_exchange(fd, DUP, answer, sizeof answer, 5000), 400, "%s", answer);
    cr_assert_not_null(strstr(answer, "{\"code\":1001,"), "%s", answer);
    cr_assert_eq(kept_exchange(fd, GET, answer, sizeof answer, 5000), 200, "after the refusal: %s", answer);
    /* Not HTTP/1.x, right after an answer: libmicrohttpd's own 505, then
     * the close. */
    static const char BAD[] = "GET /api/v1/coupon/1 HTTP/2.5\r\nHost: x\r\n\r\n";
    cr_assert_eq(kept_exchange(fd, BAD, answer, sizeof answer, 5000), 505, "%s", answer);
    close(fd);
    /* A new connection, served again after a pause. */
    fd = raw_connect(&g_app.srv[0], NULL, 5000);
    cr_assert_geq(fd, 0);
    cr_assert_eq(kept_exchange(fd, GET, answer, sizeof answer, 5000), 200, "%s", answer);
    test_sleep_ms(400);
    cr_assert_eq(kept_exchange(fd, GET, answer, sizeof answer, 5000), 200, "after a pause: %s", answer);
    close(fd);
    app_coupon_state st;
    app_expect_db(g_app.db, id, 3, 2, &st);
}
