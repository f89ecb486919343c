/* errors.c - every reply code of the contract through HTTP: status, body
 * envelope, Retry-After, Content-Type, and that refused requests change
 * nothing in the database. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

/* srv[0]: the suite's server; srv[1]: a second one some tests start. */
const app_suite_plan app_plan = {.db_name = "coupon.db", .nredis = 1, .nservers = 1};
TestSuite(app_errors, .init = app_suite_init, .fini = app_suite_fini, .timeout = 30);

/* A raw request; asserts the transport worked. */
static void req(const char *method, const char *path, const char *body,
                const char *const *headers, http_reply *r)
{
    app_request(&g_app.srv[0], method, path, body, headers, r);
}

/* Asserts a 400 / 1001 whose msg names `param`. */
static void expect_invalid(const http_reply *r, const char *param, const char *what)
{
    json_t *root = app_expect(r, 400, 1001);
    const char *msg = app_jstr(root, "msg");
    cr_assert_not_null(strstr(msg, param), "%s: msg '%s' does not name %s", what, msg, param);
    json_decref(root);
}

static void expect_unchanged(long long id, long long stock, long long records)
{
    app_coupon_state st;
    app_expect_db(g_app.db, id, stock, records, &st);
}

Test(app_errors, bad_coupon_id_1001, .timeout = 30)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 1);
    const char *paths[] = {
        "/api/v1/coupon/add?user_id=u1",
        "/api/v1/coupon/add?coupon_id=&user_id=u1",
        "/api/v1/coupon/add?coupon_id=abc&user_id=u1",
        "/api/v1/coupon/add?coupon_id=0&user_id=u1",
        "/api/v1/coupon/add?coupon_id=-1&user_id=u1",
        "/api/v1/coupon/add?coupon_id=99999999999999999999&user_id=u1",
        "/api/v1/coupon/add?coupon_id=1.5&user_id=u1",
        "/api/v1/coupon/add?coupon_id=1x&user_id=u1",
        "/api/v1/coupon/add?coupon_id=%201&user_id=u1",
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        for (int m = 0; m < 2; m++) {
            http_reply r;
            req(m ? "GET" : "POST", paths[i], NULL, NULL, &r);
            expect_invalid(&r, "coupon_id", paths[i]);
            http_reply_free(&r);
        }
    }
    expect_unchanged(id, 5, 0);
}

Test(app_errors, bad_user_id_1001, .timeout = 30)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 1);
    char long_user[66];
    memset(long_user, 'a', 65);
    long_user[65] = '\0';
    char p65[256];
    snprintf(p65, sizeof p65, "/api/v1/coupon/add?coupon_id=%lld&user_id=%s", id, long_user);
    char pmiss[128], pempty[128], pspace[128], pslash[128], pquote[128], putf[128];
    snprintf(pmiss, sizeof pmiss, "/api/v1/coupon/add?coupon_id=%lld", id);
    snprintf(pempty, sizeof pempty, "/api/v1/coupon/add?coupon_id=%lld&user_id=", id);
    snprintf(pspace, sizeof pspace, "/api/v1/coupon/add?coupon_id=%lld&user_id=a%%20b", id);
    snprintf(pslash, sizeof pslash, "/api/v1/coupon/add?coupon_id=%lld&user_id=x%%2Fy", id);
    snprintf(pquote, sizeof pquote, "/api/v1/coupon/add?coupon_id=%lld&user_id=a%%22b", id);
    snprintf(putf, sizeof putf, "/api/v1/coupon/add?coupon_id=%lld&user_id=%%C3%%A9", id);
    const char *paths[] = {pmiss, pempty, p65, pspace, pslash, pquote, putf};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        http_reply r;
        req("POST", paths[i], NULL, NULL, &r);
        expect_invalid(&r, "user_id", paths[i]);
        http_reply_free(&r);
    }
    expect_unchanged(id, 5, 0);

    /* The boundary: 64 characters of the full allowed alphabet are accepted. */
    char ok_user[65] = "Az09_.:-";
    memset(ok_user + 8, 'b', 56);
    ok_user[64] = '\0';
    http_reply r;
    app_claim(&g_app.srv[0], "POST", id, ok_user, &r);
    json_t *root = app_expect(&r, 200, 0);
    cr_assert_str_eq(app_jstr(json_object_get(root, "data"), "user_id"), ok_user);
    json_decref(root);
    http_reply_free(&r);
    expect_unchanged(id, 4, 1);
    cr_assert_eq(
        app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE user_id='%s'", ok_user), 1);
}

/* %00 must not cut a value short: "nul%00evil" is not the user "nul", and
 * "1%00junk" is not coupon 1. libmicrohttpd decodes %00 into a NUL that ends
 * the C string, so the server keeps %00 undecoded (http/unescape.c). */
Test(app_errors, nul_in_query_or_path_is_refused, .timeout = 30)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "c", 5, 0);
    char puser[128], pid[128], ppath[64];
    snprintf(puser, sizeof puser, "/api/v1/coupon/add?coupon_id=%lld&user_id=nul%%00evil", id);
    snprintf(pid, sizeof pid, "/api/v1/coupon/add?coupon_id=%lld%%00junk&user_id=u1", id);
    snprintf(ppath, sizeof ppath, "/api/v1/coupon/%lld%%00junk", id);
    http_reply r;
    req("POST", puser, NULL, NULL, &r);
    expect_invalid(&r, "user_id", puser);
    http_reply_free(&r);
    req("POST", pid, NULL, NULL, &r);
    expect_invalid(&r, "coupon_id", pid);
    http_reply_free(&r);
    req("GET", ppath, NULL, NULL, &r);
    cr_assert_neq(r.status, 200, "%s answered 200", ppath);
    cr_assert(r.status == 400 || r.status == 404, "%s answered %ld", ppath, (long)r.status);
    http_reply_free(&r);
    expect_unchanged(id, 5, 0);
}

Test(app_errors, no_such_coupon_1002, .timeout = 30)
{
    APP_SETUP_OK();
    http_reply r;
    app_claim_expect(&g_app.srv[0], "POST", 424242, "u1", 404, 1002, 0);

    req("GET", "/api/v1/coupon/424242", NULL, NULL, &r);
    json_decref(app_expect(&r, 404, 1002));
    http_reply_free(&r);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record"), 0);
}

Test(app_errors, sold_out_1003, .timeout = 30)
{
    APP_SETUP_OK();
    long long empty = app_create_coupon(&g_app.srv[0], "empty", 0, 1);
    long long two = app_create_coupon(&g_app.srv[0], "two", 2, 0);
    http_reply r;

    app_claim_expect(&g_app.srv[0], "POST", empty, "u1", 409, 1003, 0);
    expect_unchanged(empty, 0, 0);

    for (int i = 0; i < 2; i++) {
        app_claim(&g_app.srv[0], "POST", two, "u1", &r);
        json_t *root = app_expect(&r, 200, 0);
        cr_assert_eq(app_jint(json_object_get(root, "data"), "stock"), 1 - i);
        json_decref(root);
        http_reply_free(&r);
    }
    app_claim_expect(&g_app.srv[0], "POST", two, "u2", 409, 1003, 0);
    expect_unchanged(two, 0, 2);
}

Test(app_errors, user_limit_1004, .timeout = 30)
{
    APP_SETUP_OK();
    long long one = app_create_coupon(&g_app.srv[0], "one each", 10, 1);
    long long two = app_create_coupon(&g_app.srv[0], "two each", 10, 2);

    app_claim_expect(&g_app.srv[0], "POST", one, "alice", 200, 0, 0);
    app_claim_expect(&g_app.srv[0], "POST", one, "alice", 409, 1004, 0);
    app_claim_expect(&g_app.srv[0], "GET", one, "alice", 409, 1004, 0);
    expect_unchanged(one, 9, 1);

    for (int i = 0; i < 2; i++)
        app_claim_expect(&g_app.srv[0], "POST", two, "bob", 200, 0, 0);
    app_claim_expect(&g_app.srv[0], "POST", two, "bob", 409, 1004, 0);
    expect_unchanged(two, 8, 2);
    /* Another user is not affected by bob's limit. */
    app_claim_expect(&g_app.srv[0], "POST", two, "carol", 200, 0, 0);
    expect_unchanged(two, 7, 3);
}

static void expect_retry_after(const http_reply *r)
{
    cr_assert(r->retry_after[0] != '\0', "503 without Retry-After: %s", r->body);
    char *end = NULL;
    long v = strtol(r->retry_after, &end, 10);
    cr_assert(end != r->retry_after && *end == '\0' && v >= 0,
              "Retry-After '%s' is not a number of seconds", r->retry_after);
}

Test(app_errors, lock_held_1005, .timeout = 30)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "held", 5, 1);
    /* A second server on the same file and node that waits only 200 ms. */
    app_server_up(&g_app.srv[1], "--db", g_app.db, "--redis", g_app.redis[0].addr, "--lock-wait",
                  "200", NULL);

    char key[64], out[256];
    snprintf(key, sizeof key, APP_LOCK_KEY_FMT, id);
    /* Someone else's token with a long TTL: the lock stays taken for the test. */
    const char *set[] = {"SET", key, "foreign-holder-token-0000000000", "PX", "60000", "NX"};
    app_redis(&g_app.redis[0], out, sizeof out, 6, set);
    cr_assert_str_eq(out, "OK");

    http_reply r;
    app_claim(&g_app.srv[1], "POST", id, "u1", &r);
    json_decref(app_expect(&r, 503, 1005));
    expect_retry_after(&r);
    http_reply_free(&r);
    expect_unchanged(id, 5, 0);

    /* The holder's key is untouched: the server never deletes a foreign lock. */
    const char *get[] = {"GET", key};
    app_redis(&g_app.redis[0], out, sizeof out, 2, get);
    cr_assert_str_eq(out, "foreign-holder-token-0000000000");

    /* Once the holder is gone, the same request succeeds: the 1005 was the lock. */
    const char *del[] = {"DEL", key};
    app_redis(&g_app.redis[0], out, sizeof out, 2, del);
    app_claim_expect(&g_app.srv[1], "POST", id, "u1", 200, 0, 0);
    expect_unchanged(id, 4, 1);
}

Test(app_errors, redis_down_1006, .timeout = 30)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "down", 5, 1);
    cr_assert_eq(redis_kill(&g_app.redis[0]), 0);
    http_reply r;
    app_claim(&g_app.srv[0], "POST", id, "u1", &r);
    json_decref(app_expect(&r, 503, 1006));
    expect_retry_after(&r);
    http_reply_free(&r);
    expect_unchanged(id, 5, 0);
}

Test(app_errors, admin_auth_1007, .timeout = 30)
{
    APP_SETUP_OK();
    const char *body = "{\"name\":\"x\",\"stock\":3,\"per_user_limit\":1}";
    const char *json_ct = "Content-Type: application/json";
    http_reply r;

    const char *none[] = {json_ct, NULL};
    req("POST", "/api/v1/admin/coupon", body, none, &r);
    json_decref(app_expect(&r, 401, 1007));
    http_reply_free(&r);

    const char *wrong_lists[][3] = {
        {"Authorization: Bearer wrong-token", json_ct, NULL},
        {"Authorization: Bearer " APP_TOKEN "x", json_ct, NULL},
        {"Authorization: Bearer", json_ct, NULL},
        {"Authorization: Basic " APP_TOKEN, json_ct, NULL},
        {"Authorization: " APP_TOKEN, json_ct, NULL},
    };
    for (size_t i = 0; i < sizeof wrong_lists / sizeof wrong_lists[0]; i++) {
        req("POST", "/api/v1/admin/coupon", body, wrong_lists[i], &r);
        cr_assert(r.status == 401 || r.status == 403, "%s: status %ld", wrong_lists[i][0],
                  r.status);
        json_decref(app_expect(&r, r.status, 1007));
        http_reply_free(&r);
    }
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 0);

    /* Without --admin-token (and without the variable) admin is disabled. */
    unsetenv("COUPON_ADMIN_TOKEN");
    app_server_up(&g_app.srv[1], "--db", g_app.db, "--redis", g_app.redis[0].addr, NULL);
    const char *any[] = {"Authorization: Bearer " APP_TOKEN, json_ct, NULL};
    const char *empty[] = {"Authorization: Bearer ", json_ct, NULL};
    char url[256];
    app_url(url, sizeof url, &g_app.srv[1], "/api/v1/admin/coupon");
    for (int i = 0; i < 3; i++) {
        const char *const *h = i == 0 ? any : i == 1 ? empty : none;
        memset(&r, 0, sizeof r);
        cr_assert_eq(http_request("POST", url, body, h, &r), 0);
        json_decref(app_expect(&r, 403, 1007));
        http_reply_free(&r);
    }
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 0);
}

/* Strict Bearer parsing, and a back-off after failed guesses: on a server of
 * its own, so that the other tests' admin calls are not slowed down. */
Test(app_errors, admin_auth_strict_and_backoff, .timeout = 30)
{
    APP_SETUP_OK();
    const char *body = "{\"name\":\"x\",\"stock\":3}";
    const char *json_ct = "Content-Type: application/json";
    char url[256];
    http_reply r;

    app_server_up(&g_app.srv[1], "--db", g_app.db, "--redis", g_app.redis[0].addr, "--admin-token", APP_TOKEN,
                  NULL);
    app_url(url, sizeof url, &g_app.srv[1], "/api/v1/admin/coupon");
    /* Malformed: a lower-case scheme, two spaces, a second header, a space inside. */
    const char *malformed[][4] = {
        {"Authorization: bearer " APP_TOKEN, json_ct, NULL, NULL},
        {"Authorization: Bearer  " APP_TOKEN, json_ct, NULL, NULL},
        {"Authorization: Bearer " APP_TOKEN, "Authorization: Bearer " APP_TOKEN, json_ct, NULL},
        {"Authorization: Bearer " APP_TOKEN " x", json_ct, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        memset(&r, 0, sizeof r);
        cr_assert_eq(http_request("POST", url, body, malformed[i], &r), 0);
        json_decref(app_expect(&r, 401, 1007));
        http_reply_free(&r);
    }
    /* ADMIN_GUARD_FREE_TRIES (5) wrong guesses answer 401, then every
     * attempt 429 with Retry-After, the right token too (the back-off
     * comes first, so a 429 tells a guesser nothing); after the wait the
     * right token is served, and it clears the record. */
    const char *wrong[] = {"Authorization: Bearer wrong-token", json_ct, NULL};
    const char *right[] = {"Authorization: Bearer " APP_TOKEN, json_ct, NULL};
    int wait_s = 0;
    for (int i = 0; i < 6; i++) {
        memset(&r, 0, sizeof r);
        cr_assert_eq(http_request("POST", url, body, wrong, &r), 0);
        json_decref(app_expect(&r, i < 5 ? 401 : 429, 1007));
        if (i == 5)
            cr_assert((wait_s = atoi(r.retry_after)) >= 1, "Retry-After '%s'", r.retry_after);
        http_reply_free(&r);
    }
    memset(&r, 0, sizeof r);
    cr_assert_eq(http_request("POST", url, body, right, &r), 0);
    json_decref(app_expect(&r, 429, 1007));
    http_reply_free(&r);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 0);
    test_sleep_ms((int64_t)wait_s * 1000 + 100);
    memset(&r, 0, sizeof r);
    cr_assert_eq(http_request("POST", url, body, right, &r), 0);
    json_decref(app_expect(&r, 201, 0));
    http_reply_free(&r);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 1);
    memset(&r, 0, sizeof r);
    cr_assert_eq(http_request("POST", url, body, wrong, &r), 0);
    json_decref(app_expect(&r, 401, 1007));
    http_reply_free(&r);
}

Test(app_errors, admin_bad_body_1001, .timeout = 30)
{
    APP_SETUP_OK();
    const char *h[] = {"Authorization: Bearer " APP_TOKEN, "Content-Type: application/json", NULL};
    struct {
        const char *body;
        const char *param; /* the msg names it; NULL: not checked */
    } cases[] = {
        {"{\"stock\":3}", "name"},
        {"{\"name\":\"\",\"stock\":3}", "name"},
        {"{\"name\":7,\"stock\":3}", "name"},
        {"{\"name\":\"x\"}", "stock"},
        {"{\"name\":\"x\",\"stock\":-1}", "stock"},
        {"{\"name\":\"x\",\"stock\":\"3\"}", "stock"},
        {"{\"name\":\"x\",\"stock\":1.5}", "stock"},
        {"{\"name\":\"x\",\"stock\":3,\"per_user_limit\":-1}", "per_user_limit"},
        {"{\"name\":\"x\",\"stock\":3,\"per_user_limit\":\"a\"}", "per_user_limit"},
        {"{\"name\":\"x\",\"stock\":3", NULL},
        {"[1,2]", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        http_reply r;
        req("POST", "/api/v1/admin/coupon", cases[i].body, h, &r);
        if (cases[i].param) {
            expect_invalid(&r, cases[i].param, cases[i].body);
        } else {
            json_decref(app_expect(&r, 400, 1001));
        }
        http_reply_free(&r);
    }
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 0);
}

Test(app_errors, unknown_route_and_method_1008, .timeout = 30)
{
    APP_SETUP_OK();
    const char *not_found[][2] = {
        {"GET", "/nope"},
        {"GET", "/api/v1/nothing"},
        {"POST", "/api/v2/coupon/add?coupon_id=1&user_id=u"},
        {"GET", "/api/v1/coupon/add/extra?coupon_id=1&user_id=u"},
    };
    http_reply r;
    for (size_t i = 0; i < sizeof not_found / sizeof not_found[0]; i++) {
        req(not_found[i][0], not_found[i][1], NULL, NULL, &r);
        json_decref(app_expect(&r, 404, 1008));
        http_reply_free(&r);
    }
    const char *bad_method[][2] = {
        {"DELETE", "/api/v1/coupon/add?coupon_id=1&user_id=u"},
        {"PUT", "/api/v1/coupon/add?coupon_id=1&user_id=u"},
        {"DELETE", "/api/v1/admin/coupon"},
        {"GET", "/api/v1/admin/coupon"},
        {"POST", "/healthz"},
    };
    for (size_t i = 0; i < sizeof bad_method / sizeof bad_method[0]; i++) {
        req(bad_method[i][0], bad_method[i][1], NULL, NULL, &r);
        json_decref(app_expect(&r, 405, 1008));
        http_reply_free(&r);
    }
    /* The client's raw method is not echoed back. */
    req("X<script>", "/healthz", NULL, NULL, &r);
    json_decref(app_expect(&r, 405, 1008));
    cr_assert_null(strstr(r.body, "X<script>"), "%s", r.body);
    http_reply_free(&r);
}

/* Every answer, JSON or page, carries the hardening headers. */
Test(app_errors, hardening_headers_on_every_answer, .timeout = 30)
{
    APP_SETUP_OK();
    const char *paths[][2] = {
        {"GET", "/api/v1/coupon"}, {"GET", "/nope"}, {"GET", "/healthz"}, {"GET", "/metrics"},
        {"GET", "/"},              {"POST", "/api/v1/coupon/add?coupon_id=x"},
    };
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        http_reply r;
        req(paths[i][0], paths[i][1], NULL, NULL, &r);
        cr_assert_str_eq(r.nosniff, "nosniff", "%s", paths[i][1]);
        cr_assert_str_eq(r.cache_control, "no-store", "%s", paths[i][1]);
        cr_assert_not_null(strstr(r.csp, "frame-ancestors 'none'"), "%s: CSP '%s'", paths[i][1], r.csp);
        /* Only the page may run code, and only its own inline code. */
        if (strncmp(r.content_type, "text/html", 9) == 0)
            cr_assert_null(strstr(r.csp, "http"), "%s", r.csp);
        else
            cr_assert(strncmp(r.csp, "default-src 'none'", 18) == 0 && strstr(r.csp, "script-src") == NULL,
                      "%s: %s", paths[i][1], r.csp);
        http_reply_free(&r);
    }
}

/* A JSON body of `size` bytes (a long name), malloc'd. */
static char *big_body(size_t size)
{
    char *body = malloc(size + 1);
    cr_assert_not_null(body);
    memset(body, 'n', size);
    memcpy(body, "{\"name\":\"", 9);
    memcpy(body + size - 16, "\",\"stock\":1}     ", 16);
    body[size] = '\0';
    return body;
}

Test(app_errors, too_large_1009, .timeout = 30)
{
    APP_SETUP_OK();
    const char *h[] = {"Authorization: Bearer " APP_TOKEN, "Content-Type: application/json", NULL};
    http_reply r;
    /* 64 KiB: sent at once, read by the server in pieces; 2 MiB: curl asks
     * "Expect: 100-continue" first, so the refusal comes before the body. */
    size_t sizes[] = {64u * 1024, 2u * 1024 * 1024};
    for (size_t i = 0; i < 2; i++) {
        char *body = big_body(sizes[i]);
        req("POST", "/api/v1/admin/coupon", body, h, &r);
        free(body);
        json_decref(app_expect(&r, 413, 1009));
        http_reply_free(&r);
    }
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 0);

    /* 20 KB of one header. */
    size_t hlen = 20 * 1024;
    char *hdr = malloc(hlen + 16);
    cr_assert_not_null(hdr);
    memcpy(hdr, "X-Big: ", 7);
    memset(hdr + 7, 'a', hlen);
    hdr[7 + hlen] = '\0';
    const char *hh[] = {hdr, NULL};
    req("GET", "/api/v1/coupon", NULL, hh, &r);
    free(hdr);
    json_decref(app_expect(&r, 431, 1009));
    http_reply_free(&r);

    /* The server still serves normal requests afterwards. */
    req("GET", "/api/v1/coupon", NULL, NULL, &r);
    json_decref(app_expect(&r, 200, 0));
    http_reply_free(&r);
}

Test(app_errors, create_201, .timeout = 30)
{
    APP_SETUP_OK();
    const char *h[] = {"Authorization: Bearer " APP_TOKEN, "Content-Type: application/json", NULL};
    http_reply r;
    req("POST", "/api/v1/admin/coupon",
        "{\"name\":\"Spring sale \\u00e9\",\"stock\":5,\"per_user_limit\":2}", h, &r);
    json_t *root = app_expect(&r, 201, 0);
    json_t *d = json_object_get(root, "data");
    cr_assert(json_is_object(d));
    long long id = app_jint(d, "coupon_id");
    cr_assert_gt(id, 0);
    cr_assert_str_eq(app_jstr(d, "name"), "Spring sale \xc3\xa9");
    cr_assert_eq(app_jint(d, "total"), 5);
    cr_assert_eq(app_jint(d, "stock"), 5);
    cr_assert_eq(app_jint(d, "issued"), 0);
    cr_assert_eq(app_jint(d, "per_user_limit"), 2);
    json_decref(root);
    http_reply_free(&r);

    app_coupon_state st;
    app_db_state(g_app.db, id, &st);
    cr_assert_eq(st.total, 5);
    cr_assert_eq(st.stock, 5);
    cr_assert_eq(st.per_user_limit, 2);
    cr_assert_eq(st.records, 0);
    cr_assert_eq(app_db_int(g_app.db,
                            "SELECT COUNT(*) FROM coupon WHERE id=%lld AND name='Spring sale "
                            "\xc3\xa9'",
                            id),
                 1);

    /* per_user_limit defaults to 1; 0 means unlimited and is accepted. */
    req("POST", "/api/v1/admin/coupon", "{\"name\":\"dflt\",\"stock\":0}", h, &r);
    root = app_expect(&r, 201, 0);
    cr_assert_eq(app_jint(json_object_get(root, "data"), "per_user_limit"), 1);
    cr_assert_eq(app_jint(json_object_get(root, "data"), "stock"), 0);
    json_decref(root);
    http_reply_free(&r);
    req("POST", "/api/v1/admin/coupon", "{\"name\":\"unl\",\"stock\":1,\"per_user_limit\":0}", h,
        &r);
    root = app_expect(&r, 201, 0);
    cr_assert_eq(app_jint(json_object_get(root, "data"), "per_user_limit"), 0);
    json_decref(root);
    http_reply_free(&r);
    cr_assert_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon"), 3);
}

Test(app_errors, claim_200_fields, .timeout = 30)
{
    APP_SETUP_OK();
    long long id = app_create_coupon(&g_app.srv[0], "claims", 3, 1);
    long long prev_fence = 0;
    const char *users[] = {"u-1", "u.2", "u:3"};
    for (int i = 0; i < 3; i++) {
        http_reply r;
        /* GET is the original endpoint and must behave as POST. */
        app_claim(&g_app.srv[0], i == 1 ? "GET" : "POST", id, users[i], &r);
        json_t *root = app_expect(&r, 200, 0);
        json_t *d = json_object_get(root, "data");
        cr_assert(json_is_object(d));
        cr_assert_eq(app_jint(d, "coupon_id"), id);
        cr_assert_str_eq(app_jstr(d, "user_id"), users[i]);
        long long rec = app_jint(d, "record_id");
        cr_assert_eq(app_jint(d, "stock"), 2 - i);
        long long fence = app_jint(d, "fence");
        cr_assert_gt(fence, prev_fence, "fence %lld not above the previous %lld", fence,
                     prev_fence);
        prev_fence = fence;
        /* The reply describes the row that was written. */
        cr_assert_eq(app_db_int(g_app.db,
                                "SELECT COUNT(*) FROM coupon_record WHERE id=%lld AND coupon_id=%lld "
                                "AND user_id='%s' AND fence=%lld",
                                rec, id, users[i], fence),
                     1, "record %lld not in the DB as replied", rec);
        json_decref(root);
        http_reply_free(&r);
    }
    expect_unchanged(id, 0, 3);
}

Test(app_errors, get_coupon_and_list, .timeout = 30)
{
    APP_SETUP_OK();
    long long a = app_create_coupon(&g_app.srv[0], "alpha", 4, 0);
    long long b = app_create_coupon(&g_app.srv[0], "beta", 2, 1);
    http_reply r;
    for (int i = 0; i < 3; i++)
        app_claim_expect(&g_app.srv[0], "POST", a, i == 2 ? "x" : "y", 200, 0, 0);
    char path[64];
    snprintf(path, sizeof path, "/api/v1/coupon/%lld", a);
    req("GET", path, NULL, NULL, &r);
    json_t *root = app_expect(&r, 200, 0);
    json_t *d = json_object_get(root, "data");
    cr_assert_eq(app_jint(d, "coupon_id"), a);
    cr_assert_str_eq(app_jstr(d, "name"), "alpha");
    cr_assert_eq(app_jint(d, "total"), 4);
    cr_assert_eq(app_jint(d, "stock"), 1);
    cr_assert_eq(app_jint(d, "issued"), 3);
    cr_assert_eq(app_jint(d, "per_user_limit"), 0);
    cr_assert_eq(app_jint(d, "stock") + app_jint(d, "issued"), app_jint(d, "total"));
    json_decref(root);
    http_reply_free(&r);

    req("GET", "/api/v1/coupon", NULL, NULL, &r);
    root = app_expect(&r, 200, 0);
    d = json_object_get(root, "data");
    cr_assert(json_is_array(d), "data is not an array: %s", r.body);
    cr_assert_eq(json_array_size(d), 2);
    int seen_a = 0, seen_b = 0;
    for (size_t i = 0; i < json_array_size(d); i++) {
        json_t *c = json_array_get(d, i);
        long long cid = app_jint(c, "coupon_id");
        cr_assert_eq(app_jint(c, "stock") + app_jint(c, "issued"), app_jint(c, "total"));
        if (cid == a) {
            seen_a++;
            cr_assert_eq(app_jint(c, "stock"), 1);
            cr_assert_eq(app_jint(c, "issued"), 3);
        } else if (cid == b) {
            seen_b++;
            cr_assert_str_eq(app_jstr(c, "name"), "beta");
            cr_assert_eq(app_jint(c, "total"), 2);
            cr_assert_eq(app_jint(c, "stock"), 2);
            cr_assert_eq(app_jint(c, "issued"), 0);
            cr_assert_eq(app_jint(c, "per_user_limit"), 1);
        }
    }
    cr_assert_eq(seen_a, 1);
    cr_assert_eq(seen_b, 1);
    json_decref(root);
    http_reply_free(&r);
}
