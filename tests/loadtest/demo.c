/* demo.c - scripts/demo end to end (with --no-setup):
 *   - the --compare table (none oversells, atomic-sql and redlock do not);
 *   - the load every row of --compare and --trial is given (seen through a
 *     recording wrapper of coupon-loadtest);
 *   - a single run, and its one-line failures.
 * Every process it started is gone afterwards. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
     * run. The lease-outlived rows stall 250 ms on every 4th claim, so that
     * a stock of 50 still sees a dozen stale holders. 250 ms is 2.5 TTLs, so
     * that even on a loaded machine another holder gets the lock inside the
     * stall.
     * Every row runs the same closed loop of 8 connections: the outcomes
     * below follow from that concurrency, whatever the machine's speed.
     * A row that ran open loop at the rate the row before measured would be
     * starved of the contention its verdict needs after a slow row;
     * every_row_gets_the_users_load guards that. --lock-wait 10000: on a starved machine a claim waits
     * for the lock rather than being refused 1005, so the safe rows still
     * sell exactly the stock. */
    const char *argv[] = {demo, "--no-setup", "--bin-dir", bin_dir, "--compare", "--stock", "50",
                          "--connections", "8", "--requests", "400", "--instances", "2",
                          "--redis-nodes", "3", "--work-us", "20000", "--lease-pause", "250:4",
                          "--lock-wait", "10000", NULL};
    int st = run_command(argv, 300000, &out);
    cr_assert_eq(st, 0, "demo exit %d:\n%s", st, out);
    line_starting("strategy ", line, sizeof line);
    /* Exactly the six rows, in order, right after the header. */
    const char *order[] = {"none ", "atomic-sql ", "redlock     full  -", "redlock     off   lease outlived",
                           "redlock     write lease outlived", "redlock     full  lease outlived"};
    const char *p = strstr(out, line);
    cr_assert_not_null(p);
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        p = strchr(p, '\n');
        cr_assert_not_null(p, "the table ends before row %zu:\n%s", i + 1, out);
        p++;
        cr_assert_eq(strncmp(p, order[i], strlen(order[i])), 0, "row %zu is not '%s':\n%s", i + 1, order[i], out);
    }
    cr_assert_eq(strncmp(strchr(p, '\n') + 1, "as expected", 11), 0, "more than six rows:\n%s", out);
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
     * batch is refused whole (1010). So on a loaded machine most of the 400
     * requests may be refused, and the stock need not sell out. What must
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

/* A bin dir whose coupon-loadtest is a shell script that appends its argv
 * (one line per run, each argument followed by a space) to dir/argv.log and
 * execs the real one; coupon-server is a link to the real one. So the demo
 * runs real loads, and the test sees exactly what each row was given. */
static void make_recording_bin_dir(char *dir, size_t len)
{
    char path[600], real[600];
    lt_tmpdir(dir, len);
    snprintf(path, sizeof path, "%s/coupon-server", dir);
    snprintf(real, sizeof real, "%s/coupon-server", bin_dir);
    cr_assert_eq(symlink(real, path), 0, "symlink %s", path);
    snprintf(path, sizeof path, "%s/coupon-loadtest", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "cannot write %s", path);
    fprintf(f, "#!/bin/sh\nfor a in \"$@\"; do printf '%%s ' \"$a\"; done >>'%s/argv.log'\n"
               "echo >>'%s/argv.log'\nexec '%s/coupon-loadtest' \"$@\"\n",
            dir, dir, bin_dir);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, 0755), 0);
}

/* Reads dir/argv.log; returns the number of coupon-loadtest runs, and
 * asserts each run's " --rate " is exactly want_rate (NULL: none at all). */
static int recorded_runs(const char *dir, const char *want_rate, const char *what)
{
    char path[600], line[2048], want[64];
    int runs = 0;
    snprintf(path, sizeof path, "%s/argv.log", dir);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s: coupon-loadtest never ran (no %s):\n%s", what, path, out);
    if (want_rate)
        snprintf(want, sizeof want, "--rate %s ", want_rate);
    while (fgets(line, sizeof line, f) != NULL) {
        cr_assert_not_null(strchr(line, '\n'), "%s: argv line too long: %s", what, line);
        runs++;
        const char *r = strstr(line, "--rate ");
        if (want_rate == NULL)
            cr_assert_null(r, "%s: run %d got a --rate the user did not give: %s", what, runs, line);
        else
            cr_assert(r != NULL && strncmp(r, want, strlen(want)) == 0 && strstr(r + 1, "--rate ") == NULL,
                      "%s: run %d did not get the user's %s: %s", what, runs, want, line);
    }
    fclose(f);
    return runs;
}

/* Every row must run the same load: closed loop unless the user passed
 * --rate, and then exactly that rate. A row's measured throughput must
 * never become the next row's --rate, or every row after the first would
 * run open loop at the speed of the one before. */
Test(loadtest_demo, every_row_gets_the_users_load, .timeout = 380)
{
    char dir[256];
    make_recording_bin_dir(dir, sizeof dir);
    const char *closed[] = {demo, "--no-setup", "--bin-dir", dir, "--compare", "--stock", "10",
                            "--connections", "4", "--requests", "60", "--instances", "1",
                            "--redis-nodes", "1", "--work-us", "2000", "--lease-work-us", "5000",
                            "--lease-pause", "150:4", NULL};
    int st = run_command(closed, 120000, &out);
    cr_assert(st == 0 || st == 1, "demo --compare exit %d:\n%s", st, out);
    cr_assert_eq(recorded_runs(dir, NULL, "--compare"), 6, "one load per row of --compare:\n%s", out);
    assert_all_stopped();
    free(out);
    out = NULL;

    char log[600];
    snprintf(log, sizeof log, "%s/argv.log", dir);
    cr_assert_eq(unlink(log), 0);
    const char *open_loop[] = {demo, "--no-setup", "--bin-dir", dir, "--compare", "--rate", "400",
                               "--stock", "10", "--connections", "4", "--requests", "60",
                               "--instances", "1", "--redis-nodes", "1", "--work-us", "2000",
                               "--lease-work-us", "5000", "--lease-pause", "150:4", NULL};
    st = run_command(open_loop, 120000, &out);
    cr_assert(st == 0 || st == 1, "demo --compare --rate exit %d:\n%s", st, out);
    cr_assert_eq(recorded_runs(dir, "400", "--compare --rate 400"), 6, "%s", out);
    assert_all_stopped();
    free(out);
    out = NULL;

    /* The trial: a concurrency row, then a "holder killed" row (its small
     * load was what leaked at ~36 claims/s), then redlock under both. */
    cr_assert_eq(unlink(log), 0);
    const char *trial[] = {demo, "--no-setup", "--bin-dir", dir, "--trial", "--strategies", "get-set,setnx",
                           "--requests", "120", NULL};
    st = run_command(trial, 200000, &out);
    cr_assert(st == 0 || st == 1, "demo --trial exit %d:\n%s", st, out);
    cr_assert_eq(recorded_runs(dir, NULL, "--trial"), 4, "one load per row of --trial:\n%s", out);
    assert_all_stopped();
    lt_rmdir_flat(dir);
}
