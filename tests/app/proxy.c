/* proxy.c - behind a trusted proxy: the proxy names
 * the client in X-Forwarded-For (HAProxy's `option forwardfor` appends the
 * address it accepted), and the admin back-off counts that client:
 *   - two clients behind one proxy address each have their own five wrong
 *     guesses before 429, and the proxy's own address keeps its record;
 *   - the rightmost entry that is not a trusted proxy is the client: what
 *     the client wrote to its left changes nothing, and a second trusted
 *     hop is skipped;
 *   - from a peer outside --trusted-proxy the header is ignored: a client
 *     cannot pose as someone else;
 *   - IPv6 clients count by their /64;
 *   - a claim through the proxy is served and lands in the store.
 * The "proxy" is this test speaking from 127.0.0.5 (trusted); the suite's
 * helpers speak from 127.0.0.1 (not trusted). Real processes: one
 * redis-server, one coupon-server per test. */
#include <stdio.h>
#include <string.h>
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

/* An admin POST from peer with token and, unless NULL, X-Forwarded-For xff:
 * the status (0: none); the answer into ans. */
static int admin_from(const char *peer, const char *xff, const char *token, char *ans, size_t cap)
{
    static const char body[] = "{\"name\":\"p\",\"stock\":1}";
    char req[1024], hdr[300] = "";
    if (xff != NULL)
        snprintf(hdr, sizeof hdr, "X-Forwarded-For: %s\r\n", xff);
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/admin/coupon HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n%s"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     token, hdr, sizeof body - 1, body);
    int fd = raw_connect(&g_app.srv[0], peer, 5000), closed = 0;
    cr_assert(fd >= 0, "connect from %s failed", peer);
    cr_assert_eq(raw_send_all(fd, req, (size_t)n), 0);
    (void)raw_read_answer(fd, ans, cap, 8000, &closed);
    close(fd);
    return raw_status_of(ans);
}

#define WRONG "wrong-token-0123456789"

/* FREE_TRIES wrong guesses with each X-Forwarded-For value of xffs (the
 * same client, written differently) answer 401; the next one 429. */
static void expect_one_client(const char *peer, const char *const *xffs, size_t n)
{
    char ans[8192];
    for (int i = 0; i <= FREE_TRIES; i++) {
        int st = admin_from(peer, xffs[(size_t)i % n], WRONG, ans, sizeof ans);
        int want = i < FREE_TRIES ? 401 : 429;
        cr_assert_eq(st, want, "guess %d from %s (X-Forwarded-For: %s): %d, expected %d\n%s", i + 1, peer,
                     xffs[(size_t)i % n], st, want, ans);
        if (want == 429)
            cr_assert(strstr(ans, "this address") != NULL, "%s", ans);
    }
}

Test(app_proxy, each_forwarded_client_has_its_own_back_off)
{
    APP_SETUP_OK();
    server_up();
    const char *clients[2] = {"127.0.0.77", "127.0.0.78"};
    char ans[8192];
    for (int round = 0; round < FREE_TRIES + 1; round++)
        for (int k = 0; k < 2; k++) {
            int st = admin_from(PROXY_SRC, clients[k], WRONG, ans, sizeof ans);
            int want = round < FREE_TRIES ? 401 : 429;
            cr_assert_eq(st, want, "guess %d of client %s through the proxy: %d, expected %d\n%s", round + 1,
                         clients[k], st, want, ans);
        }
    /* The proxy's own address guessed nothing; a waiting client is
     * refused the right token too (the back-off comes first), and a
     * client that never guessed, behind the same proxy, is served. */
    cr_assert_eq(admin_from(PROXY_SRC, NULL, WRONG, ans, sizeof ans), 401, "%s", ans);
    cr_assert_eq(admin_from(PROXY_SRC, clients[0], APP_TOKEN, ans, sizeof ans), 429, "%s", ans);
    cr_assert_eq(admin_from(PROXY_SRC, "127.0.0.79", APP_TOKEN, ans, sizeof ans), 201, "%s", ans);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 1);
}

Test(app_proxy, rightmost_untrusted_entry_is_the_client)
{
    APP_SETUP_OK();
    server_up();
    /* What the client wrote before the proxy's entry changes nothing, and
     * a second trusted proxy (10.9.0.1) appended after it is skipped. */
    const char *xffs[] = {"1.2.3.4, 127.0.0.77", "5.6.7.8,127.0.0.77", "127.0.0.77, 10.9.0.1",
                          "9.9.9.9, 127.0.0.77, 10.9.3.3"};
    expect_one_client(PROXY_SRC, xffs, sizeof xffs / sizeof xffs[0]);
}

Test(app_proxy, header_from_an_untrusted_peer_is_ignored)
{
    APP_SETUP_OK();
    server_up();
    /* Every guess names another client, but 127.0.0.1 is no trusted
     * proxy: they all count for 127.0.0.1. */
    const char *xffs[] = {"127.0.0.80", "127.0.0.81", "127.0.0.82", "127.0.0.83", "127.0.0.84", "127.0.0.85"};
    expect_one_client("127.0.0.1", xffs, sizeof xffs / sizeof xffs[0]);
}

Test(app_proxy, ipv6_clients_count_by_their_64)
{
    APP_SETUP_OK();
    server_up();
    const char *xffs[] = {"2001:db8:1:2::1", "2001:db8:1:2:ffff::9", "2001:db8:1:2:aaaa:bbbb:cccc:dddd"};
    expect_one_client(PROXY_SRC, xffs, sizeof xffs / sizeof xffs[0]);
    /* Another /64 has its own record. */
    char ans[8192];
    cr_assert_eq(admin_from(PROXY_SRC, "2001:db8:1:3::1", WRONG, ans, sizeof ans), 401, "%s", ans);
}

Test(app_proxy, claim_through_the_proxy)
{
    APP_SETUP_OK();
    server_up();
    long long id = app_create_coupon(&g_app.srv[0], "proxied", 2, 0);
    char req[512], ans[4096];
    int n = snprintf(req, sizeof req,
                     "POST /api/v1/coupon/add?coupon_id=%lld&user_id=u77 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                     "X-Forwarded-For: 127.0.0.77\r\nConnection: close\r\n\r\n", id);
    int fd = raw_connect(&g_app.srv[0], PROXY_SRC, 5000), closed = 0;
    cr_assert_geq(fd, 0);
    cr_assert_eq(raw_send_all(fd, req, (size_t)n), 0);
    (void)raw_read_answer(fd, ans, sizeof ans, 8000, &closed);
    close(fd);
    cr_assert_eq(raw_status_of(ans), 200, "a claim through the proxy: %s", ans);
    cr_assert(strstr(ans, "\"code\":0") != NULL, "%s", ans);
    app_coupon_state cs;
    app_expect_db(g_app.db, id, 1, 1, &cs);
}
