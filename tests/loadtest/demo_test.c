/* demo_test.c - scripts/demo end to end (with --no-setup): the --compare
 * table (none oversells, atomic-sql and redlock do not), a single run, and
 * its one-line failures; every process it started is gone afterwards. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lt_test_util.h"

static char *out;
static char demo[512], bin_dir[512];

static void init(void)
{
    cr_assert_eq(test_script_paths("demo", demo, sizeof demo, bin_dir, sizeof bin_dir), 0,
                 "DLOCK_SOURCE_DIR and DLOCK_BINARY_DIR must name the tree and the build");
}

static void fini(void)
{
    free(out);
    out = NULL;
}

TestSuite(loadtest_demo, .init = init, .fini = fini);

/* The line of out that starts with prefix, copied into line; asserts one exists. */
static void line_starting(const char *prefix, char *line, size_t len)
{
    if (text_line(out, prefix, NULL, line, len) != 0)
        cr_assert_fail("no line starts with '%s':\n%s", prefix, out);
}

/* Every "pid N" the demo announced is gone, and so is its temp dir. */
static void assert_all_stopped(void)
{
    char why[512];
    cr_assert_eq(text_left_nothing(out, why, sizeof why), 0, "%s:\n%s", why, out);
}

Test(loadtest_demo, compare_table, .timeout = 360)
{
    char line[512];
    /* 20 ms between every strategy's read and write: without the lock, 8
     * claims in flight all read the same stock, so none oversells on every
     * run; the lease-outlived rows stall 250 ms (2.5 TTLs, so that even on a
     * loaded machine another holder gets the lock inside the stall) on every
     * 4th claim, so that a stock of 50 still sees a dozen stale holders. */
    const char *argv[] = {demo, "--no-setup", "--bin-dir", bin_dir, "--compare", "--stock", "50",
                          "--connections", "8", "--requests", "400", "--instances", "2",
                          "--redis-nodes", "3", "--work-us", "20000", "--lease-pause", "250:4", NULL};
    int st = run_command(argv, 300000, &out);
    cr_assert_eq(st, 0, "demo exit %d:\n%s", st, out);
    line_starting("strategy ", line, sizeof line);
    cr_assert_not_null(strstr(line, "claims/s"));
    cr_assert_not_null(strstr(line, "verdict"));
    cr_assert_not_null(strstr(line, "1010s"));
    /* The rows that must oversell: no lock, and a lock whose lease ran out
     * with the fence off or on the write only. */
    const char *oversell[] = {"none ", "redlock     off   lease outlived", "redlock     write lease outlived"};
    for (size_t i = 0; i < sizeof oversell / sizeof oversell[0]; i++) {
        line_starting(oversell[i], line, sizeof line);
        cr_assert_not_null(strstr(line, "OVERSOLD by "), "did not oversell: %s", line);
    }
    /* The rows that must sell exactly the stock. */
    const char *safe[] = {"atomic-sql ", "redlock     full  -"};
    for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++) {
        line_starting(safe[i], line, sizeof line);
        cr_assert_not_null(strstr(line, " 50/50 "), "%s", line);
        cr_assert_not_null(strstr(line, "NO OVERSELL"), "%s", line);
    }
    /* With the lease outlived and the full fence, every stale holder's
     * batch is refused whole (1010), so on a loaded machine most of the 400
     * requests may be refused and the stock need not sell out; what must
     * hold is no oversell and at least one refusal. */
    line_starting("redlock     full  lease outlived", line, sizeof line);
    cr_assert_not_null(strstr(line, "NO OVERSELL"), "%s", line);
    unsigned issued = 0, stock = 0, refused = 0;
    const char *frac = strchr(line + strlen("redlock     full  lease outlived"), '/');
    cr_assert_not_null(frac, "%s", line);
    while (frac > line && frac[-1] != ' ')
        frac--;
    cr_assert_eq(sscanf(frac, "%u/%u %u", &issued, &stock, &refused), 3, "%s", line);
    cr_assert_eq(stock, 50, "%s", line);
    cr_assert_leq(issued, 50, "%s", line);
    cr_assert_gt(refused, 0, "no write was refused: %s", line);
    assert_all_stopped();
}

Test(loadtest_demo, single_redlock_run, .timeout = 240)
{
    /* --threads are the load tester's worker threads, --connections its
     * connections: the tester's own banner says what it was given. */
    const char *argv[] = {demo, "--no-setup", "--bin-dir", bin_dir, "--strategy", "redlock",
                          "--instances", "2", "--redis-nodes", "3", "--stock", "20", "--threads", "2",
                          "--connections", "6", "--requests", "100", "--users", "30", NULL};
    int st = run_command(argv, 200000, &out);
    cr_assert_eq(st, 0, "demo exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, "verdict: NO OVERSELL\n"), "%s", out);
    cr_assert_not_null(strstr(out, "audit of coupon"), "%s", out);
    cr_assert_not_null(strstr(out, ", 6 connections on 2 threads over 2 URL(s)"), "%s", out);
    assert_all_stopped();
}

Test(loadtest_demo, threads_alone_are_worker_threads, .timeout = 240)
{
    /* The contract's --threads T alone: T worker threads on the default 64
     * connections, and more threads than that raise the connections. */
    const char *three[] = {demo, "--no-setup", "--bin-dir", bin_dir, "--strategy", "atomic-sql",
                           "--instances", "1", "--redis-nodes", "1", "--stock", "10", "--threads", "3",
                           "--requests", "50", NULL};
    const char *many[] = {demo, "--no-setup", "--bin-dir", bin_dir, "--strategy", "atomic-sql",
                          "--instances", "1", "--redis-nodes", "1", "--stock", "10", "--threads", "70",
                          "--requests", "100", NULL};
    const char *clash[] = {demo, "--no-setup", "--bin-dir", bin_dir, "--threads", "9", "--connections", "4", NULL};
    int st = run_command(three, 200000, &out);
    cr_assert_eq(st, 0, "demo exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, ", 64 connections on 3 threads over 1 URL(s)"), "%s", out);
    assert_all_stopped();
    free(out);
    out = NULL;
    st = run_command(many, 200000, &out);
    cr_assert_eq(st, 0, "demo exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, ", 70 connections on 70 threads over 1 URL(s)"), "%s", out);
    assert_all_stopped();
    free(out);
    out = NULL;
    st = run_command(clash, 30000, &out);
    cr_assert_eq(st, 2, "%s", out);
    cr_assert_not_null(strstr(out, "demo: --threads 9 is more than --connections 4"), "%s", out);
}

Test(loadtest_demo, one_line_failures, .timeout = 60)
{
    const char *nobin[] = {demo, "--no-setup", "--bin-dir", "/nonexistent-dir", NULL};
    const char *badstrat[] = {demo, "--no-setup", "--strategy", "optimistic", NULL};
    const char *help[] = {demo, "--help", NULL};
    int st = run_command(nobin, 30000, &out);
    cr_assert_eq(st, 2, "%s", out);
    cr_assert_not_null(strstr(out, "demo: coupon-server not found in /nonexistent-dir"), "%s", out);
    free(out);
    out = NULL;
    st = run_command(badstrat, 30000, &out);
    cr_assert_eq(st, 2, "%s", out);
    cr_assert_not_null(strstr(out, "--strategy: 'optimistic'"), "%s", out);
    free(out);
    out = NULL;
    st = run_command(help, 30000, &out);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert_not_null(strstr(out, "'none' is EXPECTED to oversell"), "--help must say none oversells:\n%s", out);
}

Test(loadtest_demo, port_in_use_is_named, .timeout = 60)
{
    /* A Redis node of our own holds the port the demo is told to use. */
    redis_proc r;
    char port[16];
    memset(&r, 0, sizeof r);
    cr_assert_eq(redis_start(&r), 0);
    snprintf(port, sizeof port, "%d", r.port);
    const char *argv[] = {demo, "--no-setup", "--bin-dir", bin_dir, "--base-port", port,
                          "--redis-nodes", "1", NULL};
    int st = run_command(argv, 30000, &out);
    redis_stop(&r);
    cr_assert_eq(st, 2, "%s", out);
    char needle[64];
    snprintf(needle, sizeof needle, "port %d is in use", r.port);
    cr_assert_not_null(strstr(out, needle), "%s", out);
}
