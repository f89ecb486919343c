/* audit.c - db_audit: reads one coupon's row and records back from the
 * tables and says by how much, if at all, it was oversold. */
#include <string.h>

#include "db_internal.h"

/* Saturating arithmetic: the audit also reads files edited by hand, where
 * values near INT64_MIN/MAX would otherwise overflow (undefined behaviour). */
static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t sat_abs(int64_t a)
{
    return a == INT64_MIN ? INT64_MAX : (a < 0 ? -a : a);
}

static int64_t max64(int64_t a, int64_t b)
{
    return a > b ? a : b;
}

db_status db_audit(db_store *db, int64_t coupon_id, db_audit_row *out)
{
    db_status res = DB_INVALID;
    int has_row = 0;
    int64_t limit = 0;
    int64_t over;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (db == NULL || out == NULL)
        return DB_INVALID;

    /* One read transaction for both queries: one snapshot (SQLite's WAL,
     * PostgreSQL's REPEATABLE READ), so a claim committing between them cannot make the counts disagree
     * and report an oversell that never happened. */
    res = dbi_begin_deferred(db);
    if (res != DB_OK)
        return res;
    res = db->ops->audit_coupon(db, coupon_id, &out->total, &out->stock, &limit, &out->issued, &has_row);
    if (res == DB_OK && !has_row) {
        dbi_set_error(db, "no coupon with id %lld", (long long)coupon_id);
        res = DB_NOT_FOUND;
    }
    if (res != DB_OK)
        goto out;
    out->coupon_id = coupon_id;
    res = db->ops->audit_users(db, coupon_id, limit, &out->users_over_limit, &out->excess_records);
    if (res != DB_OK)
        goto out;
    res = dbi_commit(db);
    if (res != DB_OK)
        goto out;

    /* Each term is one of the contract's oversell conditions, measured in
     * units: more records than total, negative stock, stock and records that
     * disagree (the lost update leaves stock too high), records beyond the
     * per-user limits. */
    over = sat_sub(out->issued, out->total);
    over = max64(over, sat_sub(0, out->stock));
    over = max64(over, sat_abs(sat_sub(sat_add(out->stock, out->issued), out->total)));
    over = max64(over, out->excess_records);
    out->oversold_by = max64(over, 0);
out:
    if (res != DB_OK) {
        dbi_rollback(db);
        /* Out parameters say nothing half-read on failure. */
        memset(out, 0, sizeof *out);
    }
    return res;
}
