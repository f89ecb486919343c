/* fence_raise.c - dlock_fence_raise lifts a resource's fence counters to at
 * least a value on a quorum, never lowers one, and the next acquisition's
 * fence is above it; ping_nodes names the nodes that answer. */
#include <criterion/criterion.h>

#include "lock_common.h"

#define NODES 3
static redis_proc nodes[NODES];

TC_NODES_FIXTURE(nodes, NODES)
TestSuite(lock_fence_raise, .init = tc_suite_init, .fini = tc_suite_fini);

static void set_counter(const redis_proc *r, const char *key, const char *value)
{
    char out[64];
    const char *set[] = {"SET", key, value};
    tc_cmd(r, out, sizeof out, 3, set);
    cr_assert_str_eq(out, "OK");
}

static uint64_t acquire_fence(dlock_client *c, const char *resource)
{
    dlock_lock *l = NULL;
    cr_assert_eq(dlock_try_acquire(c, resource, 5000, &l), DLOCK_OK, "%s", TC_ERR(c));
    uint64_t f = dlock_lock_fence(l);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    return f;
}

Test(lock_fence_raise, raises_and_the_next_fence_is_above, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    cr_assert_eq(acquire_fence(c, "fr1"), 1);
    cr_assert_eq(dlock_fence_raise(c, "fr1", 100), DLOCK_OK, "%s", TC_ERR(c));
    for (size_t i = 0; i < NODES; i++)
        cr_assert_eq(tc_get_ll(&nodes[i], "fence:fr1"), 100, "node %zu", i);
    cr_assert_eq(acquire_fence(c, "fr1"), 101);
    /* A resource never acquired gets its counters too. */
    cr_assert_eq(dlock_fence_raise(c, "fr-new", 7), DLOCK_OK);
    cr_assert_eq(acquire_fence(c, "fr-new"), 8);
    dlock_client_free(c);
}

Test(lock_fence_raise, never_lowers, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    /* Node 0 is ahead of the others (it saw acquisitions they missed). */
    set_counter(&nodes[0], "fence:fr2", "500");
    set_counter(&nodes[1], "fence:fr2", "40");
    set_counter(&nodes[2], "fence:fr2", "40");
    cr_assert_eq(dlock_fence_raise(c, "fr2", 60), DLOCK_OK);
    cr_assert_eq(tc_get_ll(&nodes[0], "fence:fr2"), 500, "raise lowered a counter");
    cr_assert_eq(tc_get_ll(&nodes[1], "fence:fr2"), 60);
    cr_assert_eq(tc_get_ll(&nodes[2], "fence:fr2"), 60);
    /* Lower than every counter: nothing moves. */
    cr_assert_eq(dlock_fence_raise(c, "fr2", 3), DLOCK_OK);
    cr_assert_eq(tc_get_ll(&nodes[0], "fence:fr2"), 500);
    cr_assert_eq(tc_get_ll(&nodes[1], "fence:fr2"), 60);
    cr_assert_eq(tc_get_ll(&nodes[2], "fence:fr2"), 60);
    cr_assert_eq(dlock_fence_raise(c, "fr2", 0), DLOCK_OK);
    cr_assert_eq(tc_get_ll(&nodes[1], "fence:fr2"), 60);
    dlock_client_free(c);
}

Test(lock_fence_raise, needs_a_quorum, .timeout = 20)
{
    dlock_client *c = tc_client(nodes, NODES, 200);
    uint32_t mask = 0;
    cr_assert_eq(dlock_ping_nodes(c, &mask), DLOCK_OK);
    cr_assert_eq(mask, 7u);
    cr_assert_eq(redis_kill(&nodes[2]), 0);
    cr_assert_eq(dlock_ping_nodes(c, &mask), DLOCK_OK);
    cr_assert_eq(mask, 3u, "ping_nodes mask %u with node 2 down", mask);
    cr_assert_eq(dlock_fence_raise(c, "fr3", 9), DLOCK_OK, "2 of 3 is a quorum: %s", TC_ERR(c));
    cr_assert_eq(tc_get_ll(&nodes[0], "fence:fr3"), 9);
    cr_assert_eq(redis_kill(&nodes[1]), 0);
    dlock_err e = dlock_fence_raise(c, "fr3", 20);
    cr_assert(dlock_err_is_unavailable(e), "one of 3 nodes: %s", dlock_strerror(e));
    cr_assert_eq(dlock_ping_nodes(c, &mask), DLOCK_ERR_NO_QUORUM);
    cr_assert_eq(mask, 1u);
    cr_assert_eq(redis_restart(&nodes[1]), 0);
    cr_assert_eq(redis_restart(&nodes[2]), 0);
    dlock_client_free(c);
}

Test(lock_fence_raise, bad_arguments, .timeout = 10)
{
    dlock_client *c = tc_client(nodes, NODES, 0);
    cr_assert_eq(dlock_fence_raise(NULL, "x", 1), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_fence_raise(c, NULL, 1), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_fence_raise(c, "", 1), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_fence_raise(c, "x", (UINT64_C(1) << 53) + 1), DLOCK_ERR_ARG);
    char big[600];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    cr_assert_eq(dlock_fence_raise(c, big, 1), DLOCK_ERR_ARG);
    char fkey[TC_KEY_LEN], out[16];
    const char *exists[] = {"EXISTS", tc_fence_key(fkey, "x")};
    tc_cmd(&nodes[0], out, sizeof out, 2, exists);
    cr_assert_str_eq(out, "0");
    dlock_client_free(c);
}
