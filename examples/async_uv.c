/* async_uv.c - a lock taken from a libuv loop that never blocks: the loop
 * keeps serving a 10 ms timer while the lock is acquired, a second acquire
 * of the same lock waits and is cancelled, then the lock is released.
 *
 *   cc async_uv.c $(pkg-config --cflags --libs dlock libuv) -Wl,-rpath,$(pkg-config --variable=libdir dlock) -o async_uv
 *   ./async_uv redis://127.0.0.1:6379 [more masters for Redlock]
 *
 * Exit 0 when the lock was taken, the waiter cancelled and the lock
 * released while the timer kept ticking; 1 otherwise. */
#include <stdio.h>
#include <uv.h>

#include <dlock.h>
#include <dlock_uv.h>

typedef struct app {
    dlock_async *client;
    dlock_lock *lock;        /* the first acquire's lock, while held */
    dlock_async_op *waiter;  /* the second acquire, until cancelled */
    uv_timer_t tick, cancel;
    int ticks, ok;
} app;

static void on_tick(uv_timer_t *t)
{
    ((app *)t->data)->ticks++;
}

/* Nothing left to do: the client's connections and our timers go, so
 * uv_run returns. Freeing the client from its own callback is allowed: it
 * happens when the callback returns. */
static void done(app *s)
{
    dlock_async_free(s->client);
    s->client = NULL;
    uv_timer_stop(&s->tick);
    uv_timer_stop(&s->cancel);
}

static void on_released(dlock_async *client, dlock_err rc, const char *detail, void *arg)
{
    app *s = arg;

    (void)client;
    if (rc != DLOCK_OK)
        fprintf(stderr, "async_uv: release: %s: %s\n", dlock_strerror(rc), detail);
    else
        s->ok++;
    dlock_lock_free(s->lock);
    s->lock = NULL;
    done(s);
}

static void on_waiter(dlock_async *client, dlock_err rc, dlock_lock *lock, const char *detail,
                      void *arg)
{
    app *s = arg;

    s->waiter = NULL;
    /* We hold the lock, so the second acquire can only wait; cancelled,
     * its callback still fires exactly once, saying so. */
    printf("second acquire: %s (%s)\n", dlock_strerror(rc), detail);
    if (rc == DLOCK_ERR_CANCELLED)
        s->ok++;
    dlock_lock_free(lock);
    if (dlock_async_release(client, s->lock, on_released, s) != DLOCK_OK)
        done(s);
}

static void on_cancel_timer(uv_timer_t *t)
{
    app *s = t->data;

    if (s->waiter != NULL)
        dlock_async_cancel(s->client, s->waiter);
}

static void on_first(dlock_async *client, dlock_err rc, dlock_lock *lock, const char *detail,
                     void *arg)
{
    app *s = arg;

    if (rc != DLOCK_OK) {
        /* TAKEN, or Redis did not answer: never "I have the lock". */
        fprintf(stderr, "async_uv: acquire: %s: %s\n", dlock_strerror(rc), detail);
        done(s);
        return;
    }
    s->lock = lock;
    s->ok++;
    printf("holding %s, fence %llu, after %d ticks of the 10 ms timer\n",
           dlock_lock_resource(lock), (unsigned long long)dlock_lock_fence(lock), s->ticks);
    /* The same lock again, waiting up to 5 s; cancelled after 50 ms. */
    if (dlock_async_acquire_for(client, "report:daily", 10000, 5000, on_waiter, s,
                                &s->waiter) != DLOCK_OK) {
        done(s);
        return;
    }
    uv_timer_start(&s->cancel, on_cancel_timer, 50, 0);
}

int main(int argc, char **argv)
{
    uv_loop_t *loop = uv_default_loop();
    dlock_loop hooks;
    dlock_options opts;
    char err[DLOCK_ERRSTR_LEN];
    app s = {0};

    if (argc < 2) {
        fprintf(stderr, "usage: %s redis://host:port [redis://host:port ...]\n", argv[0]);
        return 2;
    }
    dlock_options_init(&opts);
    opts.addrs = (const char *const *)&argv[1];
    opts.n_addrs = (size_t)(argc - 1);
    dlock_loop_uv(&hooks, loop);
    if (dlock_async_new(&opts, &hooks, &s.client, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "async_uv: %s\n", err);
        return 1;
    }
    uv_timer_init(loop, &s.tick);
    uv_timer_init(loop, &s.cancel);
    s.tick.data = s.cancel.data = &s;
    uv_timer_start(&s.tick, on_tick, 10, 10);
    /* Returns at once; on_first fires from the loop. */
    if (dlock_async_acquire_for(s.client, "report:daily", 10000, 2000, on_first, &s, NULL) !=
        DLOCK_OK) {
        fprintf(stderr, "async_uv: acquire refused\n");
        return 1;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    printf("the timer ticked %d times meanwhile\n", s.ticks);
    uv_close((uv_handle_t *)&s.tick, NULL);
    uv_close((uv_handle_t *)&s.cancel, NULL);
    uv_run(loop, UV_RUN_DEFAULT); /* the closes (ours and the client's) complete */
    if (uv_loop_close(loop) != 0)
        fprintf(stderr, "async_uv: the loop still has handles\n");
    return s.ok == 3 && s.ticks > 0 ? 0 : 1;
}
