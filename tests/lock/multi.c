/* multi.c - dlock_acquire_multi on one node:
 *   - all of the resources or none, a fence per resource;
 *   - release / extend / renewal of the whole set;
 *   - the argument checks;
 *   - a single waiter queued on one of the keys is handed it when the set
 *     is released. (The many-thread history check of
 * overlapping sets is multi_history.c.) */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;
static dlock_client *a, *b;

TC_NODE_CLIENTS_FIXTURE(node, &a, &b)
TestSuite(lock_multi, .init = tc_suite_init, .fini = tc_suite_fini);

static void del_key(const char *key)
{
    char out[64];
    const char *argv[2] = {"DEL", key};

    tc_cmd(&node, out, sizeof out, 2, argv);
}

Test(lock_multi, all_or_none, .timeout = 30)
{
    const char *set[3] = {"m1a", "m1b", "m1c"};
    dlock_lock *h = NULL, *m = (dlock_lock *)0x1;
    char key[TC_KEY_LEN], val[64];

    cr_assert_eq(dlock_try_acquire(b, "m1b", 10000, &h), DLOCK_OK);
    cr_assert_eq(dlock_acquire_multi(a, set, 3, 10000, 0, &m), DLOCK_ERR_TAKEN);
    cr_assert_null(m);
    cr_assert(strstr(TC_ERR(a), "\"m1b\"") != NULL, "errstr names the held one: %s", TC_ERR(a));
    /* Nothing of the set was left behind: the free ones were never set. */
    cr_assert_eq(tc_exists(&node, "m1a"), 0);
    cr_assert_eq(tc_exists(&node, "m1c"), 0);
    cr_assert_eq(tc_get_ll(&node, tc_fence_key(key, "m1a")), 0, "no fence raised for a failed set");

    cr_assert_eq(dlock_release(b, h), DLOCK_OK);
    dlock_lock_free(h);
    cr_assert_eq(dlock_acquire_multi_for(a, set, 3, 10000, 1000, &m), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(dlock_lock_count(m), 3);
    for (size_t i = 0; i < 3; i++) {
        cr_assert_str_eq(dlock_lock_resource_of(m, i), set[i]);
        tc_get(&node, tc_lock_key(key, set[i]), val, sizeof val);
        cr_assert_str_eq(val, dlock_lock_token(m), "key %zu holds our token", i);
        cr_assert_eq(dlock_lock_fence_of(m, i), (uint64_t)tc_get_ll(&node, tc_fence_key(key, set[i])));
    }
    cr_assert_eq(dlock_lock_fence_of(m, 1), 2, "m1b was locked once before: its own counter");
    cr_assert_eq(dlock_lock_fence_of(m, 0), 1);
    cr_assert_str_eq(dlock_lock_resource_of(m, 3), "");
    cr_assert_eq(dlock_lock_fence_of(m, 3), 0);
    cr_assert(dlock_is_held(m));
    /* Each key of the set is taken for single acquirers too. */
    cr_assert_eq(dlock_try_acquire(b, "m1c", 1000, &h), DLOCK_ERR_TAKEN);
    cr_assert_eq(dlock_release(a, m), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_not(dlock_is_held(m));
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(tc_exists(&node, set[i]), 0, "key %zu deleted", i);
    dlock_lock_free(m);
    /* Fences keep rising across single and multi acquisitions. */
    cr_assert_eq(dlock_try_acquire(b, "m1c", 1000, &h), DLOCK_OK);
    cr_assert_eq(dlock_lock_fence(h), 2);
    cr_assert_eq(dlock_release(b, h), DLOCK_OK);
    dlock_lock_free(h);
}

Test(lock_multi, bad_arguments, .timeout = 10)
{
    const char *dup[3] = {"x", "y", "x"};
    const char *hole[2] = {"x", NULL};
    const char *many[DLOCK_MAX_MULTI + 1];
    char names[DLOCK_MAX_MULTI + 1][8];
    dlock_lock *m = (dlock_lock *)0x1;

    cr_assert_eq(dlock_acquire_multi(a, dup, 3, 1000, 0, &m), DLOCK_ERR_ARG);
    cr_assert_null(m);
    cr_assert(strstr(TC_ERR(a), "resources[0] and resources[2] are both \"x\"") != NULL, "%s",
              TC_ERR(a));
    cr_assert_eq(dlock_acquire_multi(a, hole, 2, 1000, 0, &m), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(a), "resources[1]") != NULL, "%s", TC_ERR(a));
    cr_assert_eq(dlock_acquire_multi(a, dup, 0, 1000, 0, &m), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_acquire_multi(a, NULL, 2, 1000, 0, &m), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_acquire_multi(a, dup, 2, 0, 0, &m), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_acquire_multi(a, dup, 2, 1000, 0, NULL), DLOCK_ERR_ARG);
    cr_assert_eq(dlock_acquire_multi(NULL, dup, 2, 1000, 0, &m), DLOCK_ERR_ARG);
    for (size_t i = 0; i <= DLOCK_MAX_MULTI; i++) {
        snprintf(names[i], sizeof names[i], "n%zu", i);
        many[i] = names[i];
    }
    cr_assert_eq(dlock_acquire_multi(a, many, DLOCK_MAX_MULTI + 1, 1000, 0, &m), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(a), "DLOCK_MAX_MULTI") != NULL, "%s", TC_ERR(a));
    /* The deadline rule of dlock_acquire holds here too. */
    cr_assert_eq(dlock_acquire_multi(a, many, 2, 1000, 2000, &m), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(a), "dlock_acquire_multi_for") != NULL, "%s", TC_ERR(a));
    /* The largest set works, and every key of it is released. */
    cr_assert_eq(dlock_acquire_multi(a, many, DLOCK_MAX_MULTI, 1000, 0, &m), DLOCK_OK, "%s",
                 TC_ERR(a));
    cr_assert_eq(dlock_lock_count(m), DLOCK_MAX_MULTI);
    cr_assert_eq(tc_exists(&node, many[DLOCK_MAX_MULTI - 1]), 1);
    cr_assert_eq(dlock_release(a, m), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(tc_exists(&node, many[DLOCK_MAX_MULTI - 1]), 0);
    cr_assert_eq(tc_exists(&node, many[0]), 0);
    dlock_lock_free(m);
}

Test(lock_multi, extend_all_and_lost_when_one_key_is_gone, .timeout = 20)
{
    const char *set[3] = {"m3a", "m3b", "m3c"};
    dlock_lock *m = NULL;
    char key[TC_KEY_LEN];

    cr_assert_eq(dlock_acquire_multi(a, set, 3, 2000, 0, &m), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(dlock_extend(a, m, 60000), DLOCK_OK, "%s", TC_ERR(a));
    for (size_t i = 0; i < 3; i++)
        cr_assert_gt(tc_pttl(&node, set[i]), 50000, "key %zu extended", i);
    /* One key of the set is gone (expired, flushed): the set is no longer
     * held, extend says so and extends none of it. */
    del_key(tc_lock_key(key, "m3b"));
    cr_assert_eq(dlock_extend(a, m, 60000), DLOCK_ERR_LOST);
    cr_assert_not(dlock_is_held(m));
    /* The keys still ours were released behind the LOST (nobody waits). */
    cr_assert_eq(tc_wait_exists(&node, "m3a", 0, 2000), 0);
    cr_assert_eq(tc_wait_exists(&node, "m3c", 0, 2000), 0);
    cr_assert_eq(dlock_release(a, m), DLOCK_ERR_LOST);
    dlock_lock_free(m);
}

Test(lock_multi, release_reports_lost_when_one_key_was_taken, .timeout = 20)
{
    const char *set[2] = {"m4a", "m4b"};
    dlock_lock *m = NULL, *h = NULL;
    char key[TC_KEY_LEN];

    cr_assert_eq(dlock_acquire_multi(a, set, 2, 10000, 0, &m), DLOCK_OK, "%s", TC_ERR(a));
    del_key(tc_lock_key(key, "m4a"));
    cr_assert_eq(dlock_try_acquire(b, "m4a", 10000, &h), DLOCK_OK);
    cr_assert_eq(dlock_release(a, m), DLOCK_ERR_LOST, "%s", TC_ERR(a));
    /* Only our key went: the other owner's is untouched. */
    cr_assert_eq(tc_exists(&node, "m4a"), 1);
    cr_assert_eq(tc_exists(&node, "m4b"), 0);
    cr_assert(dlock_is_held(h));
    cr_assert_eq(dlock_release(b, h), DLOCK_OK);
    dlock_lock_free(h);
    dlock_lock_free(m);
}

Test(lock_multi, auto_renew_keeps_the_whole_set, .timeout = 20)
{
    const char *set[2] = {"m5a", "m5b"};
    dlock_lock *m = NULL, *h = NULL;
    dlock_renew_options ro = {0};

    cr_assert_eq(dlock_acquire_multi(a, set, 2, 300, 0, &m), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(dlock_auto_renew(a, m, &ro), DLOCK_OK);
    test_sleep_ms(1200);
    cr_assert(dlock_is_held(m), "renewed past four TTLs");
    cr_assert_geq(dlock_lock_renewals(m), 2);
    cr_assert_eq(dlock_try_acquire(b, "m5b", 1000, &h), DLOCK_ERR_TAKEN);
    cr_assert_eq(dlock_release(a, m), DLOCK_OK);
    dlock_lock_free(m);
}

typedef struct waiter_arg {
    dlock_err rc;
    int64_t got_at;
    uint64_t fence;
} waiter_arg;

static void *wait_for_a(void *p)
{
    waiter_arg *w = p;
    dlock_lock *l = NULL;

    w->rc = dlock_acquire_for(b, "m6a", 10000, 8000, &l);
    w->got_at = dlock_now_ms();
    if (l != NULL) {
        w->fence = dlock_lock_fence(l);
        (void)dlock_release(b, l);
        dlock_lock_free(l);
    }
    return NULL;
}

/* A single-resource waiter queued (one node: FIFO with direct hand-off) on
 * a key of a multi lock is handed that key when the set is released, as it
 * would be by a release of that key alone. It is not left blocked until
 * the set's 20 s TTL would have freed it. */
Test(lock_multi, release_hands_a_key_to_its_queued_waiter, .timeout = 30)
{
    const char *set[2] = {"m6a", "m6b"};
    dlock_lock *m = NULL;
    waiter_arg w = {0};
    pthread_t th;
    char key[TC_KEY_LEN];
    int64_t released;

    cr_assert_eq(dlock_acquire_multi(a, set, 2, 20000, 0, &m), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(pthread_create(&th, NULL, wait_for_a, &w), 0);
    /* Until the waiter is listed on m6a's queue (bounded). */
    for (int i = 0; i < 200; i++) {
        char out[32];
        const char *argv[2] = {"ZCARD", "waiters:m6a"};
        tc_cmd(&node, out, sizeof out, 2, argv);
        if (strcmp(out, "1") == 0)
            break;
        test_sleep_ms(20);
    }
    released = dlock_now_ms();
    cr_assert_eq(dlock_release(a, m), DLOCK_OK, "%s", TC_ERR(a));
    pthread_join(th, NULL);
    cr_assert_eq(w.rc, DLOCK_OK, "waiter: %s", dlock_strerror(w.rc));
    cr_assert_lt(w.got_at - released, 5000, "handed over, not left to the TTL");
    cr_assert_eq(w.fence, (uint64_t)tc_get_ll(&node, tc_fence_key(key, "m6a")));
    cr_assert_eq(tc_exists(&node, "m6b"), 0);
    dlock_lock_free(m);
}
