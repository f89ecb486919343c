/* cli.c - coupon-loadtest as a process: usage errors and unreachable
 * sources exit 2 with a one-line reason, before any load is sent. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lt_test_util.h"

static char *out;
static char dir[256]; /* made by a test that needs it; removed by fini even when it fails */

static void fini(void)
{
    free(out);
    out = NULL;
    lt_rmdir_flat(dir);
    dir[0] = '\0';
}

TestSuite(loadtest_cli, .fini = fini);

static void expect(int want_status, const char *needle, const char *const *args)
{
    int st = lt_run_loadtest(args, &out);
    cr_assert_eq(st, want_status, "exit %d, want %d; output:\n%s", st, want_status, out ? out : "");
    cr_assert_not_null(strstr(out, needle), "output lacks '%s':\n%s", needle, out);
}

Test(loadtest_cli, help_exits_0_and_defines_n, .timeout = 30)
{
    const char *a[] = {"--help", NULL};
    expect(0, "usage: coupon-loadtest", a);
    cr_assert_not_null(strstr(out, "OVERSOLD by N"));
    cr_assert_not_null(strstr(out, "--users"));
    const char *documented[] = {"--rate R", "--warmup S", "--timeline FILE.csv", "--give-up-ms MS",
                                "coordinated omission"};
    for (size_t i = 0; i < sizeof documented / sizeof documented[0]; i++)
        cr_assert_not_null(strstr(out, documented[i]), "--help lacks '%s':\n%s", documented[i], out);
}

Test(loadtest_cli, no_arguments, .timeout = 30)
{
    const char *a[] = {NULL};
    expect(2, "coupon-loadtest: missing --url", a);
}

Test(loadtest_cli, missing_url, .timeout = 30)
{
    const char *a[] = {"--coupon", "1", "--threads", "2", "--requests", "10", NULL};
    expect(2, "missing --url", a);
}

Test(loadtest_cli, bad_threads, .timeout = 30)
{
    const char *zero[] = {"--url", "http://127.0.0.1:1", "--coupon", "1", "--threads", "0", "--requests", "1", NULL};
    const char *word[] = {"--url", "http://127.0.0.1:1", "--coupon", "1", "--threads", "many", "--requests", "1", NULL};
    expect(2, "--threads: '0' is not an integer in 1..", zero);
    free(out);
    out = NULL;
    expect(2, "--threads: 'many'", word);
}

Test(loadtest_cli, unknown_flag, .timeout = 30)
{
    const char *a[] = {"--url", "http://127.0.0.1:1", "--coupon", "1", "--requests", "1", "--turbo", NULL};
    expect(2, "unknown option '--turbo'", a);
}

Test(loadtest_cli, unreachable_url_exits_2_before_load, .timeout = 30)
{
    char url[64], needle[96];
    int port = free_loopback_port();
    cr_assert_gt(port, 0);
    /* Nothing listens on a port just found free: the connect is refused. */
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    snprintf(needle, sizeof needle, "cannot reach %s", url);
    const char *a[] = {"--url", url, "--coupon", "1", "--threads", "4", "--requests", "1000", NULL};
    expect(2, needle, a);
    /* No report: the run never started. */
    cr_assert_null(strstr(out, "verdict"), "a verdict after a connection error:\n%s", out);
    cr_assert_null(strstr(out, "progress:"), "load was sent:\n%s", out);
}

Test(loadtest_cli, missing_db_file_exits_2, .timeout = 30)
{
    char db[300];
    lt_tmpdir(dir, sizeof dir);
    snprintf(db, sizeof db, "%s/absent.db", dir);
    const char *a[] = {"--url", "http://127.0.0.1:1", "--coupon", "1", "--requests", "1", "--db", db, NULL};
    expect(2, "cannot open DB", a);
    /* Read-only open: the audit must not have created the file. */
    cr_assert_neq(access(db, F_OK), 0, "%s was created", db);
}

Test(loadtest_cli, version_and_short_help_exit_0, .timeout = 30)
{
    const char *v[] = {"--version", NULL};
    expect(0, "coupon-loadtest " COUPON_VERSION "\n", v);
    cr_assert_str_eq(out, "coupon-loadtest " COUPON_VERSION "\n");
    free(out);
    out = NULL;
    const char *h[] = {"-h", NULL};
    expect(0, "usage: coupon-loadtest", h);
    cr_assert_not_null(strstr(out, "--version"));
}
