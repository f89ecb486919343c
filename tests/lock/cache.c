/* cache.c - lock caching (lock/src/cache.c) on real redis-servers: a kept
 * lock is reused with no round and the same fence; it is handed to a
 * client that asks for it (queued, polling, or a multi acquire) within a
 * round trip or so, on one node and on Redlock, also with a master paused;
 * it is released when wanted during its section, after its idle time, with
 * too little validity left, and when its client is freed; it is renewed
 * while kept. */
#include <criterion/criterion.h>
#include <string.h>
#include <time.h>

#include "lock_common.h"

static redis_proc rs[3];
TC_NODES_FIXTURE(rs, 3)
TestSuite(lock_cache, .init = tc_suite_init, .fini = tc_suite_fini, .timeout = 60);

/* A client on the first n nodes; caching on or off, queued waits or not. */
static dlock_client *client(size_t n, int cache, int wake)
{
    dlock_options o;
    tc_addrs hold;
    dlock_client *c = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";

    tc_options(&o, &hold, rs, n);
    o.cache_locks = cache;
    o.wake_on_release = wake;
    o.command_timeout_ms = 500; /* a loaded machine's round is not an error here */
    cr_assert_eq(dlock_client_new(&o, &c, err, sizeof err), DLOCK_OK, "client: %s", err);
    return c;
}

/* Until the client's listener hears a quorum (it subscribes on its own
 * thread after dlock_client_new): keep releases instead until then. */
static dlock_lock *acquire_kept(dlock_client *c, const char *res, unsigned ttl_ms, unsigned idle_ms)
{
    for (int i = 0; i < 200; i++) {
        dlock_lock *l = NULL;
        dlock_err e = dlock_acquire_for(c, res, ttl_ms, 5000, &l);
        cr_assert_eq(e, DLOCK_OK, "acquire %s: %s (%s)", res, dlock_strerror(e), TC_ERR(c));
        cr_assert_eq(dlock_keep(c, l, idle_ms), DLOCK_OK, "keep: %s", TC_ERR(c));
        dlock_lock *again = dlock_reuse(c, res, 1);
        if (again != NULL)
            return again;
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    cr_assert_fail("the listener never heard a quorum of nodes");
    return NULL;
}

Test(lock_cache, a_kept_lock_is_reused_with_no_round_and_its_fence)
{
    dlock_client *a = client(1, 1, 1);
    dlock_lock *l = acquire_kept(a, "c-reuse", 5000, 5000);
    uint64_t fence = dlock_lock_fence(l);
    dlock_stats before, after;

    cr_assert_eq(dlock_keep(a, l, 5000), DLOCK_OK, "keep: %s", TC_ERR(a));
    dlock_client_stats(a, &before);
    dlock_lock *again = dlock_reuse(a, "c-reuse", 1000);
    dlock_client_stats(a, &after);
    cr_assert_not_null(again, "reuse: %s", TC_ERR(a));
    cr_assert_eq(dlock_lock_fence(again), fence, "a reused lock keeps its fence");
    cr_assert_eq(after.round_trips, before.round_trips, "reuse sent a round");
    cr_assert_eq(after.cache_reused, before.cache_reused + 1);
    cr_assert(dlock_is_held(again));
    cr_assert_null(dlock_reuse(a, "c-reuse", 1), "reused twice");
    cr_assert_eq(dlock_release(a, again), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(tc_exists(&rs[0], "c-reuse"), 0);
    dlock_lock_free(again);
    dlock_client_free(a);
}

/* A waits with its lock kept; b asks for it: the time b's acquire took,
 * and b's fence is the next one (a hand-over is a grant). */
static void handed_to_a_waiter(size_t n, int wake, const char *res)
{
    dlock_client *a = client(n, 1, 1), *b = client(n, 0, wake);
    dlock_lock *l = acquire_kept(a, res, 10000, 30000), *bl = NULL;
    uint64_t fence = dlock_lock_fence(l);

    cr_assert_eq(dlock_keep(a, l, 30000), DLOCK_OK, "keep: %s", TC_ERR(a));
    int64_t t0 = dlock_now_ms();
    dlock_err e = dlock_acquire_for(b, res, 10000, 5000, &bl);
    int64_t took = dlock_now_ms() - t0;
    cr_assert_eq(e, DLOCK_OK, "b: %s (%s)", dlock_strerror(e), TC_ERR(b));
    cr_log_info("%zu node(s), %s waiter: handed over in %lld ms", n, wake ? "queued" : "polling",
                (long long)took);
    /* Without the notice it would wait for the idle time (30 s): far more. */
    cr_assert_lt(took, 1000, "the kept lock took %lld ms to reach the waiter", (long long)took);
    cr_assert_gt(dlock_lock_fence(bl), fence);
    cr_assert_null(dlock_reuse(a, res, 1), "a kept a lock it handed on");
    cr_assert_eq(dlock_release(b, bl), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(bl);
    dlock_client_free(b);
    dlock_client_free(a);
}

Test(lock_cache, a_queued_waiter_gets_a_kept_lock_at_once_on_one_node)
{
    handed_to_a_waiter(1, 1, "c-hand-1");
}

Test(lock_cache, a_queued_waiter_gets_a_kept_lock_at_once_on_redlock)
{
    handed_to_a_waiter(3, 1, "c-hand-3");
}

Test(lock_cache, a_polling_waiter_gets_a_kept_lock_at_once)
{
    handed_to_a_waiter(3, 0, "c-poll-3");
}

Test(lock_cache, a_multi_acquire_gets_a_kept_lock_at_once)
{
    dlock_client *a = client(3, 1, 1), *b = client(3, 0, 1);
    dlock_lock *l = acquire_kept(a, "c-multi-x", 10000, 30000), *bl = NULL;
    const char *names[2] = {"c-multi-x", "c-multi-y"};

    cr_assert_eq(dlock_keep(a, l, 30000), DLOCK_OK, "keep: %s", TC_ERR(a));
    int64_t t0 = dlock_now_ms();
    dlock_err e = dlock_acquire_multi_for(b, names, 2, 10000, 5000, &bl);
    int64_t took = dlock_now_ms() - t0;
    cr_assert_eq(e, DLOCK_OK, "b: %s (%s)", dlock_strerror(e), TC_ERR(b));
    cr_assert_lt(took, 1000, "the kept lock took %lld ms to reach the multi acquire", (long long)took);
    cr_assert_eq(dlock_release(b, bl), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(bl);
    dlock_client_free(b);
    dlock_client_free(a);
}

/* A try never queues, so the notice of its failed attempt is what frees a
 * kept lock: the next try gets it, long before the idle time (30 s). */
Test(lock_cache, a_try_acquire_each_gets_a_kept_lock_on_a_later_try)
{
    dlock_client *a = client(3, 1, 1), *b = client(3, 0, 1);
    dlock_lock *l = acquire_kept(a, "c-each-x", 10000, 30000);
    const char *names[2] = {"c-each-x", "c-each-y"};
    dlock_lock *got[2] = {NULL, NULL};
    dlock_err rc[2];

    cr_assert_eq(dlock_keep(a, l, 30000), DLOCK_OK, "keep: %s", TC_ERR(a));
    cr_assert_eq(dlock_try_acquire_each(b, names, 2, 10000, got, rc), DLOCK_OK, "%s", TC_ERR(b));
    cr_assert_eq(rc[0], DLOCK_ERR_TAKEN, "the kept lock was granted: %s", dlock_strerror(rc[0]));
    cr_assert_eq(rc[1], DLOCK_OK, "%s", dlock_strerror(rc[1]));
    int64_t t0 = dlock_now_ms();
    for (int i = 0; i < 100 && rc[0] != DLOCK_OK; i++) {
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
        cr_assert_eq(dlock_try_acquire_each(b, names, 1, 10000, got, rc), DLOCK_OK, "%s", TC_ERR(b));
    }
    int64_t took = dlock_now_ms() - t0;
    cr_assert_eq(rc[0], DLOCK_OK, "the kept lock was not given up in %lld ms", (long long)took);
    cr_assert_null(dlock_reuse(a, "c-each-x", 1), "a kept a lock it gave up");
    dlock_lock *both[2] = {got[0], got[1]};
    cr_assert_eq(dlock_release_each(b, both, 2, rc), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(got[0]);
    dlock_lock_free(got[1]);
    dlock_client_free(b);
    dlock_client_free(a);
}

Test(lock_cache, a_lock_asked_for_during_its_section_is_released_at_keep)
{
    dlock_client *a = client(3, 1, 1), *b = client(3, 0, 0);
    dlock_lock *l = acquire_kept(a, "c-wanted", 10000, 30000), *bl = NULL;

    /* In use: b's failed try is the notice. */
    cr_assert_eq(dlock_try_acquire(b, "c-wanted", 10000, &bl), DLOCK_ERR_TAKEN);
    /* The notice reaches a's listener in its own time. */
    nanosleep(&(struct timespec){0, 200 * 1000 * 1000}, NULL);
    cr_assert_eq(dlock_keep(a, l, 30000), DLOCK_OK, "keep: %s", TC_ERR(a));
    cr_assert_eq(tc_wait_holding(rs, 3, "c-wanted", 0, 2000), 0, "still held after keep");
    cr_assert_null(dlock_reuse(a, "c-wanted", 1));
    dlock_client_free(b);
    dlock_client_free(a);
}

Test(lock_cache, an_idle_kept_lock_is_released_after_its_idle_time)
{
    dlock_client *a = client(3, 1, 1);
    dlock_lock *l = acquire_kept(a, "c-idle", 10000, 30000);
    dlock_stats st;

    cr_assert_eq(dlock_keep(a, l, 200), DLOCK_OK, "keep: %s", TC_ERR(a));
    cr_assert_eq(tc_count_holding(rs, 3, "c-idle"), 3, "released before its idle time");
    cr_assert_eq(tc_wait_holding(rs, 3, "c-idle", 0, 3000), 0, "still held past its idle time");
    dlock_client_stats(a, &st);
    cr_assert_geq(st.cache_given_up, 1);
    cr_assert_null(dlock_reuse(a, "c-idle", 1));
    dlock_client_free(a);
}

Test(lock_cache, a_kept_lock_with_too_little_validity_left_is_not_reused)
{
    dlock_client *a = client(3, 1, 1);
    dlock_lock *l = acquire_kept(a, "c-short", 1000, 30000);

    cr_assert_eq(dlock_keep(a, l, 30000), DLOCK_OK, "keep: %s", TC_ERR(a));
    /* More than the whole TTL asked for: never granted, and released. */
    cr_assert_null(dlock_reuse(a, "c-short", 5000));
    cr_assert(strstr(TC_ERR(a), "too little of its validity") != NULL, "%s", TC_ERR(a));
    cr_assert_eq(tc_wait_holding(rs, 3, "c-short", 0, 2000), 0, "still held");
    dlock_client_free(a);
}

Test(lock_cache, a_kept_lock_is_renewed_by_the_watchdog)
{
    dlock_client *a = client(3, 1, 1);
    dlock_lock *l = acquire_kept(a, "c-renew", 300, 30000);

    cr_assert_eq(dlock_keep(a, l, 30000), DLOCK_OK, "keep: %s", TC_ERR(a));
    /* Three TTLs: without renewal the key would be gone. */
    nanosleep(&(struct timespec){0, 900 * 1000 * 1000}, NULL);
    dlock_lock *again = dlock_reuse(a, "c-renew", 50);
    cr_assert_not_null(again, "reuse: %s", TC_ERR(a));
    cr_assert_gt(dlock_lock_renewals(again), 0);
    cr_assert_eq(tc_count_holding(rs, 3, "c-renew"), 3);
    cr_assert_eq(dlock_release(a, again), DLOCK_OK, "%s", TC_ERR(a));
    dlock_lock_free(again);
    dlock_client_free(a);
}

Test(lock_cache, keep_needs_cache_locks_and_leaves_the_lock_to_its_holder)
{
    dlock_client *a = client(1, 0, 1);
    dlock_lock *l = NULL;

    cr_assert_eq(dlock_acquire_for(a, "c-off", 5000, 2000, &l), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(dlock_keep(a, l, 1000), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(a), "cache_locks") != NULL, "%s", TC_ERR(a));
    cr_assert_eq(dlock_keep(a, NULL, 1000), DLOCK_ERR_ARG);
    cr_assert(dlock_is_held(l));
    cr_assert_eq(dlock_release(a, l), DLOCK_OK, "%s", TC_ERR(a));
    dlock_lock_free(l);
    dlock_client_free(a);
}

Test(lock_cache, keep_refuses_a_null_lock_and_idle_zero)
{
    dlock_client *a = client(1, 1, 1);
    dlock_lock *l = NULL;

    cr_assert_eq(dlock_keep(a, NULL, 1000), DLOCK_ERR_ARG);
    cr_assert(strstr(TC_ERR(a), "NULL") != NULL, "%s", TC_ERR(a));
    cr_assert_eq(dlock_acquire_for(a, "c-zero", 5000, 2000, &l), DLOCK_OK, "%s", TC_ERR(a));
    cr_assert_eq(dlock_keep(a, l, 0), DLOCK_ERR_ARG);
    cr_assert(dlock_is_held(l), "a refused keep let go of the lock");
    cr_assert_eq(dlock_release(a, l), DLOCK_OK, "%s", TC_ERR(a));
    dlock_lock_free(l);
    dlock_client_free(a);
}

Test(lock_cache, freeing_the_client_releases_its_kept_locks)
{
    dlock_client *a = client(3, 1, 1);
    dlock_lock *l = acquire_kept(a, "c-free", 10000, 30000);

    cr_assert_eq(dlock_keep(a, l, 30000), DLOCK_OK, "keep: %s", TC_ERR(a));
    dlock_client_free(a);
    cr_assert_eq(tc_wait_holding(rs, 3, "c-free", 0, 2000), 0, "a freed client's kept lock stayed");
}

Test(lock_cache, a_paused_master_delays_no_hand_over)
{
    /* Paused before the clients exist: its listener never subscribes (it
     * retries on its own thread), the other two hear the notices. */
    cr_assert_eq(redis_pause(&rs[2]), 0);
    dlock_client *a = client(3, 1, 1), *b = client(3, 0, 1);
    dlock_lock *l = acquire_kept(a, "c-paused", 10000, 30000), *bl = NULL;

    cr_assert_eq(dlock_keep(a, l, 30000), DLOCK_OK, "keep: %s", TC_ERR(a));
    int64_t t0 = dlock_now_ms();
    dlock_err e = dlock_acquire_for(b, "c-paused", 10000, 5000, &bl);
    int64_t took = dlock_now_ms() - t0;
    cr_assert_eq(redis_resume(&rs[2]), 0);
    cr_assert_eq(e, DLOCK_OK, "b: %s (%s)", dlock_strerror(e), TC_ERR(b));
    cr_log_info("a master paused: handed over in %lld ms", (long long)took);
    cr_assert_lt(took, 1500, "the kept lock took %lld ms to reach the waiter", (long long)took);
    cr_assert_eq(dlock_release(b, bl), DLOCK_OK, "%s", TC_ERR(b));
    dlock_lock_free(bl);
    dlock_client_free(b);
    dlock_client_free(a);
}
