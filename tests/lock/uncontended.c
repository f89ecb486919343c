/* uncontended.c - the one-node queued path where nobody waits, on a real
 * redis-server. An acquire that may wait plus its release run exactly SET
 * NX PX + INCR and GET + EXISTS + DEL inside their two scripts (Redis INFO
 * commandstats), the queue untouched. And the shortcut never skips the
 * queue clean-up it must not skip: a waiter that was listed and then takes
 * the free key is off the waiters set. So its own release does not hand
 * the key to itself (nobody) and strand it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;
static dlock_client *c1, *c2;

TC_NODE_CLIENTS_FIXTURE(node, &c1, &c2)
TestSuite(lock_uncontended, .init = tc_suite_init, .fini = tc_suite_fini);

static void cmd(char *out, size_t outlen, int argc, const char *const *argv)
{
    tc_cmd(&node, out, outlen, argc, argv);
}

/* Calls of one command since the last CONFIG RESETSTAT (0 when absent). */
static long long calls_of(const char *stats, const char *name)
{
    char tag[64];
    const char *p;

    snprintf(tag, sizeof tag, "cmdstat_%s:calls=", name);
    p = strstr(stats, tag);
    return p == NULL ? 0 : strtoll(p + strlen(tag), NULL, 10);
}

static long long waiters_listed(const char *res)
{
    char key[TC_KEY_LEN + 16], out[64];
    const char *argv[] = {"ZCARD", key};

    snprintf(key, sizeof key, "%s%s", DLOCK_WAITERS_NS, res);
    cmd(out, sizeof out, 2, argv);
    return strtoll(out, NULL, 10);
}

/* One acquire that may wait (the queued path: one node, wake on release,
 * a deadline ahead) and its release. */
static void pair(dlock_client *c, const char *res)
{
    dlock_lock *l = NULL;

    cr_assert_eq(dlock_acquire_for(c, res, 5000, 2000, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_release(c, l), DLOCK_OK, "%s", TC_ERR(c));
    dlock_lock_free(l);
}

Test(lock_uncontended, pair_runs_set_incr_get_exists_del, .timeout = 60)
{
    static char stats[16384];
    const char *reset[] = {"CONFIG", "RESETSTAT"};
    const char *info[] = {"INFO", "commandstats"};
    const char *queue_cmds[] = {"zadd", "zrem", "zrange", "zcard", "time", "pttl", "rpush",
                                "pexpire", "eval"};
    char out[64], fkey[TC_KEY_LEN];

    /* Once first: loads enter.lua and pass.lua into the script cache, so
     * the counted pairs are steady-state EVALSHAs. */
    pair(c1, "uc");
    cmd(out, sizeof out, 2, reset);
    cr_assert_str_eq(out, "OK");
    for (int i = 0; i < 10; i++)
        pair(c1, "uc");
    cmd(stats, sizeof stats, 2, info);
    cr_assert_eq(calls_of(stats, "evalsha"), 20, "%s", stats);
    cr_assert_eq(calls_of(stats, "set"), 10, "%s", stats);
    cr_assert_eq(calls_of(stats, "incr"), 10, "%s", stats);
    cr_assert_eq(calls_of(stats, "get"), 10, "%s", stats);
    cr_assert_eq(calls_of(stats, "exists"), 10, "%s", stats);
    cr_assert_eq(calls_of(stats, "del"), 10, "%s", stats);
    for (size_t i = 0; i < sizeof queue_cmds / sizeof queue_cmds[0]; i++)
        cr_assert_eq(calls_of(stats, queue_cmds[i]), 0, "%s ran: %s", queue_cmds[i], stats);
    /* The fence still went up once per acquisition (1 + 10). */
    cr_assert_eq(tc_get_ll(&node, tc_fence_key(fkey, "uc")), 11);
    cr_assert_eq(tc_exists(&node, "uc"), 0, "the release left the key");
}

/* A waiter listed behind a holder that never releases (a foreign key with
 * a short TTL): its BLPOP ends at the key's expiry and its next enter.lua
 * takes the free key. That script must also take it off the waiters set:
 * left there, its own release would hand the key to its own finished
 * call's token, and the key would stay locked for 5 s with nobody in it. */
Test(lock_uncontended, listed_waiter_taking_the_free_key_leaves_the_queue, .timeout = 60)
{
    const char *res = "relisted";
    char key[TC_KEY_LEN], out[64];
    const char *set[] = {"SET", tc_lock_key(key, res), "someone-else", "PX", "400"};
    dlock_lock *l = NULL, *t = NULL;
    dlock_err rc;

    cmd(out, sizeof out, 5, set);
    cr_assert_str_eq(out, "OK");
    cr_assert_eq(dlock_acquire_for(c1, res, 5000, 10000, &l), DLOCK_OK, "%s", TC_ERR(c1));
    cr_assert_eq(waiters_listed(res), 0, "the new holder is still listed as a waiter");
    cr_assert_eq(dlock_release(c1, l), DLOCK_OK, "%s", TC_ERR(c1));
    dlock_lock_free(l);
    rc = dlock_try_acquire(c2, res, 1000, &t);
    cr_assert_eq(rc, DLOCK_OK,
                 "after the release a try found the key %s (PTTL %lld ms): it was handed to "
                 "nobody",
                 dlock_strerror(rc), tc_pttl(&node, res));
    cr_assert_eq(dlock_release(c2, t), DLOCK_OK, "%s", TC_ERR(c2));
    dlock_lock_free(t);
}
