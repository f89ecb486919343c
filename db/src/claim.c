/* claim.c - the two safe claim transactions: db_claim_coupon (under a
 * distributed lock, with the fencing check enforced by the UPDATE) and
 * db_claim_atomic (the `atomic-sql` baseline: one conditional UPDATE). */
#include "db_internal.h"

db_status db_claim_coupon(db_store *db, int64_t coupon_id, const char *user_id, uint64_t fence,
                          db_claim *out)
{
    db_status res = dbi_check_claim_args(db, coupon_id, user_id, out);
    int64_t stock = 0;
    int64_t limit = 0;
    int64_t last_fence = 0;
    int changed = 0;

    if (res != DB_OK)
        return res;
    /* SQLite INTEGER is signed 64-bit: a larger fence would wrap negative and
     * pass the `last_fence <= ?` check as the oldest fence of all. */
    if (fence > (uint64_t)INT64_MAX) {
        dbi_set_error(db, "fence %llu does not fit a signed 64-bit column", (unsigned long long)fence);
        return DB_INVALID;
    }

    /* One BEGIN IMMEDIATE transaction for read-check-write: the write lock is
     * taken before the read, so two processes' checks cannot interleave, and
     * SQLITE_BUSY (after the busy timeout) surfaces here, before anything is
     * read or written, instead of at the first write mid-transaction. */
    res = dbi_begin_immediate(db);
    if (res != DB_OK)
        return res;
    res = dbi_select_coupon(db, coupon_id, &stock, &limit, &last_fence);
    if (res != DB_OK)
        goto out;
    if (stock <= 0) {
        res = dbi_sold_out(db, coupon_id);
        goto out;
    }
    res = dbi_check_user_limit(db, coupon_id, user_id, limit);
    if (res != DB_OK)
        goto out;

    /* The fence is checked by the storage, in the UPDATE's WHERE clause, not
     * by comparing last_fence in C: the row itself refuses a holder whose lock
     * expired (GC pause, network delay) after a newer holder wrote
     * (Kleppmann, "How to do distributed locking": the fencing token).
     * `<=`, not `<`: the same holder (same fence) may write more than once
     * under one acquisition, e.g. a retry after SQLITE_BUSY or a second claim
     * in the same critical section; every later acquisition has a strictly
     * greater fence, so `<=` refuses exactly the stale holders. */
    res = dbi_update_stock(db, DBI_FENCED_DECREMENT, coupon_id, (int64_t)fence, &changed, "decrement stock");
    if (res != DB_OK)
        goto out;
    if (changed == 0) {
        /* We hold the write lock and read stock > 0 just above, so the only
         * clause that can have failed is the fence. */
        dbi_set_error(db, "fence %llu is older than last_fence %lld of coupon %lld", (unsigned long long)fence,
                      (long long)last_fence, (long long)coupon_id);
        res = DB_STALE_FENCE;
    }
out:
    /* stock - 1 is exact: the write lock was held from the read to the commit. */
    return dbi_end_claim(db, res, coupon_id, user_id, (int64_t)fence, stock - 1, out);
}

db_status db_claim_atomic(db_store *db, int64_t coupon_id, const char *user_id, db_claim *out)
{
    db_status res = dbi_check_claim_args(db, coupon_id, user_id, out);
    int64_t stock = 0;
    int64_t limit = 0;
    int64_t last_fence = 0;
    int changed = 0;

    if (res != DB_OK)
        return res;
    /* BEGIN IMMEDIATE for the same reason as db_claim_coupon: the per-user
     * check and the insert must not interleave with another process's. */
    res = dbi_begin_immediate(db);
    if (res != DB_OK)
        return res;
    /* The guard is the UPDATE itself: `stock > 0` is evaluated and the
     * decrement applied in one statement, so no read of stock taken earlier
     * can be written back (the `none` strategy's lost update). */
    res = dbi_update_stock(db, DBI_ATOMIC_DECREMENT, coupon_id, 0, &changed, "decrement stock");
    if (res != DB_OK)
        goto out;
    /* Read after the decrement: tells not-found from sold-out when nothing
     * changed, else gives the limit and the exact stock left (our own write). */
    res = dbi_select_coupon(db, coupon_id, &stock, &limit, &last_fence);
    if (res != DB_OK)
        goto out;
    if (changed == 0) {
        res = dbi_sold_out(db, coupon_id);
        goto out;
    }
    /* Checked after the decrement so the refusal order matches
     * db_claim_coupon (not found, sold out, user limit); the ROLLBACK below
     * undoes the decrement when the user is over the limit. */
    res = dbi_check_user_limit(db, coupon_id, user_id, limit);
out:
    /* Fence 0: no lock, no token; the column keeps its default meaning. */
    return dbi_end_claim(db, res, coupon_id, user_id, 0, stock, out);
}
