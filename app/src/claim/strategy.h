/* strategy.h - the claim strategy interface (claim + lock health) and its results.
 *
 * A strategy turns "give user U one coupon C" into store (and lock) calls.
 * The sold-out fast path is not here: routes_coupon.c runs it once, before
 * any strategy, so every strategy gets it and none can skip it. */
#ifndef APP_STRATEGY_H
#define APP_STRATEGY_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#include "core/config.h"
#include "core/workers.h"

typedef enum claim_result {
    CLAIM_OK = 0,
    CLAIM_NOT_FOUND,        /* 404 / 1002 */
    CLAIM_SOLD_OUT,         /* 409 / 1003 */
    CLAIM_USER_LIMIT,       /* 409 / 1004 */
    CLAIM_LOCK_TIMEOUT,     /* 503 / 1005: lock held by others until the wait ran out */
    CLAIM_STALE_FENCE,      /* 503 / 1010: our lease ran out and a newer holder read or wrote first */
    CLAIM_LOCK_UNAVAILABLE, /* 503 / 1006: no quorum, Redis unreachable or timing out */
    CLAIM_DB_BUSY,          /* 503 / 1006: SQLite stayed locked past the busy timeout */
    CLAIM_INVALID,          /* 400 / 1001: the store refused the arguments */
    CLAIM_ERROR,            /* 500 / 1500 */
    CLAIM__COUNT
} claim_result;

typedef struct claim_out {
    db_claim rec;      /* record id and stock left, on CLAIM_OK */
    uint64_t fence;    /* the lock's fencing token; 0 without a lock */
    char detail[192];  /* why, on failure (library / store detail) */
} claim_out;

typedef enum lock_health {
    LOCK_HEALTH_OK = 0,
    LOCK_HEALTH_DOWN = 1,
    LOCK_HEALTH_UNUSED = 2
} lock_health;

typedef struct strategy {
    const char *name;
    int uses_lock; /* nonzero: worker slots get a dlock_client */
    claim_result (*claim)(worker *w, const app_config *cfg, int64_t coupon_id, const char *user_id,
                          claim_out *out);
    /* nodes_up / nodes for the health report (0 / 0 when unused). */
    lock_health (*health)(worker *w, size_t *nodes_up, size_t *nodes);
} strategy;

extern const strategy strategy_redlock;
extern const strategy strategy_none;
extern const strategy strategy_atomic;

/* NULL for an unknown name. */
const strategy *strategy_by_name(const char *name);
/* "redlock, none, atomic-sql", for messages. */
const char *strategy_names(void);
/* The claim result a store status means (DB_OK -> CLAIM_OK). */
claim_result claim_from_db(db_status st);
/* One claim's outcome after the critical section: out->rec on success,
 * out->detail (from w's store) on failure; returns its claim result. */
claim_result claim_from_req(worker *w, const db_claim_req *req, claim_out *out);
const char *claim_result_name(claim_result r);
/* Health for strategies that use no lock. */
lock_health strategy_no_lock_health(worker *w, size_t *nodes_up, size_t *nodes);

#endif /* APP_STRATEGY_H */
