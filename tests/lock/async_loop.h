/* async_loop.h - what the event-loop suites share: one libuv loop with
 * libdlock's hooks, running it until a callback fired (bounded), clients
 * on a suite's nodes, and each call's outcome, counted (every callback
 * must fire exactly once). */
#ifndef ASYNC_LOOP_H
#define ASYNC_LOOP_H

#include <uv.h>

#include "dlock.h"
#include "lock_common.h"

extern uv_loop_t loop;
extern dlock_loop hooks;

/* The loop and its hooks (a suite's init); aloop_fini in its fini. */
void aloop_init(void);
void aloop_fini(void);

/* Runs the loop until *done is nonzero or timeout_ms passes; 1 when done. */
int run_until(const int *done, int64_t timeout_ms);
/* Runs the loop until res's lock key on r exists (want 1) or not (0):
 * what the client sends without waiting goes out from the loop. */
int wait_key(const redis_proc *r, const char *res, int want, int64_t timeout_ms);
/* Frees an async client and lets its handles close. */
void async_down(dlock_async *a);
/* An async client on nodes[0..n); command_timeout_ms 0: the default. */
dlock_async *aloop_client(const redis_proc *nodes, size_t n, int command_timeout_ms);

/* One call's outcome, counted. */
typedef struct outcome {
    int calls;
    dlock_err rc;
    dlock_lock *lock;
    char detail[DLOCK_ERRSTR_LEN];
    int64_t at_ms;
} outcome;

void on_acquired(dlock_async *a, dlock_err rc, dlock_lock *lock, const char *detail, void *arg);
void on_done(dlock_async *a, dlock_err rc, const char *detail, void *arg);
/* A try-acquire and a release, run to their callback (asserted). */
outcome try_acquire(dlock_async *a, const char *res, uint32_t ttl);
outcome release(dlock_async *a, dlock_lock *l);

#endif
