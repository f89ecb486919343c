/* guard.c - the way into every public call on a client: the fork check,
 * the client mutex, a fresh error text. Every call file uses it, so it sits
 * below them all (client.c makes the client; this only lets calls in). */
#include "dlock_internal.h"

#include <unistd.h>

int dlock__forked(const dlock_client *c)
{
    return getpid() != c->pid;
}

int dlock__enter(dlock_client *c, const char *op)
{
    if (dlock__forked(c)) {
        /* Refused, not reconnected:
         * - the child's copy of the mutex may be locked for ever (a thread
         *   of the parent held it at the fork);
         * - its connections are shared with the parent (both would read
         *   the same replies);
         * - its watchdog did not come along.
         * The child is one thread now: writing its own errstr copy races
         * nobody. */
        dlock__errf(c->errstr, "%s: this client was made by process %ld and used in process %ld "
                    "after fork(); make a new client in the child", op, (long)c->pid,
                    (long)getpid());
        return -1;
    }
    pthread_mutex_lock(&c->mu);
    c->errstr[0] = '\0';
    return 0;
}
