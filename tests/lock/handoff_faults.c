/* handoff_faults.c - the hand-off protocols under the faults a review found
 * them to mishandle, each on real redis-servers and each failing on the
 * code before its fix:
 * - a Redlock queued grant whose fence-sync round is held back past the
 *   keys' TTL (a TCP relay delays that one command): never DLOCK_OK with
 *   the validity spent, and no second holder;
 * - a multi-resource release with single-resource waiters queued on its
 *   keys, from a client that does not wake (3 masters) and sent into a
 *   stalled node (one master): the waiter is handed the key at once;
 * - a Redlock waiter whose wall clock is 270 ms behind or 60 s ahead of
 *   the nodes' (the clockshift shim preloaded into a waiter process of its
 *   own) among 4 threads taking the lock in turn: it gets the lock, within
 *   a small multiple of an unskewed waiter's time;
 * - a Redlock master that always answers a waiter just after its round
 *   stopped waiting (a relay lags each command until the next): the
 *   recheck livelock SPIN found, a hand-off window now instead of a TTL. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "delay_proxy.h"
#include "handoff_setup.h"

#define NODES 3
static redis_proc nodes[NODES];
static delay_proxy *proxy;

static void setup(void)
{
    proxy = NULL;
    cr_assert_eq(ho_nodes_up(nodes, NODES, NULL), 0, "redis nodes did not start");
}

static void teardown(void)
{
    delay_proxy_stop(proxy);
    ho_nodes_down(nodes, NODES);
}

TestSuite(lock_handoff_faults, .init = setup, .fini = teardown);

/* A client on addrs[0..n) (NULL: the first n test nodes). */
static dlock_client *client_on(const char *const *addrs, size_t n, int wake, int command_timeout_ms)
{
    ho_client_opts o = {.addrs = addrs, .wake = wake, .command_timeout_ms = command_timeout_ms};
    char err[DLOCK_ERRSTR_LEN] = "";
    dlock_client *c = ho_client(nodes, n, &o, err);

    cr_assert_not_null(c, "%s", err);
    return c;
}

static void cmd(const redis_proc *r, int argc, const char *const *argv)
{
    char out[128];

    tc_cmd(r, out, sizeof out, argc, argv);
    cr_assert(strcmp(out, "OK") == 0 || strcmp(out, "1") == 0, "%s %s: %s", argv[0], argv[1], out);
}

static void wait_listed(size_t n, const char *res, long long want)
{
    long long got = -1;
    int at = tc_wait_listed(nodes, n, res, want, 10000, &got);

    cr_assert_eq(at, -1, "%lld waiters listed on node %d, expected %lld", got, at, want);
}

/* ---- a grant whose fence sync is held back past the TTL ---- */

/* Node A's fence counter far ahead, node B's key held by someone else,
 * node C's counter behind and reached through the relay. A grant on {A, C}
 * needs a fence-sync round to C, and the relay holds that round 500 ms,
 * longer than the 300 ms TTL. */
/* The nodes' addresses with C (node 2) reached through a fresh delay
 * proxy (the suite's `proxy`, stopped by teardown). */
static const char *const *addrs_with_c_proxied(void)
{
    static tc_addrs hold;
    dlock_options o;

    proxy = delay_proxy_start(nodes[2].port);
    cr_assert_not_null(proxy);
    tc_options_via(&o, &hold, nodes, NODES, 2, delay_proxy_port(proxy));
    return hold.p;
}

static dlock_client *slow_sync_client(void)
{
    char fkey[TC_KEY_LEN], lkey[TC_KEY_LEN], pat[64];
    const char *a100[] = {"SET", tc_fence_key(fkey, "r"), "100"};
    const char *c5[] = {"SET", fkey, "5"};
    const char *held[] = {"SET", tc_lock_key(lkey, "r"), "someone-else", "PX", "60000"};
    const char *const *addrs;
    int n;

    cmd(&nodes[0], 3, a100);
    cmd(&nodes[1], 5, held);
    cmd(&nodes[2], 3, c5);
    addrs = addrs_with_c_proxied();
    /* fence_sync.lua is the only script sent with one key, the fence key:
     * "... numkeys 1, then fence:r". */
    n = snprintf(pat, sizeof pat, "$1\r\n1\r\n$%zu\r\n%s\r\n", strlen(fkey), fkey);
    delay_proxy_arm(proxy, pat, (size_t)n, 500);
    return client_on(addrs, NODES, 1, 1000);
}

Test(lock_handoff_faults, queued_grant_refuses_a_validity_spent_in_the_fence_sync, .timeout = 30)
{
    dlock_client *c = slow_sync_client(), *third = client_on(NULL, NODES, 1, 1000);
    dlock_lock *lock = NULL, *other = NULL;
    dlock_err rc;

    /* 200 ms of wait: the queued path (a try is the plain one), and the
     * deadline is gone when the held-back sync answers. */
    rc = dlock_acquire_for(c, "r", 300, 200, &lock);
    cr_assert_eq(delay_proxy_held(proxy), 1, "the fence sync was not the round held back");
    cr_assert_eq(rc, DLOCK_ERR_EXPIRED, "got %s (fence %llu, validity %lld ms): %s",
                 dlock_strerror(rc), lock ? (unsigned long long)dlock_lock_fence(lock) : 0ULL,
                 lock ? (long long)dlock_lock_validity_ms(lock) : 0LL, TC_ERR(c));
    cr_assert_null(lock);
    /* Its keys were handed back at once: the next client gets the lock
     * (on A and C) without waiting for their TTL. */
    cr_assert_eq(dlock_acquire_for(third, "r", 5000, 2000, &other), DLOCK_OK, "%s", TC_ERR(third));
    cr_assert_gt(dlock_lock_fence(other), 101);
    dlock_release(third, other);
    dlock_lock_free(other);
    dlock_client_free(third);
    dlock_client_free(c);
}

Test(lock_handoff_faults, queued_grant_after_a_slow_fence_sync_retries_within_its_wait,
     .timeout = 30)
{
    dlock_client *c = slow_sync_client(), *third = client_on(NULL, NODES, 1, 1000);
    dlock_lock *lock = NULL, *other = NULL;
    dlock_err rc;

    /* With wait left, the spent grant is given back and tried again. */
    rc = dlock_acquire_for(c, "r", 300, 3000, &lock);
    cr_assert_eq(delay_proxy_held(proxy), 1);
    cr_assert_eq(rc, DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_gt(dlock_lock_validity_ms(lock), 0);
    /* Held for real: a third client is refused while the handle is valid. */
    rc = dlock_try_acquire(third, "r", 300, &other);
    if (dlock_lock_validity_ms(lock) > 0)
        cr_assert_eq(rc, DLOCK_ERR_TAKEN, "a second holder while the first is valid: %s",
                     dlock_strerror(rc));
    if (other != NULL)
        dlock_lock_free(other);
    dlock_release(c, lock);
    dlock_lock_free(lock);
    dlock_client_free(third);
    dlock_client_free(c);
}

/* ---- a multi-resource release beside queued single waiters ---- */

typedef struct waiter {
    dlock_client *c;
    const char *res;
    dlock_err rc;
    int64_t got_ms;
} waiter;

static void *wait_for_lock(void *arg)
{
    waiter *w = arg;
    dlock_lock *lock = NULL;

    w->rc = dlock_acquire_for(w->c, w->res, 2000, 10000, &lock);
    w->got_ms = test_now_ms();
    if (lock != NULL) {
        dlock_release(w->c, lock);
        dlock_lock_free(lock);
    }
    return NULL;
}

Test(lock_handoff_faults, multi_release_hands_over_to_a_redlock_waiter, .timeout = 30)
{
    dlock_client *holder = client_on(NULL, NODES, 0, 0); /* polls: wake_on_release = 0 */
    const char *set[2] = {"m1", "m2"};
    dlock_lock *m = NULL;
    waiter w = {client_on(NULL, NODES, 1, 0), "m1", DLOCK_ERR_ARG, 0};
    pthread_t th;
    int64_t released;

    cr_assert_eq(dlock_acquire_multi_for(holder, set, 2, 8000, 0, &m), DLOCK_OK, "%s",
                 TC_ERR(holder));
    cr_assert_eq(pthread_create(&th, NULL, wait_for_lock, &w), 0);
    wait_listed(NODES, "m1", 1);
    released = test_now_ms();
    cr_assert_eq(dlock_release(holder, m), DLOCK_OK, "%s", TC_ERR(holder));
    pthread_join(th, NULL);
    cr_assert_eq(w.rc, DLOCK_OK, "%s", TC_ERR(w.c));
    /* Handed over by the release itself, not found free when the 8 s key
     * would have expired. */
    cr_assert_lt(w.got_ms - released, 1000, "the waiter got the key %lld ms after the release",
                 (long long)(w.got_ms - released));
    dlock_lock_free(m);
    dlock_client_free(w.c);
    dlock_client_free(holder);
}

typedef struct resumer {
    redis_proc *node;
    int after_ms;
    int64_t resumed_ms;
} resumer;

static void *resume_later(void *arg)
{
    resumer *r = arg;

    test_sleep_ms(r->after_ms);
    redis_resume(r->node);
    r->resumed_ms = test_now_ms();
    return NULL;
}

Test(lock_handoff_faults, multi_release_into_a_stall_hands_over, .timeout = 30)
{
    /* One node; the holder's release round times out in the stall (150 ms
     * command timeout) and is resent behind itself. */
    dlock_client *holder = client_on(NULL, 1, 1, 150);
    const char *set[2] = {"s1", "s2"};
    dlock_lock *m = NULL;
    waiter w = {client_on(NULL, 1, 1, 0), "s1", DLOCK_ERR_ARG, 0};
    resumer r = {&nodes[0], 400, 0};
    pthread_t th, rt;

    cr_assert_eq(dlock_acquire_multi_for(holder, set, 2, 8000, 0, &m), DLOCK_OK, "%s",
                 TC_ERR(holder));
    cr_assert_eq(pthread_create(&th, NULL, wait_for_lock, &w), 0);
    wait_listed(1, "s1", 1);
    /* In its BLPOP: the answer to its listing has reached it. */
    cr_assert_eq(tc_wait_blocked(&nodes[0], 1, 5000), 1, "the waiter never blocked in its BLPOP");
    cr_assert_eq(redis_pause(&nodes[0]), 0);
    cr_assert_eq(pthread_create(&rt, NULL, resume_later, &r), 0);
    (void)dlock_release(holder, m); /* an unknown outcome in the stall: no code to assert */
    pthread_join(rt, NULL);
    pthread_join(th, NULL);
    cr_assert_eq(w.rc, DLOCK_OK, "%s", TC_ERR(w.c));
    cr_assert_lt(w.got_ms - r.resumed_ms, 1000,
                 "the waiter got the key %lld ms after the node resumed",
                 (long long)(w.got_ms - r.resumed_ms));
    /* The other key, without waiters, was deleted. */
    cr_assert_eq(tc_wait_exists(&nodes[0], "s2", 0, 2000), 0);
    dlock_lock_free(m);
    dlock_client_free(w.c);
    dlock_client_free(holder);
}

/* ---- a waiter whose wall clock is off ---- */

typedef struct looper {
    dlock_client *c;
    atomic_int *stop;
    long grants;
} looper;

/* Takes the lock in turn with the others, holding it 1 ms, until stop. */
static void *take_in_turn(void *arg)
{
    looper *l = arg;

    for (int i = 0; i < 100000 && !atomic_load(l->stop); i++) {
        dlock_lock *lock = NULL;

        if (dlock_acquire_for(l->c, "hot", 500, 2000, &lock) != DLOCK_OK)
            continue;
        l->grants++;
        test_sleep_ms(1);
        dlock_release(l->c, lock);
        dlock_lock_free(lock);
    }
    return NULL;
}

/* Runs lock_skew_waiter with its wall clock offset_ms off the nodes'; its
 * wait in ms, with *rc its result. */
static long long skewed_wait(long long offset_ms, int *rc)
{
    const char *bin = getenv("DLOCK_BINARY_DIR");
    char exe[512], lib[512], file[512], off[32], out[64] = "";
    char preload[600], shiftenv[600];
    int pipefd[2], status = 0;
    ssize_t got = 0;
    long long ms = -1;
    pid_t pid;
    FILE *f;

    cr_assert_not_null(bin, "DLOCK_BINARY_DIR is not set");
    snprintf(exe, sizeof exe, "%s/tests/bin/lock_skew_waiter", bin);
    snprintf(lib, sizeof lib, "%s/tests/lib/libclockshift.so", bin);
    snprintf(file, sizeof file, "%s/clockshift", nodes[0].dir);
    f = fopen(file, "w");
    cr_assert_not_null(f);
    fprintf(f, "%lld\n", offset_ms);
    cr_assert_eq(fclose(f), 0);
    snprintf(off, sizeof off, "%lld", offset_ms);
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", lib);
    snprintf(shiftenv, sizeof shiftenv, "DLOCK_CLOCKSHIFT_FILE=%s", file);
    cr_assert_eq(pipe(pipefd), 0);
    pid = tc_fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char *argv[] = {exe, "hot", "500", "5000", nodes[0].addr, nodes[1].addr, nodes[2].addr,
                        NULL};
        /* The shim is no ASan build: ASan must not insist on coming first. */
        char *envp[] = {preload, shiftenv, "ASAN_OPTIONS=verify_asan_link_order=0", NULL};

        dup2(pipefd[1], STDOUT_FILENO);
        close(pipefd[0]);
        execve(exe, argv, envp);
        _exit(127);
    }
    close(pipefd[1]);
    while (got < (ssize_t)sizeof out - 1) {
        ssize_t n = read(pipefd[0], out + got, sizeof out - 1 - (size_t)got);

        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += n;
    }
    close(pipefd[0]);
    status = tc_wait_child(pid, 15000);
    cr_assert_eq(status, 0, "lock_skew_waiter exited %d (output \"%s\")", status, out);
    cr_assert_eq(sscanf(out, "%d %lld", rc, &ms), 2, "lock_skew_waiter printed \"%s\"", out);
    return ms;
}

/* 4 threads take "hot" in turn; waiters with the given wall-clock offsets,
 * one after the other, each must get it. The unskewed one first, as the
 * yardstick. */
static void skewed_waiter_gets_the_lock(long long offset_ms)
{
    atomic_int stop = 0;
    looper ls[4];
    pthread_t th[4];
    long long base, skewed;
    int rc_base = -1, rc_skewed = -1;
    long total = 0;

    for (size_t i = 0; i < 4; i++) {
        ls[i] = (looper){client_on(NULL, NODES, 1, 0), &stop, 0};
        cr_assert_eq(pthread_create(&th[i], NULL, take_in_turn, &ls[i]), 0);
    }
    test_sleep_ms(300); /* the queue is busy */
    base = skewed_wait(0, &rc_base);
    skewed = skewed_wait(offset_ms, &rc_skewed);
    atomic_store(&stop, 1);
    for (size_t i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        total += ls[i].grants;
        dlock_client_free(ls[i].c);
    }
    cr_log_info("offset %lld ms: unskewed waiter %lld ms, skewed %lld ms; %ld grants to the 4 "
                "threads", offset_ms, base, skewed, total);
    cr_assert_gt(total, 50, "the 4 threads did not contend (%ld grants)", total);
    cr_assert_eq(rc_base, DLOCK_OK, "the unskewed waiter: %s", dlock_strerror(rc_base));
    cr_assert_eq(rc_skewed, DLOCK_OK, "the waiter %lld ms off waited %lld ms: %s", offset_ms,
                 skewed, dlock_strerror(rc_skewed));
    /* Order may degrade by the nodes' clamp (20 ms), never to starvation:
     * within a small multiple of the unskewed waiter's time (with a floor
     * for a 2-core machine's scheduling noise). */
    cr_assert_leq(skewed, 5 * base + 300, "the waiter %lld ms off waited %lld ms, unskewed %lld",
                  offset_ms, skewed, base);
}

Test(lock_handoff_faults, waiter_with_a_clock_270ms_behind_gets_the_lock, .timeout = 60)
{
    skewed_waiter_gets_the_lock(-270);
}

Test(lock_handoff_faults, waiter_with_a_clock_60s_ahead_gets_the_lock, .timeout = 60)
{
    skewed_waiter_gets_the_lock(60000);
}

/* ---- a master always a little late ---- */

/* Waiters W3 (older) and W1 reach master C through the relay with the lag.
 * C runs each of their commands just after the round stopped waiting for
 * it and before their next command there. So every listing round of
 * theirs ends on A and B with C's answer one command late, never so late
 * that C's breaker opens. H (direct) holds "r"; W3 queues behind it; H's
 * keys on A and C go (as if expired), and W1's first round takes A (SET
 * NX) and, late, C. H's release hands B to W3. W1 held A with C unknown
 * and rechecked at once, again and again, never hearing C in time, while
 * W3 held B alone and yielded it to itself: no grant until W1's key on A
 * expired, a TTL (2 s) later. One recheck per unanswered node now, then
 * W1 yields A like any minority (to W3, the head of A's queue). */
Test(lock_handoff_faults, a_master_always_a_little_late_stalls_no_waiter, .timeout = 60)
{
    char lkey[TC_KEY_LEN], out[128];
    const char *const *addrs;
    const char *del[2] = {"DEL", tc_lock_key(lkey, "r")};
    dlock_client *h = client_on(NULL, NODES, 1, 0);
    dlock_lock *held = NULL;
    waiter w3, w1;
    pthread_t t3, t1;
    int64_t released;

    addrs = addrs_with_c_proxied();
    delay_proxy_lag(proxy, 30);
    w3 = (waiter){client_on(addrs, NODES, 1, 0), "r", DLOCK_ERR_ARG, 0};
    w1 = (waiter){client_on(addrs, NODES, 1, 0), "r", DLOCK_ERR_ARG, 0};

    cr_assert_eq(dlock_try_acquire(h, "r", 10000, &held), DLOCK_OK, "%s", TC_ERR(h));
    cr_assert_eq(pthread_create(&t3, NULL, wait_for_lock, &w3), 0);
    wait_listed(NODES, "r", 1);
    tc_cmd(&nodes[0], out, sizeof out, 2, del);
    tc_cmd(&nodes[2], out, sizeof out, 2, del);
    cr_assert_eq(pthread_create(&t1, NULL, wait_for_lock, &w1), 0);
    /* W1's first round takes A (its late enter.lua on C takes C too). */
    cr_assert_eq(tc_wait_exists(&nodes[0], "r", 1, 2000), 1, "W1 did not take A");
    test_sleep_ms(100);
    released = test_now_ms();
    /* Only B is still H's: the release says the lock was lost, and hands B
     * over all the same. */
    cr_assert_eq(dlock_release(h, held), DLOCK_ERR_LOST, "%s", TC_ERR(h));
    pthread_join(t3, NULL);
    pthread_join(t1, NULL);
    cr_log_info("W3 granted %lld ms after the release, W1 %lld ms", (long long)(w3.got_ms - released),
                (long long)(w1.got_ms - released));
    cr_assert_eq(w3.rc, DLOCK_OK, "%s", TC_ERR(w3.c));
    cr_assert_eq(w1.rc, DLOCK_OK, "%s", TC_ERR(w1.c));
    /* A hand-off window (200 ms here) and a few rounds, not W1's 2 s TTL. */
    cr_assert_lt(w3.got_ms - released, 1000, "W3 got the lock %lld ms after the release",
                 (long long)(w3.got_ms - released));
    dlock_lock_free(held);
    dlock_client_free(w1.c);
    dlock_client_free(w3.c);
    dlock_client_free(h);
}

/* A key that a waiter's late enter.lua takes is announced on its list, as
 * a hand-off is. H holds A and B (C's key gone, as after a restart). W's
 * listing round stops at A's and B's answers. Its enter.lua on C, held
 * back by the relay, takes the free key for W after the round. X
 * queues behind on C. W hears of C, holds it alone for a hand-off window
 * and yields it: C's key goes to X (C's fence rises), long before W's key
 * there would expire (2 s). A W that never read the late answer would
 * leave C's key unused, unknown to its owner, for its whole TTL. With the
 * other nodes' queues in different orders, nobody would have a quorum
 * meanwhile (the stall of the 64-worker history). */
Test(lock_handoff_faults, a_key_a_late_listing_took_is_heard_of_at_once, .timeout = 60)
{
    char lkey[TC_KEY_LEN], fkey[TC_KEY_LEN], out[128];
    const char *const *addrs;
    const char *del[2] = {"DEL", tc_lock_key(lkey, "r")};
    dlock_client *h = client_on(NULL, NODES, 1, 0);
    dlock_lock *held = NULL;
    waiter w, x;
    pthread_t tw, tx;
    long long fence_c;
    int64_t taken, end;

    addrs = addrs_with_c_proxied();
    delay_proxy_lag(proxy, 30);
    w = (waiter){client_on(addrs, NODES, 1, 0), "r", DLOCK_ERR_ARG, 0};
    x = (waiter){client_on(NULL, NODES, 1, 0), "r", DLOCK_ERR_ARG, 0};

    cr_assert_eq(dlock_try_acquire(h, "r", 10000, &held), DLOCK_OK, "%s", TC_ERR(h));
    tc_cmd(&nodes[2], out, sizeof out, 2, del);
    cr_assert_eq(pthread_create(&tw, NULL, wait_for_lock, &w), 0);
    /* W's late enter.lua takes C. */
    cr_assert_eq(tc_wait_exists(&nodes[2], "r", 1, 2000), 1, "W's late enter.lua did not take C");
    taken = test_now_ms();
    tc_fence_key(fkey, "r");
    fence_c = tc_get_ll(&nodes[2], fkey);
    cr_assert_eq(pthread_create(&tx, NULL, wait_for_lock, &x), 0);
    end = taken + 5000;
    while (tc_get_ll(&nodes[2], fkey) == fence_c && test_now_ms() < end)
        test_sleep_ms(2);
    cr_log_info("C's key left W %lld ms after W's late enter.lua took it", (long long)(test_now_ms() - taken));
    /* A hand-off window (200 ms here) and the relay's lag, not W's 2 s. */
    cr_assert_lt(test_now_ms() - taken, 1000, "C's key stayed W's, unused, for %lld ms",
                 (long long)(test_now_ms() - taken));
    cr_assert_eq(dlock_release(h, held), DLOCK_OK, "%s", TC_ERR(h));
    pthread_join(tw, NULL);
    pthread_join(tx, NULL);
    cr_assert_eq(w.rc, DLOCK_OK, "%s", TC_ERR(w.c));
    cr_assert_eq(x.rc, DLOCK_OK, "%s", TC_ERR(x.c));
    /* No announcement outlives its call: the releases take the lists (on
     * C, once the relay has passed the last release on: bounded). */
    for (size_t i = 0; i < NODES; i++) {
        int64_t until = test_now_ms() + 2000;
        long long lists;

        while ((lists = tc_waiter_lists(&nodes[i])) != 0 && test_now_ms() < until)
            test_sleep_ms(10);
        cr_assert_eq(lists, 0, "node %zu keeps %lld waiter lists", i, lists);
    }
    dlock_lock_free(held);
    dlock_client_free(w.c);
    dlock_client_free(x.c);
    dlock_client_free(h);
}
