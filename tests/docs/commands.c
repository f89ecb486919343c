/* commands.c - every command README.md and the docs/ pages tell a reader to run,
 * run here in a small size (the size flags the scripts have): its exit
 * status and the shape of what it prints (the table's header, its rows, the
 * verdict column). A documented command that stops working fails CI. The
 * list these tests cover is in documented.c, which fails when the docs show
 * a command that is not in it. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dlock.h>

#include "docs_util.h"
#include "lt_test_util.h"
#include "procs.h"

static char *out;

static void fini(void)
{
    free(out);
    out = NULL;
}

TestSuite(docs_commands, .fini = fini);

/* The line of out that starts with prefix (and contains needle, or NULL). */
static void want_line(const char *prefix, const char *needle, char *line, size_t len)
{
    if (text_line(out, prefix, needle, line, len) != 0)
        cr_assert_fail("no line starts with '%s'%s%s:\n%s", prefix, needle ? " containing " : "",
                       needle ? needle : "", out);
}

/* Every "pid N" the script announced is gone, and its temp dir too. */
static void left_nothing(void)
{
    char why[512];
    cr_assert_eq(text_left_nothing(out, why, sizeof why), 0, "%s:\n%s", why, out);
}

/* README: ./scripts/demo (the sale, then the audit). */
Test(docs_commands, demo_sale, .timeout = 180)
{
    char line[512];
    const char *argv[] = {"scripts/demo", "--no-setup", "--bin-dir", docs_bin(), "--stock", "20", "--requests",
                          "150", "--connections", "8", NULL};
    int st = docs_run(argv, 150, &out);
    cr_assert_eq(st, 0, "./scripts/demo exit %d:\n%s", st, out);
    want_line("audit of coupon", NULL, line, sizeof line);
    want_line("  issued: 20 of 20", NULL, line, sizeof line);
    want_line("verdict: NO OVERSELL", NULL, line, sizeof line);
    left_nothing();
}

/* ./scripts/demo --tls: the same sale over three TLS-only masters, with
 * certificates made by openssl in its temp dir. */
Test(docs_commands, demo_tls, .timeout = 180)
{
    char line[512];
    const char *argv[] = {"scripts/demo", "--no-setup", "--bin-dir", docs_bin(), "--tls", "--stock", "20",
                          "--requests", "150", "--connections", "8", NULL};
    int st = docs_run(argv, 150, &out);
    cr_assert_eq(st, 0, "./scripts/demo --tls exit %d:\n%s", st, out);
    want_line("demo: TLS: CA and certificates in", NULL, line, sizeof line);
    want_line("  issued: 20 of 20", NULL, line, sizeof line);
    want_line("verdict: NO OVERSELL", NULL, line, sizeof line);
    left_nothing();
}

/* ./scripts/demo --compare: six rows, each with the verdict it must show. */
Test(docs_commands, demo_compare, .timeout = 300)
{
    char rows[6][512];
    /* The sizes of loadtest_demo/compare_table (its comment says why they
     * make every verdict certain), with fewer claims. */
    const char *argv[] = {"scripts/demo", "--no-setup", "--bin-dir", docs_bin(), "--compare", "--stock", "50",
                          "--connections", "8", "--requests", "300", "--work-us", "20000", "--lease-pause",
                          "250:4", "--lock-wait", "10000", NULL};
    int st = docs_run(argv, 280, &out);
    cr_assert_eq(st, 0, "./scripts/demo --compare exit %d:\n%s", st, out);
    docs_rows_after(out, "strategy    fence fault            claims/s    p99 ms issued/stock  1010s  verdict",
                    rows, 6);
    const struct {
        const char *start, *verdict;
    } want[] = {
        {"none        -     -", "OVERSOLD by "},
        {"atomic-sql  -     -", " 50/50      0  NO OVERSELL"},
        {"redlock     full  -", " 50/50      0  NO OVERSELL"},
        {"redlock     off   lease outlived", "OVERSOLD by "},
        {"redlock     write lease outlived", "OVERSOLD by "},
        {"redlock     full  lease outlived", "NO OVERSELL"},
    };
    for (size_t i = 0; i < 6; i++) {
        cr_assert_eq(strncmp(rows[i], want[i].start, strlen(want[i].start)), 0, "row %zu is not '%s':\n%s",
                     i + 1, want[i].start, out);
        cr_assert_not_null(strstr(rows[i], want[i].verdict), "row %zu has no '%s':\n%s", i + 1, want[i].verdict,
                           out);
    }
    char line[512];
    want_line("as expected: ", NULL, line, sizeof line);
    left_nothing();
}

/* ./scripts/demo --trial: thirteen rows, each recipe's flaw and redlock's none. */
Test(docs_commands, demo_trial, .timeout = 300)
{
    char rows[13][512];
    const char *argv[] = {"scripts/demo", "--no-setup", "--bin-dir", docs_bin(), "--trial", "--requests", "150",
                          NULL};
    int st = docs_run(argv, 280, &out);
    cr_assert_eq(st, 0, "./scripts/demo --trial exit %d:\n%s", st, out);
    docs_rows_after(out, "recipe               seed    trigger              claims/s issued/stock  verdict", rows,
                    13);
    const struct {
        const char *recipe, *trigger, *verdict;
    } want[] = {
        {"get-set ", "none (concurrency)", "OVERSOLD by "},
        {"setnx ", "holder killed", "STUCK"},
        {"multi-setnx-pexpire ", "holder killed", "STUCK"},
        {"setnx-expire ", "holder killed", "STUCK"},
        {"lua-setnx-pexpire ", "pause past TTL", "OVERSOLD by "},
        {"del-no-token ", "pause past TTL", "OVERSOLD by "},
        {"setnx-getset ", "clock +5 s", "OVERSOLD by "},
        {"failover ", "master killed", "OVERSOLD by "},
        {"redlock ", "none (concurrency)", " 50/50  NO OVERSELL"},
        {"redlock ", "holder killed", "NO OVERSELL"},
        {"redlock ", "pause past TTL", "NO OVERSELL"},
        {"redlock ", "clock +5 s", "NO OVERSELL"},
        {"redlock ", "master killed", "NO OVERSELL"},
    };
    for (size_t i = 0; i < 13; i++) {
        cr_assert_eq(strncmp(rows[i], want[i].recipe, strlen(want[i].recipe)), 0, "row %zu is not %s:\n%s",
                     i + 1, want[i].recipe, out);
        cr_assert_not_null(strstr(rows[i], want[i].trigger), "row %zu: no '%s':\n%s", i + 1, want[i].trigger, out);
        cr_assert_not_null(strstr(rows[i], want[i].verdict), "row %zu: no '%s':\n%s", i + 1, want[i].verdict, out);
        cr_assert_null(strstr(rows[i], "<- expected"), "row %zu:\n%s", i + 1, out);
    }
    char line[512];
    want_line("as expected: ", NULL, line, sizeof line);
    left_nothing();
}

/* ./scripts/demo --chaos --seed 42 --duration S (docs/reliability.md), at
 * the shortest duration the script takes. */
Test(docs_commands, demo_chaos, .timeout = 200)
{
    char line[512];
    const char *argv[] = {"scripts/demo", "--no-setup", "--bin-dir", docs_bin(), "--chaos", "--seed", "42",
                          "--duration", "20", NULL};
    int st = docs_run(argv, 180, &out);
    cr_assert_eq(st, 0, "./scripts/demo --chaos exit %d:\n%s", st, out);
    want_line("chaos-check: ", "oversold 0, verdict PASS", line, sizeof line);
}

#define HOSTS_UNAVAILABLE "hosts: network namespaces unavailable: "

/* ./scripts/demo --hosts: three partitions, each row OK, then PASS. */
Test(docs_commands, demo_hosts, .timeout = 240)
{
    char line[512];
    const char *argv[] = {"scripts/demo", "--no-setup", "--bin-dir", docs_bin(), "--hosts", "--phase-s", "3", NULL};
    int st = docs_run(argv, 220, &out);
    if (st == 2 && strstr(out, HOSTS_UNAVAILABLE) != NULL)
        cr_skip_test("./scripts/demo --hosts not run: %s", strstr(out, HOSTS_UNAVAILABLE));
    cr_assert_eq(st, 0, "./scripts/demo --hosts exit %d:\n%s", st, out);
    const char *phases[] = {"a  Redis master r1", "b  s2 cut from the Redis masters", "c  PostgreSQL cut off from s2"};
    for (size_t i = 0; i < 3; i++) {
        want_line(phases[i], NULL, line, sizeof line);
        size_t l = strlen(line);
        while (l > 0 && line[l - 1] == ' ')
            line[--l] = '\0';
        cr_assert(l >= 2 && strcmp(line + l - 2, "OK") == 0, "phase %c is not OK: %s\n%s", 'a' + (int)i, line, out);
    }
    want_line("hosts: PASS", NULL, line, sizeof line);
}

/* bench/run-bench.sh --matrix (docs/benchmarks.md): one JSON line per row. */
Test(docs_commands, run_bench, .timeout = 120)
{
    char dir[256], matrix[300], bench[600];
    cr_assert_eq(test_mkdtemp(dir, sizeof dir, "docs-bench"), 0);
    snprintf(matrix, sizeof matrix, "%s/matrix", dir);
    FILE *f = fopen(matrix, "w");
    cr_assert_not_null(f);
    fputs("# the documented row, 1 s instead of 5\n3 --mode contended --workers 8 --duration 1\n"
          "1 --mode raw --workers 2 --duration 1\n",
          f);
    cr_assert_eq(fclose(f), 0);
    snprintf(bench, sizeof bench, "%s/dlock-bench", docs_bin());
    const char *argv[] = {"bench/run-bench.sh", "--bench", bench, "--matrix", matrix, NULL};
    int st = docs_run(argv, 100, &out);
    test_rmtree(dir);
    cr_assert_eq(st, 0, "bench/run-bench.sh exit %d:\n%s", st, out);
    cr_assert_eq(docs_count_lines(out, "{\"driver\":\"c\""), 2, "not one JSON line per row:\n%s", out);
    char line[512];
    want_line("{\"driver\":\"c\",\"lib\":\"libdlock\",\"mode\":\"contended\"", "\"redis_nodes\":3,\"workers\":8",
              line, sizeof line);
    cr_assert_not_null(strstr(line, "\"ops_per_s\":"), "%s", line);
    want_line("{\"driver\":\"c\",\"lib\":\"libdlock\",\"mode\":\"raw\"", "\"redis_nodes\":1,\"workers\":2", line,
              sizeof line);
}

/* bench/db-compare.sh on both stores (docs/benchmarks.md), with --stages:
 * four rows, each selling exactly the stock with NO OVERSELL, each followed
 * by its stage line with the stock peeks counted. */
Test(docs_commands, db_compare_both_stores, .timeout = 240)
{
    char rows[8][512], pg[256];
    if (pg_bindir(pg, sizeof pg) != 0)
        cr_skip_test("PostgreSQL server binaries not installed (apt-get install postgresql): "
                     "bench/db-compare.sh not run");
    const char *argv[] = {"bench/db-compare.sh", "--requests", "200", "--stock", "100", "--connections", "16",
                          "--pg-synchronous-commit", "off", "--stages", NULL};
    int st = docs_run(argv, 220, &out);
    cr_assert_eq(st, 0, "bench/db-compare.sh exit %d:\n%s", st, out);
    docs_rows_after(out, "store       strategy      claims/s    p99 ms issued/stock  verdict", rows, 8);
    const char *start[] = {"sqlite      redlock ", "sqlite      atomic-sql ", "postgresql  redlock ",
                           "postgresql  atomic-sql "};
    for (size_t i = 0; i < 4; i++) {
        const char *row = rows[2 * i], *stages = rows[2 * i + 1];
        cr_assert_eq(strncmp(row, start[i], strlen(start[i])), 0, "row %zu is not '%s':\n%s", i + 1, start[i], out);
        cr_assert_not_null(strstr(row, " 100/100  NO OVERSELL"), "row %zu:\n%s", i + 1, out);
        cr_assert_eq(strncmp(stages, "  us per claim (200 claims): http_in ", 37), 0, "row %zu's stages:\n%s", i + 1,
                     out);
        cr_assert_not_null(strstr(stages, "; stock peeks issued "), "row %zu's stages:\n%s", i + 1, out);
    }
    /* The script stops the postgres it started by its PID before it exits
     * (it once signalled a runuser that had forked postgres, which outlived it). */
    cr_assert_eq(docs_count_procs("/db-compare."), 0,
                 "bench/db-compare.sh left its postgres running");
}

/* bench/hot-coupon.sh (docs/benchmarks.md), one short round: the ceiling,
 * atomic-sql and redlock rows each NO OVERSELL, the medians with their
 * ratios, and a redlock claim's stages measured (a lock and a read per pass). */
Test(docs_commands, hot_coupon, .timeout = 120)
{
    char line[512];
    const char *argv[] = {"bench/hot-coupon.sh", "--rounds", "1", "--duration", "1", "--stock", "1000", NULL};
    int st = docs_run(argv, 100, &out);
    cr_assert_eq(st, 0, "bench/hot-coupon.sh exit %d:\n%s", st, out);
    want_line("1      ceiling ", "  NO OVERSELL", line, sizeof line);
    want_line("1      atomic-sql ", "  NO OVERSELL", line, sizeof line);
    want_line("1      redlock ", "  NO OVERSELL", line, sizeof line);
    want_line("  redlock ", " of atomic-sql", line, sizeof line);
    cr_assert_null(strstr(line, " 0.0 "), "redlock answered nothing: %s", line);
    /* The stage table: redlock's lock and read ran at least once. */
    want_line("  lock ", "", line, sizeof line);
    cr_assert_null(strstr(line + strlen(line) - 8, "       0"), "no lock pass counted: %s", line);
    want_line("  read ", "", line, sizeof line);
    cr_assert_null(strstr(line + strlen(line) - 8, "       0"), "no read pass counted: %s", line);
    cr_assert_not_null(strstr(out, "load before: "), "%s", out);
}

/* bench/many-coupons.sh (docs/benchmarks.md), one short round over 1 and
 * 10 coupons: atomic-sql and redlock rows each NO OVERSELL, the table of
 * medians with redlock's ratio, and the commit group's passes counted. */
Test(docs_commands, many_coupons, .timeout = 150)
{
    char line[512];
    const char *argv[] = {"bench/many-coupons.sh", "--rounds", "1", "--duration", "1", "--stock", "1000",
                          "--counts", "1 10", NULL};
    int st = docs_run(argv, 130, &out);
    cr_assert_eq(st, 0, "bench/many-coupons.sh exit %d:\n%s", st, out);
    want_line("1            1 atomic-sql ", "  NO OVERSELL", line, sizeof line);
    want_line("1            1 redlock ", "  NO OVERSELL", line, sizeof line);
    want_line("1           10 atomic-sql ", "  NO OVERSELL", line, sizeof line);
    want_line("1           10 redlock ", "  NO OVERSELL", line, sizeof line);
    want_line("  coupons ", "", line, sizeof line);
    want_line("  redlock/atomic-sql ", "x", line, sizeof line);
    cr_assert_null(strstr(line, " -"), "a ratio without a baseline: %s", line);
    /* 10 coupons: the redlock sections went through the commit group. */
    want_line("where a claim's time goes, 10 coupon(s)", "", line, sizeof line);
    const char *ten = strstr(out, "where a claim's time goes, 10 coupon(s)");
    const char *commit = ten != NULL ? strstr(ten, "\n  commit ") : NULL;
    cr_assert_not_null(commit, "%s", out);
    const char *eol = strchr(commit + 1, '\n');
    cr_assert_not_null(eol);
    cr_assert_neq(strncmp(eol - 8, "       0", 8), 0, "no group commit counted for redlock: %.*s",
                  (int)(eol - commit), commit);
    cr_assert_not_null(strstr(out, "load before: "), "%s", out);
}

/* bench/many-coupons.sh --zipf (docs/benchmarks.md, the Zipf row), one
 * short round over 10 coupons: the header names the distribution, both
 * rows NO OVERSELL, and the CPU-per-answer lines the page's figures and
 * its CPU ceiling come from are printed for both strategies. */
Test(docs_commands, many_coupons_zipf, .timeout = 150)
{
    char line[512];
    const char *argv[] = {"bench/many-coupons.sh", "--rounds", "1", "--duration", "1", "--stock", "1000",
                          "--counts", "10", "--zipf", "1.1", NULL};
    int st = docs_run(argv, 130, &out);
    cr_assert_eq(st, 0, "bench/many-coupons.sh --zipf exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, "(Zipf 1.1)"), "the header does not name the distribution:\n%s", out);
    want_line("1           10 atomic-sql ", "  NO OVERSELL", line, sizeof line);
    want_line("1           10 redlock ", "  NO OVERSELL", line, sizeof line);
    want_line("  CPU per answer", "", line, sizeof line);
    want_line("    atomic-sql ", " / ", line, sizeof line);
    want_line("    redlock ", " / ", line, sizeof line);
}

/* bench/many-coupons.sh --route coupon (docs/benchmarks.md, lock rounds per
 * claim), one short round over 10 coupons: the header names the route and
 * the formula, each row has its rounds per claim (none for atomic-sql,
 * some for redlock) and NO OVERSELL, and the medians table follows. */
Test(docs_commands, many_coupons_route, .timeout = 150)
{
    char line[512];
    double rounds = -1;
    const char *argv[] = {"bench/many-coupons.sh", "--rounds", "1", "--duration", "1", "--stock", "1000",
                          "--counts", "10", "--route", "coupon", NULL};
    int st = docs_run(argv, 130, &out);
    cr_assert_eq(st, 0, "bench/many-coupons.sh --route coupon exit %d:\n%s", st, out);
    cr_assert_not_null(strstr(out, " --route coupon; "), "the header does not name the route:\n%s", out);
    want_line("rounds/claim = (EVALSHA + EVAL + FCALL calls on the masters", " / 3 masters / claims answered", line,
              sizeof line);
    want_line("1           10 atomic-sql ", "  NO OVERSELL", line, sizeof line);
    cr_assert_not_null(strstr(line, " 0.00  NO OVERSELL"), "atomic-sql ran lock scripts: %s", line);
    want_line("1           10 redlock ", "  NO OVERSELL", line, sizeof line);
    const char *v = strstr(line, "  NO OVERSELL");
    while (v > line && v[-1] != ' ')
        v--;
    cr_assert_eq(sscanf(v, "%lf", &rounds), 1, "no rounds per claim in: %s", line);
    cr_assert(rounds > 0 && rounds <= 3, "redlock: %.2f lock rounds per claim: %s", rounds, line);
    want_line("medians of 1 rounds (lock rounds per claim, route coupon):", "", line, sizeof line);
}

/* The row of the glance table that starts with prefix holds needle. */
static void glance_row(const char *prefix, const char *needle)
{
    char line[1024];
    if (text_line(out, prefix, NULL, line, sizeof line) != 0)
        cr_assert_fail("no table row '%s':\n%s", prefix, out);
    cr_assert_not_null(strstr(line, needle), "the row has no '%s': %s\n%s", needle, line, out);
}

/* bench/glance.sh --quick (docs/benchmarks.md, "At a glance"): every step
 * of the pass runs once, briefly, and the table fills in from their JSON
 * lines: a figure in every row and no step FAILED. The PostgreSQL and peer
 * rows may say "not run" only when the server binaries or the drivers'
 * packages are missing (DLOCK_TEST_PEERS=1: never for the peers). */
Test(docs_commands, glance_quick, .timeout = 300)
{
    char line[1024], pg[256];
    const char *argv[] = {"bench/glance.sh", "--quick", NULL};
    int st = docs_run(argv, 280, &out);
    cr_assert_eq(st, 0, "bench/glance.sh --quick exit %d:\n%s", st, out);
    want_line("One pass of `bench/glance.sh --quick` on ", " cores (", line, sizeof line);
    cr_assert_not_null(strstr(line, "; load average "), "%s", line);
    want_line("| what | command | result |", NULL, line, sizeof line);
    glance_row("| hot coupon on SQLite, ", " answers/s: **");
    if (pg_bindir(pg, sizeof pg) == 0) {
        glance_row("| PostgreSQL, `synchronous_commit` off |", " claims/s: **");
        glance_row("| PostgreSQL, `synchronous_commit` on |", " claims/s: **");
    } else {
        glance_row("| PostgreSQL, `synchronous_commit` off and on |", "| not run: ");
    }
    if (docs_peers_installed()) {
        glance_row("| 64 workers on one key, 3 masters, ", " ops/s: **");
        glance_row("| uncontended, 1 node, 8 workers, ", " ops/s: **");
    } else {
        glance_row("| libdlock against node-redlock and redis-semaphore |", "| not run: ");
    }
    glance_row("| a many-coupon sale, SQLite |", "| 1 / 10 / 100 coupons: `redlock` ");
    glance_row("| `dlock-bench` uncontended, 1 node, 8 workers |", " vs raw hiredis ");
    glance_row("| Redlock uncontended, 3 nodes, 8 workers |", " vs raw hiredis ");
    glance_row("| Redlock uncontended, 5 nodes, 8 workers |", " vs raw hiredis ");
    glance_row("| Redlock contended, 3 nodes, 8 / 64 workers |", "; violations 0 in every run");
    cr_assert_null(strstr(out, "FAILED"), "%s", out);
    want_line("Load per step (1 minute, before-after): hot-coupon ", NULL, line, sizeof line);
    /* glance.sh starts no server itself; each step stops its own (db_compare_both_stores,
     * peers and the others check that of their script). */
}

/* bench/sick-minority.sh --only paused-1of3 (docs/benchmarks.md): one line,
 * no stray lock key once the paused node resumed. */
Test(docs_commands, sick_minority, .timeout = 120)
{
    char line[512], bench[600];
    snprintf(bench, sizeof bench, "%s/dlock-bench", docs_bin());
    const char *argv[] = {"bench/sick-minority.sh", "--bench", bench, "--only", "paused-1of3", "--workers", "4",
                          "--duration", "1", NULL};
    int st = docs_run(argv, 100, &out);
    cr_assert_eq(st, 0, "bench/sick-minority.sh exit %d:\n%s", st, out);
    cr_assert_eq(docs_count_lines(out, "paused-1of3 "), 1, "%s", out);
    want_line("paused-1of3  workers=4 ", " stray_keys=0 {", line, sizeof line);
    cr_assert_null(strstr(line, "ops/s=0 "), "%s", line);
}

/* The contended rows of docs/benchmarks.md ("Redlock hand-off with a
 * master paused"): every worker on one key, one master of three paused. */
Test(docs_commands, sick_minority_contended, .timeout = 120)
{
    char line[512], bench[600];
    snprintf(bench, sizeof bench, "%s/dlock-bench", docs_bin());
    const char *argv[] = {"bench/sick-minority.sh", "--bench", bench, "--only", "paused-1of3", "--mode",
                          "contended", "--workers", "4", "--duration", "1", NULL};
    int st = docs_run(argv, 100, &out);
    cr_assert_eq(st, 0, "bench/sick-minority.sh exit %d:\n%s", st, out);
    want_line("paused-1of3  workers=4 ", " stray_keys=0 {", line, sizeof line);
    cr_assert_not_null(strstr(line, "\"mode\":\"contended\""), "%s", line);
    cr_assert_not_null(strstr(line, "\"violations\":0,"), "%s", line);
    cr_assert_null(strstr(line, "ops/s=0 "), "%s", line);
}

/* dlockctl's session in the docs, against 3 masters while this process
 * holds orders:42 through libdlock. */
static redis_proc ctl_nodes[3];

static int ctl(char **text, const char *a, const char *b, const char *c, const char *d)
{
    char bin[600], csv[256];
    snprintf(bin, sizeof bin, "%s/dlockctl", docs_bin());
    redis_addrs_csv(ctl_nodes, 3, csv, sizeof csv);
    const char *argv[] = {bin, "--redis", csv, a, b, c, d, NULL};
    free(*text);
    *text = NULL;
    int st = run_command(argv, 20000, text);
    cr_assert_neq(st, -1);
    return st;
}

Test(docs_commands, dlockctl_session, .timeout = 120)
{
    char line[512], want[128];
    const char *addrs[3];
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    char err[256] = "";
    cr_assert_eq(redis_start_n(ctl_nodes, 3), 0, "redis nodes did not start");
    for (size_t i = 0; i < 3; i++)
        addrs[i] = ctl_nodes[i].addr;
    dlock_options o;
    dlock_options_init(&o);
    o.addrs = addrs;
    o.n_addrs = 3;
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "%s", err);
    dlock_err e = dlock_acquire(c, "orders:42", 60000, dlock_now_ms() + 10000, &lock);
    cr_assert_eq(e, DLOCK_OK, "%s", dlock_strerror(e));
    const char *token = dlock_lock_token(lock);

    cr_assert_eq(ctl(&out, "ping", NULL, NULL, NULL), 0, "%s", out);
    cr_assert_eq(docs_count_lines(out, "127.0.0.1:"), 3, "%s", out);
    want_line("3/3 nodes up, quorum 2: ok", NULL, line, sizeof line);

    cr_assert_eq(ctl(&out, "list", NULL, NULL, NULL), 0, "%s", out);
    want_line("RESOURCE ", "PTTL_MS", line, sizeof line);
    cr_assert_eq(docs_count_lines(out, "orders:42 "), 3, "%s", out);
    want_line("orders:42 ", token, line, sizeof line);
    want_line("3 lock key(s) on 3/3 nodes answering (quorum 2)", NULL, line, sizeof line);

    cr_assert_eq(ctl(&out, "show", "orders:42", NULL, NULL), 0, "%s", out);
    want_line("resource orders:42: lock key \"lock:orders:42\", fence key \"fence:orders:42\"", NULL, line,
              sizeof line);
    snprintf(want, sizeof want, "held by %s on 3/3 nodes (quorum 2)", token);
    want_line(want, NULL, line, sizeof line);

    cr_assert_eq(ctl(&out, "release", "orders:42", "--force", NULL), 0, "%s", out);
    want_line("dlockctl: WARNING: force-releasing \"orders:42\".", NULL, line, sizeof line);
    cr_assert_eq(docs_count_lines(out, "127.0.0.1:"), 3, "%s", out);
    for (size_t i = 0; i < 3; i++)
        want_line(ctl_nodes[i].addr, "deleted", line, sizeof line);

    cr_assert_eq(ctl(&out, "fence", "orders:42", "--raise", "1000"), 0, "%s", out);
    for (size_t i = 0; i < 3; i++)
        want_line(ctl_nodes[i].addr, "-> 1000", line, sizeof line);
    cr_assert_eq(ctl(&out, "fence", "orders:42", "--raise", "10"), 0, "%s", out);
    for (size_t i = 0; i < 3; i++)
        want_line(ctl_nodes[i].addr, "fence 1000 (already >= 10, left alone)", line, sizeof line);

    /* Two masters stopped: no quorum, exit 1. */
    redis_stop(&ctl_nodes[1]);
    redis_stop(&ctl_nodes[2]);
    cr_assert_eq(ctl(&out, "ping", NULL, NULL, NULL), 1, "%s", out);
    want_line(ctl_nodes[0].addr, " up ", line, sizeof line);
    cr_assert_eq(docs_count_lines(out, "127.0.0.1:"), 3, "%s", out);
    want_line("1/3 nodes up, quorum 2: NO QUORUM", NULL, line, sizeof line);

    dlock_lock_free(lock);
    dlock_client_free(c);
    redis_stop_n(ctl_nodes, 3);
}

/* docs/deployment.md and README: coupon-server with the documented options
 * and coupon-loadtest against two of them, here on one host and SQLite. */
Test(docs_commands, server_and_loadtest, .timeout = 120)
{
    lt_rig rig;
    char line[512];
    const char *server[] = {"--strategy", "redlock", "--fence", "full", "--db-busy-ms", "5000", "--lock-ttl", "2000",
                            NULL};
    lt_rig_up(&rig, 2, server);
    long long id = lt_create_coupon(&rig, 100, 1);
    char coupon[32];
    snprintf(coupon, sizeof coupon, "%lld", id);
    const char *args[] = {"--url", rig.urls, "--coupon", coupon, "--threads", "2", "--connections", "64",
                          "--requests", "300", "--db", rig.db_path, NULL};
    int st = lt_run_loadtest(args, &out);
    lt_rig_down(&rig);
    cr_assert_eq(st, 0, "coupon-loadtest exit %d:\n%s", st, out);
    want_line("requests:   300 answered in ", "throughput", line, sizeof line);
    want_line("  issued: 100 of 100", NULL, line, sizeof line);
    want_line("verdict: NO OVERSELL", NULL, line, sizeof line);
}
