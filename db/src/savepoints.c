/* savepoints.c - group commit (coupon_db.h, db_claim_group): the sections of
 * several coupons in one write transaction, each in its own savepoint.
 *
 * Each section is the whole section of section.c with no business step:
 * the fenced read (which registers the section's fence on its coupon's
 * row), the users' counts, the decision, the fenced write and the inserts.
 * The fence check stays in the row, on the read and the write, for every
 * section: a section whose lock holder went stale is refused by its own
 * statements, however long the group took, and undone alone. */
#include <string.h>

#include "db_internal.h"

int db_group_supported(const db_store *db)
{
    return db != NULL && db->ops->savepoint != NULL;
}

/* One section inside the open transaction; on failure its changes are
 * still there (the caller undoes its savepoint). */
static db_status run_section(db_store *db, db_group_section *s)
{
    db_claim_view view;
    int has_row = 0, changed = 0;
    int64_t sold = 0, left, values[2];
    db_status res = dbi_check_section_args(db, DB_FENCE_FULL, s->fence, s->reqs, s->n);

    if (res != DB_OK)
        return res;
    for (size_t i = 0; i < s->n; i++) {
        s->reqs[i].held = 0;
        memset(&s->reqs[i].claim, 0, sizeof s->reqs[i].claim);
    }
    res = db->ops->fenced_read(db, s->coupon_id, (int64_t)s->fence, &view.stock, &view.per_user_limit, &has_row);
    if (res == DB_OK && !has_row)
        res = dbi_missing_or_stale(db, s->coupon_id, s->fence, "read");
    for (size_t i = 0; res == DB_OK && i < s->n; i++)
        res = dbi_count_user_records(db, s->coupon_id, s->reqs[i].user_id, &s->reqs[i].held);
    if (res != DB_OK)
        return res;
    sold = (int64_t)db_claim_decide(&view, s->reqs, s->n);
    if (sold == 0)
        return DB_OK;
    /* The value read minus what was sold, fenced: as db_claim_write. */
    values[0] = view.stock - sold;
    values[1] = (int64_t)s->fence;
    res = dbi_update_stock(db, DBI_FENCED_WRITE_STOCK, s->coupon_id, values, 2, &changed, "fenced write stock");
    if (res == DB_OK && changed == 0)
        res = dbi_missing_or_stale(db, s->coupon_id, s->fence, "write");
    left = view.stock;
    for (size_t i = 0; res == DB_OK && i < s->n; i++) {
        if (s->reqs[i].status != DB_OK)
            continue;
        res = dbi_insert_record(db, s->coupon_id, s->reqs[i].user_id, (int64_t)s->fence,
                                &s->reqs[i].claim.record_id);
        s->reqs[i].claim.stock = --left;
    }
    return res;
}

/* A section's outcome is its failure: every claim carries it, none holds a record. */
static void fail_section(db_group_section *s, db_status res, const db_store *db)
{
    s->status = res;
    s->fault = db->fault;
    memcpy(s->errmsg, db->errmsg, sizeof s->errmsg);
    s->errmsg[sizeof s->errmsg - 1] = '\0';
    for (size_t i = 0; s->reqs != NULL && i < s->n; i++) {
        s->reqs[i].status = res;
        memset(&s->reqs[i].claim, 0, sizeof s->reqs[i].claim);
    }
}

db_status db_claim_group(db_store *db, db_group_section *const *secs, size_t n)
{
    db_status res;

    if (db == NULL || secs == NULL || n == 0)
        return DB_INVALID;
    for (size_t i = 0; i < n; i++) {
        secs[i]->status = DB_OK;
        secs[i]->fault = DB_FAULT_NONE;
        secs[i]->errmsg[0] = '\0';
    }
    if (!db_group_supported(db)) {
        dbi_set_error(db, "group commit: not supported on %s", db->ops->name);
        res = DB_INVALID;
        goto failed;
    }
    res = dbi_begin_immediate(db);
    for (size_t i = 0; res == DB_OK && i < n; i++) {
        res = db->ops->savepoint(db, DBI_SAVEPOINT_OPEN);
        if (res != DB_OK)
            break;
        db_status own = run_section(db, secs[i]);
        if (own == DB_OK) {
            res = db->ops->savepoint(db, DBI_SAVEPOINT_RELEASE);
            continue;
        }
        fail_section(secs[i], own, db);
        /* Some errors (I/O, a full disk) end SQLite's whole transaction by
         * themselves: then the sections before this one are gone too, and
         * the group must fail as a whole, not report them committed. */
        if (!db->ops->in_transaction(db)) {
            res = own;
            break;
        }
        res = db->ops->savepoint(db, DBI_SAVEPOINT_UNDO);
    }
    if (res == DB_OK)
        res = dbi_commit(db);
    if (res == DB_OK)
        return DB_OK;
    dbi_rollback(db); /* nothing of any section stays */
failed:
    for (size_t i = 0; i < n; i++)
        fail_section(secs[i], res, db);
    return res;
}
