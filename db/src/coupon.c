/* coupon.c - creating and reading coupons: create with validation, get and
 * list with `issued` counted from the records, and the cheap stock peek. */
#include <string.h>

#include "db_internal.h"

db_status db_create_coupon(db_store *db, const char *name, int64_t stock, int64_t per_user_limit,
                           db_coupon *out)
{
    db_status res = DB_INVALID;
    size_t name_len;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (db == NULL)
        goto out;
    if (out == NULL) {
        dbi_set_error(db, "create coupon: NULL out parameter");
        goto out;
    }
    if (dbi_check_text(db, name, DB_NAME_MAX, "coupon name", &name_len) != DB_OK)
        goto out;
    if (stock < 0) {
        dbi_set_error(db, "stock must be >= 0 (got %lld)", (long long)stock);
        goto out;
    }
    if (per_user_limit < 0) {
        dbi_set_error(db, "per_user_limit must be >= 0 (got %lld)", (long long)per_user_limit);
        goto out;
    }

    res = db->ops->insert_coupon(db, name, stock, per_user_limit, &out->id);
    if (res != DB_OK)
        goto out;
    memcpy(out->name, name, name_len + 1);
    out->total = stock;
    out->stock = stock;
    out->issued = 0;
    out->per_user_limit = per_user_limit;
    out->last_fence = 0;
out:
    return res;
}

db_status db_get_coupon(db_store *db, int64_t coupon_id, db_coupon *out)
{
    db_coupon c;
    db_status res;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (db == NULL || out == NULL)
        return DB_INVALID;
    memset(&c, 0, sizeof c);
    res = db->ops->get_coupon(db, coupon_id, &c);
    if (res == DB_OK)
        *out = c;
    return res;
}

db_status db_list_coupons(db_store *db, db_coupon **out, size_t *n)
{
    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (db == NULL || out == NULL || n == NULL)
        return DB_INVALID;
    return db->ops->list_coupons(db, out, n);
}

db_status db_peek_stock(db_store *db, int64_t coupon_id, int64_t *stock)
{
    if (stock != NULL)
        *stock = 0;
    if (db == NULL || stock == NULL)
        return DB_INVALID;
    return db->ops->peek_stock(db, coupon_id, stock);
}
