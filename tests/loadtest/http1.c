/* http1.c - the load's HTTP/1.1 framing: targets from base URLs, the
 * claim request, and the incremental response parser (every prefix of a
 * reply is "incomplete", lengths, chunks, keep-alive, malformed replies). */
#include <criterion/criterion.h>
#include <string.h>

#include "loadtest.h"

static char body[64];
static lt_http_resp resp;

static int parse(const char *s, int eof)
{
    memset(body, 0, sizeof body);
    return lt_http_parse(s, strlen(s), eof, body, sizeof body - 1, &resp);
}

/* Every strict prefix of a complete reply must say "need more", never a
 * wrong answer: replies arrive in arbitrary pieces. */
static void every_prefix_incomplete(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(lt_http_parse(s, i, 0, body, sizeof body - 1, &resp), 0, "prefix %zu of %s", i, s);
}

Test(loadtest_http1, targets, .timeout = 10)
{
    lt_target t;
    char err[LT_ERR_MAX];
    cr_assert_eq(lt_target_parse("http://127.0.0.1:8080", &t, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(t.host, "127.0.0.1:8080");
    cr_assert_str_eq(t.path, "");
    cr_assert_str_eq(t.url, "http://127.0.0.1:8080");
    cr_assert_eq(lt_target_parse("http://example.test", &t, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(t.host, "example.test:80");
    cr_assert_eq(lt_target_parse("http://h:81/shop/", &t, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(t.path, "/shop");
    cr_assert_eq(lt_target_parse("http://[::1]:9", &t, err, sizeof err), 0, "%s", err);
    cr_assert_str_eq(t.host, "[::1]:9");
    cr_assert_eq(lt_target_parse("http://:bad:port:", &t, err, sizeof err), -1);
}

Test(loadtest_http1, claim_requests, .timeout = 10)
{
    lt_target t;
    char err[LT_ERR_MAX], buf[512];
    cr_assert_eq(lt_target_parse("http://127.0.0.1:8080", &t, err, sizeof err), 0);
    int n = lt_http_format_claim(buf, sizeof buf, &t, 0, 7, "u12");
    cr_assert_eq((size_t)n, strlen(buf));
    cr_assert_str_eq(buf, "POST /api/v1/coupon/add?coupon_id=7&user_id=u12 HTTP/1.1\r\n"
                          "Host: 127.0.0.1:8080\r\n"
                          "User-Agent: coupon-loadtest\r\n"
                          "Content-Length: 0\r\n"
                          "\r\n");
    n = lt_http_format_claim(buf, sizeof buf, &t, 1, 7, "u12");
    cr_assert_str_eq(buf, "GET /api/v1/coupon/add?coupon_id=7&user_id=u12 HTTP/1.1\r\n"
                          "Host: 127.0.0.1:8080\r\n"
                          "User-Agent: coupon-loadtest\r\n"
                          "\r\n");
    cr_assert_eq(lt_http_format_claim(buf, 40, &t, 0, 7, "u12"), -1);
}

Test(loadtest_http1, content_length_reply, .timeout = 10)
{
    const char *r = "HTTP/1.1 409 Conflict\r\n"
                    "Content-Type: application/json\r\n"
                    "content-length: 13\r\n"
                    "\r\n"
                    "{\"code\":1003}";
    every_prefix_incomplete(r);
    cr_assert_eq(parse(r, 0), 1);
    cr_assert_eq(resp.status, 409);
    cr_assert_eq(resp.keep_alive, 1);
    cr_assert_eq(resp.consumed, strlen(r));
    cr_assert_eq(resp.body_len, 13);
    cr_assert_str_eq(body, "{\"code\":1003}");
}

Test(loadtest_http1, chunked_reply, .timeout = 10)
{
    const char *r = "HTTP/1.1 200 OK\r\n"
                    "Transfer-Encoding: chunked\r\n"
                    "\r\n"
                    "5;ext=1\r\n{\"cod\r\n"
                    "8\r\ne\":1003}\r\n"
                    "0\r\n"
                    "X-Trailer: 1\r\n"
                    "\r\n";
    every_prefix_incomplete(r);
    cr_assert_eq(parse(r, 0), 1);
    cr_assert_eq(resp.status, 200);
    cr_assert_eq(resp.consumed, strlen(r));
    cr_assert_str_eq(body, "{\"code\":1003}");
}

Test(loadtest_http1, keep_alive_rules, .timeout = 10)
{
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", 0), 1);
    cr_assert_eq(resp.keep_alive, 0);
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", 0), 1);
    cr_assert_eq(resp.keep_alive, 0);
    cr_assert_eq(parse("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", 0), 1);
    cr_assert_eq(resp.keep_alive, 1);
}

Test(loadtest_http1, interim_and_bodyless, .timeout = 10)
{
    const char *r = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}";
    cr_assert_eq(parse(r, 0), 1);
    cr_assert_eq(resp.status, 201);
    cr_assert_eq(resp.consumed, strlen(r));
    cr_assert_eq(parse("HTTP/1.1 204 No Content\r\n\r\n", 0), 1);
    cr_assert_eq(resp.status, 204);
    cr_assert_eq(resp.body_len, 0);
}

Test(loadtest_http1, body_until_close, .timeout = 10)
{
    const char *r = "HTTP/1.1 200 OK\r\n\r\n{\"code\":0}";
    cr_assert_eq(parse(r, 0), 0);
    cr_assert_eq(parse(r, 1), 1);
    cr_assert_eq(resp.keep_alive, 0);
    cr_assert_str_eq(body, "{\"code\":0}");
}

Test(loadtest_http1, long_body_is_truncated_not_overrun, .timeout = 10)
{
    static char r[4096];
    int n = snprintf(r, sizeof r, "HTTP/1.1 200 OK\r\nContent-Length: 3000\r\n\r\n");
    memset(r + n, 'x', 3000);
    r[n + 3000] = '\0';
    cr_assert_eq(parse(r, 0), 1);
    cr_assert_eq(resp.body_len, sizeof body - 1);
    cr_assert_eq(resp.consumed, (size_t)n + 3000);
}

Test(loadtest_http1, second_reply_left_in_buffer, .timeout = 10)
{
    const char *one = "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nA";
    char two[128];
    snprintf(two, sizeof two, "%s%s", one, one);
    cr_assert_eq(parse(two, 0), 1);
    cr_assert_eq(resp.consumed, strlen(one));
}

Test(loadtest_http1, malformed_replies, .timeout = 10)
{
    cr_assert_eq(parse("HTTP/2 200 OK\r\n\r\n", 0), -1);
    cr_assert_eq(parse("garbage garbage\r\n\r\n", 0), -1);
    cr_assert_eq(parse("HTTP/1.1 20 OK\r\n\r\n", 0), -1);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n", 0), -1);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nAB", 0), -1);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", 0), -1);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 0), -1);
    cr_assert_eq(parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nABC\r\n", 0), -1);
}
