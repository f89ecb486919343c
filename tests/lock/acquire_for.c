/* acquire_for.c - dlock_acquire_for waits a relative time; dlock_acquire
 * refuses a deadline that cannot be an instant on the library's clock (a
 * relative wait passed by mistake) and keeps "a little in the past" as
 * "try once". */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "lock_common.h"

static redis_proc node;
static dlock_client *holder, *waiter;

TC_NODE_CLIENTS_FIXTURE(node, &holder, &waiter)
TestSuite(lock_acquire_for, .init = tc_suite_init, .fini = tc_suite_fini);

Test(lock_acquire_for, waits_relative_time_then_gets_expired_key, .timeout = 20)
{
    dlock_lock *h = NULL, *w = NULL;
    int64_t t0;

    cr_assert_eq(dlock_try_acquire(holder, "af1", 400, &h), DLOCK_OK);
    t0 = dlock_now_ms();
    cr_assert_eq(dlock_acquire_for(waiter, "af1", 1000, 150, &w), DLOCK_ERR_TAKEN);
    cr_assert_null(w);
    cr_assert_geq(dlock_now_ms() - t0, 145, "waited its 150 ms");
    /* The holder never releases: its key expires and the waiter, still
     * inside its relative wait, takes it. */
    cr_assert_eq(dlock_acquire_for(waiter, "af1", 1000, 5000, &w), DLOCK_OK, "%s", TC_ERR(waiter));
    cr_assert_eq(dlock_lock_fence(w), 2);
    cr_assert_eq(dlock_release(waiter, w), DLOCK_OK);
    dlock_lock_free(w);
    dlock_lock_free(h);
}

Test(lock_acquire_for, no_wait_and_overlong_wait, .timeout = 20)
{
    dlock_lock *h = NULL, *w = NULL;
    int64_t t0;

    cr_assert_eq(dlock_try_acquire(holder, "af2", 10000, &h), DLOCK_OK);
    for (int64_t wait = -5; wait <= 0; wait += 5) {
        t0 = dlock_now_ms();
        cr_assert_eq(dlock_acquire_for(waiter, "af2", 1000, wait, &w), DLOCK_ERR_TAKEN);
        cr_assert_lt(dlock_now_ms() - t0, 1000, "wait %lld: one attempt", (long long)wait);
    }
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    dlock_lock_free(h);
    /* A wait that would overflow now + wait is "for ever", not the past. */
    cr_assert_eq(dlock_acquire_for(waiter, "af2", 1000, INT64_MAX, &w), DLOCK_OK, "%s",
                 TC_ERR(waiter));
    cr_assert_eq(dlock_release(waiter, w), DLOCK_OK);
    dlock_lock_free(w);
}

Test(lock_acquire_for, past_instants_try_once, .timeout = 20)
{
    dlock_lock *h = NULL, *w = NULL;
    int64_t deadlines[4] = {0, -1, INT64_MIN, 0};

    deadlines[3] = dlock_now_ms() - 1000; /* a little in the past: legal */
    cr_assert_eq(dlock_try_acquire(holder, "af3", 10000, &h), DLOCK_OK);
    for (size_t i = 0; i < 4; i++) {
        int64_t t0 = dlock_now_ms();
        cr_assert_eq(dlock_acquire(waiter, "af3", 1000, deadlines[i], &w), DLOCK_ERR_TAKEN,
                     "deadline %lld: %s", (long long)deadlines[i], TC_ERR(waiter));
        cr_assert_lt(dlock_now_ms() - t0, 1000);
    }
    cr_assert_eq(dlock_release(holder, h), DLOCK_OK);
    dlock_lock_free(h);
}

/* The trap: a relative wait (2000) where an absolute instant belongs. On a
 * host up for longer than a few minutes, 2000 ms after boot is long before
 * this process loaded libdlock: refused, nothing sent, and the detail says
 * what to do. */
Test(lock_acquire_for, relative_wait_as_deadline_is_refused, .timeout = 20)
{
    dlock_lock *w = (dlock_lock *)0x1;
    dlock_stats before, after;
    const char *err;

    if (dlock_now_ms() < 2000 + DLOCK_DEADLINE_SLACK_MS + 60000)
        cr_skip_test("host booted less than two minutes ago: 2000 may be a real instant");
    dlock_client_stats(waiter, &before);
    cr_assert_eq(dlock_acquire(waiter, "af4", 1000, 2000, &w), DLOCK_ERR_ARG);
    cr_assert_null(w);
    dlock_client_stats(waiter, &after);
    cr_assert_eq(after.round_trips, before.round_trips, "nothing sent");
    cr_assert_eq(tc_exists(&node, "af4"), 0);
    err = TC_ERR(waiter);
    cr_assert(strstr(err, "absolute") != NULL && strstr(err, "2000 is") != NULL &&
                  strstr(err, "dlock_acquire_for") != NULL,
              "%s", err);
    /* The same number as a relative wait does what was meant. */
    cr_assert_eq(dlock_acquire_for(waiter, "af4", 1000, 2000, &w), DLOCK_OK);
    cr_assert_eq(dlock_release(waiter, w), DLOCK_OK);
    dlock_lock_free(w);
}
