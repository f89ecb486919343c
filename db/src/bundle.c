/* bundle.c - the bundle claim (coupon_bundle.h): one unit of every listed
 * coupon for one user, or nothing. The section is the single claim's
 * (section.c) stretched over several rows:
 *   (1) one short read transaction of fenced reads, one per row, each with
 *       its own coupon's fence;
 *   (2) the business step with no transaction open;
 *   (3) ONE write transaction of fenced writes and record inserts. A row that refuses its fence in (3)
 * rolls the whole transaction back, so a holder whose lease ran out on one
 * coupon can issue none of the bundle: never half a bundle.
 *
 * Every loop walks the rows in coupon-id order, whatever order the request
 * listed them in: PostgreSQL takes a row lock per UPDATE, and two
 * transactions that update the same two rows crosswise deadlock (the
 * server aborts one). In id order they queue instead. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "coupon_bundle.h"
#include "db_internal.h"

/* order[k] = index of the item with the k-th smallest coupon id. */
static void id_order(const db_bundle_item *items, size_t n, size_t *order)
{
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    /* Insertion sort: n <= DB_BUNDLE_MAX. */
    for (size_t i = 1; i < n; i++) {
        size_t v = order[i], j = i;
        while (j > 0 && items[order[j - 1]].coupon_id > items[v].coupon_id) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
}

static void clear_outputs(db_bundle_item *items, size_t n, db_status st)
{
    for (size_t i = 0; items != NULL && i < n; i++) {
        items[i].status = st;
        items[i].record_id = 0;
        items[i].stock_left = 0;
    }
}

static db_status check_args(db_store *db, const char *user_id, const db_bundle_item *items, size_t n,
                            size_t *order)
{
    size_t len;

    if (db == NULL)
        return DB_INVALID;
    if (items == NULL || n == 0 || n > DB_BUNDLE_MAX) {
        dbi_set_error(db, "bundle: %zu coupons given (1 to %d)", items == NULL ? 0 : n, DB_BUNDLE_MAX);
        return DB_INVALID;
    }
    db_status res = dbi_check_text(db, user_id, DB_USER_MAX, "user id", &len);
    if (res != DB_OK)
        return res;
    id_order(items, n, order);
    for (size_t k = 0; k < n; k++) {
        const db_bundle_item *it = &items[order[k]];
        /* Same reason as section.c: a larger fence wraps negative in a
         * signed column and passes `last_fence <= ?` as the oldest of all. */
        if (it->fence > (uint64_t)INT64_MAX) {
            dbi_set_error(db, "fence %" PRIu64 " does not fit a signed 64-bit column", it->fence);
            return DB_INVALID;
        }
        /* Two units of one coupon in one bundle would read one stock and
         * write it back minus one: a lost unit, not a bundle. */
        if (k > 0 && items[order[k - 1]].coupon_id == it->coupon_id) {
            dbi_set_error(db, "bundle: coupon %" PRId64 " listed twice", it->coupon_id);
            return DB_INVALID;
        }
    }
    return DB_OK;
}

/* A fenced statement changed no row: the coupon is gone, or a newer
 * holder's fence is on it (the message names which). */
static db_status missing_or_stale(db_store *db, const db_bundle_item *it, const char *step)
{
    int64_t stock, limit, last_fence;
    db_status res = dbi_select_coupon(db, it->coupon_id, &stock, &limit, &last_fence);

    if (res != DB_OK)
        return res;
    dbi_set_error(db, "bundle %s refused: fence %" PRIu64 " is older than last_fence %" PRId64 " of coupon %" PRId64,
                  step, it->fence, last_fence, it->coupon_id);
    return DB_STALE_FENCE;
}

static db_status read_row(db_store *db, db_fence_mode mode, const char *user_id, db_bundle_item *it)
{
    int64_t last_fence = 0;
    int has_row = 0;
    db_status res;

    if (mode == DB_FENCE_FULL) {
        /* Registering the fence and reading the stock are one statement
         * (section.c's fenced read), row by row with each coupon's fence. */
        res = db->ops->fenced_read(db, it->coupon_id, (int64_t)it->fence, &it->stock, &it->per_user_limit,
                                   &has_row);
        if (res == DB_OK && !has_row)
            res = missing_or_stale(db, it, "read");
    } else {
        res = dbi_select_coupon(db, it->coupon_id, &it->stock, &it->per_user_limit, &last_fence);
    }
    if (res == DB_OK)
        res = dbi_count_user_records(db, it->coupon_id, user_id, &it->held);
    return res;
}

db_status db_bundle_read(db_store *db, db_fence_mode mode, const char *user_id, db_bundle_item *items, size_t n)
{
    size_t order[DB_BUNDLE_MAX];
    db_status res = check_args(db, user_id, items, n, order);

    for (size_t i = 0; items != NULL && i < n; i++)
        items[i].stock = items[i].per_user_limit = items[i].held = 0;
    if (res == DB_OK && db_fence_mode_name(mode) == NULL) {
        dbi_set_error(db, "unknown fence mode %d", (int)mode);
        res = DB_INVALID;
    }
    if (res != DB_OK)
        goto out;
    /* One snapshot of every row, IMMEDIATE under `full` (the reads write
     * last_fence), ended before the business step like the single claim's. */
    res = mode == DB_FENCE_FULL ? dbi_begin_immediate(db) : dbi_begin_deferred(db);
    if (res != DB_OK)
        goto out;
    for (size_t k = 0; res == DB_OK && k < n; k++)
        res = read_row(db, mode, user_id, &items[order[k]]);
    if (res == DB_OK)
        res = dbi_commit(db);
    if (res != DB_OK)
        dbi_rollback(db);
out:
    if (items != NULL && n <= DB_BUNDLE_MAX)
        clear_outputs(items, n, res);
    return res;
}

db_status db_bundle_decide(db_bundle_item *items, size_t n)
{
    int sold_out = 0, at_limit = 0;

    for (size_t i = 0; i < n; i++) {
        db_bundle_item *it = &items[i];
        it->record_id = it->stock_left = 0;
        if (it->stock <= 0)
            it->status = DB_SOLD_OUT;
        else if (it->per_user_limit > 0 && it->held >= it->per_user_limit)
            it->status = DB_USER_LIMIT;
        else
            it->status = DB_OK;
        sold_out |= it->status == DB_SOLD_OUT;
        at_limit |= it->status == DB_USER_LIMIT;
    }
    /* The single claim's refusal order: sold out before the user's limit. */
    return sold_out ? DB_SOLD_OUT : at_limit ? DB_USER_LIMIT : DB_OK;
}

db_status db_bundle_write(db_store *db, db_fence_mode mode, const char *user_id, db_bundle_item *items, size_t n)
{
    size_t order[DB_BUNDLE_MAX];
    db_status res = check_args(db, user_id, items, n, order);

    if (res != DB_OK)
        goto out;
    res = dbi_begin_immediate(db);
    if (res != DB_OK)
        goto out;
    for (size_t k = 0; res == DB_OK && k < n; k++) {
        db_bundle_item *it = &items[order[k]];
        int64_t values[2] = {it->stock - 1, (int64_t)it->fence};
        int changed = 0;
        /* THE write, row by row: the value read minus one, correct only if
         * nobody wrote the row since our read; the lock keeps others out,
         * the fence refuses us once our lease on this coupon ran out. */
        if (mode == DB_FENCE_OFF)
            res = dbi_update_stock(db, DBI_WRITE_STOCK, it->coupon_id, values, 1, &changed, "write stock");
        else
            res = dbi_update_stock(db, DBI_FENCED_WRITE_STOCK, it->coupon_id, values, 2, &changed,
                                   "fenced write stock");
        if (res == DB_OK && changed == 0)
            res = missing_or_stale(db, it, "write");
        if (res == DB_OK)
            res = dbi_insert_record(db, it->coupon_id, user_id, (int64_t)it->fence, &it->record_id);
        it->stock_left = it->stock - 1;
    }
    if (res == DB_OK)
        res = dbi_commit(db);
    if (res != DB_OK)
        dbi_rollback(db); /* one refused row takes every row of the bundle back */
out:
    if (res != DB_OK && items != NULL && n <= DB_BUNDLE_MAX)
        clear_outputs(items, n, res);
    return res;
}

db_status db_bundle_section(db_store *db, db_fence_mode mode, const char *user_id, db_bundle_item *items, size_t n,
                            db_work_fn work, void *work_arg)
{
    db_status res = db_bundle_read(db, mode, user_id, items, n);

    if (res != DB_OK)
        return res;
    res = db_bundle_decide(items, n);
    if (res != DB_OK)
        return res; /* the items say which coupon is sold out or at the limit */
    /* The business step, once per bundle, with no transaction open. */
    if (work != NULL)
        work(work_arg, n);
    return db_bundle_write(db, mode, user_id, items, n);
}

db_status db_bundle_atomic(db_store *db, const char *user_id, db_bundle_item *items, size_t n)
{
    size_t order[DB_BUNDLE_MAX];
    int sold_out = 0, at_limit = 0;
    db_status res = check_args(db, user_id, items, n, order);

    if (res != DB_OK)
        goto out;
    /* The write lock first (claim.c's reason): the checks and the inserts
     * cannot interleave with another writer's. */
    res = dbi_begin_immediate(db);
    if (res != DB_OK)
        goto out;
    for (size_t k = 0; res == DB_OK && k < n; k++) {
        db_bundle_item *it = &items[order[k]];
        int64_t last_fence = 0;
        int changed = 0;
        /* The guard is the UPDATE itself (`stock > 0`), as in the single
         * atomic claim; the read after it tells sold-out from not-found and
         * gives the limit. */
        res = dbi_update_stock(db, DBI_ATOMIC_DECREMENT, it->coupon_id, NULL, 0, &changed, "decrement stock");
        if (res == DB_OK)
            res = dbi_select_coupon(db, it->coupon_id, &it->stock_left, &it->per_user_limit, &last_fence);
        if (res == DB_OK)
            res = dbi_count_user_records(db, it->coupon_id, user_id, &it->held);
        if (res != DB_OK)
            break;
        it->stock = changed ? it->stock_left + 1 : it->stock_left;
        it->status = !changed ? DB_SOLD_OUT
                     : it->per_user_limit > 0 && it->held >= it->per_user_limit ? DB_USER_LIMIT
                                                                                : DB_OK;
        sold_out |= it->status == DB_SOLD_OUT;
        at_limit |= it->status == DB_USER_LIMIT;
    }
    if (res == DB_OK && (sold_out || at_limit)) {
        dbi_set_error(db, "bundle refused: %s", sold_out ? "a coupon is sold out" : "a per-user limit is reached");
        res = sold_out ? DB_SOLD_OUT : DB_USER_LIMIT;
    }
    for (size_t k = 0; res == DB_OK && k < n; k++) {
        db_bundle_item *it = &items[order[k]];
        /* Fence 0: no lock, no token (claim.c). */
        res = dbi_insert_record(db, it->coupon_id, user_id, 0, &it->record_id);
    }
    if (res == DB_OK)
        res = dbi_commit(db);
    if (res != DB_OK) {
        /* Undoes every decrement: a refused bundle leaves every stock as it was. */
        dbi_rollback(db);
        /* Keep the per-item verdicts of a refusal (which coupon is sold out). */
        if (res != DB_SOLD_OUT && res != DB_USER_LIMIT)
            clear_outputs(items, n, res);
        else
            for (size_t i = 0; i < n; i++)
                items[i].record_id = 0;
    }
    return res;
out:
    if (items != NULL && n <= DB_BUNDLE_MAX)
        clear_outputs(items, n, res);
    return res;
}
