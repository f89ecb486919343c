/* coupon.c - creating and reading coupons: create with validation, get and
 * list with `issued` counted from the records, and the cheap stock peek. */
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"

/* Fill *c from a row of DBI_COUPON_GET / DBI_COUPON_LIST (DBI_COUPON_COLUMNS). */
static void read_coupon_row(sqlite3_stmt *st, db_coupon *c)
{
    const unsigned char *name = sqlite3_column_text(st, 1);
    int name_len = sqlite3_column_bytes(st, 1);

    memset(c, 0, sizeof *c);
    c->id = sqlite3_column_int64(st, 0);
    /* A name longer than DB_NAME_MAX can only come from outside this API
     * (raw SQL); truncating keeps the struct's bound instead of overflowing. */
    if (name != NULL && name_len > 0) {
        size_t n = (size_t)name_len > DB_NAME_MAX ? DB_NAME_MAX : (size_t)name_len;
        memcpy(c->name, name, n);
        c->name[n] = '\0';
    }
    c->total = sqlite3_column_int64(st, 2);
    c->stock = sqlite3_column_int64(st, 3);
    c->per_user_limit = sqlite3_column_int64(st, 4);
    c->last_fence = sqlite3_column_int64(st, 5);
    c->issued = sqlite3_column_int64(st, 6);
}

db_status db_create_coupon(db_store *db, const char *name, int64_t stock, int64_t per_user_limit,
                           db_coupon *out)
{
    db_status res = DB_INVALID;
    sqlite3_stmt *st = NULL;
    size_t name_len;
    int has_row = 0;

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

    /* One INSERT in autocommit is its own transaction: the coupon exists
     * whole or not at all. total and stock both take `stock` (?2). */
    st = dbi_stmt(db, DBI_COUPON_INSERT);
    res = dbi_bind_text(db, st, 1, name);
    if (res == DB_OK)
        res = dbi_bind_int64(db, st, 2, stock);
    if (res == DB_OK)
        res = dbi_bind_int64(db, st, 3, per_user_limit);
    if (res == DB_OK)
        res = dbi_step(db, st, &has_row, "insert coupon");
    if (res != DB_OK)
        goto out;
    /* Read on this connection right after its own INSERT: no other
     * statement can run on a db_store in between (one thread at a time). */
    out->id = sqlite3_last_insert_rowid(db->conn);
    memcpy(out->name, name, name_len + 1);
    out->total = stock;
    out->stock = stock;
    out->issued = 0;
    out->per_user_limit = per_user_limit;
    out->last_fence = 0;
out:
    dbi_done(st);
    return res;
}

db_status db_get_coupon(db_store *db, int64_t coupon_id, db_coupon *out)
{
    db_status res = DB_INVALID;
    sqlite3_stmt *st = NULL;

    if (out != NULL)
        memset(out, 0, sizeof *out);
    if (db == NULL || out == NULL)
        goto out;
    /* One statement reads the row and its record count from one snapshot,
     * so stock + issued is never a mix of two moments. */
    st = dbi_stmt(db, DBI_COUPON_GET);
    res = dbi_step_coupon(db, st, coupon_id, "get coupon");
    if (res != DB_OK)
        goto out;
    read_coupon_row(st, out);
out:
    dbi_done(st);
    return res;
}

db_status db_list_coupons(db_store *db, db_coupon **out, size_t *n)
{
    db_status res = DB_INVALID;
    sqlite3_stmt *st = NULL;
    db_coupon *list = NULL;
    size_t count = 0;
    size_t cap = 0;
    int has_row = 0;

    if (out != NULL)
        *out = NULL;
    if (n != NULL)
        *n = 0;
    if (db == NULL || out == NULL || n == NULL)
        goto out;
    st = dbi_stmt(db, DBI_COUPON_LIST);
    for (;;) {
        res = dbi_step(db, st, &has_row, "list coupons");
        if (res != DB_OK || !has_row)
            break;
        if (count == cap) {
            size_t new_cap = cap == 0 ? 8 : cap * 2;
            db_coupon *grown;
            /* Doubling must not wrap the byte count handed to realloc. */
            if (new_cap > SIZE_MAX / sizeof *list) {
                dbi_set_error(db, "list coupons: too many rows");
                res = DB_ERROR;
                break;
            }
            grown = realloc(list, new_cap * sizeof *list);
            if (grown == NULL) {
                dbi_set_error(db, "list coupons: out of memory");
                res = DB_ERROR;
                break;
            }
            list = grown;
            cap = new_cap;
        }
        read_coupon_row(st, &list[count]);
        count++;
    }
    if (res != DB_OK)
        goto out;
    *out = list;
    *n = count;
    list = NULL;
out:
    dbi_done(st);
    free(list);
    return res;
}

db_status db_peek_stock(db_store *db, int64_t coupon_id, int64_t *stock)
{
    db_status res = DB_INVALID;
    sqlite3_stmt *st = NULL;

    if (stock != NULL)
        *stock = 0;
    if (db == NULL || stock == NULL)
        goto out;
    st = dbi_stmt(db, DBI_STOCK_PEEK);
    res = dbi_step_coupon(db, st, coupon_id, "peek stock");
    if (res != DB_OK)
        goto out;
    *stock = sqlite3_column_int64(st, 0);
out:
    dbi_done(st);
    return res;
}
