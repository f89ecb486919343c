/* dlock_uv.h - the event-loop client (dlock_async_*, dlock.h) on libuv.
 *
 *   dlock_loop loop;
 *   dlock_loop_uv(&loop, uv_default_loop());
 *   dlock_async_new(&opts, &loop, &client, err, sizeof err);
 *
 * Header-only, as hiredis's own adapters: libdlock itself links no event
 * library; the program that includes this links libuv (pkg-config libuv).
 * Every watch and timer is a libuv handle, closed with uv_close and freed
 * in its close callback, so run the loop once more after dlock_async_free
 * (uv_run(loop, UV_RUN_NOWAIT)) before uv_loop_close. */
#ifndef DLOCK_UV_H
#define DLOCK_UV_H

#include <stdint.h>
#include <stdlib.h>
#include <uv.h>

#include "dlock.h"

typedef struct dlock__uv_watch {
    uv_poll_t poll; /* first: the handle's address is the struct's */
    void (*cb)(void *arg, int events);
    void *arg;
} dlock__uv_watch;

typedef struct dlock__uv_timer {
    uv_timer_t timer; /* first, as above */
    void (*cb)(void *arg);
    void *arg;
} dlock__uv_timer;

static inline void dlock__uv_free_handle(uv_handle_t *h)
{
    free(h->data);
}

static inline void dlock__uv_poll_cb(uv_poll_t *h, int status, int events)
{
    dlock__uv_watch *w = (dlock__uv_watch *)h->data;
    int ev = 0;

    /* An error on the socket: hiredis finds it by reading or writing. */
    if (status < 0)
        ev = DLOCK_LOOP_READ | DLOCK_LOOP_WRITE;
    if (events & UV_READABLE)
        ev |= DLOCK_LOOP_READ;
    if (events & UV_WRITABLE)
        ev |= DLOCK_LOOP_WRITE;
    w->cb(w->arg, ev);
}

static inline void *dlock__uv_watch_new(void *loop, int fd, void (*cb)(void *arg, int events), void *arg)
{
    dlock__uv_watch *w = (dlock__uv_watch *)calloc(1, sizeof(*w));

    if (w == NULL)
        return NULL;
    if (uv_poll_init((uv_loop_t *)loop, &w->poll, fd) != 0) {
        free(w);
        return NULL;
    }
    w->poll.data = w;
    w->cb = cb;
    w->arg = arg;
    return w;
}

static inline void dlock__uv_watch_set(void *p, int events)
{
    dlock__uv_watch *w = (dlock__uv_watch *)p;
    int flags = ((events & DLOCK_LOOP_READ) ? UV_READABLE : 0) |
                ((events & DLOCK_LOOP_WRITE) ? UV_WRITABLE : 0);

    if (flags == 0)
        (void)uv_poll_stop(&w->poll);
    else
        (void)uv_poll_start(&w->poll, flags, dlock__uv_poll_cb);
}

static inline void dlock__uv_watch_free(void *p)
{
    dlock__uv_watch *w = (dlock__uv_watch *)p;

    (void)uv_poll_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, dlock__uv_free_handle);
}

static inline void dlock__uv_timer_cb(uv_timer_t *h)
{
    dlock__uv_timer *t = (dlock__uv_timer *)h->data;

    t->cb(t->arg);
}

static inline void *dlock__uv_timer_new(void *loop, void (*cb)(void *arg), void *arg)
{
    dlock__uv_timer *t = (dlock__uv_timer *)calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    if (uv_timer_init((uv_loop_t *)loop, &t->timer) != 0) {
        free(t);
        return NULL;
    }
    t->timer.data = t;
    t->cb = cb;
    t->arg = arg;
    return t;
}

static inline void dlock__uv_timer_set(void *p, int64_t after_ms)
{
    dlock__uv_timer *t = (dlock__uv_timer *)p;

    (void)uv_timer_start(&t->timer, dlock__uv_timer_cb, after_ms > 0 ? (uint64_t)after_ms : 0, 0);
}

static inline void dlock__uv_timer_stop(void *p)
{
    (void)uv_timer_stop(&((dlock__uv_timer *)p)->timer);
}

static inline void dlock__uv_timer_free(void *p)
{
    dlock__uv_timer *t = (dlock__uv_timer *)p;

    (void)uv_timer_stop(&t->timer);
    uv_close((uv_handle_t *)&t->timer, dlock__uv_free_handle);
}

/* Fills out with hooks onto loop. 0, or -1 for a NULL argument. */
static inline int dlock_loop_uv(dlock_loop *out, uv_loop_t *loop)
{
    if (out == NULL || loop == NULL)
        return -1;
    out->loop = loop;
    out->watch_new = dlock__uv_watch_new;
    out->watch_set = dlock__uv_watch_set;
    out->watch_free = dlock__uv_watch_free;
    out->timer_new = dlock__uv_timer_new;
    out->timer_set = dlock__uv_timer_set;
    out->timer_stop = dlock__uv_timer_stop;
    out->timer_free = dlock__uv_timer_free;
    return 0;
}

#endif /* DLOCK_UV_H */
