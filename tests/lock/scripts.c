/* scripts.c - the Lua scripts survive SCRIPT FLUSH and a restarted
 * node: EVALSHA's NOSCRIPT reply falls back to sending the script in full. */
#include <criterion/criterion.h>

#include "lock_common.h"

static redis_proc nodes[3];

TC_NODES_FIXTURE(nodes, 3)
TestSuite(lock_scripts, .init = tc_suite_init, .fini = tc_suite_fini);

static void flush_scripts(size_t n)
{
    char out[64];
    const char *argv[] = {"SCRIPT", "FLUSH"};
    for (size_t i = 0; i < n; i++) {
        tc_cmd(&nodes[i], out, sizeof out, 2, argv);
        cr_assert_str_eq(out, "OK");
    }
}

static uint64_t loads(dlock_client *c)
{
    dlock_stats s;
    dlock_client_stats(c, &s);
    return s.script_loads;
}

static void check_fallback(size_t n)
{
    dlock_client *c = tc_client(nodes, n, 0);
    dlock_lock *l = NULL, *l2 = NULL;
    cr_assert_not_null(c);
    /* Warm up: every script used once, so they are known to the nodes. */
    cr_assert_eq(dlock_try_acquire(c, "sc", 5000, &l), DLOCK_OK);
    cr_assert_eq(dlock_extend(c, l, 5000), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = NULL;
    cr_assert_eq(dlock_try_acquire(c, "sc", 5000, &l), DLOCK_OK);
    uint64_t s0 = loads(c);

    /* Warm caches: no script is sent in full again. */
    cr_assert_eq(dlock_extend(c, l, 5000), DLOCK_OK);
    cr_assert_eq(loads(c), s0);

    flush_scripts(n);
    cr_assert_eq(dlock_extend(c, l, 6000), DLOCK_OK);
    uint64_t s1 = loads(c);
    cr_assert_gt(s1, s0, "extend after SCRIPT FLUSH did not reload");
    long long pttl = tc_pttl(&nodes[0], "sc");
    cr_assert_gt(pttl, 5000);

    flush_scripts(n);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    uint64_t s2 = loads(c);
    cr_assert_gt(s2, s1, "release after SCRIPT FLUSH did not reload");
    cr_assert_eq(tc_wait_holding(nodes, n, "sc", 0, TC_SETTLE_MS), 0);

    flush_scripts(n);
    cr_assert_eq(dlock_try_acquire(c, "sc", 5000, &l2), DLOCK_OK);
    uint64_t s3 = loads(c);
    cr_assert_gt(s3, s2, "acquire after SCRIPT FLUSH did not reload");
    cr_assert_eq(tc_wait_holding(nodes, n, "sc", (int)n, TC_SETTLE_MS), (int)n);
    cr_assert_gt(dlock_lock_fence(l2), dlock_lock_fence(l));
    cr_assert_eq(dlock_release(c, l2), DLOCK_OK);
    uint64_t s4 = loads(c);
    cr_assert_gt(s4, s3, "release after SCRIPT FLUSH did not reload");
    cr_assert_eq(tc_wait_holding(nodes, n, "sc", 0, TC_SETTLE_MS), 0);
    /* Every node runs the scripts again: each one sets and deletes the key. */
    for (int i = 0; i < 3; i++) {
        dlock_lock *l3 = NULL;
        cr_assert_eq(dlock_try_acquire(c, "sc", 5000, &l3), DLOCK_OK);
        cr_assert_eq(tc_wait_holding(nodes, n, "sc", (int)n, TC_SETTLE_MS), (int)n);
        cr_assert_eq(dlock_release(c, l3), DLOCK_OK);
        cr_assert_eq(tc_wait_holding(nodes, n, "sc", 0, TC_SETTLE_MS), 0);
        dlock_lock_free(l3);
    }
    if (n == 1) {
        /* One node: exactly one full send per flushed script, then none. */
        cr_assert_eq(s1 - s0, 1);
        cr_assert_eq(s2 - s1, 1);
        cr_assert_eq(s3 - s2, 1);
        cr_assert_eq(s4 - s3, 1);
        cr_assert_eq(loads(c), s4);
    }
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_free(c);
}

Test(lock_scripts, noscript_single, .timeout = 15)
{
    check_fallback(1);
}

Test(lock_scripts, noscript_redlock3, .timeout = 15)
{
    check_fallback(3);
}

Test(lock_scripts, restarted_node_has_no_scripts, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, 1, 0);
    dlock_lock *l = NULL;
    cr_assert_not_null(c);
    cr_assert_eq(dlock_try_acquire(c, "rs", 5000, &l), DLOCK_OK);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = NULL;
    /* A restarted (empty) node: reconnect and script reload in one call. */
    cr_assert_eq(redis_restart(&nodes[0]), 0);
    dlock_err e = dlock_try_acquire(c, "rs", 5000, &l);
    if (e != DLOCK_OK) {
        /* The first call may only discover the broken connection. */
        cr_assert(dlock_err_is_unavailable(e), "got %s", dlock_strerror(e));
        e = dlock_try_acquire(c, "rs", 5000, &l);
    }
    cr_assert_eq(e, DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(tc_wait_exists(&nodes[0], "rs", 1, TC_SETTLE_MS), 1);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}
