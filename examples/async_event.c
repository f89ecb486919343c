/* async_event.c - a lock on a libevent loop: while a first acquire is in
 * flight the loop serves a 10 ms heartbeat; an acquire that waits behind
 * the held lock is cancelled; 100 ms of work later the lock is extended,
 * then released, and the heartbeat never stopped.
 *
 *   cc async_event.c $(pkg-config --cflags --libs dlock libevent) -Wl,-rpath,$(pkg-config --variable=libdir dlock) -o async_event
 *   ./async_event redis://127.0.0.1:6379 redis://127.0.0.1:6380 redis://127.0.0.1:6381
 *
 * Exit 0 when every step went as described; 1 otherwise. */
#include <event2/event.h>
#include <stdio.h>

#include <dlock.h>
#include <dlock_event.h>

struct state {
    struct event_base *base;
    dlock_async *client;
    dlock_lock *lock;
    struct event *heartbeat, *work;
    int beats, steps;
};

/* The end, good or bad: freeing the client from one of its callbacks is
 * allowed (done when the callback returns); with the heartbeat gone the
 * loop has nothing left and event_base_dispatch returns. */
static void finish(struct state *s, const char *why)
{
    if (why != NULL)
        fprintf(stderr, "async_event: %s\n", why);
    dlock_lock_free(s->lock);
    s->lock = NULL;
    dlock_async_free(s->client);
    s->client = NULL;
    event_del(s->heartbeat);
    event_del(s->work);
}

static void on_beat(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ((struct state *)arg)->beats++;
}

static void released(dlock_async *c, dlock_err rc, const char *detail, void *arg)
{
    struct state *s = arg;

    (void)c;
    s->steps += rc == DLOCK_OK;
    finish(s, rc == DLOCK_OK ? NULL : detail);
}

static void extended(dlock_async *c, dlock_err rc, const char *detail, void *arg)
{
    struct state *s = arg;

    if (rc != DLOCK_OK) {
        finish(s, detail);
        return;
    }
    s->steps++;
    printf("extended: valid for %lld ms more\n", (long long)dlock_lock_validity_ms(s->lock));
    if (dlock_async_release(c, s->lock, released, s) != DLOCK_OK)
        finish(s, "release refused");
}

static void waited(dlock_async *client, dlock_err rc, dlock_lock *lock, const char *detail, void *arg)
{
    struct state *s = arg;

    (void)client;

    dlock_lock_free(lock); /* NULL: it never got the lock */
    printf("waiting acquire: %s (%s)\n", dlock_strerror(rc), detail);
    if (rc != DLOCK_ERR_CANCELLED) {
        finish(s, "the waiting acquire was not cancelled");
        return;
    }
    s->steps++;
    /* 100 ms of work under the lock: the loop keeps beating meanwhile. */
    {
        struct timeval t = {0, 100000};

        if (event_add(s->work, &t) != 0)
            finish(s, "no timer for the work");
    }
}

static void work_done(evutil_socket_t fd, short what, void *arg)
{
    struct state *s = arg;

    (void)fd;
    (void)what;
    if (dlock_async_extend(s->client, s->lock, 20000, extended, s) != DLOCK_OK)
        finish(s, "extend refused");
}

static void acquired(dlock_async *c, dlock_err rc, dlock_lock *lock, const char *detail,
                     void *arg)
{
    struct state *s = arg;
    dlock_async_op *op = NULL;

    if (rc != DLOCK_OK) {
        finish(s, detail);
        return;
    }
    s->lock = lock;
    s->steps++;
    printf("holding %s on a quorum, fence %llu; %d heartbeats so far\n",
           dlock_lock_resource(lock), (unsigned long long)dlock_lock_fence(lock), s->beats);
    /* A second acquire of the held lock can only wait: cancelled at once,
     * between its attempts, its callback fires inside the cancel. */
    if (dlock_async_acquire_for(c, "inventory:sync", 10000, 5000, waited, s, &op) != DLOCK_OK)
        finish(s, "second acquire refused");
    else
        dlock_async_cancel(c, op);
}

int main(int argc, char **argv)
{
    struct state s = {0};
    struct timeval ten_ms = {0, 10000};
    dlock_options opts;
    dlock_loop hooks;
    char err[DLOCK_ERRSTR_LEN];

    if (argc < 2) {
        fprintf(stderr, "usage: %s redis://host:port [redis://host:port ...]\n", argv[0]);
        return 2;
    }
    s.base = event_base_new();
    if (s.base == NULL)
        return 1;
    s.heartbeat = event_new(s.base, -1, EV_PERSIST, on_beat, &s);
    s.work = evtimer_new(s.base, work_done, &s);
    if (s.heartbeat == NULL || s.work == NULL || event_add(s.heartbeat, &ten_ms) != 0)
        return 1;
    dlock_options_init(&opts);
    opts.addrs = (const char *const *)&argv[1];
    opts.n_addrs = (size_t)(argc - 1);
    dlock_loop_event(&hooks, s.base);
    if (dlock_async_new(&opts, &hooks, &s.client, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "async_event: %s\n", err);
        return 1;
    }
    if (dlock_async_acquire_for(s.client, "inventory:sync", 10000, 2000, acquired, &s, NULL) !=
        DLOCK_OK)
        return 1;
    event_base_dispatch(s.base);
    printf("%d heartbeats while the lock was taken, extended and released\n", s.beats);
    event_free(s.heartbeat);
    event_free(s.work);
    event_base_free(s.base);
    return s.steps == 4 && s.beats > 0 ? 0 : 1;
}
