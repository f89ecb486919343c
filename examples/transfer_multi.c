/* transfer_multi.c - two resources as one lock: a transfer between two
 * accounts holds both or neither. dlock_acquire_multi takes every key in
 * one atomic script per node, so two transfers {a,b} and {b,a} can never
 * deadlock, whatever order they name them in.
 *
 *   cc transfer_multi.c $(pkg-config --cflags --libs dlock) -Wl,-rpath,$(pkg-config --variable=libdir dlock) -o transfer_multi
 *   ./transfer_multi redis://127.0.0.1:6379
 *
 * Exit 0 when the pair was taken (each with its own fence) and released. */
#include <stdio.h>

#include <dlock.h>

int main(int argc, char **argv)
{
    const char *addrs[1];
    const char *accounts[2] = {"account:17", "account:42"};
    dlock_options opts;
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    char err[DLOCK_ERRSTR_LEN];
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
        fprintf(stderr, "transfer_multi: %s\n", err);
        return 1;
    }
    rc = dlock_acquire_multi_for(c, accounts, 2, 5000, 2000, &lock);
    if (rc != DLOCK_OK) {
        fprintf(stderr, "transfer_multi: %s: %s\n", dlock_strerror(rc),
                dlock_client_errstr(c, err, sizeof err));
        dlock_client_free(c);
        return 1;
    }
    /* Each resource keeps its own fence counter: write each account's row
     * with its own fence. */
    for (size_t i = 0; i < dlock_lock_count(lock); i++)
        printf("%s fence %llu\n", dlock_lock_resource_of(lock, i),
               (unsigned long long)dlock_lock_fence_of(lock, i));
    rc = dlock_release(c, lock);
    dlock_lock_free(lock);
    dlock_client_free(c);
    return rc == DLOCK_OK ? 0 : 1;
}
