/* take_a_lock.c - the first program: take a lock on one Redis, work under
 * it, release it.
 *
 *   cc take_a_lock.c $(pkg-config --cflags --libs dlock) -Wl,-rpath,$(pkg-config --variable=libdir dlock) -o take_a_lock
 *   ./take_a_lock redis://127.0.0.1:6379
 *
 * Exit 0 when the lock was taken and released, 1 otherwise. */
#include <stdio.h>

#include <dlock.h>

int main(int argc, char **argv)
{
    const char *addrs[1];
    dlock_options opts;
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    char err[DLOCK_ERRSTR_LEN];
    dlock_err rc;

    if (argc != 2) {
        fprintf(stderr, "usage: %s redis://[user:password@]host:port\n", argv[0]);
        return 2;
    }
    addrs[0] = argv[1];
    dlock_options_init(&opts); /* every default: timeouts, retry, wake on release */
    opts.addrs = addrs;
    opts.n_addrs = 1;
    if (dlock_client_new(&opts, &c, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "take_a_lock: %s\n", err);
        return 1;
    }
    /* Hold it 10 s at most (the TTL: if this process dies, Redis frees the
     * lock by itself then), and wait at most 2 s for it. */
    rc = dlock_acquire_for(c, "report:daily", 10000, 2000, &lock);
    if (rc != DLOCK_OK) {
        /* TAKEN means another owner; the unavailable codes mean Redis did
         * not answer: never treat those as "I have the lock". */
        fprintf(stderr, "take_a_lock: %s: %s\n", dlock_strerror(rc),
                dlock_client_errstr(c, err, sizeof err));
        dlock_client_free(c);
        return 1;
    }
    /* The fence goes with every write the work makes (see fenced_workers.c);
     * the validity is how long the lock is certainly ours. */
    printf("holding %s, fence %llu, valid for %lld ms\n", dlock_lock_resource(lock),
           (unsigned long long)dlock_lock_fence(lock), (long long)dlock_lock_validity_ms(lock));
    rc = dlock_release(c, lock);
    if (rc != DLOCK_OK)
        fprintf(stderr, "take_a_lock: release: %s\n", dlock_strerror(rc));
    dlock_lock_free(lock);
    dlock_client_free(c);
    return rc == DLOCK_OK ? 0 : 1;
}
