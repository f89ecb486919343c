/* outcome.h - the one table from every outcome of a claim to what the client
 * gets: HTTP status, the contract's code, the metric label, Retry-After.
 *
 * Three 503s, three different lessons, told apart on purpose:
 *   1005  contention: the lock was held by others until --lock-wait ran out,
 *         or the claim waited its --lock-wait out in the claim queue, or
 *         that queue was full (the overload row: so many claims wait ahead
 *         that this one could not get the lock in time either); the
 *         service is fine, retrying later may succeed;
 *   1006  a backing service is down: no quorum / Redis unreachable, or SQLite
 *         locked past its busy timeout; the server refuses, it never guesses.
 *         A claim whose wait ran out while the lock service had no quorum
 *         is told this too, not 1005 (claim_from_wait);
 *   1010  our lease ran out inside the critical section and a newer holder
 *         read the coupon first: the fence refused us and nothing was applied.
 * Which lock error (dlock_err) and which store status (db_status) lands on
 * which row is decided in outcome.c, and nowhere else. */
#ifndef APP_OUTCOME_H
#define APP_OUTCOME_H

#include "coupon_db.h"
#include "dlock.h"

#include "api.h"

/* detail: may the reply's msg carry this request's detail after the fixed
 * message? Only where the detail is about the request itself (which
 * argument, which user). Lock and store failures keep theirs for the
 * server's log (log.h): their text names Redis addresses, the database
 * file and SQLite's codes, which are the operator's business, not the
 * client's; the fixed message says all a client can act on. */
/*  row               metric label        HTTP code              Retry-After detail message */
#define CLAIM_OUTCOMES(X)                                                                                   \
    X(OK,               "ok",               200, API_OK,           0, 0, "ok")                               \
    X(NOT_FOUND,        "not_found",        404, API_NO_COUPON,    0, 0, "no such coupon")                   \
    X(SOLD_OUT,         "sold_out",         409, API_SOLD_OUT,     0, 0, "sold out")                         \
    X(USER_LIMIT,       "user_limit",       409, API_USER_LIMIT,   0, 1, "per-user limit of this coupon reached") \
    X(LOCK_TIMEOUT,     "lock_timeout",     503, API_LOCK_TIMEOUT, 1, 0, "lock not acquired in time, retry later") \
    X(QUEUE_TIMEOUT,    "queue_timeout",    503, API_LOCK_TIMEOUT, 1, 0,                                     \
      "lock not acquired in time: the whole wait passed in the claim queue, retry later")                 \
    X(OVERLOAD,         "overload",         503, API_LOCK_TIMEOUT, 1, 0,                                     \
      "too many claims waiting for the lock (--claim-queue is full), retry later")                        \
    X(STOPPING,         "stopping",         503, API_LOCK_TIMEOUT, 1, 0, "server stopping, retry later")     \
    X(LOCK_UNAVAILABLE, "lock_unavailable", 503, API_UNAVAILABLE,  1, 0, "lock service unavailable")         \
    X(DB_BUSY,          "db_busy",          503, API_UNAVAILABLE,  1, 0, "database busy, retry later")       \
    X(STALE_FENCE,      "stale_fence",      503, API_LEASE_LOST,   1, 0,                                     \
      "lock lost before the write; nothing was applied, retry later")                                       \
    X(INVALID,          "invalid",          400, API_BAD_PARAM,    0, 1, "invalid parameter")                \
    X(ERROR,            "error",            500, API_INTERNAL,     0, 0, "internal error")

typedef enum claim_result {
#define CLAIM_OUTCOME_ENUM(row, label, http, code, retry, detail, msg) CLAIM_##row,
    CLAIM_OUTCOMES(CLAIM_OUTCOME_ENUM)
#undef CLAIM_OUTCOME_ENUM
    CLAIM__COUNT
} claim_result;

typedef struct claim_outcome {
    const char *label;  /* coupon_claims_total{result=...} */
    unsigned http;      /* HTTP status */
    int code;           /* enum api_code */
    int retry_after;    /* the reply carries Retry-After: a retry may succeed */
    int detail;         /* the reply's msg may carry the request's detail */
    const char *msg;    /* the reply's msg, before any detail */
} claim_outcome;

/* The row of r (the ERROR row for an out-of-range value). */
const claim_outcome *claim_outcome_of(claim_result r);

/* Failed acquisitions as counted in coupon_lock_errors_total{kind=...}:
 * finer than the claim rows (TAKEN and EXPIRED both answer 1005), and one
 * count per claim that gave up on the lock, so the kinds add up to the
 * claims answered 1005 or 1006 by the lock. A store's fence refusal is no
 * lock error (coupon_claims_total{result="stale_fence"} counts it), and a
 * failed release is counted apart (coupon_lock_release_errors_total). */
#define LOCK_ERRORS(X)                                                                     \
    X(TIMEOUT, "timeout")         /* still taken at the deadline (or queued past it) */     \
    X(EXPIRED, "expired")         /* quorum reached but validity used up */                 \
    X(UNAVAILABLE, "unavailable") /* no quorum / unreachable / timeout / auth / protocol */ \
    X(FENCE_SYNC, "fence_sync")   /* a quorum granted it, its fence counters could not be synced */ \
    X(OTHER, "other")

typedef enum lock_error_kind {
#define LOCK_ERROR_ENUM(row, label) LOCK_ERROR_##row,
    LOCK_ERRORS(LOCK_ERROR_ENUM)
#undef LOCK_ERROR_ENUM
    LOCK_ERROR__COUNT
} lock_error_kind;

const char *lock_error_label(lock_error_kind k);

/* The row a store status lands on (DB_OK -> CLAIM_OK). */
claim_result claim_from_db(db_status st);
/* The row a failed acquisition lands on, and the lock error it counts as. */
claim_result claim_from_lock(dlock_err e, lock_error_kind *kind);
/* The row of a claim whose wait ran out before an acquisition of its own
 * answered (queued behind another claim of its coupon: LOCK_TIMEOUT; in
 * the claim queue: QUEUE_TIMEOUT). Given the lock service's last seen
 * failure (core/lockstate.h; DLOCK_OK: a quorum answered), it is that row,
 * or the failure's own (1006) when the service had no quorum as it ended. */
claim_result claim_from_wait(claim_result waited, dlock_err last_seen, lock_error_kind *kind);

#endif /* APP_OUTCOME_H */
