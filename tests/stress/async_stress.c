/* async_stress.c - the event-loop client beside blocking clients on other
 * threads, as one plain program (no Criterion, so the TSan build runs it):
 * async workers on this thread's libuv loop and blocking workers on their
 * own threads share one key, on one node and on Redlock over three; no two
 * sections may overlap and fences must strictly increase. Exits 0 when
 * every check holds; prints each failed check otherwise. */
#include <stdio.h>

#include "async_history.h"
#include "dlock_uv.h"
#include "lock_common.h"
#include "stress.h"

int stress_failures;

#define NODES 3
#define ASYNC_WORKERS 16
#define THREADS 4
#define EACH 8

static redis_proc nodes[NODES];

static void history_on(uv_loop_t *loop, const dlock_loop *hooks, size_t n)
{
    async_history h;

    /* TSan makes everything slow: a generous limit, exact counts. */
    CHECK(async_history_run(loop, hooks, nodes, n, ASYNC_WORKERS, THREADS, EACH, 120000, &h) == 0,
          "the history could not start on %zu nodes", n);
    CHECK(h.unfinished == 0, "%d async workers did not finish (%zu nodes)", h.unfinished, n);
    CHECK(h.failures == 0, "%d acquires or releases failed (%zu nodes)", h.failures, n);
    CHECK(h.overlaps == 0, "%d sections overlapped (%zu nodes)", h.overlaps, n);
    CHECK(h.fence_regressions == 0, "%d fences did not increase (%zu nodes)",
          h.fence_regressions, n);
    CHECK(h.sections == (ASYNC_WORKERS + THREADS) * EACH, "%d sections (%zu nodes)", h.sections,
          n);
}

int main(void)
{
    uv_loop_t loop;
    dlock_loop hooks;

    if (tc_nodes_up(nodes, NODES, 0) != 0)
        return 2;
    if (uv_loop_init(&loop) != 0 || dlock_loop_uv(&hooks, &loop) != 0) {
        tc_nodes_down(nodes, NODES);
        return 2;
    }
    history_on(&loop, &hooks, 1);
    history_on(&loop, &hooks, NODES);
    CHECK(uv_loop_close(&loop) == 0, "handles left on the loop");
    tc_nodes_down(nodes, NODES);
    if (stress_failures)
        fprintf(stderr, "async_stress: %d checks failed\n", stress_failures);
    return stress_failures ? 1 : 0;
}
