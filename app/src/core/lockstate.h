/* lockstate.h - whether the lock service had a quorum, as this server last
 * saw it: from the latest acquisition of any claim, or the latest probe
 * (lockwatch.c), whichever came last.
 *
 * Why: a claim whose wait ends before an acquisition of its own has
 * answered (queued behind another claim of its coupon, or in the claim
 * queue) has only this to go by. Without it such a claim was told 1005
 * ("held by others until your wait ran out") while the nodes were down:
 * with 2 of 3 nodes stopped, 89 of 100 claims answered 1005, not 1006
 * (app_outcomes/quorum_lost_*). */
#ifndef APP_LOCKSTATE_H
#define APP_LOCKSTATE_H

#include <stddef.h>

#include "dlock.h"

/* One finished acquisition: OK, TAKEN and EXPIRED mean a quorum answered;
 * an unavailable code (dlock_err_is_unavailable) or FENCE_SYNC means the
 * service failed; other codes (ARG, NOMEM) say nothing and are ignored.
 * Thread-safe, lock-free. */
void lockstate_note_acquire(dlock_err e);
/* One probe: up of nodes answered (quorum nodes / 2 + 1). Thread-safe. */
void lockstate_note_probe(size_t up, size_t nodes);
/* The latest observation: DLOCK_OK when a quorum answered (or nothing was
 * seen yet), else the code of the failure (NO_QUORUM for a probe). */
dlock_err lockstate_last(void);

#endif /* APP_LOCKSTATE_H */
