/* stats.c - the per-client counters snapshot. */
#include "dlock_internal.h"

#include <string.h>

void dlock_client_stats(dlock_client *c, dlock_stats *out)
{
    if (out == NULL)
        return;
    if (c == NULL) {
        memset(out, 0, sizeof(*out));
        return;
    }
    /* Copied under the mutex every counter is updated under: the snapshot
     * is consistent (attempts >= acquires, ...) and race-free. */
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    pthread_mutex_unlock(&c->mu);
}
