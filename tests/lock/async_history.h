/* async_history.h - a history on one key from event-loop workers on the
 * caller's libuv loop beside blocking clients on threads of their own:
 * every section is checked for overlap (an atomic count of holders) and
 * every grant's fence against the one before it. No Criterion in here, so
 * the TSan build's plain stress program runs it too (tests/stress). */
#ifndef TESTS_ASYNC_HISTORY_H
#define TESTS_ASYNC_HISTORY_H

#include <uv.h>

#include "dlock.h"
#include "procs_base.h"

typedef struct async_history {
    int sections;          /* sections entered, async and blocking */
    int overlaps;          /* a section entered while another was held: must be 0 */
    int fence_regressions; /* a grant whose fence was not above the last: must be 0 */
    int failures;          /* acquires or releases that failed otherwise than TAKEN */
    int unfinished;        /* async workers still running at the time limit */
} async_history;

/* async_workers workers on loop (run here, on the caller's thread) and
 * blocking_workers threads, each making `each` sections of 2 ms on one
 * resource of rs[0..n), for at most timeout_ms. 0, or -1 when a client or
 * thread could not be made (then *out says what ran). */
int async_history_run(uv_loop_t *loop, const dlock_loop *hooks, const redis_proc *rs, size_t n,
                      int async_workers, int blocking_workers, int each, int64_t timeout_ms,
                      async_history *out);

#endif /* TESTS_ASYNC_HISTORY_H */
