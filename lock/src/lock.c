/* lock.c - the lock handle: accessors and dlock_lock_free. */
#include "dlock_internal.h"

#include <stdlib.h>

void dlock_lock_free(dlock_lock *lock)
{
    dlock_client *c;

    if (lock == NULL)
        return;
    /* Unregister before freeing, under the client mutex: the watchdog only
     * touches registered locks and only with that mutex, so it can never
     * renew (or call on_lost for) freed memory. */
    c = atomic_load(&lock->reg_client);
    if (c != NULL) {
        pthread_mutex_lock(&c->mu);
        dlock__renew_unregister_locked(c, lock);
        pthread_mutex_unlock(&c->mu);
    }
    free(lock->resource);
    free(lock);
}

const char *dlock_lock_resource(const dlock_lock *lock)
{
    return lock != NULL ? lock->resource : "";
}

const char *dlock_lock_token(const dlock_lock *lock)
{
    return lock != NULL ? lock->token : "";
}

uint64_t dlock_lock_fence(const dlock_lock *lock)
{
    return lock != NULL ? lock->fence : 0;
}

int64_t dlock_lock_valid_until_ms(const dlock_lock *lock)
{
    return lock != NULL ? atomic_load(&lock->valid_until_ms) : 0;
}

int64_t dlock_lock_validity_ms(const dlock_lock *lock)
{
    int64_t left;

    if (lock == NULL || atomic_load(&lock->state) != DLOCK__HELD)
        return 0;
    left = atomic_load(&lock->valid_until_ms) - dlock_now_ms();
    return left > 0 ? left : 0;
}

int dlock_is_held(const dlock_lock *lock)
{
    return dlock_lock_validity_ms(lock) > 0;
}

uint32_t dlock_lock_renewals(const dlock_lock *lock)
{
    return lock != NULL ? atomic_load(&lock->renewals) : 0;
}
