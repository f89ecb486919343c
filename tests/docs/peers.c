/* peers.c - bench/peers.sh (docs/benchmarks.md), the comparison with the
 * Node peers, in a small size: every client's run is safe (violations 0,
 * exit 0), and the driver with no lock at all is caught (violations, exit
 * 1), so a check that stopped counting would fail here. The peer drivers'
 * packages come from npm (bench/peers.sh --setup): without
 * bench/peers/node_modules these tests skip, saying so, unless
 * DLOCK_TEST_PEERS=1, where their absence is a failure. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docs_util.h"
#include "procs.h"

static char *peers_out;

static void peers_fini(void)
{
    free(peers_out);
    peers_out = NULL;
}

/* Skips (or, with DLOCK_TEST_PEERS=1, fails) without the drivers' packages. */
static void need_peers(void)
{
    if (!docs_peers_installed())
        cr_skip_test("bench/peers.sh not run: bench/peers/node_modules is missing (bench/peers.sh --setup "
                     "installs the peer drivers' packages from npm; DLOCK_TEST_PEERS=1 makes this a failure)");
}

/* The medians table's row for a row and client; asserts it is there. */
static void table_row(const char *row, const char *client, char *line, size_t len)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "| %s | %s | ", row, client);
    if (text_line(peers_out, prefix, NULL, line, len) != 0)
        cr_assert_fail("no table row '%s':\n%s", prefix, peers_out);
}

/* Cell i (0-based) of a markdown table row "| a | b | ... |", into cell. */
static void table_cell(const char *line, int i, char *cell, size_t len)
{
    const char *p = line;
    for (int k = 0; k <= i; k++) {
        p = strchr(p, '|');
        cr_assert_not_null(p, "no cell %d in: %s", i, line);
        p++;
    }
    while (*p == ' ')
        p++;
    size_t n = strcspn(p, "|");
    while (n > 0 && p[n - 1] == ' ')
        n--;
    cr_assert_lt(n, len, "cell %d too long in: %s", i, line);
    memcpy(cell, p, n);
    cell[n] = '\0';
}

static int ends_with(const char *s, const char *suffix)
{
    size_t l = strlen(s), n = strlen(suffix);
    return l >= n && strcmp(s + l - n, suffix) == 0;
}

Test(docs_commands, peers, .timeout = 240, .fini = peers_fini)
{
    char bench[600], line[512], why[512];
    need_peers();
    snprintf(bench, sizeof bench, "%s/dlock-bench", docs_bin());
    /* One row of each of the two targets' kinds, small. */
    const char *argv[] = {"bench/peers.sh", "--bench", bench, "--rounds", "1", "--duration", "1",
                          "--rows", "1:4:uncontended,3:8:contended", NULL};
    int st = docs_run(argv, 200, &peers_out);
    cr_assert_eq(st, 0, "bench/peers.sh exit %d:\n%s", st, peers_out);
    const char *clients[] = {"libdlock", "node-redlock", "redis-semaphore"};
    const char *rows[] = {"1 | 4 | uncontended", "3 | 8 | contended"};
    for (size_t r = 0; r < 2; r++) {
        for (size_t c = 0; c < 3; c++) {
            table_row(rows[r], clients[c], line, sizeof line);
            char ops[64];
            /* The last column: violations, 0 for every lock. */
            cr_assert(ends_with(line, " | 0 |"), "violations in: %s\n%s", line, peers_out);
            table_cell(line, 4, ops, sizeof ops);
            cr_assert(atof(ops) > 0, "no ops/s in: %s\n%s", line, peers_out);
        }
        /* libdlock against the best peer of the row. */
        char prefix[64];
        snprintf(prefix, sizeof prefix, "| %s | ", rows[r]);
        cr_assert_eq(docs_count_lines(peers_out, prefix), 4, "the row's lines:\n%s", peers_out);
    }
    /* Every client's commands per success, for the uncontended row. */
    for (size_t c = 0; c < 3; c++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "| %s | evalsha | ", clients[c]);
        cr_assert_eq(text_line(peers_out, prefix, NULL, line, sizeof line), 0, "no '%s':\n%s", prefix,
                     peers_out);
    }
    cr_assert_not_null(strstr(peers_out, "load before: "), "%s", peers_out);
    cr_assert_not_null(strstr(peers_out, "load after: "), "%s", peers_out);
    cr_assert_eq(text_left_nothing(peers_out, why, sizeof why), 0, "%s:\n%s", why, peers_out);
}

/* The driver without a lock: the same section unguarded. The run must be
 * reported with its violations and fail the script (exit 1). */
Test(docs_commands, peers_catch_violations, .timeout = 120, .fini = peers_fini)
{
    char bench[600], line[512];
    need_peers();
    snprintf(bench, sizeof bench, "%s/dlock-bench", docs_bin());
    const char *argv[] = {"bench/peers.sh", "--bench", bench, "--clients", "none", "--rounds", "1",
                          "--duration", "1", "--rows", "1:8:contended", NULL};
    int st = docs_run(argv, 100, &peers_out);
    cr_assert_eq(st, 1, "bench/peers.sh with no lock: exit %d, not 1:\n%s", st, peers_out);
    cr_assert_not_null(strstr(peers_out, "peers.sh: none, 1 node(s), 8 workers, contended, round 1: exit 1, "
                                         "violations "),
                       "the unguarded run was not named as failing:\n%s", peers_out);
    table_row("1 | 8 | contended", "none", line, sizeof line);
    cr_assert(!ends_with(line, " | 0 |"), "the unguarded run reported no violation: %s\n%s", line, peers_out);
}
