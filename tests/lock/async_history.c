/* async_history.c - see async_history.h. */
#include "async_history.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "lock_common.h"

#define MAX_WORKERS 64
#define MAX_THREADS 16
#define RESOURCE "history"

static atomic_int holders, overlaps, fence_regressions, sections, failures;
static _Atomic uint64_t last_fence;

static void enter_section(uint64_t fence)
{
    uint64_t prev;

    if (atomic_fetch_add(&holders, 1) != 0)
        atomic_fetch_add(&overlaps, 1);
    prev = atomic_exchange(&last_fence, fence);
    if (fence <= prev)
        atomic_fetch_add(&fence_regressions, 1);
    atomic_fetch_add(&sections, 1);
}

static void leave_section(void)
{
    atomic_fetch_sub(&holders, 1);
}

typedef struct worker {
    dlock_async *a;
    uv_timer_t hold;
    dlock_lock *lock;
    int left;
    int *running;
} worker;

static void worker_next(worker *w);
static void worker_try(worker *w);

static void on_released(dlock_async *a, dlock_err rc, const char *detail, void *arg)
{
    (void)a;
    (void)detail;
    if (rc != DLOCK_OK)
        atomic_fetch_add(&failures, 1);
    worker_next(arg);
}

static void on_hold_done(uv_timer_t *h)
{
    worker *w = h->data;
    dlock_lock *l = w->lock;

    w->lock = NULL;
    leave_section(); /* before the release goes: the next holder may enter at once */
    if (dlock_async_release(w->a, l, on_released, w) != DLOCK_OK) {
        atomic_fetch_add(&failures, 1);
        worker_next(w);
    }
    dlock_lock_free(l);
}

static void on_acquired(dlock_async *a, dlock_err rc, dlock_lock *lock, const char *detail,
                        void *arg)
{
    worker *w = arg;

    (void)a;
    (void)detail;
    if (rc != DLOCK_OK) {
        if (rc != DLOCK_ERR_TAKEN)
            atomic_fetch_add(&failures, 1);
        worker_try(w); /* the wait ended while others held it: wait again */
        return;
    }
    enter_section(dlock_lock_fence(lock));
    w->lock = lock;
    uv_timer_start(&w->hold, on_hold_done, 2, 0);
}

static void worker_next(worker *w)
{
    if (w->left == 0) {
        (*w->running)--;
        return;
    }
    w->left--;
    worker_try(w);
}

static void worker_try(worker *w)
{
    if (dlock_async_acquire_for(w->a, RESOURCE, 5000, 3000, on_acquired, w, NULL) != DLOCK_OK) {
        atomic_fetch_add(&failures, 1);
        (*w->running)--;
    }
}

typedef struct blocking_arg {
    const redis_proc *rs;
    size_t n;
    int each;
} blocking_arg;

static void *blocking_worker(void *p)
{
    blocking_arg *b = p;
    dlock_client *c = tc_client(b->rs, b->n, 0);

    if (c == NULL) {
        atomic_fetch_add(&failures, b->each);
        return NULL;
    }
    for (int i = 0; i < b->each; i++) {
        dlock_lock *l = NULL;
        dlock_err rc = DLOCK_ERR_TAKEN;

        /* Held by others all the wait: wait again (bounded). */
        for (int tries = 0; tries < 20 && rc == DLOCK_ERR_TAKEN; tries++)
            rc = dlock_acquire_for(c, RESOURCE, 5000, 3000, &l);
        if (rc != DLOCK_OK) {
            atomic_fetch_add(&failures, 1);
            continue;
        }
        enter_section(dlock_lock_fence(l));
        test_sleep_ms(2);
        leave_section();
        if (dlock_release(c, l) != DLOCK_OK)
            atomic_fetch_add(&failures, 1);
        dlock_lock_free(l);
    }
    dlock_client_free(c);
    return NULL;
}

static void on_turn(uv_timer_t *h)
{
    (void)h;
}

int async_history_run(uv_loop_t *loop, const dlock_loop *hooks, const redis_proc *rs, size_t n,
                      int async_workers, int blocking_workers, int each, int64_t timeout_ms,
                      async_history *out)
{
    static worker ws[MAX_WORKERS];
    pthread_t th[MAX_THREADS];
    blocking_arg ba = {rs, n, each};
    dlock_options o;
    tc_addrs addrs;
    dlock_async *a = NULL;
    char err[DLOCK_ERRSTR_LEN];
    uv_timer_t turn;
    int running = async_workers, started = 0, rc = 0;
    int64_t until = test_now_ms() + timeout_ms;

    memset(out, 0, sizeof(*out));
    atomic_store(&holders, 0);
    atomic_store(&last_fence, 0);
    atomic_store(&overlaps, 0);
    atomic_store(&fence_regressions, 0);
    atomic_store(&sections, 0);
    atomic_store(&failures, 0);
    if (async_workers > MAX_WORKERS || blocking_workers > MAX_THREADS)
        return -1;
    tc_options(&o, &addrs, rs, n);
    if (dlock_async_new(&o, hooks, &a, err, sizeof err) != DLOCK_OK)
        return -1;
    for (; started < blocking_workers; started++)
        if (pthread_create(&th[started], NULL, blocking_worker, &ba) != 0) {
            rc = -1;
            break;
        }
    uv_timer_init(loop, &turn);
    uv_timer_start(&turn, on_turn, 20, 20); /* bounds each turn of the loop */
    for (int i = 0; i < async_workers; i++) {
        ws[i] = (worker){.a = a, .left = each, .running = &running};
        uv_timer_init(loop, &ws[i].hold);
        ws[i].hold.data = &ws[i];
        worker_next(&ws[i]);
    }
    while (running > 0 && test_now_ms() < until)
        uv_run(loop, UV_RUN_ONCE);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < async_workers; i++) {
        if (ws[i].lock != NULL) /* a section cut short by the time limit */
            dlock_lock_free(ws[i].lock);
        uv_close((uv_handle_t *)&ws[i].hold, NULL);
    }
    uv_close((uv_handle_t *)&turn, NULL);
    dlock_async_free(a);
    for (int i = 0; i < 10; i++)
        uv_run(loop, UV_RUN_NOWAIT);
    out->sections = atomic_load(&sections);
    out->overlaps = atomic_load(&overlaps);
    out->fence_regressions = atomic_load(&fence_regressions);
    out->failures = atomic_load(&failures);
    out->unfinished = running;
    return rc;
}
