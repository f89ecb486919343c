/* claim_steps.c - the steps the claim transactions share: argument checks,
 * reading the coupon, the per-user limit, the stock decrement and the record
 * insert. Each runs inside the caller's transaction, through the backend's
 * statements (db->ops). */
#include <string.h>

#include "db_internal.h"

db_status dbi_check_text(db_store *db, const char *s, int max, const char *label, size_t *len)
{
    *len = 0;
    if (s == NULL || s[0] == '\0') {
        dbi_set_error(db, "%s must not be empty", label);
        return DB_INVALID;
    }
    /* strnlen: an unterminated or huge string costs at most max + 1 reads. */
    *len = strnlen(s, (size_t)max + 1);
    if (*len > (size_t)max) {
        dbi_set_error(db, "%s longer than %d bytes", label, max);
        return DB_INVALID;
    }
    return DB_OK;
}

db_status dbi_check_claim_args(db_store *db, int64_t coupon_id, const char *user_id, db_claim *out)
{
    size_t len;

    (void)coupon_id; /* any id is a question the table answers (DB_NOT_FOUND) */
    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (db == NULL)
        return DB_INVALID;
    if (out == NULL) {
        dbi_set_error(db, "claim: NULL out parameter");
        return DB_INVALID;
    }
    return dbi_check_text(db, user_id, DB_USER_MAX, "user id", &len);
}

/* The coupon's stock, per-user limit and last fence. DB_NOT_FOUND when the
 * row does not exist. */
db_status dbi_select_coupon(db_store *db, int64_t coupon_id, int64_t *stock, int64_t *limit,
                            int64_t *last_fence)
{
    *stock = 0;
    *limit = 0;
    *last_fence = 0;
    return db->ops->select_coupon(db, coupon_id, stock, limit, last_fence);
}

db_status dbi_count_user_records(db_store *db, int64_t coupon_id, const char *user_id, int64_t *held)
{
    *held = 0;
    return db->ops->count_user_records(db, coupon_id, user_id, held);
}

/* DB_USER_LIMIT when the user already holds `limit` records (limit 0 = unlimited). */
db_status dbi_check_user_limit(db_store *db, int64_t coupon_id, const char *user_id, int64_t limit)
{
    int64_t held = 0;
    db_status res;

    if (limit == 0)
        return DB_OK;
    res = dbi_count_user_records(db, coupon_id, user_id, &held);
    if (res == DB_OK && held >= limit) {
        dbi_set_error(db, "user holds %lld of at most %lld", (long long)held, (long long)limit);
        res = DB_USER_LIMIT;
    }
    return res;
}

/* Insert the claim's record; *record_id gets its row id. */
db_status dbi_insert_record(db_store *db, int64_t coupon_id, const char *user_id, int64_t fence,
                            int64_t *record_id)
{
    *record_id = 0;
    return db->ops->insert_record(db, coupon_id, user_id, fence, record_id);
}

db_status dbi_update_stock(db_store *db, dbi_stmt_id id, int64_t coupon_id, const int64_t *values,
                           int n_values, int *changed, const char *what)
{
    *changed = 0;
    return db->ops->update_stock(db, id, coupon_id, values, n_values, changed, what);
}

db_status dbi_sold_out(db_store *db, int64_t coupon_id)
{
    dbi_set_error(db, "coupon %lld is sold out", (long long)coupon_id);
    return DB_SOLD_OUT;
}

db_status dbi_end_claim(db_store *db, db_status res, int64_t coupon_id, const char *user_id, int64_t fence,
                        int64_t stock_left, db_claim *out)
{
    int64_t record_id = 0;

    if (res == DB_OK)
        res = dbi_insert_record(db, coupon_id, user_id, fence, &record_id);
    if (res == DB_OK)
        res = dbi_commit(db);
    if (res != DB_OK) {
        dbi_rollback(db); /* nothing of a refused or failed claim stays */
        return res;
    }
    out->record_id = record_id;
    out->stock = stock_left;
    return DB_OK;
}
