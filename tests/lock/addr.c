/* addr.c - addresses as people write them: host without a port (6379),
 * localhost, [v6] with and without a port, redis://[[user]:password@]host
 * [:port][/0]; their credentials reach AUTH (password-only and ACL user,
 * right and wrong); bad input gets DLOCK_ERR_ARG with a clear reason that
 * never shows the password. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;

static void setup(void)
{
    char out[128];
    const char *setuser[] = {"ACL", "SETUSER", "locker", "on", ">user:pw@1", "~*", "+@all"};

    memset(&node, 0, sizeof node);
    strcpy(node.password, "s3cret");
    cr_assert_eq(redis_start(&node), 0);
    tc_cmd(&node, out, sizeof out, 7, setuser);
    cr_assert_str_eq(out, "OK");
}

static void teardown(void)
{
    redis_stop(&node);
}

TestSuite(lock_addr, .init = setup, .fini = teardown);

typedef struct good {
    const char *addr, *host;
    int port;
    const char *user, *password;
} good;

Test(lock_addr, accepted_forms, .timeout = 10)
{
    static const good cases[] = {
        {"localhost", "localhost", 6379, "", ""},
        {"127.0.0.1", "127.0.0.1", 6379, "", ""},
        {"127.0.0.1:16379", "127.0.0.1", 16379, "", ""},
        {"redis.example:7000", "redis.example", 7000, "", ""},
        {"[::1]", "::1", 6379, "", ""},
        {"[::1]:7000", "::1", 7000, "", ""},
        {"redis://127.0.0.1:16379", "127.0.0.1", 16379, "", ""},
        {"redis://localhost", "localhost", 6379, "", ""},
        {"redis://localhost/", "localhost", 6379, "", ""},
        {"redis://h:1/0", "h", 1, "", ""},
        {"redis://[fe80::1]:6380", "fe80::1", 6380, "", ""},
        {"redis://:pw@h:2", "h", 2, "", "pw"},
        {"redis://u:p@ss:w@h", "h", 6379, "u", "p@ss:w"},
        {"redis://u%3Ax:p%2C%25@h:3", "h", 3, "u:x", "p,%"},
        {"unix:/tmp/r.sock", "/tmp/r.sock", 0, "", ""},
        {"sentinel://s1,s2:5/mymaster", "mymaster", -1, "", ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char host[300], user[64], pw[64], err[DLOCK_ERRSTR_LEN];
        int port = -7;
        const good *g = &cases[i];

        cr_assert_eq(dlock_addr_parse(g->addr, host, sizeof host, &port, err, sizeof err),
                     DLOCK_OK, "%s: %s", g->addr, err);
        cr_assert_str_eq(host, g->host, "%s", g->addr);
        cr_assert_eq(port, g->port, "%s: port %d", g->addr, port);
        cr_assert_eq(dlock_addr_credentials(g->addr, user, sizeof user, pw, sizeof pw, err,
                                            sizeof err),
                     DLOCK_OK, "%s: %s", g->addr, err);
        cr_assert_str_eq(user, g->user, "%s", g->addr);
        cr_assert_str_eq(pw, g->password, "%s", g->addr);
    }
}

typedef struct bad {
    const char *addr, *reason;
} bad;

Test(lock_addr, refused_forms_say_why_and_hide_the_password, .timeout = 10)
{
    static const bad cases[] = {
        {"", "empty address"},
        {"::1:6379", "write IPv6 hosts as [addr]"},
        {"fe80::1", "write IPv6 hosts as [addr]"},
        {"[::1", "expected [ipv6]"},
        {"[::1]x", "expected [ipv6]"},
        {"h:", "bad port"},
        {"h:0", "port out of range"},
        {"h:65536", "port out of range"},
        {"h:12ab", "bad port"},
        {":6379", "bad host (none given)"},
        {"redis://", "bad host (none given)"},
        {"redis://:6379", "bad host (none given)"},
        {"redis://u@h", "a user without a password"},
        {"redis://u:@h", "empty password"},
        {"redis://u:s3cret@h/3", "database 0"},
        {"redis://:s3cret@h?timeout=1", "no URL options"},
        {"redis://u:%zzs3cret@h", "bad %XX escape"},
        {"rediss://:s3cret@h/3", "database 0"},
        {"http://h:80", "unknown scheme"},
        {"a b:1", "bad character (byte 0x20) in host"},
        {"h;x:6379", "bad character ';' in host"},
        {"h\"x", "bad character '\"' in host"},
        {"[::1;]:6379", "bad character ';' in host"},
        {"redis:/127.0.0.1:6379", "not host:port (a URL is written redis://host:port)"},
        {"sentinel://s1/", "expected sentinel://"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[DLOCK_ERRSTR_LEN] = "";
        dlock_options o;
        dlock_client *c = (dlock_client *)0x1;
        char cerr[DLOCK_ERRSTR_LEN] = "";
        const char *addrs[1] = {cases[i].addr};

        cr_assert_eq(dlock_addr_check(cases[i].addr, err, sizeof err), DLOCK_ERR_ARG, "%s",
                     cases[i].addr);
        cr_assert(strstr(err, cases[i].reason) != NULL, "%s: \"%s\" lacks \"%s\"", cases[i].addr,
                  err, cases[i].reason);
        cr_assert(strstr(err, "s3cret") == NULL, "%s: the message shows the password: %s",
                  cases[i].addr, err);
        /* dlock_client_new refuses it the same way, never connects. */
        dlock_options_init(&o);
        o.addrs = addrs;
        o.n_addrs = 1;
        cr_assert_eq(dlock_client_new(&o, &c, cerr, sizeof cerr), DLOCK_ERR_ARG);
        cr_assert_null(c);
        cr_assert(strstr(cerr, cases[i].reason) != NULL, "%s: %s", cases[i].addr, cerr);
    }
    /* What logs and replies show: never the password. */
    {
        char shown[128];
        cr_assert_str_eq(dlock_addr_shown("redis://u:p@ss:w@h:5", shown, sizeof shown),
                         "redis://u:***@h:5");
        cr_assert_str_eq(dlock_addr_shown("redis://:s3cret@h", shown, sizeof shown),
                         "redis://:***@h");
        cr_assert_str_eq(dlock_addr_shown("h:1", shown, sizeof shown), "h:1");
        cr_assert_str_eq(dlock_addr_shown("redis://u:s3cret@h/9", shown, sizeof shown),
                         "(bad address)");
        cr_assert_str_eq(dlock_addr_shown("h", NULL, 0), "");
    }
    /* NULLs: no crash, a reason. */
    cr_assert_eq(dlock_addr_check(NULL, NULL, 0), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_addr_credentials("h", NULL, 0, NULL, 0, NULL, 0), DLOCK_ERR_ARG);
}

static dlock_err try_with(const char *addr, const char *opt_user, const char *opt_pw,
                          char *cerr, size_t cerrlen, dlock_err *lock_rc)
{
    dlock_options o;
    dlock_client *c = NULL;
    dlock_lock *l = NULL;
    const char *addrs[1] = {addr};
    dlock_err rc;

    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 1;
    o.username = opt_user;
    o.password = opt_pw;
    rc = dlock_client_new(&o, &c, cerr, cerrlen);
    *lock_rc = DLOCK_ERR_ARG;
    if (rc != DLOCK_OK)
        return rc;
    *lock_rc = dlock_try_acquire(c, "addr-auth", 5000, &l);
    if (l != NULL) {
        cr_assert_eq(dlock_release(c, l), DLOCK_OK);
        dlock_lock_free(l);
    }
    dlock_client_free(c);
    return rc;
}

/* The URL's credentials reach AUTH: password only (the default user), an
 * ACL user with its password (escaped ':' and '@' in it), and wrong ones
 * give DLOCK_ERR_AUTH. Against a real redis-server with requirepass. */
Test(lock_addr, url_credentials_authenticate, .timeout = 20)
{
    char a[128], cerr[DLOCK_ERRSTR_LEN];
    dlock_err lrc;

    snprintf(a, sizeof a, "redis://:s3cret@127.0.0.1:%d", node.port);
    cr_assert_eq(try_with(a, NULL, NULL, cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert_eq(lrc, DLOCK_OK, "password-only URL");
    snprintf(a, sizeof a, "redis://locker:user%%3Apw%%401@127.0.0.1:%d/0", node.port);
    cr_assert_eq(try_with(a, NULL, NULL, cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert_eq(lrc, DLOCK_OK, "ACL user from the URL");
    snprintf(a, sizeof a, "redis://locker:wrong@127.0.0.1:%d", node.port);
    cr_assert_eq(try_with(a, NULL, NULL, cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert_eq(lrc, DLOCK_ERR_AUTH, "wrong password: %s", dlock_strerror(lrc));
    snprintf(a, sizeof a, "redis://nobody:s3cret@127.0.0.1:%d", node.port);
    cr_assert_eq(try_with(a, NULL, NULL, cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert_eq(lrc, DLOCK_ERR_AUTH, "unknown user: %s", dlock_strerror(lrc));
    /* The options' credentials and the URL's agree: fine; differ: refused
     * at dlock_client_new, naming the address without its password. */
    snprintf(a, sizeof a, "redis://:s3cret@127.0.0.1:%d", node.port);
    cr_assert_eq(try_with(a, NULL, "s3cret", cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert_eq(lrc, DLOCK_OK);
    cr_assert_eq(try_with(a, "locker", "user:pw@1", cerr, sizeof cerr, &lrc), DLOCK_ERR_ARG);
    cr_assert(strstr(cerr, "differs") != NULL && strstr(cerr, "s3cret") == NULL, "%s", cerr);
    /* No credentials anywhere: the server refuses (AUTH, or PROTOCOL for
     * an unauthenticated multibulk: see lock_handoff's
     * queued_acquire_without_password_says_auth). */
    snprintf(a, sizeof a, "127.0.0.1:%d", node.port);
    cr_assert_eq(try_with(a, NULL, NULL, cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert(lrc == DLOCK_ERR_AUTH || lrc == DLOCK_ERR_PROTOCOL, "%s", dlock_strerror(lrc));
}

/* Two addresses with different credentials: one client has one set. */
Test(lock_addr, two_urls_with_different_passwords_are_refused, .timeout = 10)
{
    dlock_options o;
    dlock_client *c = (dlock_client *)0x1;
    char err[DLOCK_ERRSTR_LEN];
    const char *addrs[3] = {"redis://:pw1@h1", "h2", "redis://:pw2@h3"};

    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 3;
    o.connect_timeout_ms = 50;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_ERR_ARG);
    cr_assert_null(c);
    cr_assert(strstr(err, "addrs[2]") != NULL && strstr(err, "pw2") == NULL, "%s", err);
}

/* "localhost" and a bracketed IPv6 literal reach a real server: the node
 * is made to listen on ::1 too (CONFIG SET bind), and a client on
 * redis://:pw@[::1]:port takes and releases a lock there. */
Test(lock_addr, localhost_and_ipv6_reach_the_server, .timeout = 20)
{
    char a[128], out[128], cerr[DLOCK_ERRSTR_LEN];
    const char *bind[] = {"CONFIG", "SET", "bind", "127.0.0.1 -::1"};
    dlock_err lrc;

    snprintf(a, sizeof a, "redis://:s3cret@localhost:%d", node.port);
    cr_assert_eq(try_with(a, NULL, NULL, cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert_eq(lrc, DLOCK_OK, "localhost: %s", dlock_strerror(lrc));
    tc_cmd(&node, out, sizeof out, 4, bind);
    if (strcmp(out, "OK") != 0)
        cr_skip_test("this redis-server cannot listen on ::1: %s", out);
    snprintf(a, sizeof a, "redis://:s3cret@[::1]:%d", node.port);
    cr_assert_eq(try_with(a, NULL, NULL, cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert_eq(lrc, DLOCK_OK, "[::1]: %s", dlock_strerror(lrc));
    snprintf(a, sizeof a, "[::1]:%d", node.port);
    cr_assert_eq(try_with(a, NULL, "s3cret", cerr, sizeof cerr, &lrc), DLOCK_OK, "%s", cerr);
    cr_assert_eq(lrc, DLOCK_OK, "[::1] plain: %s", dlock_strerror(lrc));
}
