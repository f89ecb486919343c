/* bundle.h - the bundle claim: one unit of each of 2..16 coupons for one
 * user, all or nothing (POST /api/v1/coupon/bundle), under one of the
 * --bundle-lock ways:
 *
 *   request-order  one libdlock lock per coupon, taken in the order the
 *                  request lists them: two requests listing the same
 *                  coupons in opposite orders each hold one and wait for
 *                  the other until --lock-wait runs out (1005 for both);
 *   sorted         one lock per coupon, taken in id order: no deadlock,
 *                  but the first lease runs while the last is waited for;
 *   multi          dlock_acquire_multi: every coupon in one round per node;
 *   atomic-sql     no lock: one conditional transaction (the baseline).
 *
 * The lock ways all run the store's bundle section (coupon_bundle.h) with
 * each coupon's own fence, so a lease outlived on any coupon refuses the
 * whole bundle (1010). A bundle runs on a claim worker, like a claim. */
#ifndef APP_CLAIM_BUNDLE_H
#define APP_CLAIM_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_bundle.h"

#include "claim/claimq.h"
#include "outcome.h"
#include "core/config.h"
#include "core/workers.h"

#define BUNDLE_MIN 2
#define BUNDLE_MAX DB_BUNDLE_MAX

typedef enum bundle_lock_kind {
    BUNDLE_LOCK_REQUEST_ORDER = 0,
    BUNDLE_LOCK_SORTED = 1,
    BUNDLE_LOCK_MULTI = 2,
    BUNDLE_LOCK_ATOMIC = 3
} bundle_lock_kind;

/* A bundle claim in flight: the claim queue's job (first member: the queue
 * hands it back as a claim_job) and the bundle's input and output. */
typedef struct bundle_job {
    claim_job base;                 /* coupon_id: ids[0], its lane; user_id, deadline_us, done, ctx as a claim's */
    size_t n;                       /* coupons listed */
    int64_t ids[BUNDLE_MAX];        /* in the request's order */
    int64_t record_ids[BUNDLE_MAX]; /* on CLAIM_OK, one per id */
    uint64_t fences[BUNDLE_MAX];    /* on CLAIM_OK: each coupon's fence (0 without a lock) */
    unsigned char sold_out[BUNDLE_MAX]; /* on CLAIM_SOLD_OUT: which ids */
} bundle_job;

/* At start-up, before any thread: resolves --bundle-lock (unset: multi
 * under a --strategy with a lock, atomic-sql under one without) and refuses
 * a way this build cannot run. 0, or -1 with a one-line reason. */
int bundle_setup(const app_config *cfg, int strategy_uses_lock, char *err, size_t errlen);
/* Nonzero when the resolved way takes libdlock locks (the worker slots
 * then need a lock client even under a lock-free --strategy). */
int bundle_uses_lock(void);
/* The resolved way's name. */
const char *bundle_lock_name(void);
/* Readies job for the claim queue (its run hook); the caller fills the rest. */
void bundle_job_init(bundle_job *job);

/* bundle_lock.c, for bundle.c: the lock ways, which take every coupon's
 * lock (setting items[i].fence), run section, release, and return the
 * store's status, or set *lock_failed to the claim row of a lock failure. */
typedef db_status (*bundle_section_fn)(worker *w, const app_config *cfg, bundle_job *job, db_bundle_item *items);
db_status bundle_under_locks(worker *w, const app_config *cfg, bundle_lock_kind kind, bundle_job *job,
                             db_bundle_item *items, int64_t deadline_us, claim_result *lock_failed,
                             bundle_section_fn section);

#endif /* APP_CLAIM_BUNDLE_H */
