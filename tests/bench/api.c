/* api.c - dlock-bench's --api and TLS options against real redis-servers:
 * --api async runs every worker on one thread and keeps the contended
 * counter exact; both APIs report "api" and "threads"; the combinations
 * the bench refuses are usage errors (exit 2); --tls-* reach a TLS-only
 * server with both APIs. Short runs (1 s). The async tests skip in a
 * dlock-bench built without libuv, the TLS test in a build without TLS. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dlock.h"
#include "procs_base.h"
#include "tls_procs.h"

static const char *bench_bin(void)
{
    const char *b = getenv("DLOCK_BENCH_BIN");
    cr_assert_not_null(b, "DLOCK_BENCH_BIN is not set (run under ctest)");
    return b;
}

/* dlock-bench with args (NULL-terminated, after the binary); its exit
 * status, and its output in *out (caller frees). */
static int bench(char **out, const char *const *args)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = bench_bin();
    for (size_t i = 0; args[i] != NULL; i++) {
        cr_assert_lt(n, sizeof argv / sizeof argv[0] - 1);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    *out = NULL;
    int st = run_command(argv, 60000, out);
    cr_assert_geq(st, 0, "cannot run %s", argv[0]);
    return st;
}

/* A key's number in the JSON line, or -1 when absent. */
static long long jnum(const char *json, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(json, pat);
    return p != NULL ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* Whether this dlock-bench has --api async: refused with libuv's name when not. */
static int has_async(const char *port)
{
    char *out = NULL;
    int st = bench(&out, (const char *const[]){"--ports", port, "--duration", "0.1", "--api", "async",
                                                NULL});
    int yes = !(st == 2 && out != NULL && strstr(out, "libuv") != NULL);
    free(out);
    return yes;
}

static redis_proc node;
static char port[16];

static void start_node(void)
{
    memset(&node, 0, sizeof node);
    cr_assert_eq(redis_start(&node), 0);
    snprintf(port, sizeof port, "%d", node.port);
}

static void stop_node(void)
{
    redis_stop(&node);
}

TestSuite(bench_api, .init = start_node, .fini = stop_node, .timeout = 60);

Test(bench_api, async_contended_one_thread_exact_counter)
{
    if (!has_async(port))
        cr_skip_test("dlock-bench built without libuv");
    char *out = NULL;
    int st = bench(&out, (const char *const[]){"--ports", port, "--mode", "contended", "--workers", "8",
                                               "--duration", "1", "--api", "async", NULL});
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, "\"api\":\"async\",\"threads\":1}"), "%s", out);
    cr_assert_gt(jnum(out, "successes"), 0, "%s", out);
    cr_assert_eq(jnum(out, "counter"), jnum(out, "successes"), "%s", out);
    cr_assert_eq(jnum(out, "violations"), 0, "%s", out);
    cr_assert_eq(jnum(out, "workers"), 8, "%s", out);
    free(out);
}

Test(bench_api, async_uncontended_every_worker_runs)
{
    if (!has_async(port))
        cr_skip_test("dlock-bench built without libuv");
    char *out = NULL;
    int st = bench(&out, (const char *const[]){"--ports", port, "--workers", "4", "--duration", "1",
                                               "--hold", "1", "--api", "async", NULL});
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    cr_assert_gt(jnum(out, "per_worker_min"), 0, "%s", out);
    cr_assert_not_null(strstr(out, "\"lock_rt_per_success\":2.000"), "%s", out);
    free(out);
}

Test(bench_api, blocking_reports_one_thread_per_worker)
{
    char *out = NULL;
    int st = bench(&out, (const char *const[]){"--ports", port, "--workers", "3", "--duration", "0.5",
                                               NULL});
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, "\"api\":\"blocking\",\"threads\":3}"), "%s", out);
    free(out);
}

Test(bench_api, refused_combinations_are_usage_errors)
{
    static const char *const cases[][12] = {
        {"--mode", "raw", "--api", "async", NULL},
        {"--mode", "raw", "--tls-ca", "/nonexistent/ca.crt", NULL},
        {"--mode", "contended", "--tls-ca", "/nonexistent/ca.crt", NULL},
        {"--tls-cert", "/nonexistent/c.crt", "--tls-ca", "/nonexistent/ca.crt", NULL},
        {"--tls-cert", "/nonexistent/c.crt", "--tls-key", "/nonexistent/c.key", NULL},
        {"--api", "threads", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[16] = {"--ports", port, "--duration", "0.1"};
        size_t n = 4;
        for (size_t j = 0; cases[i][j] != NULL; j++)
            args[n++] = cases[i][j];
        args[n] = NULL;
        char *out = NULL;
        int st = bench(&out, args);
        cr_expect_eq(st, 2, "case %zu: exit %d:\n%s", i, st, out);
        free(out);
    }
}

/* A TLS-only server (no plaintext port): uncontended runs need no counter. */
Test(bench_api, tls_only_server_both_apis)
{
    char err[DLOCK_ERRSTR_LEN], dir[256], ca[300], crt[300], key[300], tport[16];
    tls_redis srv = {0};

    if (dlock_addr_check("rediss://127.0.0.1:1", err, sizeof err) != DLOCK_OK)
        cr_skip_test("this build has no TLS (its hiredis has none: -DDLOCK_HIREDIS=bundled)");
    cr_assert_eq(test_mkdtemp(dir, sizeof dir, "bench-tls-"), 0);
    cr_assert_eq(tls_make_certs(dir), 0);
    snprintf(ca, sizeof ca, "%s/ca.crt", dir);
    snprintf(crt, sizeof crt, "%s/client.crt", dir);
    snprintf(key, sizeof key, "%s/client.key", dir);
    int started = tls_redis_start(&srv, dir, "yes") == 0;
    snprintf(tport, sizeof tport, "%d", srv.port);
    int async = started && has_async(port);
    int st_b = -1, st_a = 0;
    char *out_b = NULL, *out_a = NULL;
    if (started) {
        st_b = bench(&out_b, (const char *const[]){"--ports", tport, "--workers", "2", "--duration",
                                                   "0.5", "--tls-ca", ca, "--tls-cert", crt,
                                                   "--tls-key", key, NULL});
        if (async)
            st_a = bench(&out_a, (const char *const[]){"--ports", tport, "--workers", "2",
                                                       "--duration", "0.5", "--tls-ca", ca,
                                                       "--tls-cert", crt, "--tls-key", key,
                                                       "--api", "async", NULL});
    }
    tls_redis_stop(&srv);
    test_rmtree(dir);
    cr_assert(started, "the TLS redis-server did not start");
    cr_expect_eq(st_b, 0, "blocking over TLS: exit %d:\n%s", st_b, out_b);
    cr_expect_gt(out_b != NULL ? jnum(out_b, "successes") : -1, 0, "%s", out_b);
    if (async) {
        cr_expect_eq(st_a, 0, "async over TLS: exit %d:\n%s", st_a, out_a);
        cr_expect_gt(out_a != NULL ? jnum(out_a, "successes") : -1, 0, "%s", out_a);
    }
    free(out_b);
    free(out_a);
}
