/* proxy.c - the PROXY protocol from a trusted proxy (issue 22, point 6):
 *   - a connection from a --trusted-proxy network opens with a PROXY v2 (or
 *     v1) header, whose client address is the one the server believes: the
 *     admin back-off counts two clients behind the same proxy connection
 *     source separately, and the proxy's LOCAL health check keeps its own;
 *   - a PROXY header from any other address is refused 400 (a client
 *     claiming someone else's address);
 *   - a trusted peer without the header, or with a malformed one, is
 *     refused; a truncated one is closed without an answer;
 *   - a claim through it is served and lands in the store.
 * The "proxy" is this test speaking the bytes HAProxy's send-proxy-v2 sends,
 * from 127.0.0.5 (trusted); the suite's helpers speak from 127.0.0.1 (not
 * trusted). Real processes: one redis-server, one coupon-server per test. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "app_util.h"
#include "raw_conn.h"

const app_suite_plan app_plan = {.db_name = "proxy.db", .nredis = 1, .nservers = 0};
TestSuite(app_proxy, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

#define PROXY_SRC "127.0.0.5"
#define FREE_TRIES 5 /* app/src/http/admin_guard.h: wrong guesses before the wait */

static void server_up(void)
{
    app_env_server_up(&g_app, 0, "--trusted-proxy", "10.9.0.0/16," PROXY_SRC "/32", NULL);
}

/* A PROXY v2 header, PROXY command, TCP over IPv4, from client src:sport to
 * 127.0.0.1:8080, into out (28 bytes); local: the LOCAL command instead. */
static size_t v2_header(char *out, const char *src, int local)
{
    static const unsigned char sig[12] = {'\r', '\n', '\r', '\n', 0, '\r', '\n', 'Q', 'U', 'I', 'T', '\n'};
    unsigned char *p = (unsigned char *)out;
    memcpy(p, sig, 12);
    p[12] = local ? 0x20 : 0x21;
    p[13] = 0x11; /* AF_INET, STREAM */
    p[14] = 0;
    p[15] = 12;
    cr_assert_eq(inet_pton(AF_INET, src, p + 16), 1);
    cr_assert_eq(inet_pton(AF_INET, "127.0.0.1", p + 20), 1);
    p[24] = 0xc3; /* source port 50000 */
    p[25] = 0x50;
    p[26] = 0x1f; /* destination port 8080 */
    p[27] = 0x90;
    return 28;
}

/* prefix[0..np) then req on a fresh connection from peer: the answer's
 * status (0: none), the answer into ans; *closed: the server closed. */
static int send_raw(const char *peer, const char *prefix, size_t np, const char *req, char *ans, size_t cap,
                    int *closed)
{
    int fd = raw_connect(&g_app.srv[0], peer, 5000);
    cr_assert(fd >= 0, "connect from %s failed", peer);
    cr_assert_eq(raw_send_all(fd, prefix, np), 0);
    if (req != NULL)
        cr_assert_eq(raw_send_all(fd, req, strlen(req)), 0);
    else
        (void)shutdown(fd, SHUT_WR); /* nothing more will come */
    int c = 0;
    (void)raw_read_answer(fd, ans, cap, 8000, &c);
    close(fd);
    if (closed != NULL)
        *closed = c;
    return raw_status_of(ans);
}

static char *admin_req(char *out, size_t cap, const char *token)
{
    static const char body[] = "{\"name\":\"p\",\"stock\":1}";
    snprintf(out, cap,
             "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
             token, sizeof body - 1, body);
    return out;
}

static const char HEALTHZ[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

/* Two clients behind the one proxy address, alternating wrong guesses:
 * each has its own FREE_TRIES. Believed or not, the guesses would all be
 * 127.0.0.5's, and the third round would already wait. */
Test(app_proxy, each_proxied_client_has_its_own_back_off)
{
    APP_SETUP_OK();
    server_up();
    const char *clients[2] = {"127.0.0.77", "127.0.0.78"};
    char hdr[64], req[512], ans[8192];
    for (int round = 0; round < FREE_TRIES + 1; round++)
        for (int k = 0; k < 2; k++) {
            size_t nh = v2_header(hdr, clients[k], 0);
            int st = send_raw(PROXY_SRC, hdr, nh, admin_req(req, sizeof req, "wrong-token-0123456789"), ans,
                              sizeof ans, NULL);
            int want = round < FREE_TRIES ? 401 : 429;
            cr_assert_eq(st, want, "guess %d of client %s through the proxy: %d, expected %d\n%s", round + 1,
                         clients[k], st, want, ans);
            if (want == 429)
                cr_assert(strstr(ans, "this address") != NULL, "%s", ans);
        }
    /* The proxy's own LOCAL connection is 127.0.0.5, which guessed nothing. */
    size_t nh = v2_header(hdr, "0.0.0.0", 1);
    int st = send_raw(PROXY_SRC, hdr, nh, admin_req(req, sizeof req, APP_TOKEN), ans, sizeof ans, NULL);
    cr_assert_eq(st, 201, "the right token on a LOCAL connection: %d\n%s", st, ans);
    /* A waiting client stays waiting with the right token too. */
    nh = v2_header(hdr, clients[0], 0);
    st = send_raw(PROXY_SRC, hdr, nh, admin_req(req, sizeof req, APP_TOKEN), ans, sizeof ans, NULL);
    cr_assert_eq(st, 429, "the right token from a waiting proxied client: %d\n%s", st, ans);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 1);
}

Test(app_proxy, header_from_an_untrusted_peer_is_refused)
{
    APP_SETUP_OK();
    server_up();
    char hdr[64], ans[4096];
    size_t nh = v2_header(hdr, "127.0.0.77", 0);
    int st = send_raw("127.0.0.1", hdr, nh, HEALTHZ, ans, sizeof ans, NULL);
    cr_assert_eq(st, 400, "a v2 header from an untrusted peer: %d\n%s", st, ans);
    cr_assert(strstr(ans, "\"code\":1001") != NULL && strstr(ans, "trusted-proxy") != NULL, "%s", ans);
    static const char v1[] = "PROXY TCP4 127.0.0.77 127.0.0.1 50000 8080\r\n";
    st = send_raw("127.0.0.1", v1, sizeof v1 - 1, HEALTHZ, ans, sizeof ans, NULL);
    cr_assert_eq(st, 400, "a v1 header from an untrusted peer: %d\n%s", st, ans);
    /* Without a header, the same peer is served. */
    st = send_raw("127.0.0.1", "", 0, HEALTHZ, ans, sizeof ans, NULL);
    cr_assert_eq(st, 200, "plain /healthz from an untrusted peer: %d\n%s", st, ans);
}

Test(app_proxy, trusted_peer_without_or_with_a_bad_header_is_refused)
{
    APP_SETUP_OK();
    server_up();
    char hdr[64], ans[4096];
    int closed = 0;
    int st = send_raw(PROXY_SRC, "", 0, HEALTHZ, ans, sizeof ans, NULL);
    cr_assert_eq(st, 400, "a trusted peer without a header: %d\n%s", st, ans);
    cr_assert(strstr(ans, "must open with a PROXY") != NULL, "%s", ans);
    size_t nh = v2_header(hdr, "127.0.0.77", 0);
    hdr[12] = 0x31; /* version 3 */
    st = send_raw(PROXY_SRC, hdr, nh, HEALTHZ, ans, sizeof ans, NULL);
    cr_assert_eq(st, 400, "a version-3 header: %d\n%s", st, ans);
    nh = v2_header(hdr, "127.0.0.77", 0);
    hdr[15] = 4; /* too short for IPv4's 12 address bytes */
    st = send_raw(PROXY_SRC, hdr, nh, HEALTHZ, ans, sizeof ans, NULL);
    cr_assert_eq(st, 400, "a header shorter than its family: %d\n%s", st, ans);
    static const char v1bad[] = "PROXY TCP4 127.0.0.777 127.0.0.1 50000 8080\r\n";
    st = send_raw(PROXY_SRC, v1bad, sizeof v1bad - 1, HEALTHZ, ans, sizeof ans, NULL);
    cr_assert_eq(st, 400, "a v1 line with a bad address: %d\n%s", st, ans);
    /* Truncated: half a header, then the proxy's side closes. */
    nh = v2_header(hdr, "127.0.0.77", 0);
    st = send_raw(PROXY_SRC, hdr, 20, NULL, ans, sizeof ans, &closed);
    cr_assert(st == 0 && closed, "a truncated header: status %d, closed %d\n%s", st, closed, ans);
    /* The v1 text form from a trusted peer is taken. */
    static const char v1[] = "PROXY TCP4 127.0.0.77 127.0.0.1 50000 8080\r\n";
    st = send_raw(PROXY_SRC, v1, sizeof v1 - 1, HEALTHZ, ans, sizeof ans, NULL);
    cr_assert_eq(st, 200, "/healthz behind a v1 header: %d\n%s", st, ans);
}

Test(app_proxy, claim_through_the_proxy)
{
    APP_SETUP_OK();
    server_up();
    long long id = app_create_coupon(&g_app.srv[0], "proxied", 2, 0);
    char hdr[64], req[512], ans[4096];
    size_t nh = v2_header(hdr, "127.0.0.77", 0);
    snprintf(req, sizeof req,
             "POST /api/v1/coupon/add?coupon_id=%lld&user_id=u77 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
             "Connection: close\r\n\r\n", id);
    int st = send_raw(PROXY_SRC, hdr, nh, req, ans, sizeof ans, NULL);
    cr_assert_eq(st, 200, "a claim through the proxy: %d\n%s", st, ans);
    cr_assert(strstr(ans, "\"code\":0") != NULL, "%s", ans);
    app_coupon_state cs;
    app_expect_db(g_app.db, id, 1, 1, &cs);
}
