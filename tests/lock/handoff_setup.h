/* handoff_setup.h - the set-up and tear-down the hand-off suites share
 * (lock_handoff, lock_handoff_faults, lock_redlock_handoff, lock_wake):
 * their nodes, started with the options a suite needs and stopped with
 * every forked child and paused node dealt with, and wake-on-release
 * clients on them. No Criterion asserts here: the suites assert on the
 * results, and forked children call ho_client too. */
#ifndef TESTS_HANDOFF_SETUP_H
#define TESTS_HANDOFF_SETUP_H

#include <stddef.h>

#include "lock_common.h"

/* How the nodes start; zero for plain nodes. */
typedef struct ho_nodes_opts {
    int clock_shift;      /* preload the wall-clock step shim (redis_clock_step) */
    const char *password; /* requirepass, or NULL */
} ho_nodes_opts;

/* Zeroes rs[0..n), applies o (NULL: plain nodes) and starts them: 0, or -1
 * when one did not start. */
int ho_nodes_up(redis_proc *rs, size_t n, const ho_nodes_opts *o);
/* Kills the forked children first (a child may hold a lock or a paused
 * node's connection), then resumes any paused node and stops them all. */
void ho_nodes_down(redis_proc *rs, size_t n);

/* A client's options beyond its nodes; zero for the library default. */
typedef struct ho_client_opts {
    const char *const *addrs; /* n addresses used instead of the nodes' own (a relay in front
                                 of one), or NULL */
    int wake;                 /* wake_on_release */
    int command_timeout_ms;
    int retry_fixed_ms;
    const char *password;
} ho_client_opts;

/* A client on rs[0..n) with o applied (NULL: defaults); NULL when
 * dlock_client_new failed, with why in err[DLOCK_ERRSTR_LEN] when err is
 * not NULL. */
dlock_client *ho_client(const redis_proc *rs, size_t n, const ho_client_opts *o, char *err);

#endif /* TESTS_HANDOFF_SETUP_H */
