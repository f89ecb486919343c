/* coupon_bundle.h - the bundle claim of the coupon store: one unit of each
 * of several coupons for one user, all or nothing. It comes in the same two
 * shapes as the single claim (coupon_db.h): the critical section under a
 * lock (fenced read of every row, business step, one transaction of fenced
 * writes) and the lock-free `atomic-sql` transaction.
 *
 * Same conventions as coupon_db.h: a db_status comes back, the items'
 * outputs are set on every path, detail in db_errmsg(). */
#ifndef COUPON_BUNDLE_H
#define COUPON_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

#define DB_BUNDLE_MAX 16 /* most coupons one bundle may list (the API's limit) */

/* One coupon of a bundle. coupon_id and fence are the input; the rest is
 * output. */
typedef struct db_bundle_item {
    int64_t coupon_id;      /* in: distinct within the bundle */
    uint64_t fence;         /* in: the fencing token of this coupon's lock (0 without one) */
    int64_t stock;          /* read: the stock as read in step 1 */
    int64_t per_user_limit; /* read: 0 = unlimited */
    int64_t held;           /* read: the user's records of this coupon */
    db_status status;       /* DB_OK, DB_SOLD_OUT or DB_USER_LIMIT for this coupon, or the bundle's failure */
    int64_t record_id;      /* on success: the new coupon_record row */
    int64_t stock_left;     /* on success: the stock left after this claim */
} db_bundle_item;

/* Step 1, the read, in one short transaction: every coupon's stock and
 * limit (under DB_FENCE_FULL the fenced read, registering each item's own
 * fence) and the user's records of each. DB_NOT_FOUND for an unknown id,
 * DB_STALE_FENCE when any row refused its fence, DB_INVALID for a bad
 * argument (no items, more than DB_BUNDLE_MAX, a duplicate id, a bad user
 * id, a fence beyond INT64_MAX). Rows are touched in id order whatever the
 * order of items, so two readers never lock PostgreSQL rows crosswise. */
db_status db_bundle_read(db_store *db, db_fence_mode mode, const char *user_id, db_bundle_item *items, size_t n);
/* The decision from the read, in memory: each item DB_OK, DB_SOLD_OUT
 * (stock 0) or DB_USER_LIMIT; returns DB_SOLD_OUT if any item is sold out,
 * else DB_USER_LIMIT if any is at its limit, else DB_OK. */
db_status db_bundle_decide(db_bundle_item *items, size_t n);
/* Step 3, the write, in ONE transaction: for every item stock := stock read
 * - 1 (fenced by its own fence unless DB_FENCE_OFF) and one record with
 * that fence. Any refused row (DB_STALE_FENCE) or failure rolls the whole
 * transaction back: no coupon of the bundle is issued. Call after
 * db_bundle_decide said DB_OK. */
db_status db_bundle_write(db_store *db, db_fence_mode mode, const char *user_id, db_bundle_item *items, size_t n);
/* The whole section: read, decide, work(arg, n) when every item can be
 * issued, write. DB_OK when every item was issued; DB_SOLD_OUT /
 * DB_USER_LIMIT (the items say which) or a failure, and then nothing was
 * written. Safe only under mutual exclusion on every listed coupon. */
db_status db_bundle_section(db_store *db, db_fence_mode mode, const char *user_id, db_bundle_item *items, size_t n,
                            db_work_fn work, void *work_arg);
/* The `atomic-sql` bundle: no lock, one transaction of conditional
 * decrements (`stock > 0`) and inserts, rolled back whole on any sold-out
 * or limit. Fence stored as 0. Statuses as db_bundle_section's. */
db_status db_bundle_atomic(db_store *db, const char *user_id, db_bundle_item *items, size_t n);

#endif /* COUPON_BUNDLE_H */
