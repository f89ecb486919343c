/* multi_redlock.c - dlock_acquire_multi over three masters:
 *   - the set is ours with a quorum that granted ALL of it in one round;
 *   - a minority down or holding one key is tolerated;
 *   - a majority holding one key is TAKEN, and the nodes that granted the
 *     set are cleaned at once;
 *   - fences of every resource are synced to the quorum's maximum after a
 *     node lost its counters;
 *   - release and extend reach the whole set on every node. */
#include <criterion/criterion.h>
#include <string.h>

#include "lock_common.h"

#define NODES 3
static redis_proc nodes[NODES];

TC_NODES_FIXTURE(nodes, NODES)
TestSuite(lock_multi_redlock, .init = tc_suite_init, .fini = tc_suite_fini);

/* Puts a key of ours directly on one node: another owner there only. */
static void set_on(const redis_proc *r, const char *res, const char *val)
{
    char key[TC_KEY_LEN], out[64];
    const char *argv[5] = {"SET", tc_lock_key(key, res), val, "PX", "20000"};

    tc_cmd(r, out, sizeof out, 5, argv);
    cr_assert_str_eq(out, "OK");
}

Test(lock_multi_redlock, minority_holding_a_key_is_tolerated_majority_is_not, .timeout = 30)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    const char *set[3] = {"r1a", "r1b", "r1c"};
    dlock_lock *m = NULL;

    cr_assert_not_null(c);
    set_on(&nodes[0], "r1b", "someone-else");
    cr_assert_eq(dlock_acquire_multi(c, set, 3, 10000, 0, &m), DLOCK_OK, "%s", TC_ERR(c));
    /* Node 0 refused the whole set: none of it there, not even r1a. */
    cr_assert_eq(tc_exists(&nodes[0], "r1a"), 0);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "r1a", 2, TC_SETTLE_MS), 2);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "r1c", 2, TC_SETTLE_MS), 2);
    cr_assert_eq(dlock_extend(c, m, 30000), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_gt(tc_pttl(&nodes[1], "r1c"), 20000);
    cr_assert_eq(dlock_release(c, m), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(tc_wait_holding(nodes, NODES, "r1a", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "r1b", 1, TC_SETTLE_MS), 1, "the other owner's key stays");
    dlock_lock_free(m);

    /* A majority holds r1b: TAKEN, and node 2, which granted the whole
     * set, is cleaned at once (nobody waits for our keys to expire). */
    set_on(&nodes[1], "r1b", "someone-else");
    m = (dlock_lock *)0x1;
    cr_assert_eq(dlock_acquire_multi(c, set, 3, 10000, 0, &m), DLOCK_ERR_TAKEN);
    cr_assert_null(m);
    cr_assert(strstr(TC_ERR(c), "\"r1b\"") != NULL, "%s", TC_ERR(c));
    cr_assert_eq(tc_wait_holding(nodes, NODES, "r1a", 0, TC_SETTLE_MS), 0);
    cr_assert_eq(tc_wait_holding(nodes, NODES, "r1c", 0, TC_SETTLE_MS), 0);
    dlock_client_free(c);
}

Test(lock_multi_redlock, node_down_then_back_without_counters_fences_still_rise, .timeout = 30)
{
    dlock_client *c = tc_client(nodes, NODES, 300);
    const char *set[2] = {"r2a", "r2b"};
    char key[TC_KEY_LEN];
    uint64_t last[2] = {0, 0};

    cr_assert_not_null(c);
    for (int k = 0; k < 3; k++) {
        dlock_lock *m = NULL;
        cr_assert_eq(dlock_acquire_multi(c, set, 2, 5000, 0, &m), DLOCK_OK, "%s", TC_ERR(c));
        for (size_t i = 0; i < 2; i++) {
            cr_assert_gt(dlock_lock_fence_of(m, i), last[i]);
            last[i] = dlock_lock_fence_of(m, i);
        }
        cr_assert_eq(dlock_release(c, m), DLOCK_OK);
        dlock_lock_free(m);
    }
    /* Node 0 restarts empty (no persistence): its counters are gone. With
     * node 1 down the quorum is {0, 2}: the fences come from node 2, and
     * node 0's counters are raised to them before the lock is handed out. */
    cr_assert_eq(redis_kill(&nodes[0]), 0);
    cr_assert_eq(redis_restart(&nodes[0]), 0);
    cr_assert_eq(redis_kill(&nodes[1]), 0);
    dlock_lock *m = NULL;
    dlock_err rc = dlock_acquire_multi_for(c, set, 2, 5000, 3000, &m);
    cr_assert_eq(rc, DLOCK_OK, "%s: %s", dlock_strerror(rc), TC_ERR(c));
    for (size_t i = 0; i < 2; i++) {
        cr_assert_eq(dlock_lock_fence_of(m, i), last[i] + 1, "resource %zu", i);
        cr_assert_eq(tc_get_ll(&nodes[0], tc_fence_key(key, set[i])), (long long)last[i] + 1,
                     "node 0's counter of %s synced", set[i]);
    }
    cr_assert_eq(dlock_release(c, m), DLOCK_OK, "%s", TC_ERR(c));
    dlock_lock_free(m);
    cr_assert_eq(redis_restart(&nodes[1]), 0);
    dlock_client_free(c);
}
