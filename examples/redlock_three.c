/* redlock_three.c - Redlock over three independent masters (not replicas of
 * one another): the lock is ours when a majority (2 of 3) granted it, and
 * its validity is the TTL minus the time the round took and the clock
 * drift allowance. One master down changes nothing for the caller.
 *
 *   cc redlock_three.c $(pkg-config --cflags --libs dlock) -Wl,-rpath,$(pkg-config --variable=libdir dlock) -o redlock_three
 *   ./redlock_three redis://h1:6379 redis://h2:6379 redis://h3:6379
 *
 * Exit 0 when the lock was taken on a quorum and released. */
#include <stdio.h>

#include <dlock.h>

int main(int argc, char **argv)
{
    dlock_options opts;
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    char err[DLOCK_ERRSTR_LEN];
    size_t up = 0;
    dlock_err rc;

    if (argc != 4) {
        fprintf(stderr, "usage: %s URL1 URL2 URL3\n", argv[0]);
        return 2;
    }
    dlock_options_init(&opts);
    opts.addrs = (const char *const *)(argv + 1);
    opts.n_addrs = 3;
    if (dlock_client_new(&opts, &c, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "redlock_three: %s\n", err);
        return 1;
    }
    /* How many masters answer now; the lock needs dlock_client_quorum(c). */
    (void)dlock_ping(c, &up);
    printf("%zu of %zu masters up, quorum %zu\n", up, dlock_client_nodes(c), dlock_client_quorum(c));
    rc = dlock_acquire_for(c, "invoice:2026-11", 5000, 2000, &lock);
    if (rc != DLOCK_OK) {
        /* NO_QUORUM (too few masters answered) is not TAKEN: report it as
         * an outage, never proceed. */
        fprintf(stderr, "redlock_three: %s: %s\n", dlock_strerror(rc),
                dlock_client_errstr(c, err, sizeof err));
        dlock_client_free(c);
        return 1;
    }
    printf("holding on a quorum: fence %llu, valid for %lld ms\n",
           (unsigned long long)dlock_lock_fence(lock), (long long)dlock_lock_validity_ms(lock));
    rc = dlock_release(c, lock);
    dlock_lock_free(lock);
    dlock_client_free(c);
    return rc == DLOCK_OK ? 0 : 1;
}
