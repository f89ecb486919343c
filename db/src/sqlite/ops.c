/* sqlite/ops.c - the SQLite backend's statements (dbi_ops, db_internal.h):
 * each binds its parameters to a statement of the prepared table (sqlite/stmt.c),
 * steps it and reads its columns. The logic around them (section.c,
 * claim.c, coupon.c, audit.c) is shared with the PostgreSQL backend. */
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"

static void sq_close(db_store *db)
{
    dbi_finalize_all(db);
    /* With every statement finalized close cannot answer SQLITE_BUSY; the
     * last connection to close checkpoints the WAL into the main file. */
    (void)sqlite3_close(db->conn);
    db->conn = NULL;
}

static int sq_in_transaction(db_store *db)
{
    /* Autocommit means SQLite already ended the transaction (some errors
     * roll back by themselves). */
    return db->conn != NULL && !sqlite3_get_autocommit(db->conn);
}

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

static db_status sq_insert_coupon(db_store *db, const char *name, int64_t stock, int64_t per_user_limit,
                                  int64_t *id)
{
    /* One INSERT in autocommit is its own transaction: the coupon exists
     * whole or not at all. total and stock both take `stock` (?2). */
    sqlite3_stmt *st = dbi_stmt(db, DBI_COUPON_INSERT);
    int has_row = 0;
    db_status res = dbi_bind_text(db, st, 1, name);

    *id = 0;
    if (res == DB_OK)
        res = dbi_bind_int64(db, st, 2, stock);
    if (res == DB_OK)
        res = dbi_bind_int64(db, st, 3, per_user_limit);
    if (res == DB_OK)
        res = dbi_step(db, st, &has_row, "insert coupon");
    /* Read on this connection right after its own INSERT: no other
     * statement can run on a db_store in between (one thread at a time). */
    if (res == DB_OK)
        *id = sqlite3_last_insert_rowid(db->conn);
    dbi_done(st);
    return res;
}

static db_status sq_get_coupon(db_store *db, int64_t coupon_id, db_coupon *out)
{
    /* One statement reads the row and its record count from one snapshot,
     * so stock + issued is never a mix of two moments. */
    sqlite3_stmt *st = dbi_stmt(db, DBI_COUPON_GET);
    db_status res = dbi_step_coupon(db, st, coupon_id, "get coupon");

    if (res == DB_OK)
        read_coupon_row(st, out);
    dbi_done(st);
    return res;
}

static db_status sq_list_coupons(db_store *db, db_coupon **out, size_t *n)
{
    sqlite3_stmt *st = dbi_stmt(db, DBI_COUPON_LIST);
    db_coupon *list = NULL;
    size_t count = 0;
    size_t cap = 0;
    int has_row = 0;
    db_status res;

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
    dbi_done(st);
    if (res != DB_OK) {
        free(list);
        return res;
    }
    *out = list;
    *n = count;
    return DB_OK;
}

static db_status sq_peek_stock(db_store *db, int64_t coupon_id, int64_t *stock)
{
    sqlite3_stmt *st = dbi_stmt(db, DBI_STOCK_PEEK);
    db_status res = dbi_step_coupon(db, st, coupon_id, "peek stock");

    if (res == DB_OK)
        *stock = sqlite3_column_int64(st, 0);
    dbi_done(st);
    return res;
}

static db_status sq_select_coupon(db_store *db, int64_t coupon_id, int64_t *stock, int64_t *limit,
                                  int64_t *last_fence)
{
    sqlite3_stmt *st = dbi_stmt(db, DBI_CLAIM_SELECT);
    db_status res = dbi_step_coupon(db, st, coupon_id, "select coupon for claim");

    if (res == DB_OK) {
        *stock = sqlite3_column_int64(st, 0);
        *limit = sqlite3_column_int64(st, 1);
        *last_fence = sqlite3_column_int64(st, 2);
    }
    dbi_done(st);
    return res;
}

static db_status sq_fenced_read(db_store *db, int64_t coupon_id, int64_t fence, int64_t *stock, int64_t *limit,
                                int *has_row)
{
    sqlite3_stmt *st = dbi_stmt(db, DBI_FENCED_READ);
    db_status res = dbi_bind_int64(db, st, 1, coupon_id);

    *has_row = 0;
    if (res == DB_OK)
        res = dbi_bind_int64(db, st, 2, fence);
    if (res == DB_OK)
        res = dbi_step(db, st, has_row, "fenced read");
    if (res == DB_OK && *has_row) {
        *stock = sqlite3_column_int64(st, 0);
        *limit = sqlite3_column_int64(st, 1);
    }
    /* The UPDATE is complete after the first step; the reset ends it. */
    dbi_done(st);
    return res;
}

static db_status sq_count_user_records(db_store *db, int64_t coupon_id, const char *user_id, int64_t *held)
{
    sqlite3_stmt *st = dbi_stmt(db, DBI_USER_COUNT);
    int has_row = 0;
    db_status res = dbi_bind_int64(db, st, 1, coupon_id);

    if (res == DB_OK)
        res = dbi_bind_text(db, st, 2, user_id);
    if (res == DB_OK)
        res = dbi_step(db, st, &has_row, "count user records");
    if (res == DB_OK && has_row)
        *held = sqlite3_column_int64(st, 0);
    dbi_done(st);
    return res;
}

static db_status sq_update_stock(db_store *db, dbi_stmt_id id, int64_t coupon_id, const int64_t *values,
                                 int n_values, int *changed, const char *what)
{
    sqlite3_stmt *st = dbi_stmt(db, id);
    int has_row = 0;
    db_status res = dbi_bind_int64(db, st, 1, coupon_id);
    /* Bound by the statement's own parameter count: binding past it would
     * fail with SQLITE_RANGE (the atomic decrement has only ?1). */
    int n_params = sqlite3_bind_parameter_count(st);

    for (int i = 0; res == DB_OK && i < n_values && i + 2 <= n_params; i++)
        res = dbi_bind_int64(db, st, i + 2, values[i]);
    if (res == DB_OK)
        res = dbi_step(db, st, &has_row, what);
    if (res == DB_OK)
        *changed = sqlite3_changes(db->conn);
    dbi_done(st);
    return res;
}

static db_status sq_insert_record(db_store *db, int64_t coupon_id, const char *user_id, int64_t fence,
                                  int64_t *record_id)
{
    sqlite3_stmt *st = dbi_stmt(db, DBI_RECORD_INSERT);
    int has_row = 0;
    db_status res = dbi_bind_int64(db, st, 1, coupon_id);

    if (res == DB_OK)
        res = dbi_bind_text(db, st, 2, user_id);
    if (res == DB_OK)
        res = dbi_bind_int64(db, st, 3, fence);
    if (res == DB_OK)
        res = dbi_step(db, st, &has_row, "insert record");
    dbi_done(st);
    /* Valid right after this connection's INSERT (one thread per db_store). */
    *record_id = res == DB_OK ? sqlite3_last_insert_rowid(db->conn) : 0;
    return res;
}

static db_status sq_audit_coupon(db_store *db, int64_t coupon_id, int64_t *total, int64_t *stock, int64_t *limit,
                                 int64_t *issued, int *found)
{
    sqlite3_stmt *st = dbi_stmt(db, DBI_AUDIT_COUPON);
    db_status res = dbi_bind_int64(db, st, 1, coupon_id);

    if (res == DB_OK)
        res = dbi_step(db, st, found, "audit coupon");
    if (res == DB_OK && *found) {
        *total = sqlite3_column_int64(st, 0);
        *stock = sqlite3_column_int64(st, 1);
        *limit = sqlite3_column_int64(st, 2);
        *issued = sqlite3_column_int64(st, 3);
    }
    dbi_done(st);
    return res;
}

static db_status sq_audit_users(db_store *db, int64_t coupon_id, int64_t limit, int64_t *users_over,
                                int64_t *excess)
{
    sqlite3_stmt *st = dbi_stmt(db, DBI_AUDIT_USERS);
    int has_row = 0;
    db_status res = dbi_bind_int64(db, st, 1, coupon_id);

    if (res == DB_OK)
        res = dbi_bind_int64(db, st, 2, limit);
    if (res == DB_OK)
        res = dbi_step(db, st, &has_row, "audit users");
    /* An aggregate without GROUP BY always yields one row. */
    if (res == DB_OK && has_row) {
        *users_over = sqlite3_column_int64(st, 0);
        *excess = sqlite3_column_int64(st, 1);
    }
    dbi_done(st);
    return res;
}

/* One name serves every section of a group: they nest nowhere, each is
 * released or undone before the next opens. Fixed text, never built from
 * input; sqlite3_exec's parse is a few microseconds against a section's
 * statements. */
static db_status sq_savepoint(db_store *db, dbi_savepoint_op op)
{
    const char *sql = op == DBI_SAVEPOINT_OPEN      ? "SAVEPOINT grp"
                      : op == DBI_SAVEPOINT_RELEASE ? "RELEASE grp"
                                                    : "ROLLBACK TO grp; RELEASE grp";
    int rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL);

    return rc == SQLITE_OK ? DB_OK : dbi_fail(db, rc, sql);
}

const dbi_ops dbi_sqlite_ops = {
    .name = "sqlite",
    .close = sq_close,
    .exec = dbi_exec,
    .in_transaction = sq_in_transaction,
    .write_probe = dbi_sqlite_write_probe,
    .insert_coupon = sq_insert_coupon,
    .get_coupon = sq_get_coupon,
    .list_coupons = sq_list_coupons,
    .peek_stock = sq_peek_stock,
    .select_coupon = sq_select_coupon,
    .fenced_read = sq_fenced_read,
    .count_user_records = sq_count_user_records,
    .update_stock = sq_update_stock,
    .insert_record = sq_insert_record,
    .audit_coupon = sq_audit_coupon,
    .audit_users = sq_audit_users,
    .savepoint = sq_savepoint,
};
