/* claim.c - db_claim_atomic, the `atomic-sql` baseline: the claim as one
 * conditional UPDATE in one transaction, which needs no distributed lock.
 * The claim under a lock is the critical section in section.c. */
#include "db_internal.h"

db_status db_claim_atomic(db_store *db, int64_t coupon_id, const char *user_id, db_claim *out)
{
    db_status res = dbi_check_claim_args(db, coupon_id, user_id, out);
    int64_t stock = 0;
    int64_t limit = 0;
    int64_t last_fence = 0;
    int changed = 0;

    if (res != DB_OK)
        return res;
    /* BEGIN IMMEDIATE: the write lock is taken before the per-user check, so
     * the check and the insert cannot interleave with another process's, and
     * SQLITE_BUSY surfaces here, before anything is written. */
    res = dbi_begin_immediate(db);
    if (res != DB_OK)
        return res;
    /* The guard is the UPDATE itself: `stock > 0` is evaluated and the
     * decrement applied in one statement, so no read of stock taken earlier
     * can be written back (the `none` strategy's lost update). */
    res = dbi_update_stock(db, DBI_ATOMIC_DECREMENT, coupon_id, NULL, 0, &changed, "decrement stock");
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
    /* Checked after the decrement so the refusal order matches the critical
     * section's (not found, sold out, user limit); the ROLLBACK below
     * undoes the decrement when the user is over the limit. */
    res = dbi_check_user_limit(db, coupon_id, user_id, limit);
out:
    /* Fence 0: no lock, no token; the column keeps its default meaning. */
    return dbi_end_claim(db, res, coupon_id, user_id, 0, stock, out);
}
