/* skew_waiter.c - one Redlock waiter in a process of its own, so that the
 * test can give it a wall clock of its own (the clockshift shim, preloaded
 * by lock_handoff_faults): dlock_acquire_for on the nodes given, with
 * wake_on_release, then release. Prints "<dlock_err> <ms waited>" and exits
 * 0, or 2 on bad arguments or when no client could be made.
 * usage: lock_skew_waiter RESOURCE TTL_MS WAIT_MS ADDR... */
#include <stdio.h>
#include <stdlib.h>

#include "dlock.h"

int main(int argc, char **argv)
{
    dlock_options o;
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    char err[DLOCK_ERRSTR_LEN] = "";
    int64_t t0;
    dlock_err rc;

    if (argc < 5 || argc - 4 > DLOCK_MAX_NODES) {
        fprintf(stderr, "usage: %s RESOURCE TTL_MS WAIT_MS ADDR...\n", argv[0]);
        return 2;
    }
    dlock_options_init(&o);
    o.addrs = (const char *const *)(argv + 4);
    o.n_addrs = (size_t)(argc - 4);
    o.wake_on_release = 1;
    if (dlock_client_new(&o, &c, err, sizeof err) != DLOCK_OK) {
        fprintf(stderr, "skew_waiter: %s\n", err);
        return 2;
    }
    t0 = dlock_now_ms();
    rc = dlock_acquire_for(c, argv[1], (uint32_t)strtoul(argv[2], NULL, 10),
                           strtoll(argv[3], NULL, 10), &lock);
    printf("%d %lld\n", (int)rc, (long long)(dlock_now_ms() - t0));
    if (rc == DLOCK_OK) {
        (void)dlock_release(c, lock);
        dlock_lock_free(lock);
    } else {
        fprintf(stderr, "skew_waiter: %s\n", dlock_client_errstr(c, err, sizeof err));
    }
    dlock_client_free(c);
    return 0;
}
