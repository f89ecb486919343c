/* outcome.c - which lock error and which store status answers which row of
 * the claim outcome table (outcome.h): the only place that decides it. */
#include "outcome.h"

static const claim_outcome ROWS[CLAIM__COUNT] = {
#define CLAIM_OUTCOME_ROW(row, label, http, code, retry, detail, msg) [CLAIM_##row] = {label, http, code, retry, detail, msg},
    CLAIM_OUTCOMES(CLAIM_OUTCOME_ROW)
#undef CLAIM_OUTCOME_ROW
};

static const char *const LOCK_ERROR_LABELS[LOCK_ERROR__COUNT] = {
#define LOCK_ERROR_LABEL(row, label) [LOCK_ERROR_##row] = label,
    LOCK_ERRORS(LOCK_ERROR_LABEL)
#undef LOCK_ERROR_LABEL
};

const claim_outcome *claim_outcome_of(claim_result r)
{
    return (unsigned)r < CLAIM__COUNT ? &ROWS[r] : &ROWS[CLAIM_ERROR];
}

const char *lock_error_label(lock_error_kind k)
{
    return (unsigned)k < LOCK_ERROR__COUNT ? LOCK_ERROR_LABELS[k] : "other";
}

claim_result claim_from_db(db_status st)
{
    switch (st) {
    case DB_OK: return CLAIM_OK;
    case DB_NOT_FOUND: return CLAIM_NOT_FOUND;
    case DB_SOLD_OUT: return CLAIM_SOLD_OUT;
    case DB_USER_LIMIT: return CLAIM_USER_LIMIT;
    /* A newer holder read or wrote first: the 1010 row, not an error (the
     * fence did its job) and not a verdict on the coupon (409). */
    case DB_STALE_FENCE: return CLAIM_STALE_FENCE;
    /* SQLite locked past the busy timeout is a backing service momentarily
     * unavailable, like a Redis without quorum: 503 / 1006, not a defect
     * (500) that retrying cannot fix. */
    case DB_BUSY: return CLAIM_DB_BUSY;
    case DB_INVALID: return CLAIM_INVALID;
    case DB_ERROR: return CLAIM_ERROR;
    }
    return CLAIM_ERROR;
}

claim_result claim_from_lock(dlock_err e, lock_error_kind *kind)
{
    switch (e) {
    /* Contention, not an outage: someone else held it until our deadline. */
    case DLOCK_ERR_TAKEN: *kind = LOCK_ERROR_TIMEOUT; return CLAIM_LOCK_TIMEOUT;
    /* A quorum granted it, but the round took so long that no validity was
     * left: a slow contended round, retried like contention. */
    case DLOCK_ERR_EXPIRED: *kind = LOCK_ERROR_EXPIRED; return CLAIM_LOCK_TIMEOUT;
    /* The nodes that granted the lock did not all take the fence sync: a
     * lock service outage (1006) like a missing quorum, counted apart so
     * an operator looks at the lagging nodes' counters, not at quorum. */
    case DLOCK_ERR_FENCE_SYNC: *kind = LOCK_ERROR_FENCE_SYNC; return CLAIM_LOCK_UNAVAILABLE;
    default: break;
    }
    /* No quorum, unreachable, timing out, refused auth, protocol errors:
     * the lock service is down, so the claim is refused, never guessed. */
    if (dlock_err_is_unavailable(e)) {
        *kind = LOCK_ERROR_UNAVAILABLE;
        return CLAIM_LOCK_UNAVAILABLE;
    }
    *kind = LOCK_ERROR_OTHER;
    return CLAIM_ERROR;
}

claim_result claim_from_wait(claim_result waited, dlock_err last_seen, lock_error_kind *kind)
{
    /* The wait ended while the service had no quorum: waiting longer would
     * not have helped, and the client must hear that the service is down
     * (1006), as the claim that saw it failing did, not "held by others". */
    if (last_seen != DLOCK_OK && claim_from_lock(last_seen, kind) == CLAIM_LOCK_UNAVAILABLE)
        return CLAIM_LOCK_UNAVAILABLE;
    *kind = LOCK_ERROR_TIMEOUT;
    return waited;
}
