/* renew_with_on_lost.c - work for longer than the TTL: the client's
 * watchdog renews the lock every third of its TTL, and tells us through
 * on_lost if a renewal finds the lock gone (expired while the process
 * stalled, taken over), so the work stops instead of going on unprotected.
 *
 *   cc renew_with_on_lost.c $(pkg-config --cflags --libs dlock) -Wl,-rpath,$(pkg-config --variable=libdir dlock) -o renew_with_on_lost
 *   ./renew_with_on_lost redis://127.0.0.1:6379
 *
 * Works 3 s under a 1 s TTL; exit 0 when the lock was renewed throughout
 * and released. */
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#include <dlock.h>

static atomic_int lost;

/* Called from the watchdog thread: keep it short, and never free the lock
 * here; the worker sees the flag (or dlock_is_held) and stops. */
static void on_lost(const dlock_lock *lock, dlock_err why, void *user)
{
    (void)user;
    fprintf(stderr, "renew_with_on_lost: lost %s: %s\n", dlock_lock_resource(lock),
            dlock_strerror(why));
    atomic_store(&lost, 1);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    const char *addrs[1];
    dlock_options opts;
    dlock_renew_options ropts = {0};
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    char err[DLOCK_ERRSTR_LEN];
    int steps = 0;
    dlock_err rc;

    if (argc != 2) {
        fprintf(stderr, "usage: %s redis://host:port\n", argv[0]);
        return 2;
    }
    addrs[0] = argv[1];
    dlock_options_init(&opts);
    opts.addrs = addrs;
    opts.n_addrs = 1;
    if (dlock_client_new(&opts, &c, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "renew_with_on_lost: %s\n", err);
        return 1;
    }
    rc = dlock_acquire_for(c, "job:reindex", 1000, 2000, &lock);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "renew_with_on_lost: %s\n", dlock_strerror(rc));
        dlock_client_free(c);
        return 1;
    }
    ropts.on_lost = on_lost;
    if (dlock_auto_renew(c, lock, &ropts) != DLOCK_OK) {
        fprintf(stderr, "renew_with_on_lost: %s\n", dlock_client_errstr(c, err, sizeof err));
        dlock_release(c, lock);
        dlock_lock_free(lock);
        dlock_client_free(c);
        return 1;
    }
    /* 30 steps of 100 ms: 3 TTLs. Check before each step, not only at the
     * end: work done after the lock is gone is work another owner may be
     * doing too. */
    while (steps < 30 && !atomic_load(&lost) && dlock_is_held(lock)) {
        sleep_ms(100);
        steps++;
    }
    printf("%d steps of 100 ms under a 1000 ms TTL, %u renewals\n", steps,
           (unsigned)dlock_lock_renewals(lock));
    rc = dlock_release(c, lock); /* stops the renewal too */
    dlock_lock_free(lock);
    dlock_client_free(c);
    return steps == 30 && rc == DLOCK_OK ? 0 : 1;
}
