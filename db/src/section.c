/* section.c - the claim's critical section, the same for every strategy:
 * (1) read the stock, the per-user limit and the users' records; (2) the
 * business step; (3) write stock := (value read) - sold and insert the
 * records, in one short transaction.
 *
 * There is deliberately no transaction, no `stock > 0` condition and no
 * compare-and-set spanning (1) to (3): that is how business code is written
 * (seed 001's controller), and it is exactly the lost update when two
 * callers overlap. What keeps them apart is the distributed lock; what keeps
 * a holder whose lease ran out from writing is the fence, checked by the row
 * itself in the statement that reads or writes it:
 *
 *   off    nothing is checked.
 *   write  step 3 applies only if last_fence <= fence. Not enough for a
 *          read-modify-write: A reads (fence 10), A's lease runs out, B reads
 *          (11), A writes (accepted: nothing newer has written yet), B writes
 *          (accepted): two records from one unit of stock.
 *   full   step 1 registers the fence as well, so once B has read, every
 *          read or write of A is refused. Each operation the row accepts
 *          then carries a fence >= every fence it accepted before, so the
 *          accepted operations are grouped by holder, in fence order, and no
 *          other holder's write lands between a holder's read and its write
 *          (docs/fencing.md has the proof).
 *
 * `<=`, not `<`: one holder (one fence) reads, then writes, possibly a whole
 * batch; every later acquisition has a strictly greater fence, so `<=`
 * refuses exactly the older holders. */
#include <inttypes.h>
#include <string.h>

#include "db_internal.h"

const char *db_fence_mode_name(db_fence_mode m)
{
    switch (m) {
    case DB_FENCE_OFF: return "off";
    case DB_FENCE_WRITE: return "write";
    case DB_FENCE_FULL: return "full";
    }
    return NULL;
}

int db_fence_mode_parse(const char *name, db_fence_mode *out)
{
    static const db_fence_mode all[] = {DB_FENCE_OFF, DB_FENCE_WRITE, DB_FENCE_FULL};

    for (size_t i = 0; name != NULL && i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, db_fence_mode_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -1;
}

db_status dbi_check_section_args(db_store *db, db_fence_mode mode, uint64_t fence, const db_claim_req *reqs,
                                 size_t n)
{
    size_t len;

    if (db == NULL)
        return DB_INVALID;
    if (db_fence_mode_name(mode) == NULL) {
        dbi_set_error(db, "unknown fence mode %d", (int)mode);
        return DB_INVALID;
    }
    /* SQLite INTEGER is signed 64-bit: a larger fence would wrap negative and
     * pass the `last_fence <= ?` check as the oldest fence of all. */
    if (fence > (uint64_t)INT64_MAX) {
        dbi_set_error(db, "fence %" PRIu64 " does not fit a signed 64-bit column", fence);
        return DB_INVALID;
    }
    if (reqs == NULL || n == 0) {
        dbi_set_error(db, "claim: no claims given");
        return DB_INVALID;
    }
    for (size_t i = 0; i < n; i++) {
        db_status res = dbi_check_text(db, reqs[i].user_id, DB_USER_MAX, "user id", &len);
        if (res != DB_OK)
            return res;
    }
    return DB_OK;
}

/* A fenced statement changed no row: the coupon does not exist, or a newer
 * holder's fence is already on it. */
db_status dbi_missing_or_stale(db_store *db, int64_t coupon_id, uint64_t fence, const char *step)
{
    int64_t stock, limit, last_fence;
    db_status res = dbi_select_coupon(db, coupon_id, &stock, &limit, &last_fence);

    if (res != DB_OK)
        return res; /* DB_NOT_FOUND with its detail, or the failure */
    dbi_set_error(db, "%s refused: fence %" PRIu64 " is older than last_fence %" PRId64 " of coupon %" PRId64,
                  step, fence, last_fence, coupon_id);
    return DB_STALE_FENCE;
}

static db_status read_coupon(db_store *db, int64_t coupon_id, db_fence_mode mode, uint64_t fence,
                             db_claim_view *view)
{
    int64_t last_fence = 0;
    int has_row = 0;

    if (mode != DB_FENCE_FULL)
        return dbi_select_coupon(db, coupon_id, &view->stock, &view->per_user_limit, &last_fence);

    /* The fenced read: registering our fence and reading the stock are one
     * statement, so no newer holder can read between the check and the read. */
    db_status res = db->ops->fenced_read(db, coupon_id, (int64_t)fence, &view->stock, &view->per_user_limit,
                                         &has_row);
    if (res == DB_OK && !has_row)
        res = dbi_missing_or_stale(db, coupon_id, fence, "read");
    return res;
}

db_status db_claim_read(db_store *db, int64_t coupon_id, db_fence_mode mode, uint64_t fence, db_claim_req *reqs,
                        size_t n, db_claim_view *view)
{
    db_status res;

    if (view != NULL)
        memset(view, 0, sizeof *view);
    res = dbi_check_section_args(db, mode, fence, reqs, n);
    if (res != DB_OK)
        return res;
    if (view == NULL) {
        dbi_set_error(db, "claim read: NULL view");
        return DB_INVALID;
    }
    for (size_t i = 0; i < n; i++)
        reqs[i].held = 0;
    if (db->ops->section_read != NULL) {
        int has_row = 0;
        res = db->ops->section_read(db, coupon_id, mode, (int64_t)fence, reqs, n, view, &has_row);
        if (res == DB_OK && !has_row)
            res = dbi_missing_or_stale(db, coupon_id, fence, "read");
        if (res != DB_OK) {
            dbi_rollback(db);
            memset(view, 0, sizeof *view);
            for (size_t i = 0; i < n; i++)
                reqs[i].held = 0;
        }
        return res;
    }
    /* One short transaction so the stock and the counts are one snapshot:
     * IMMEDIATE under `full` (the read writes last_fence, and SQLITE_BUSY
     * should surface here, not mid-way), a plain read otherwise. It ends
     * before the business step: no transaction spans the section. */
    res = mode == DB_FENCE_FULL ? dbi_begin_immediate(db) : dbi_begin_deferred(db);
    if (res != DB_OK)
        return res;
    res = read_coupon(db, coupon_id, mode, fence, view);
    for (size_t i = 0; res == DB_OK && i < n; i++)
        res = dbi_count_user_records(db, coupon_id, reqs[i].user_id, &reqs[i].held);
    if (res == DB_OK)
        res = dbi_commit(db);
    if (res != DB_OK) {
        dbi_rollback(db);
        memset(view, 0, sizeof *view);
    }
    return res;
}

size_t db_claim_decide(const db_claim_view *view, db_claim_req *reqs, size_t n)
{
    int64_t left = view->stock;
    size_t accepted = 0;

    for (size_t i = 0; i < n; i++) {
        memset(&reqs[i].claim, 0, sizeof reqs[i].claim);
        if (left <= 0) {
            reqs[i].status = DB_SOLD_OUT;
            continue;
        }
        if (view->per_user_limit > 0) {
            /* The user's records as read plus those this batch gives them. */
            int64_t mine = reqs[i].held;
            for (size_t j = 0; j < i; j++)
                if (reqs[j].status == DB_OK && strcmp(reqs[j].user_id, reqs[i].user_id) == 0)
                    mine++;
            if (mine >= view->per_user_limit) {
                reqs[i].status = DB_USER_LIMIT;
                continue;
            }
        }
        reqs[i].status = DB_OK;
        left--;
        accepted++;
    }
    return accepted;
}

db_status db_claim_write(db_store *db, int64_t coupon_id, db_fence_mode mode, uint64_t fence,
                         const db_claim_view *view, db_claim_req *reqs, size_t n)
{
    db_status res = dbi_check_section_args(db, mode, fence, reqs, n);
    int64_t sold = 0, left, values[2];
    int changed = 0;

    if (res != DB_OK)
        return res;
    if (view == NULL) {
        dbi_set_error(db, "claim write: NULL view");
        return DB_INVALID;
    }
    for (size_t i = 0; i < n; i++)
        sold += reqs[i].status == DB_OK;
    if (sold == 0)
        return DB_OK;

    if (db->ops->section_write != NULL) {
        /* The same write, the same refusal, as one round trip. */
        res = db->ops->section_write(db, coupon_id, mode, (int64_t)fence, view->stock - sold, reqs, n, &changed);
        if (res == DB_OK && changed == 0)
            res = dbi_missing_or_stale(db, coupon_id, fence, "write");
        left = view->stock;
        for (size_t i = 0; res == DB_OK && i < n; i++)
            if (reqs[i].status == DB_OK)
                reqs[i].claim.stock = --left;
        goto done;
    }
    res = dbi_begin_immediate(db);
    if (res != DB_OK)
        return res;
    /* THE write of the section: the value read minus what was sold, not
     * `stock - sold`. Correct only if nobody wrote since our read, which is
     * what the lock (and, once the lease ran out, the fence) guarantees. */
    values[0] = view->stock - sold;
    values[1] = (int64_t)fence;
    if (mode == DB_FENCE_OFF)
        res = dbi_update_stock(db, DBI_WRITE_STOCK, coupon_id, values, 1, &changed, "write stock");
    else
        res = dbi_update_stock(db, DBI_FENCED_WRITE_STOCK, coupon_id, values, 2, &changed, "fenced write stock");
    if (res == DB_OK && changed == 0)
        res = dbi_missing_or_stale(db, coupon_id, fence, "write");
    left = view->stock;
    for (size_t i = 0; res == DB_OK && i < n; i++) {
        if (reqs[i].status != DB_OK)
            continue;
        res = dbi_insert_record(db, coupon_id, reqs[i].user_id, (int64_t)fence, &reqs[i].claim.record_id);
        reqs[i].claim.stock = --left;
    }
    if (res == DB_OK)
        res = dbi_commit(db);
done:
    if (res != DB_OK) {
        dbi_rollback(db); /* nothing of a refused or failed write stays */
        for (size_t i = 0; i < n; i++)
            memset(&reqs[i].claim, 0, sizeof reqs[i].claim);
    }
    return res;
}

/* With no business step between them, a backend may run the read, the
 * decision and the write as one transaction (section_whole): the same
 * fenced read and fenced write, the same outcomes, the row locked from the
 * read to the write. */
static db_status whole_section(db_store *db, int64_t coupon_id, uint64_t fence, db_claim_req *reqs, size_t n)
{
    int has_row = 0;
    db_status res = dbi_check_section_args(db, DB_FENCE_FULL, fence, reqs, n);

    if (res != DB_OK)
        return res;
    for (size_t i = 0; i < n; i++) {
        reqs[i].held = 0;
        reqs[i].status = DB_OK;
        memset(&reqs[i].claim, 0, sizeof reqs[i].claim);
    }
    res = db->ops->section_whole(db, coupon_id, (int64_t)fence, reqs, n, &has_row);
    if (res == DB_OK && !has_row)
        res = dbi_missing_or_stale(db, coupon_id, fence, "read");
    if (res != DB_OK)
        dbi_rollback(db);
    return res;
}

db_status db_claim_section(db_store *db, int64_t coupon_id, db_fence_mode mode, uint64_t fence, db_claim_req *reqs,
                           size_t n, db_work_fn work, void *work_arg)
{
    db_claim_view view;
    int whole = work == NULL && mode == DB_FENCE_FULL && db != NULL && db->ops->section_whole != NULL;
    db_status res = whole ? whole_section(db, coupon_id, fence, reqs, n)
                          : db_claim_read(db, coupon_id, mode, fence, reqs, n, &view);

    if (res == DB_OK && !whole) {
        size_t accepted = db_claim_decide(&view, reqs, n);
        if (accepted > 0) {
            /* The business step runs between the read and the write with no
             * transaction open: whatever it lasts, the row is not locked. */
            if (work != NULL)
                work(work_arg, accepted);
            res = db_claim_write(db, coupon_id, mode, fence, &view, reqs, n);
        }
    }
    for (size_t i = 0; res != DB_OK && reqs != NULL && i < n; i++) {
        reqs[i].status = res;
        memset(&reqs[i].claim, 0, sizeof reqs[i].claim);
    }
    return res;
}

db_status db_claim_coupon(db_store *db, int64_t coupon_id, const char *user_id, uint64_t fence, db_claim *out)
{
    db_claim_req req;

    /* The same argument checks as the one-statement claim (claim.c). */
    db_status res = dbi_check_claim_args(db, coupon_id, user_id, out);
    if (res != DB_OK)
        return res;
    memset(&req, 0, sizeof req);
    req.user_id = user_id;
    res = db_claim_section(db, coupon_id, DB_FENCE_FULL, fence, &req, 1, NULL, NULL);
    if (res != DB_OK)
        return res;
    if (req.status == DB_OK)
        *out = req.claim;
    else if (req.status == DB_SOLD_OUT)
        return dbi_sold_out(db, coupon_id);
    else
        dbi_set_error(db, "user holds %" PRId64 " records, the per-user limit", req.held);
    return req.status;
}
