/* ping.c - dlockctl ping: every node with its round-trip time; exit 1 as
 * soon as fewer than a quorum answer, also when a node stalls (timeout) or
 * refuses our password. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"

#define NODES 3
static redis_proc rs[NODES];
static char csv[256];

CTL_NODES_FIXTURE(rs, NODES, csv)
TestSuite(ctl_ping, .init = ctl_suite_init, .fini = ctl_suite_fini);

/* "ADDR up N.NNN ms" for node i in out. */
static int node_up(const char *out, const redis_proc *r)
{
    char line[256];
    double ms = -1;
    if (text_line(out, r->addr, " up ", line, sizeof line) != 0)
        return 0;
    return sscanf(line + strlen(r->addr), " up %lf ms", &ms) == 1 && ms >= 0 && ms < 5000;
}

Test(ctl_ping, lists_every_node_with_its_round_trip)
{
    char *out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", csv, "ping", NULL), 0, "%s", out);
    for (size_t i = 0; i < NODES; i++)
        cr_expect(node_up(out, &rs[i]), "node %s not up in:\n%s", rs[i].addr, out);
    cr_expect(strstr(out, "3/3 nodes up, quorum 2: ok") != NULL, "%s", out);
    free(out);
}

Test(ctl_ping, below_quorum_exits_1)
{
    char *out = NULL;
    cr_assert_eq(redis_kill(&rs[2]), 0);
    cr_expect_eq(ctl_run(&out, "--redis", csv, "ping", NULL), 0, "one down of 3 is still a quorum: %s",
                 out);
    cr_expect(strstr(out, "2/3 nodes up") != NULL, "%s", out);
    free(out);

    cr_assert_eq(redis_kill(&rs[1]), 0);
    out = NULL;
    cr_expect_eq(ctl_run(&out, "--redis", csv, "ping", NULL), 1, "%s", out);
    cr_expect(strstr(out, "1/3 nodes up, quorum 2: NO QUORUM") != NULL, "%s", out);
    cr_expect(strstr(out, "DOWN") != NULL, "%s", out);
    cr_expect(node_up(out, &rs[0]), "%s", out);
    free(out);
    cr_assert_eq(redis_restart(&rs[1]), 0);
    cr_assert_eq(redis_restart(&rs[2]), 0);
}

Test(ctl_ping, a_stalled_node_times_out)
{
    char *out = NULL, one[64];
    snprintf(one, sizeof one, "%s", rs[0].addr);
    cr_assert_eq(redis_pause(&rs[0]), 0);
    int64_t t0 = test_now_ms();
    int rc = ctl_run(&out, "--redis", one, "--timeout-ms", "200", "ping", NULL);
    int64_t took = test_now_ms() - t0;
    cr_assert_eq(redis_resume(&rs[0]), 0);
    cr_expect_eq(rc, 1, "%s", out);
    cr_expect(strstr(out, "no answer within the timeout") != NULL, "%s", out);
    /* A connect accepted by the kernel plus one 200 ms read: well under 2 s. */
    cr_expect_lt(took, 2000, "took %lld ms", (long long)took);
    free(out);
}

Test(ctl_ping, wrong_password_is_down_right_password_is_up)
{
    redis_proc secured = {0};
    char *out = NULL;
    snprintf(secured.password, sizeof secured.password, "s3cret");
    cr_assert_eq(redis_start(&secured), 0);

    /* No password at all: the node's NOAUTH names the option that gives one. */
    int rc = ctl_run(&out, "--redis", secured.addr, "ping", NULL);
    cr_expect_eq(rc, 1, "%s", out);
    cr_expect(strstr(out, "NOAUTH") != NULL && strstr(out, "--password") != NULL, "%s", out);
    free(out);
    out = NULL;
    rc = ctl_run(&out, "--redis", secured.addr, "--password", "wrong", "ping", NULL);
    cr_expect_eq(rc, 1, "%s", out);
    cr_expect(strstr(out, "AUTH") != NULL, "%s", out);
    free(out);
    out = NULL;
    rc = ctl_run(&out, "--redis", secured.addr, "--password", "s3cret", "ping", NULL);
    cr_expect_eq(rc, 0, "%s", out);
    free(out);
    out = NULL;
    /* The environment variable keeps the password out of ps. */
    setenv("DLOCKCTL_PASSWORD", "s3cret", 1);
    rc = ctl_run(&out, "--redis", secured.addr, "ping", NULL);
    unsetenv("DLOCKCTL_PASSWORD");
    cr_expect_eq(rc, 0, "%s", out);
    free(out);
    redis_stop(&secured);
}

/* redis://[user]:password@host:port: dlockctl authenticates with the URL's
 * credentials (password only, and an ACL user), reports a wrong one as
 * AUTH, and never prints the password. */
Test(ctl_ping, url_credentials)
{
    redis_proc secured = {0};
    char *out = NULL, url[160], out_s[64];
    const char *setuser[] = {"ACL", "SETUSER", "ops", "on", ">opspw", "~*", "+@all"};
    snprintf(secured.password, sizeof secured.password, "s3cret");
    cr_assert_eq(redis_start(&secured), 0);
    cr_assert_eq(redis_cmd(&secured, out_s, sizeof out_s, 7, setuser), 0);

    snprintf(url, sizeof url, "redis://:s3cret@127.0.0.1:%d", secured.port);
    int rc = ctl_run(&out, "--redis", url, "ping", NULL);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "s3cret") == NULL, "password printed: %s", out);
    free(out);
    out = NULL;
    snprintf(url, sizeof url, "redis://ops:opspw@localhost:%d/0", secured.port);
    rc = ctl_run(&out, "--redis", url, "ping", NULL);
    cr_expect_eq(rc, 0, "%s", out);
    cr_expect(strstr(out, "opspw") == NULL, "password printed: %s", out);
    free(out);
    out = NULL;
    snprintf(url, sizeof url, "redis://ops:wrongpw@127.0.0.1:%d", secured.port);
    rc = ctl_run(&out, "--redis", url, "ping", NULL);
    cr_expect_eq(rc, 1, "%s", out);
    cr_expect(strstr(out, "AUTH") != NULL && strstr(out, "wrongpw") == NULL, "%s", out);
    free(out);
    redis_stop(&secured);
}
