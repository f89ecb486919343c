/* ctl_util.h - what the dlockctl suites share: running the real binary and
 * picking its output apart. */
#ifndef TESTS_CTL_UTIL_H
#define TESTS_CTL_UTIL_H

#include <stddef.h>

#include "lock_common.h"

/* The suites' fixture: n plain nodes rs[0..n) for the whole suite and their
 * addresses in csv ("host:port,..."), the form --redis takes. */
#define CTL_NODES_FIXTURE(rs, n, csv)                                              \
    static void ctl_suite_init(void)                                               \
    {                                                                              \
        cr_assert_eq(tc_nodes_up(rs, n, 0), 0, "redis nodes did not start");       \
        redis_addrs_csv(rs, n, csv, sizeof csv);                                   \
    }                                                                              \
    static void ctl_suite_fini(void)                                               \
    {                                                                              \
        tc_nodes_down(rs, n);                                                      \
    }

/* Runs $DLOCKCTL_BIN with the NULL-terminated arguments (at most 30),
 * bounded by 10 s; *out (may be NULL) gets stdout+stderr, to free().
 * Returns the exit status, or -1 when it could not run. */
int ctl_run(char **out, ...) __attribute__((sentinel));

/* One row of `dlockctl list` / `show` text output. */
typedef struct ctl_row {
    char resource[128];
    char node[64];
    char token[64];
    char pttl[24];
    char fence[24];
} ctl_row;

/* The row of text for resource on node addr: 0, or -1 when there is none. */
int ctl_find_row(const char *text, const char *resource, const char *addr, ctl_row *row);
/* How many rows of text name resource. */
int ctl_count_rows(const char *text, const char *resource);

#endif /* TESTS_CTL_UTIL_H */
