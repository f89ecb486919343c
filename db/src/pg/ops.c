/* pg/ops.c - the PostgreSQL backend's statements (dbi_ops, db_internal.h):
 * each formats its parameters as text, runs its statement through
 * dbpg_run (bounded) and reads the cells back, checked. The logic around
 * them (section.c, claim.c, coupon.c, audit.c) is shared with SQLite. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

/* Room for any int64 in decimal, its sign and the NUL. */
#define I64_TEXT 24

db_status dbpg_int64(db_store *db, const PGresult *r, int row, int col, int64_t *v)
{
    const char *s;
    char *end = NULL;
    long long x;

    *v = 0;
    if (row >= PQntuples(r) || col >= PQnfields(r) || PQgetisnull(r, row, col)) {
        dbi_set_error(db, "result has no integer at row %d column %d", row, col);
        return DB_ERROR;
    }
    s = PQgetvalue(r, row, col);
    errno = 0;
    x = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0') {
        dbi_set_error(db, "result cell '%.32s' is not a 64-bit integer", s);
        return DB_ERROR;
    }
    *v = (int64_t)x;
    return DB_OK;
}

static db_status ints(db_store *db, const PGresult *r, int row, int64_t *const *cols, int n)
{
    db_status res = DB_OK;
    for (int i = 0; res == DB_OK && i < n; i++)
        res = dbpg_int64(db, r, row, i, cols[i]);
    return res;
}

static db_status pg_exec(db_store *db, dbi_stmt_id id, const char *what)
{
    (void)what; /* the statement table names it */
    return dbpg_run(db, id, NULL, NULL);
}

static int pg_in_transaction(db_store *db)
{
    /* INTRANS or INERROR (a failed statement aborted it): ROLLBACK needed.
     * A dropped connection has no transaction left: the server rolled it back. */
    return db->pg->conn != NULL && PQtransactionStatus(db->pg->conn) != PQTRANS_IDLE;
}

static db_status pg_write_probe(db_store *db)
{
    PGresult *r = NULL;
    /* An UPDATE that matches no row: it still passes every check a write
     * passes (a read-only session or a standby refuses it) and takes the
     * table lock every write takes (waiting, up to lock_timeout, behind an
     * ALTER TABLE or a VACUUM FULL), and changes nothing. */
    db_status res = dbpg_run_text(db, "UPDATE coupon SET stock = stock WHERE false", "write probe", &r);

    PQclear(r);
    return res;
}

/* One coupon from a row of DBI_COUPON_GET / DBI_COUPON_LIST. */
static db_status coupon_row(db_store *db, const PGresult *r, int row, db_coupon *c)
{
    int64_t *cols[] = {&c->id, NULL, &c->total, &c->stock, &c->per_user_limit, &c->last_fence, &c->issued};
    db_status res = DB_OK;

    memset(c, 0, sizeof *c);
    for (int i = 0; res == DB_OK && i < 7; i++)
        if (cols[i] != NULL)
            res = dbpg_int64(db, r, row, i, cols[i]);
    /* A name longer than DB_NAME_MAX can only come from outside this API
     * (raw SQL): truncated to the struct's bound. */
    if (res == DB_OK)
        (void)snprintf(c->name, sizeof c->name, "%s", PQgetvalue(r, row, 1));
    return res;
}

static db_status not_found(db_store *db, int64_t coupon_id)
{
    dbi_set_error(db, "no coupon with id %" PRId64, coupon_id);
    return DB_NOT_FOUND;
}

static db_status pg_insert_coupon(db_store *db, const char *name, int64_t stock, int64_t per_user_limit,
                                  int64_t *id)
{
    char s[I64_TEXT], l[I64_TEXT];
    const char *v[] = {name, s, l};
    PGresult *r = NULL;
    db_status res;

    (void)snprintf(s, sizeof s, "%" PRId64, stock);
    (void)snprintf(l, sizeof l, "%" PRId64, per_user_limit);
    /* One INSERT in autocommit: the coupon exists whole or not at all. */
    res = dbpg_run(db, DBI_COUPON_INSERT, v, &r);
    if (res == DB_OK)
        res = dbpg_int64(db, r, 0, 0, id);
    PQclear(r);
    return res;
}

static db_status pg_get_coupon(db_store *db, int64_t coupon_id, db_coupon *out)
{
    char id[I64_TEXT];
    const char *v[] = {id};
    PGresult *r = NULL;
    db_status res;

    (void)snprintf(id, sizeof id, "%" PRId64, coupon_id);
    /* One statement: the row and its record count from one snapshot. */
    res = dbpg_run(db, DBI_COUPON_GET, v, &r);
    if (res == DB_OK)
        res = PQntuples(r) == 0 ? not_found(db, coupon_id) : coupon_row(db, r, 0, out);
    PQclear(r);
    return res;
}

static db_status pg_list_coupons(db_store *db, db_coupon **out, size_t *n)
{
    PGresult *r = NULL;
    db_coupon *list = NULL;
    db_status res = dbpg_run(db, DBI_COUPON_LIST, NULL, &r);
    int rows = res == DB_OK ? PQntuples(r) : 0;

    /* calloc of at least one element: a list of none is a valid empty array. */
    if (res == DB_OK) {
        list = calloc(rows > 0 ? (size_t)rows : 1, sizeof *list);
        if (list == NULL) {
            dbi_set_error(db, "list coupons: out of memory");
            res = DB_ERROR;
        }
    }
    for (int i = 0; res == DB_OK && i < rows; i++)
        res = coupon_row(db, r, i, &list[i]);
    PQclear(r);
    if (res != DB_OK) {
        free(list);
        return res;
    }
    if (rows == 0) {
        free(list); /* as SQLite's: NULL and 0 for no coupons */
        list = NULL;
    }
    *out = list;
    *n = (size_t)rows;
    return DB_OK;
}

/* Run a statement whose first parameter is the coupon id and that returns
 * at most one row; DB_NOT_FOUND when it returns none. */
static db_status coupon_query(db_store *db, dbi_stmt_id id, int64_t coupon_id, int64_t *const *cols, int n)
{
    char cid[I64_TEXT];
    const char *v[] = {cid};
    PGresult *r = NULL;
    db_status res;

    (void)snprintf(cid, sizeof cid, "%" PRId64, coupon_id);
    res = dbpg_run(db, id, v, &r);
    if (res == DB_OK)
        res = PQntuples(r) == 0 ? not_found(db, coupon_id) : ints(db, r, 0, cols, n);
    PQclear(r);
    return res;
}

static db_status pg_peek_stock(db_store *db, int64_t coupon_id, int64_t *stock)
{
    int64_t *cols[] = {stock};
    return coupon_query(db, DBI_STOCK_PEEK, coupon_id, cols, 1);
}

static db_status pg_select_coupon(db_store *db, int64_t coupon_id, int64_t *stock, int64_t *limit,
                                  int64_t *last_fence)
{
    int64_t *cols[] = {stock, limit, last_fence};
    return coupon_query(db, DBI_CLAIM_SELECT, coupon_id, cols, 3);
}

static db_status pg_fenced_read(db_store *db, int64_t coupon_id, int64_t fence, int64_t *stock, int64_t *limit,
                                int *has_row)
{
    char cid[I64_TEXT], f[I64_TEXT];
    const char *v[] = {cid, f};
    int64_t *cols[] = {stock, limit};
    PGresult *r = NULL;
    db_status res;

    *has_row = 0;
    (void)snprintf(cid, sizeof cid, "%" PRId64, coupon_id);
    (void)snprintf(f, sizeof f, "%" PRId64, fence);
    res = dbpg_run(db, DBI_FENCED_READ, v, &r);
    if (res == DB_OK && PQntuples(r) > 0) {
        *has_row = 1;
        res = ints(db, r, 0, cols, 2);
    }
    PQclear(r);
    return res;
}

static db_status pg_count_user_records(db_store *db, int64_t coupon_id, const char *user_id, int64_t *held)
{
    char cid[I64_TEXT];
    const char *v[] = {cid, user_id};
    PGresult *r = NULL;
    db_status res;

    (void)snprintf(cid, sizeof cid, "%" PRId64, coupon_id);
    res = dbpg_run(db, DBI_USER_COUNT, v, &r);
    if (res == DB_OK)
        res = dbpg_int64(db, r, 0, 0, held);
    PQclear(r);
    return res;
}

static db_status pg_update_stock(db_store *db, dbi_stmt_id id, int64_t coupon_id, const int64_t *values,
                                 int n_values, int *changed, const char *what)
{
    char text[3][I64_TEXT];
    const char *v[3] = {text[0], text[1], text[2]};
    /* As many values as the statement has parameters (the decrement: only $1). */
    int n_params = (int)strlen(dbpg_statements[id].params);
    PGresult *r = NULL;
    db_status res;

    (void)what;
    if (n_params > 3 || n_params - 1 > n_values) {
        dbi_set_error(db, "%s: %d parameters, %d values", dbpg_statements[id].name, n_params, n_values + 1);
        return DB_INVALID;
    }
    (void)snprintf(text[0], sizeof text[0], "%" PRId64, coupon_id);
    for (int i = 1; i < n_params; i++)
        (void)snprintf(text[i], sizeof text[i], "%" PRId64, values[i - 1]);
    res = dbpg_run(db, id, v, &r);
    /* PQcmdTuples: the rows the UPDATE changed, as text ("0" or "1"). */
    if (res == DB_OK)
        *changed = atoi(PQcmdTuples(r));
    PQclear(r);
    return res;
}

static db_status pg_insert_record(db_store *db, int64_t coupon_id, const char *user_id, int64_t fence,
                                  int64_t *record_id)
{
    char cid[I64_TEXT], f[I64_TEXT];
    const char *v[] = {cid, user_id, f};
    PGresult *r = NULL;
    db_status res;

    (void)snprintf(cid, sizeof cid, "%" PRId64, coupon_id);
    (void)snprintf(f, sizeof f, "%" PRId64, fence);
    res = dbpg_run(db, DBI_RECORD_INSERT, v, &r);
    if (res == DB_OK)
        res = dbpg_int64(db, r, 0, 0, record_id);
    PQclear(r);
    return res;
}

static db_status pg_audit_coupon(db_store *db, int64_t coupon_id, int64_t *total, int64_t *stock, int64_t *limit,
                                 int64_t *issued, int *found)
{
    int64_t *cols[] = {total, stock, limit, issued};
    db_status res = coupon_query(db, DBI_AUDIT_COUPON, coupon_id, cols, 4);

    *found = res != DB_NOT_FOUND;
    return res == DB_NOT_FOUND ? DB_OK : res;
}

static db_status pg_audit_users(db_store *db, int64_t coupon_id, int64_t limit, int64_t *users_over,
                                int64_t *excess)
{
    char cid[I64_TEXT], l[I64_TEXT];
    const char *v[] = {cid, l};
    int64_t *cols[] = {users_over, excess};
    PGresult *r = NULL;
    db_status res;

    (void)snprintf(cid, sizeof cid, "%" PRId64, coupon_id);
    (void)snprintf(l, sizeof l, "%" PRId64, limit);
    res = dbpg_run(db, DBI_AUDIT_USERS, v, &r);
    /* An aggregate without GROUP BY always yields one row. */
    if (res == DB_OK)
        res = ints(db, r, 0, cols, 2);
    PQclear(r);
    return res;
}

const dbi_ops dbi_pg_ops = {
    .name = "postgresql",
    .close = dbpg_close,
    .exec = pg_exec,
    .in_transaction = pg_in_transaction,
    .write_probe = pg_write_probe,
    .insert_coupon = pg_insert_coupon,
    .get_coupon = pg_get_coupon,
    .list_coupons = pg_list_coupons,
    .peek_stock = pg_peek_stock,
    .select_coupon = pg_select_coupon,
    .fenced_read = pg_fenced_read,
    .count_user_records = pg_count_user_records,
    .update_stock = pg_update_stock,
    .insert_record = pg_insert_record,
    .audit_coupon = pg_audit_coupon,
    .audit_users = pg_audit_users,
    .section_read = dbpg_section_read,
    .section_write = dbpg_section_write,
    .section_whole = dbpg_section_whole,
};
