/* consumer.c - a program outside the build tree using the installed libdlock:
 * the header compiles standalone, the library links, and a call works. */
#include <dlock.h>

#include <stdio.h>
#include <string.h>

int main(void)
{
    /* Port 1 on loopback: nothing listens, so the connection is refused at
     * once and the call must report the node unreachable, not hang. */
    const char *addrs[1] = {"127.0.0.1:1"};
    dlock_options opts;
    dlock_client *c = NULL;
    dlock_lock *lock = NULL;
    char err[DLOCK_ERRSTR_LEN];
    dlock_err rc;
    int status = 1;

    printf("dlock %d.%d.%d\n", DLOCK_VERSION_MAJOR, DLOCK_VERSION_MINOR, DLOCK_VERSION_PATCH);
    dlock_options_init(&opts);
    opts.addrs = addrs;
    opts.n_addrs = 1;
    rc = dlock_client_new(&opts, &c, err, sizeof(err));
    if (rc != DLOCK_OK) {
        printf("client_new: %s: %s\n", dlock_strerror(rc), err);
        goto out;
    }
    rc = dlock_try_acquire(c, "install-test", 1000, &lock);
    printf("try_acquire: %s (%s)\n", dlock_strerror(rc), dlock_client_errstr(c));
    if (rc != DLOCK_ERR_UNREACHABLE || lock != NULL || !dlock_err_is_unavailable(rc))
        goto out;
    if (strcmp(dlock_strerror(DLOCK_OK), "success") != 0)
        goto out;
    printf("consumer ok\n");
    status = 0;
out:
    dlock_lock_free(lock);
    dlock_client_free(c);
    return status;
}
