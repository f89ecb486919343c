/* dlock_event.h - the event-loop client (dlock_async_*, dlock.h) on
 * libevent 2.
 *
 *   dlock_loop loop;
 *   dlock_loop_event(&loop, base);
 *   dlock_async_new(&opts, &loop, &client, err, sizeof err);
 *
 * Header-only, as hiredis's own adapters: libdlock itself links no event
 * library; the program that includes this links libevent (pkg-config
 * libevent). Events are freed at once (event_free), so nothing is left
 * for the loop after dlock_async_free. */
#ifndef DLOCK_EVENT_H
#define DLOCK_EVENT_H

#include <event2/event.h>
#include <stdint.h>
#include <stdlib.h>

#include "dlock.h"

typedef struct dlock__ev_watch {
    struct event_base *base;
    struct event *ev; /* NULL while nothing is watched */
    evutil_socket_t fd;
    int events;
    void (*cb)(void *arg, int events);
    void *arg;
} dlock__ev_watch;

typedef struct dlock__ev_timer {
    struct event *ev;
    void (*cb)(void *arg);
    void *arg;
} dlock__ev_timer;

static inline void dlock__ev_io_cb(evutil_socket_t fd, short what, void *p)
{
    dlock__ev_watch *w = (dlock__ev_watch *)p;

    (void)fd;
    w->cb(w->arg, ((what & EV_READ) ? DLOCK_LOOP_READ : 0) |
                      ((what & EV_WRITE) ? DLOCK_LOOP_WRITE : 0));
}

static inline void *dlock__ev_watch_new(void *loop, int fd, void (*cb)(void *arg, int events), void *arg)
{
    dlock__ev_watch *w = (dlock__ev_watch *)calloc(1, sizeof(*w));

    if (w == NULL)
        return NULL;
    w->base = (struct event_base *)loop;
    w->fd = fd;
    w->cb = cb;
    w->arg = arg;
    return w;
}

/* One persistent event for what is watched now, made afresh on a change
 * (libevent allows freeing an event from inside its own callback). */
static inline void dlock__ev_watch_set(void *p, int events)
{
    dlock__ev_watch *w = (dlock__ev_watch *)p;
    short flags = (short)(((events & DLOCK_LOOP_READ) ? EV_READ : 0) |
                          ((events & DLOCK_LOOP_WRITE) ? EV_WRITE : 0));

    if (events == w->events && (w->ev != NULL || flags == 0))
        return;
    w->events = events;
    if (w->ev != NULL) {
        event_free(w->ev);
        w->ev = NULL;
    }
    if (flags == 0)
        return;
    w->ev = event_new(w->base, w->fd, (short)(flags | EV_PERSIST), dlock__ev_io_cb, w);
    if (w->ev != NULL && event_add(w->ev, NULL) != 0) {
        event_free(w->ev);
        w->ev = NULL;
    }
}

static inline void dlock__ev_watch_free(void *p)
{
    dlock__ev_watch *w = (dlock__ev_watch *)p;

    if (w->ev != NULL)
        event_free(w->ev);
    free(w);
}

static inline void dlock__ev_timer_cb(evutil_socket_t fd, short what, void *p)
{
    dlock__ev_timer *t = (dlock__ev_timer *)p;

    (void)fd;
    (void)what;
    t->cb(t->arg);
}

static inline void *dlock__ev_timer_new(void *loop, void (*cb)(void *arg), void *arg)
{
    dlock__ev_timer *t = (dlock__ev_timer *)calloc(1, sizeof(*t));

    if (t == NULL)
        return NULL;
    t->ev = evtimer_new((struct event_base *)loop, dlock__ev_timer_cb, t);
    if (t->ev == NULL) {
        free(t);
        return NULL;
    }
    t->cb = cb;
    t->arg = arg;
    return t;
}

static inline void dlock__ev_timer_set(void *p, int64_t after_ms)
{
    dlock__ev_timer *t = (dlock__ev_timer *)p;
    struct timeval tv;

    if (after_ms < 0)
        after_ms = 0;
    tv.tv_sec = (time_t)(after_ms / 1000);
    tv.tv_usec = (suseconds_t)((after_ms % 1000) * 1000);
    (void)evtimer_add(t->ev, &tv);
}

static inline void dlock__ev_timer_stop(void *p)
{
    (void)evtimer_del(((dlock__ev_timer *)p)->ev);
}

static inline void dlock__ev_timer_free(void *p)
{
    dlock__ev_timer *t = (dlock__ev_timer *)p;

    event_free(t->ev);
    free(t);
}

/* Fills out with hooks onto base. 0, or -1 for a NULL argument. */
static inline int dlock_loop_event(dlock_loop *out, struct event_base *base)
{
    if (out == NULL || base == NULL)
        return -1;
    out->loop = base;
    out->watch_new = dlock__ev_watch_new;
    out->watch_set = dlock__ev_watch_set;
    out->watch_free = dlock__ev_watch_free;
    out->timer_new = dlock__ev_timer_new;
    out->timer_set = dlock__ev_timer_set;
    out->timer_stop = dlock__ev_timer_stop;
    out->timer_free = dlock__ev_timer_free;
    return 0;
}

#endif /* DLOCK_EVENT_H */
