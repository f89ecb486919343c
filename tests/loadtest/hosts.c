/* hosts.c - scripts/hosts (./scripts/demo --hosts) end to end, with
 * short phases. The sale across network-namespace hosts shows each of its
 * three partitions doing what it should:
 *   (a) the sale goes on without one Redis master;
 *   (b) the late write of a server cut from Redis inside a lease is
 *       refused by the fence;
 *   (c) a server cut from the database answers 503, no 500.
 * All of it runs through HAProxy (its configuration passes haproxy -c, the
 * load tester's target is the proxy). The audit passes, and every process,
 * namespace and temp dir is gone afterwards. Where namespaces cannot be made (not root, a sandbox),
 * the script says so in one line and exits 2: the test then skips. */
#include <criterion/criterion.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lt_test_util.h"

static char *out;
static char hosts[512], bin_dir[512];

static void init(void)
{
    cr_assert_eq(test_script_paths("hosts", hosts, sizeof hosts, bin_dir, sizeof bin_dir), 0,
                 "DLOCK_SOURCE_DIR and DLOCK_BINARY_DIR must name the tree and the build");
}

static void fini(void)
{
    free(out);
    out = NULL;
}

TestSuite(loadtest_hosts, .init = init, .fini = fini);

#define UNAVAILABLE "hosts: network namespaces unavailable: "

/* The table row of phase p ("a  ...", "b  ...", "c  ..."), its 1010s and
 * 500s columns and its check. */
static void phase_row(const char *prefix, unsigned *n1010, unsigned *n500, char *check, size_t checklen)
{
    char line[512], title[128];
    unsigned before, during, after, n503;
    if (text_line(out, prefix, NULL, line, sizeof line) != 0)
        cr_assert_fail("no row '%s':\n%s", prefix, out);
    /* "a  Redis master r1 (127.10.1.11) cut off   352  359  413  0  0  0  OK": the numbers
     * are the last six fields before the check. */
    char *end = line + strlen(line);
    char *f[7];
    int n = 0;
    while (n < 7 && end > line) {
        while (end > line && end[-1] == ' ')
            *--end = '\0';
        char *sp = strrchr(line, ' ');
        if (sp == NULL)
            break;
        f[n++] = sp + 1;
        *sp = '\0';
        end = sp;
    }
    cr_assert_eq(n, 7, "cannot read the row '%s'", prefix);
    snprintf(check, checklen, "%s", f[0]);
    (void)snprintf(title, sizeof title, "%s", line);
    cr_assert_eq(sscanf(f[6], "%u", &before) + sscanf(f[5], "%u", &during) + sscanf(f[4], "%u", &after) +
                     sscanf(f[3], "%u", &n503) + sscanf(f[2], "%u", n1010) + sscanf(f[1], "%u", n500),
                 6, "row %s: not six numbers", title);
    cr_assert_gt(before, 0, "row %s: nothing sold before the cut", title);
    cr_assert_gt(after, 0, "row %s: nothing sold after the cut", title);
}

/* No namespace named by the run ("namespaces dlN-*") is left. */
static void assert_no_namespace_left(void)
{
    char prefix[64], pattern[128];
    const char *p = strstr(out, "namespaces ");
    cr_assert_not_null(p, "the output named no namespaces:\n%s", out);
    cr_assert_eq(sscanf(p + strlen("namespaces "), "%63[^*]", prefix), 1);
    snprintf(pattern, sizeof pattern, "/run/netns/%s*", prefix);
    glob_t g;
    int r = glob(pattern, 0, NULL, &g);
    size_t left = r == 0 ? g.gl_pathc : 0;
    if (r == 0)
        globfree(&g);
    cr_assert_eq(left, 0, "namespaces %s* left behind", prefix);
}

Test(loadtest_hosts, three_partitions_then_no_oversell, .timeout = 240)
{
    unsigned n1010 = 0, n500 = 0;
    char check[16], why[512];
    /* 3 s cuts: the first ~0.3 s of a master's cut (command timeout, breaker)
     * weighs less in the rate than in 2 s ones, where one run in seven fell
     * below the fifth the check asks for while the sale went on. */
    const char *argv[] = {hosts, "--no-setup", "--bin-dir", bin_dir, "--phase-s", "3", NULL};
    int st = run_command(argv, 200000, &out);
    if (st == 2 && strstr(out, UNAVAILABLE) != NULL)
        cr_skip_test("%s", strstr(out, UNAVAILABLE));
    cr_assert_eq(st, 0, "hosts exit %d:\n%s", st, out);

    /* HAProxy in front: its configuration passed
     * haproxy -c, with the eight JSON errorfiles and the /healthz checks,
     * and the load went through it. */
    char pline[512];
    cr_assert_eq(text_line(out, "hosts: haproxy -c: configuration valid (8 JSON errorfiles, health checks: option "
                                "httpchk GET /healthz)", NULL, pline, sizeof pline),
                 0, "%s", out);
    /* Claims by leastconn: the phases need both servers on the one coupon,
     * which the shipped coupon affinity would not give (scripts/hosts). */
    cr_assert_not_null(strstr(pline, "), claims: balance leastconn"), "%s", pline);
    cr_assert_eq(text_line(out, "hosts: host lt: coupon-loadtest pid ", "connections to http://127.10.0.10:8080", pline,
                           sizeof pline),
                 0, "%s", out);
    cr_assert_eq(text_line(out, "proxy: HAProxy at http://127.10.0.10:8080 (X-Forwarded-For, checks GET /healthz)", NULL,
                           pline, sizeof pline),
                 0, "%s", out);

    /* (a) one master of three cut off: both servers kept selling. */
    phase_row("a  Redis master r1", &n1010, &n500, check, sizeof check);
    cr_assert_str_eq(check, "OK", "%s", out);
    /* (b) the stale holder's write refused by the fence: at least once. */
    phase_row("b  s2 cut from the Redis masters", &n1010, &n500, check, sizeof check);
    cr_assert_str_eq(check, "OK", "%s", out);
    cr_assert_geq(n1010, 1, "no 1010 in phase b:\n%s", out);
    /* (c) the database cut off from s2: 503s, and no 500. */
    phase_row("c  PostgreSQL cut off from s2", &n1010, &n500, check, sizeof check);
    cr_assert_str_eq(check, "OK", "%s", out);
    cr_assert_eq(n500, 0, "500s in phase c:\n%s", out);
    char line[512];
    cr_assert_eq(text_line(out, "phase c: ", NULL, line, sizeof line), 0, "%s", out);
    cr_assert_eq(text_line(out, "  claims/s before ", "s2 answered 503", line, sizeof line), 0, "%s", out);

    /* No request left without an answer: a cut is answered, never a hang. */
    cr_assert_eq(text_line(out, "load run (every 200 has its record): NO OVERSELL (exit 0)",
                           "; requests left without an answer: 0", line, sizeof line),
                 0, "%s", out);
    cr_assert_eq(text_line(out, "audit (--audit-only, servers and database): NO OVERSELL (exit 0)", NULL, line,
                           sizeof line),
                 0, "%s", out);
    cr_assert_eq(text_line(out, "hosts: PASS", NULL, line, sizeof line), 0, "%s", out);

    cr_assert_eq(text_left_nothing(out, why, sizeof why), 0, "%s:\n%s", why, out);
    assert_no_namespace_left();
}

Test(loadtest_hosts, without_root_one_line_and_exit_2, .timeout = 30)
{
    /* As nobody: the script refuses before it creates anything. */
    if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0)
        cr_skip_test("needs root and setpriv to run the script as an unprivileged user");
    const char *argv[] = {"/usr/bin/setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                          hosts, "--no-setup", "--bin-dir", bin_dir, NULL};
    int st = run_command(argv, 20000, &out);
    cr_assert_eq(st, 2, "exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, UNAVAILABLE "needs root"), "%s", out);
    /* One line, nothing else. */
    cr_assert_eq(strchr(out, '\n'), out + strlen(out) - 1, "more than one line:\n%s", out);
}
