/* async_loop.c - the event-loop suites' shared loop, clients and
 * outcomes (async_loop.h). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "async_loop.h"
#include "dlock_uv.h"

uv_loop_t loop;
dlock_loop hooks;
static uv_timer_t wake; /* bounds each turn of run_until */

void aloop_init(void)
{
    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(uv_timer_init(&loop, &wake), 0);
    cr_assert_eq(dlock_loop_uv(&hooks, &loop), 0);
}

void aloop_fini(void)
{
    /* Not run again: a failed test may have left calls whose callbacks
     * point into its stack. */
    uv_close((uv_handle_t *)&wake, NULL);
    (void)uv_loop_close(&loop);
}

static void on_wake(uv_timer_t *h)
{
    (void)h;
}

/* Runs the loop until *done is nonzero or timeout_ms passes; 1 when done. */
int run_until(const int *done, int64_t timeout_ms)
{
    int64_t until = test_now_ms() + timeout_ms;

    /* A short repeating timer, so that UV_RUN_ONCE never blocks past the
     * bound. */
    uv_timer_start(&wake, on_wake, 20, 20);
    while (!*done && test_now_ms() < until)
        uv_run(&loop, UV_RUN_ONCE);
    uv_timer_stop(&wake);
    return *done;
}

/* Runs the loop until res's lock key on r exists (want 1) or not (0):
 * what the client sends without waiting goes out from the loop. */
int wait_key(const redis_proc *r, const char *res, int want, int64_t timeout_ms)
{
    int64_t until = test_now_ms() + timeout_ms;
    int none = 0, seen = tc_exists(r, res);

    while (seen != want && test_now_ms() < until) {
        uv_timer_start(&wake, on_wake, 10, 10);
        uv_run(&loop, UV_RUN_ONCE);
        uv_timer_stop(&wake);
        seen = tc_exists(r, res);
    }
    (void)none;
    return seen;
}

/* Frees an async client and lets its handles close. */
void async_down(dlock_async *a)
{
    dlock_async_free(a);
    for (int i = 0; i < 10; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
}

dlock_async *aloop_client(const redis_proc *nodes, size_t n, int command_timeout_ms)
{
    dlock_options o;
    tc_addrs addrs;
    dlock_async *a = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";

    tc_options(&o, &addrs, nodes, n);
    if (command_timeout_ms > 0)
        o.command_timeout_ms = command_timeout_ms;
    cr_assert_eq(dlock_async_new(&o, &hooks, &a, err, sizeof err), DLOCK_OK, "%s", err);
    return a;
}

void on_acquired(dlock_async *a, dlock_err rc, dlock_lock *lock, const char *detail,
                        void *arg)
{
    outcome *o = arg;

    (void)a;
    o->calls++;
    o->rc = rc;
    o->lock = lock;
    o->at_ms = test_now_ms();
    snprintf(o->detail, sizeof o->detail, "%s", detail);
}

void on_done(dlock_async *a, dlock_err rc, const char *detail, void *arg)
{
    outcome *o = arg;

    (void)a;
    o->calls++;
    o->rc = rc;
    o->at_ms = test_now_ms();
    snprintf(o->detail, sizeof o->detail, "%s", detail);
}

outcome try_acquire(dlock_async *a, const char *res, uint32_t ttl)
{
    outcome o = {0};

    cr_assert_eq(dlock_async_try_acquire(a, res, ttl, on_acquired, &o, NULL), DLOCK_OK);
    cr_assert(o.calls == 0, "the callback fired inside the call");
    cr_assert(run_until(&o.calls, 5000), "no callback for the acquire of %s", res);
    return o;
}

outcome release(dlock_async *a, dlock_lock *l)
{
    outcome o = {0};

    cr_assert_eq(dlock_async_release(a, l, on_done, &o), DLOCK_OK);
    cr_assert(o.calls == 0, "the callback fired inside the call");
    cr_assert(run_until(&o.calls, 5000), "no callback for the release");
    return o;
}
