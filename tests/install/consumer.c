/* consumer.c - a program outside the build tree using the installed libdlock:
 * the header compiles standalone, the library links, and it locks for real.
 *
 * consumer ADDR: ADDR is a running redis-server ("unix:/path" or
 * "host:port"). Prints "consumer ok" and exits 0 only when every step did
 * what it must. */
#include <dlock.h>

#include <stdio.h>
#include <string.h>

/* Port 1 on loopback: nothing listens, so the connection is refused at once
 * and the call must report the node unreachable, not hang. */
static int unreachable_is_reported(void)
{
    const char *addrs[1] = {"127.0.0.1:1"};
    dlock_options opts;
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    char err[DLOCK_ERRSTR_LEN], detail[DLOCK_ERRSTR_LEN];
    dlock_err rc;
    int ok = 0;

    dlock_options_init(&opts);
    opts.addrs = addrs;
    opts.n_addrs = 1;
    rc = dlock_client_new(&opts, &c, err, sizeof(err));
    if (rc != DLOCK_OK) {
        printf("client_new: %s: %s\n", dlock_strerror(rc), err);
        return 0;
    }
    rc = dlock_try_acquire(c, "install-test", 1000, &lock);
    printf("unreachable try_acquire: %s (%s)\n", dlock_strerror(rc),
           dlock_client_errstr(c, detail, sizeof detail));
    ok = rc == DLOCK_ERR_UNREACHABLE && lock == NULL && dlock_err_is_unavailable(rc);
    dlock_lock_free(lock);
    dlock_client_free(c);
    return ok;
}

/* Acquire, see a second acquisition refused while held, release, and
 * acquire again with a larger fence. */
static int locks_for_real(const char *addr)
{
    const char *addrs[1] = {addr};
    dlock_options opts;
    dlock_client *c = NULL;
    dlock_lock *first = NULL, *second = NULL;
    char err[DLOCK_ERRSTR_LEN];
    dlock_err rc;
    int ok = 0;

    dlock_options_init(&opts);
    opts.addrs = addrs;
    opts.n_addrs = 1;
    /* A loaded CI machine may be slow to answer; the test is about linking. */
    opts.command_timeout_ms = 2000;
    rc = dlock_client_new(&opts, &c, err, sizeof(err));
    if (rc != DLOCK_OK) {
        printf("client_new %s: %s: %s\n", addr, dlock_strerror(rc), err);
        return 0;
    }
    rc = dlock_acquire(c, "install-test", 10000, dlock_now_ms() + 2000, &first);
    printf("acquire: %s, fence %llu\n", dlock_strerror(rc),
           first != NULL ? (unsigned long long)dlock_lock_fence(first) : 0ULL);
    if (rc != DLOCK_OK)
        goto out;
    /* A second client: the holding thread's own client would be told it
     * holds the lock already (not reentrant). */
    {
        dlock_client *c2 = NULL;

        if (dlock_client_new(&opts, &c2, err, sizeof(err)) != DLOCK_OK) {
            printf("client_new (second) %s: %s\n", addr, err);
            goto out;
        }
        rc = dlock_try_acquire(c2, "install-test", 10000, &second);
        printf("second client's try_acquire while held: %s\n", dlock_strerror(rc));
        dlock_client_free(c2);
        if (rc != DLOCK_ERR_TAKEN)
            goto out;
    }
    rc = dlock_release(c, first);
    printf("release: %s\n", dlock_strerror(rc));
    if (rc != DLOCK_OK)
        goto out;
    rc = dlock_try_acquire(c, "install-test", 10000, &second);
    printf("acquire after release: %s, fence %llu\n", dlock_strerror(rc),
           second != NULL ? (unsigned long long)dlock_lock_fence(second) : 0ULL);
    if (rc != DLOCK_OK || dlock_lock_fence(second) <= dlock_lock_fence(first))
        goto out;
    ok = dlock_release(c, second) == DLOCK_OK;
out:
    if (!ok)
        printf("detail: %s\n", dlock_client_errstr(c, err, sizeof err));
    dlock_lock_free(first);
    dlock_lock_free(second);
    dlock_client_free(c);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer REDIS_ADDR\n");
        return 2;
    }
    printf("dlock %d.%d.%d\n", DLOCK_VERSION_MAJOR, DLOCK_VERSION_MINOR, DLOCK_VERSION_PATCH);
    if (strcmp(dlock_strerror(DLOCK_OK), "success") != 0)
        return 1;
    if (!unreachable_is_reported() || !locks_for_real(argv[1]))
        return 1;
    printf("consumer ok\n");
    return 0;
}
