/* options.c - command-line parsing: accepted forms and each rejection. */
#include <criterion/criterion.h>
#include <string.h>

#include "loadtest.h"

static lt_options opt;
static char err[LT_ERR_MAX];

static int parse(const char *const *args)
{
    char *argv[40];
    int argc = 0;
    argv[argc++] = (char *)"coupon-loadtest";
    for (; *args != NULL; args++)
        argv[argc++] = (char *)*args;
    argv[argc] = NULL;
    lt_options_free(&opt);
    err[0] = '\0';
    return lt_options_parse(argc, argv, &opt, err, sizeof err);
}

static void cleanup(void)
{
    lt_options_free(&opt);
}

TestSuite(loadtest_options, .fini = cleanup);

Test(loadtest_options, full_command_line, .timeout = 10)
{
    const char *a[] = {"--url", "http://127.0.0.1:8080/,http://127.0.0.1:8081", "--coupon", "7",
                       "--threads", "16", "--requests=1000", "--users", "10", "--json", "--quiet",
                       "--db", "/tmp/x.db", "--method", "get", "--timeout-ms", "500", "--seed", "42",
                       "--duration", "2.5", "--connections", "64", NULL};
    cr_assert_eq(parse(a), 0, "%s", err);
    cr_assert_eq(opt.n_urls, 2);
    /* The trailing slash is dropped so the request path is not "//api". */
    cr_assert_str_eq(opt.urls[0], "http://127.0.0.1:8080");
    cr_assert_str_eq(opt.urls[1], "http://127.0.0.1:8081");
    cr_assert_eq(opt.coupon_id, 7);
    cr_assert_eq(opt.threads, 16);
    cr_assert_eq(opt.requests, 1000);
    cr_assert_eq(opt.users, 10);
    cr_assert_eq(opt.json, 1);
    cr_assert_eq(opt.quiet, 1);
    cr_assert_str_eq(opt.db_path, "/tmp/x.db");
    cr_assert_eq(opt.use_get, 1);
    cr_assert_eq(opt.timeout_ms, 500);
    cr_assert_eq(opt.seed, 42);
    cr_assert_float_eq(opt.duration_s, 2.5, 1e-12);
    cr_assert_eq(opt.connections, 64);
}

Test(loadtest_options, defaults, .timeout = 10)
{
    const char *a[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", NULL};
    cr_assert_eq(parse(a), 0, "%s", err);
    cr_assert_eq(opt.threads, 8);
    /* One connection per thread unless told otherwise. */
    cr_assert_eq(opt.connections, 8);
    cr_assert_eq(opt.users, 0);
    cr_assert_eq(opt.use_get, 0);
    cr_assert_eq(opt.json, 0);
    cr_assert_null(opt.db_path);
}

Test(loadtest_options, help, .timeout = 10)
{
    const char *a[] = {"--url", "nonsense", "--help", NULL};
    cr_assert_eq(parse(a), 0);
    cr_assert_eq(opt.help, 1);
}

static void rejects(const char *const *args, const char *needle)
{
    cr_assert_eq(parse(args), -1, "accepted; expected an error with '%s'", needle);
    cr_assert_not_null(strstr(err, needle), "error '%s' lacks '%s'", err, needle);
}

Test(loadtest_options, rejections_name_the_problem, .timeout = 10)
{
    const char *missing_url[] = {"--coupon", "1", "--requests", "5", NULL};
    const char *missing_coupon[] = {"--url", "http://h:1", "--requests", "5", NULL};
    const char *missing_count[] = {"--url", "http://h:1", "--coupon", "1", NULL};
    const char *threads0[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--threads", "0", NULL};
    const char *threads_abc[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--threads", "abc", NULL};
    const char *threads_neg[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--threads", "-3", NULL};
    const char *threads_big[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--threads", "5000", NULL};
    const char *unknown[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--frobnicate", NULL};
    const char *positional[] = {"http://h:1", NULL};
    const char *ftp[] = {"--url", "ftp://h:1", "--coupon", "1", "--requests", "5", NULL};
    const char *empty_url[] = {"--url", ",", "--coupon", "1", "--requests", "5", NULL};
    const char *coupon0[] = {"--url", "http://h:1", "--coupon", "0", "--requests", "5", NULL};
    const char *req12x[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "12x", NULL};
    const char *users0[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--users", "0", NULL};
    const char *dur[] = {"--url", "http://h:1", "--coupon", "1", "--duration", "-1", NULL};
    const char *method[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--method", "PUT", NULL};
    const char *prefix[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--user-prefix", "a b", NULL};
    const char *novalue[] = {"--url", "http://h:1", "--coupon", "1", "--requests", NULL};
    const char *jsonval[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--json=1", NULL};
    rejects(missing_url, "missing --url");
    rejects(missing_coupon, "missing --coupon");
    rejects(missing_count, "--requests R or --duration S");
    rejects(threads0, "--threads");
    rejects(threads_abc, "--threads: 'abc'");
    rejects(threads_neg, "--threads");
    rejects(threads_big, "--threads");
    rejects(unknown, "unknown option '--frobnicate'");
    rejects(positional, "unexpected argument");
    rejects(ftp, "not an http://");
    rejects(empty_url, "no URL");
    rejects(coupon0, "--coupon");
    rejects(req12x, "--requests");
    rejects(users0, "--users");
    rejects(dur, "--duration");
    rejects(method, "--method");
    rejects(prefix, "--user-prefix");
    rejects(novalue, "--requests needs a value");
    rejects(jsonval, "--json takes no value");
    const char *fewconns[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--threads", "4", "--connections", "2", NULL};
    const char *zeroconns[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--connections", "0", NULL};
    rejects(fewconns, "--connections 2 is less than --threads 4");
    rejects(zeroconns, "--connections: '0'");
}

Test(loadtest_options, open_loop_warmup_timeline_give_up, .timeout = 10)
{
    const char *a[] = {"--url", "http://h:1", "--coupon", "1", "--duration", "10", "--rate", "250.5",
                       "--warmup", "2", "--timeline", "t.csv", "--give-up-ms", "800", NULL};
    const char *d[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", NULL};
    cr_assert_eq(parse(a), 0, "%s", err);
    cr_assert_float_eq(opt.rate, 250.5, 1e-12);
    cr_assert_float_eq(opt.warmup_s, 2.0, 1e-12);
    cr_assert_str_eq(opt.timeline_path, "t.csv");
    cr_assert_eq(opt.give_up_ms, 800);
    cr_assert_eq(parse(d), 0, "%s", err);
    /* Closed loop, no warm-up, no timeline, 5 s of failed connects by default. */
    cr_assert_float_eq(opt.rate, 0.0, 1e-12);
    cr_assert_float_eq(opt.warmup_s, 0.0, 1e-12);
    cr_assert_null(opt.timeline_path);
    cr_assert_eq(opt.give_up_ms, 5000);
}

Test(loadtest_options, open_loop_rejections, .timeout = 10)
{
    const char *rate0[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--rate", "0", NULL};
    const char *rate_word[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--rate", "fast", NULL};
    const char *warm_long[] = {"--url", "http://h:1", "--coupon", "1", "--duration", "2", "--warmup", "2", NULL};
    const char *warm_neg[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--warmup", "-1", NULL};
    const char *tl_empty[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--timeline", "", NULL};
    const char *give0[] = {"--url", "http://h:1", "--coupon", "1", "--requests", "5", "--give-up-ms", "0", NULL};
    rejects(rate0, "--rate: '0'");
    rejects(rate_word, "--rate: 'fast'");
    rejects(warm_long, "--warmup 2 is not shorter than --duration 2");
    rejects(warm_neg, "--warmup");
    rejects(tl_empty, "--timeline");
    rejects(give0, "--give-up-ms");
}
