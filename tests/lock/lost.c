/* lost.c - the renewal watchdog's loss report:
 *   - on_lost runs without the client's mutex (it may call the client);
 *   - the lock outlives the callback, even when its holder frees it the
 *     moment dlock_is_held() turns 0;
 *   - one unanswered renewal round is retried instead of reported as a
 *     loss. */
#include <criterion/criterion.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock_common.h"

#define NODES 3
#define TTL 1000
#define CMD_TIMEOUT 100
static redis_proc nodes[NODES];

TC_NODES_FIXTURE(nodes, NODES)
TestSuite(lock_lost, .init = tc_suite_init, .fini = tc_suite_fini);

/* What a callback saw, written by the watchdog thread. */
typedef struct seen {
    dlock_client *c;
    dlock_lock *free_me;     /* non-NULL: the callback frees this lock itself */
    int64_t sleep_ms;        /* how long the callback takes */
    _Atomic int calls;
    _Atomic int done;
    _Atomic int64_t done_ms; /* dlock_now_ms() when the callback returned */
    dlock_err why;
    dlock_err ping;          /* a call on the same client from inside the callback */
    char resource[64];       /* read from the lock at the END of the callback */
    char detail[DLOCK_ERRSTR_LEN]; /* dlock_lock_lost_detail, read inside the callback */
} seen;

static void on_lost(const dlock_lock *lock, dlock_err why, void *user)
{
    seen *s = user;
    atomic_fetch_add(&s->calls, 1);
    s->why = why;
    (void)dlock_lock_lost_detail(lock, s->detail, sizeof s->detail);
    if (s->c != NULL)
        s->ping = dlock_ping(s->c, NULL);
    test_sleep_ms(s->sleep_ms);
    snprintf(s->resource, sizeof s->resource, "%s", dlock_lock_resource(lock));
    if (s->free_me != NULL)
        dlock_lock_free(s->free_me);
    atomic_store(&s->done_ms, dlock_now_ms());
    atomic_store(&s->done, 1);
}

static dlock_lock *renewed(dlock_client *c, const char *res, seen *s)
{
    dlock_lock *l = NULL;
    dlock_renew_options ro = {.on_lost = on_lost, .user = s};
    cr_assert_eq(dlock_try_acquire(c, res, TTL, &l), DLOCK_OK, "%s", TC_ERR(c));
    cr_assert_eq(dlock_auto_renew(c, l, &ro), DLOCK_OK);
    return l;
}

/* Makes the next renewal of res find "not our token": LOST at once. */
static void delete_key(const char *res)
{
    char out[32], key[TC_KEY_LEN];
    const char *del[] = {"DEL", tc_lock_key(key, res)};
    tc_cmd(&nodes[0], out, sizeof out, 2, del);
    cr_assert_str_eq(out, "1");
}

static int wait_flag(_Atomic int *flag, int64_t timeout_ms)
{
    int64_t until = dlock_now_ms() + timeout_ms;
    while (!atomic_load(flag) && dlock_now_ms() < until)
        test_sleep_ms(2);
    return atomic_load(flag);
}

/* on_lost runs without the client's mutex, so a callback may call the
 * client (here dlock_ping); with the mutex held it would deadlock the
 * watchdog. */
Test(lock_lost, on_lost_may_call_the_client, .timeout = 10)
{
    dlock_client *c = tc_client(nodes, 1, 0);
    seen s = {.c = c};
    dlock_lock *l = renewed(c, "cb-call", &s);
    delete_key("cb-call");
    cr_assert_eq(wait_flag(&s.done, 3 * TTL), 1, "on_lost did not return (deadlock?)");
    cr_assert_eq(s.why, DLOCK_ERR_LOST);
    cr_assert_eq(s.ping, DLOCK_OK);
    cr_assert_eq(atomic_load(&s.calls), 1);
    cr_assert_eq(dlock_is_held(l), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The lock stays in the registry while on_lost runs. So a holder that
 * frees it as soon as dlock_is_held() turns 0 does not free it under the
 * callback (ASan would report a heap-use-after-free in dlock_lock_resource
 * from on_lost). The free waits for the callback and returns only after
 * the callback did, and the callback still reads the lock's own name. */
Test(lock_lost, free_when_not_held_waits_for_on_lost, .timeout = 10)
{
    dlock_client *c = tc_client(nodes, 1, 0);
    seen s = {.sleep_ms = 300};
    dlock_lock *l = renewed(c, "cb-free", &s);
    delete_key("cb-free");
    int64_t until = dlock_now_ms() + 3 * TTL;
    while (dlock_is_held(l) && dlock_now_ms() < until)
        test_sleep_ms(1);
    cr_assert_eq(dlock_is_held(l), 0);
    dlock_lock_free(l); /* what a holder does when it sees the lock gone */
    int64_t freed_ms = dlock_now_ms();
    cr_assert_eq(atomic_load(&s.done), 1, "dlock_lock_free returned while on_lost still ran");
    cr_assert_leq(atomic_load(&s.done_ms), freed_ms);
    cr_assert_str_eq(s.resource, "cb-free");
    dlock_client_free(c);
}

/* Freeing the lock from inside its own callback is deferred until the
 * callback returns (ASan build: no use after free, no leak). */
Test(lock_lost, free_inside_on_lost_is_deferred, .timeout = 10)
{
    dlock_client *c = tc_client(nodes, 1, 0);
    seen s = {0};
    dlock_lock *l = renewed(c, "cb-self", &s);
    s.free_me = l;
    delete_key("cb-self");
    cr_assert_eq(wait_flag(&s.done, 3 * TTL), 1);
    cr_assert_str_eq(s.resource, "cb-self");
    /* The watchdog goes on serving other locks afterwards. */
    seen s2 = {0};
    dlock_lock *l2 = renewed(c, "cb-next", &s2);
    test_sleep_ms(2 * TTL);
    cr_assert_eq(dlock_is_held(l2), 1);
    cr_assert_geq(dlock_lock_renewals(l2), 2);
    cr_assert_eq(dlock_release(c, l2), DLOCK_OK);
    dlock_lock_free(l2);
    cr_assert_eq(atomic_load(&s2.calls), 0);
    dlock_client_free(c);
}

/* One renewal round that a quorum did not answer (two of three nodes
 * paused for a moment) does not declare the lock lost with two thirds of
 * its validity left. It is retried while a round can still finish inside
 * the validity, and succeeds once the nodes are back. */
Test(lock_lost, one_unanswered_renewal_is_retried, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, CMD_TIMEOUT);
    seen s = {0};
    dlock_lock *l = renewed(c, "blip", &s);
    int64_t t0 = dlock_now_ms();
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    cr_assert_eq(redis_pause(&nodes[2]), 0);
    /* Across the first renewal (due at TTL/3), resumed with a third left. */
    test_sleep_ms(TTL / 3 + 2 * CMD_TIMEOUT - (dlock_now_ms() - t0));
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(redis_resume(&nodes[2]), 0);
    test_sleep_ms(2 * TTL);
    cr_assert_eq(atomic_load(&s.calls), 0, "on_lost(%s) after one unanswered round",
                 dlock_strerror(s.why));
    cr_assert_eq(dlock_is_held(l), 1);
    cr_assert_geq(dlock_lock_renewals(l), 3);
    cr_assert_eq(dlock_release(c, l), DLOCK_OK);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* The loss names both paused nodes, not only the first, and not the one
 * that answered: the operator is told every node to look at. */
static void expect_silent_named(const char *detail)
{
    char want[96];

    for (size_t i = 1; i < NODES; i++) {
        snprintf(want, sizeof want, "node %s: ", nodes[i].addr);
        cr_assert_not_null(strstr(detail, want), "\"%s\" not in the detail: %s", want, detail);
    }
    cr_assert_null(strstr(detail, nodes[0].addr), "the node that answered is named: %s", detail);
    cr_assert_not_null(strstr(detail, "; 1/3 nodes answered"), "%s", detail);
}

/* And it does give up: with the quorum gone for good, on_lost comes once,
 * with the unavailable code, no later than the validity's end and no
 * earlier than the last retry that could still fit in it, and its detail
 * names both silent nodes. */
Test(lock_lost, renewal_gives_up_shortly_before_validity_ends, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, CMD_TIMEOUT);
    seen s = {0};
    dlock_lock *l = renewed(c, "gone-for-good", &s);
    int64_t end = dlock_lock_valid_until_ms(l);
    cr_assert_eq(redis_pause(&nodes[1]), 0);
    cr_assert_eq(redis_pause(&nodes[2]), 0);
    cr_assert_eq(wait_flag(&s.done, 3 * TTL), 1);
    int64_t at = atomic_load(&s.done_ms);
    cr_assert_eq(redis_resume(&nodes[1]), 0);
    cr_assert_eq(redis_resume(&nodes[2]), 0);
    cr_assert(dlock_err_is_unavailable(s.why), "on_lost with %s", dlock_strerror(s.why));
    expect_silent_named(s.detail);
    cr_assert_geq(at, end - 3 * CMD_TIMEOUT, "gave up %lld ms before the validity's end",
                  (long long)(end - at));
    cr_assert_leq(at, end + CMD_TIMEOUT, "reported %lld ms after the validity's end",
                  (long long)(at - end));
    cr_assert_eq(dlock_is_held(l), 0);
    test_sleep_ms(TTL / 2);
    cr_assert_eq(atomic_load(&s.calls), 1);
    dlock_lock_free(l);
    dlock_client_free(c);
}

/* A release that finds the lock gone names where: the nodes that hold
 * another token (or none) and the one that did not answer. */
Test(lock_lost, a_lost_release_names_the_nodes, .timeout = 15)
{
    dlock_client *c = tc_client(nodes, NODES, CMD_TIMEOUT);
    dlock_lock *l = NULL;
    char key[TC_KEY_LEN], out[64], want[160];
    const char *detail;

    cr_assert_not_null(c);
    cr_assert_eq(dlock_try_acquire(c, "named", 10000, &l), DLOCK_OK, "%s", TC_ERR(c));
    tc_cmd(&nodes[0], out, sizeof out, 2, (const char *const[]){"DEL", tc_lock_key(key, "named")});
    tc_cmd(&nodes[1], out, sizeof out, 2, (const char *const[]){"DEL", tc_lock_key(key, "named")});
    cr_assert_eq(redis_pause(&nodes[2]), 0);
    cr_assert_eq(dlock_release(c, l), DLOCK_ERR_LOST, "%s", TC_ERR(c));
    detail = TC_ERR(c);
    snprintf(want, sizeof want, "not ours on %s, %s", nodes[0].addr, nodes[1].addr);
    cr_assert_not_null(strstr(detail, want), "\"%s\" not in: %s", want, detail);
    snprintf(want, sizeof want, "no answer from %s", nodes[2].addr);
    cr_assert_not_null(strstr(detail, want), "\"%s\" not in: %s", want, detail);
    cr_assert_eq(redis_resume(&nodes[2]), 0);
    dlock_lock_free(l);
    dlock_client_free(c);
}
