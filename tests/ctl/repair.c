/* repair.c - dlockctl release --force frees a lock another client can then
 * take (with a larger fence), and fence --raise only ever raises. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_util.h"

#define NODES 3
static redis_proc rs[NODES];
static char csv[256];

CTL_NODES_FIXTURE(rs, NODES, csv)
TestSuite(ctl_repair, .init = ctl_suite_init, .fini = ctl_suite_fini);

static unsigned long long fence_on(const redis_proc *r, const char *key)
{
    char v[64];
    tc_get(r, key, v, sizeof v);
    return strtoull(v, NULL, 10);
}

Test(ctl_repair, force_release_frees_the_lock_for_another_client)
{
    dlock_client *holder = tc_client(rs, NODES, 0);
    dlock_client *next = tc_client(rs, NODES, 0);
    dlock_lock *l = NULL, *l2 = NULL;
    char *out = NULL;
    cr_assert(holder != NULL && next != NULL);

    cr_assert_eq(dlock_acquire(holder, "stuck", 60000, dlock_now_ms() + 2000, &l), DLOCK_OK);
    cr_assert_eq(dlock_try_acquire(next, "stuck", 60000, &l2), DLOCK_ERR_TAKEN);

    /* Without --force nothing is deleted. */
    cr_assert_eq(ctl_run(&out, "--redis", csv, "release", "stuck", NULL), 2);
    free(out);
    for (size_t i = 0; i < NODES; i++)
        cr_expect_eq(tc_exists(&rs[i], "stuck"), 1);

    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", csv, "release", "stuck", "--force", NULL), 0, "%s", out);
    cr_expect(strstr(out, "WARNING") != NULL && strstr(out, "still running") != NULL &&
              strstr(out, "only the fence") != NULL, "no warning in: %s", out);
    for (size_t i = 0; i < NODES; i++) {
        char line[128];
        snprintf(line, sizeof line, "%s", rs[i].addr);
        cr_expect(strstr(out, line) != NULL, "%s", out);
        cr_expect_eq(tc_exists(&rs[i], "stuck"), 0, "lock key left on %s", rs[i].addr);
        /* The fence counter is what protects the data now: it stays. */
        cr_expect_eq(fence_on(&rs[i], "fence:stuck"), dlock_lock_fence(l));
    }
    free(out);

    cr_assert_eq(dlock_try_acquire(next, "stuck", 60000, &l2), DLOCK_OK);
    cr_expect_gt(dlock_lock_fence(l2), dlock_lock_fence(l));
    /* The old holder learns it lost the lock: its token is gone. */
    cr_expect_eq(dlock_release(holder, l), DLOCK_ERR_LOST);
    cr_expect_eq(dlock_release(next, l2), DLOCK_OK);
    dlock_lock_free(l);
    dlock_lock_free(l2);
    dlock_client_free(holder);
    dlock_client_free(next);
}

Test(ctl_repair, raise_sets_every_node_and_never_lowers)
{
    dlock_client *c = tc_client(rs, NODES, 0);
    dlock_lock *l = NULL;
    char *out = NULL, to[32], low[32];
    cr_assert(c != NULL);

    cr_assert_eq(dlock_try_acquire(c, "ledger", 10000, &l), DLOCK_OK);
    unsigned long long f = dlock_lock_fence(l);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    l = NULL;

    snprintf(to, sizeof to, "%llu", f + 100);
    cr_assert_eq(ctl_run(&out, "--redis", csv, "fence", "ledger", "--raise", to, NULL), 0, "%s",
                 out);
    free(out);
    for (size_t i = 0; i < NODES; i++)
        cr_expect_eq(fence_on(&rs[i], "fence:ledger"), f + 100, "node %zu", i);

    /* Lower than the counter: left alone on every node, not an error. */
    snprintf(low, sizeof low, "%llu", f + 1);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", csv, "fence", "ledger", "--raise", low, NULL), 0);
    cr_expect(strstr(out, "left alone") != NULL, "%s", out);
    free(out);
    for (size_t i = 0; i < NODES; i++)
        cr_expect_eq(fence_on(&rs[i], "fence:ledger"), f + 100, "lowered on node %zu", i);

    /* One node behind the others: raised there only. */
    const char *set[] = {"SET", "fence:ledger", "3"};
    char reply[32];
    tc_cmd(&rs[1], reply, sizeof reply, 3, set);
    out = NULL;
    cr_assert_eq(ctl_run(&out, "--redis", csv, "--json", "fence", "ledger", "--raise", to, NULL), 0);
    cr_expect(strstr(out, "\"before\": \"3\"") != NULL, "%s", out);
    free(out);
    cr_expect_eq(fence_on(&rs[1], "fence:ledger"), f + 100);

    /* The next acquisition continues above the raised counter. */
    cr_assert_eq(dlock_try_acquire(c, "ledger", 10000, &l), DLOCK_OK);
    cr_expect_eq(dlock_lock_fence(l), f + 101);
    dlock_release(c, l);
    dlock_lock_free(l);
    dlock_client_free(c);
}

Test(ctl_repair, raise_reports_a_corrupt_counter_and_leaves_it)
{
    const char *set[] = {"SET", "fence:bad", "not-a-number"};
    char reply[64], v[64], *out = NULL;
    tc_cmd(&rs[0], reply, sizeof reply, 3, set);

    /* Two nodes raised = a quorum: exit 0, the bad node named. */
    cr_assert_eq(ctl_run(&out, "--redis", csv, "fence", "bad", "--raise", "50", NULL), 0, "%s", out);
    cr_expect(strstr(out, "non-integer") != NULL, "%s", out);
    free(out);
    tc_get(&rs[0], "fence:bad", v, sizeof v);
    cr_expect_str_eq(v, "not-a-number");
    cr_expect_eq(fence_on(&rs[1], "fence:bad"), 50);
}
