/* lockstate.c - the lock service's quorum as last seen (lockstate.h). */
#include "core/lockstate.h"

#include <stdatomic.h>

/* The latest observation's code; DLOCK_OK for "a quorum answered". One
 * atomic store per observation: the last writer wins, which is what "as
 * last seen" means, and no claim waits on a mutex for it. */
static atomic_int last = DLOCK_OK;

void lockstate_note_acquire(dlock_err e)
{
    if (e == DLOCK_OK || e == DLOCK_ERR_TAKEN || e == DLOCK_ERR_EXPIRED)
        atomic_store_explicit(&last, DLOCK_OK, memory_order_relaxed);
    else if (e == DLOCK_ERR_FENCE_SYNC || dlock_err_is_unavailable(e))
        atomic_store_explicit(&last, (int)e, memory_order_relaxed);
}

void lockstate_note_probe(size_t up, size_t nodes)
{
    if (nodes == 0)
        return;
    atomic_store_explicit(&last, up >= nodes / 2 + 1 ? DLOCK_OK : DLOCK_ERR_NO_QUORUM, memory_order_relaxed);
}

dlock_err lockstate_last(void)
{
    return (dlock_err)atomic_load_explicit(&last, memory_order_relaxed);
}
