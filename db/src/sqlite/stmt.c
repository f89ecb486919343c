/* sqlite/stmt.c - the table of SQL statements the store runs, prepared once per
 * connection and reused, with checked bind/step helpers. Every value reaches
 * SQLite through a bound parameter: no SQL text is ever built from input. */
#include <stdio.h>

#include "db_internal.h"

/* Counting records with a correlated subquery walks only this coupon's slice
 * of the (coupon_id, user_id) index: no table scan, no GROUP BY over all rows. */
#define DBI_ISSUED_SUBQUERY "(SELECT COUNT(*) FROM coupon_record r WHERE r.coupon_id = c.id)"
#define DBI_COUPON_COLUMNS \
    "c.id, c.name, c.total, c.stock, c.per_user_limit, c.last_fence, " DBI_ISSUED_SUBQUERY

static const struct {
    const char *name; /* for error detail */
    const char *sql;
} dbi_sql[DBI_STMT_COUNT] = {
    [DBI_BEGIN_IMMEDIATE] = {"begin immediate", "BEGIN IMMEDIATE"},
    [DBI_BEGIN_DEFERRED] = {"begin", "BEGIN"},
    [DBI_COMMIT] = {"commit", "COMMIT"},
    [DBI_ROLLBACK] = {"rollback", "ROLLBACK"},
    /* Reads a page of the coupon table, so a ping fails when the file or its
     * schema is unusable, not only when the library is loaded. */
    [DBI_PING] = {"ping", "SELECT 1 FROM coupon LIMIT 1"},
    [DBI_COUPON_INSERT] = {"insert coupon",
                           "INSERT INTO coupon(name, total, stock, per_user_limit) VALUES (?1, ?2, ?2, ?3)"},
    [DBI_COUPON_GET] = {"get coupon", "SELECT " DBI_COUPON_COLUMNS " FROM coupon c WHERE c.id = ?1"},
    [DBI_COUPON_LIST] = {"list coupons", "SELECT " DBI_COUPON_COLUMNS " FROM coupon c ORDER BY c.id"},
    [DBI_STOCK_PEEK] = {"peek stock", "SELECT stock FROM coupon WHERE id = ?1"},
    [DBI_CLAIM_SELECT] = {"select coupon for claim",
                          "SELECT stock, per_user_limit, last_fence FROM coupon WHERE id = ?1"},
    [DBI_USER_COUNT] = {"count user records",
                        "SELECT COUNT(*) FROM coupon_record WHERE coupon_id = ?1 AND user_id = ?2"},
    /* Step 1 under --fence full: the read registers the holder's fence in
     * the same statement that returns the stock, so the row refuses every
     * later operation of an older holder (see section.c for why `<=`). */
    [DBI_FENCED_READ] = {"fenced read",
                         "UPDATE coupon SET last_fence = ?2 WHERE id = ?1 AND last_fence <= ?2 "
                         "RETURNING stock, per_user_limit"},
    /* Step 3: write back the value read minus what was sold. Not `stock =
     * stock - n`: the section is written the way business code is, so that
     * only mutual exclusion keeps two holders from writing the same value. */
    [DBI_WRITE_STOCK] = {"write stock", "UPDATE coupon SET stock = ?2 WHERE id = ?1"},
    /* Step 3 under --fence write|full: the fence check lives in the WHERE
     * clause of the write itself, so the database refuses a stale holder. */
    [DBI_FENCED_WRITE_STOCK] = {"fenced write stock",
                                "UPDATE coupon SET stock = ?2, last_fence = ?3 WHERE id = ?1 AND last_fence <= ?3"},
    [DBI_ATOMIC_DECREMENT] = {"conditional decrement",
                              "UPDATE coupon SET stock = stock - 1 WHERE id = ?1 AND stock > 0"},
    [DBI_RECORD_INSERT] = {"insert record",
                           "INSERT INTO coupon_record(coupon_id, user_id, fence) VALUES (?1, ?2, ?3)"},
    [DBI_AUDIT_COUPON] = {"audit coupon",
                          "SELECT c.total, c.stock, c.per_user_limit, " DBI_ISSUED_SUBQUERY
                          " FROM coupon c WHERE c.id = ?1"},
    /* Per user of one coupon: how many records beyond the limit (?2, the
     * coupon's per_user_limit; 0 = unlimited, so nothing is over it). */
    [DBI_AUDIT_USERS] = {"audit users",
                         "SELECT COUNT(*), COALESCE(SUM(n - ?2), 0) FROM "
                         "(SELECT COUNT(*) AS n FROM coupon_record WHERE coupon_id = ?1 GROUP BY user_id) "
                         "WHERE ?2 > 0 AND n > ?2"},
};

db_status dbi_prepare_all(db_store *db)
{
    for (int i = 0; i < DBI_STMT_COUNT; i++) {
        /* PERSISTENT: these live as long as the connection, so SQLite should
         * not take their memory from the small lookaside pool. */
        int rc = sqlite3_prepare_v3(db->conn, dbi_sql[i].sql, -1, SQLITE_PREPARE_PERSISTENT,
                                    &db->stmt[i], NULL);
        if (rc != SQLITE_OK) {
            char what[64];
            (void)snprintf(what, sizeof what, "prepare %s", dbi_sql[i].name);
            return dbi_fail(db, rc, what);
        }
    }
    return DB_OK;
}

void dbi_finalize_all(db_store *db)
{
    for (int i = 0; i < DBI_STMT_COUNT; i++) {
        /* sqlite3_finalize(NULL) is a no-op; its return value repeats the last
         * step's error, already reported where it happened. */
        (void)sqlite3_finalize(db->stmt[i]);
        db->stmt[i] = NULL;
    }
}

sqlite3_stmt *dbi_stmt(db_store *db, dbi_stmt_id id)
{
    sqlite3_stmt *st = db->stmt[id];

    /* reset's return value is the previous step's error, already handled;
     * the statement itself is always usable afterwards. */
    (void)sqlite3_reset(st);
    (void)sqlite3_clear_bindings(st);
    return st;
}

db_status dbi_bind_int64(db_store *db, sqlite3_stmt *st, int idx, int64_t v)
{
    int rc = sqlite3_bind_int64(st, idx, (sqlite3_int64)v);
    if (rc != SQLITE_OK)
        return dbi_fail(db, rc, "bind integer");
    return DB_OK;
}

db_status dbi_bind_text(db_store *db, sqlite3_stmt *st, int idx, const char *s)
{
    /* SQLITE_TRANSIENT: SQLite copies the text, so the caller's buffer may
     * change or go away before the step. */
    int rc = sqlite3_bind_text(st, idx, s, -1, SQLITE_TRANSIENT);
    if (rc != SQLITE_OK)
        return dbi_fail(db, rc, "bind text");
    return DB_OK;
}

db_status dbi_step(db_store *db, sqlite3_stmt *st, int *has_row, const char *what)
{
    int rc = sqlite3_step(st);

    *has_row = 0;
    if (rc == SQLITE_ROW) {
        *has_row = 1;
        return DB_OK;
    }
    if (rc == SQLITE_DONE)
        return DB_OK;
    return dbi_fail(db, rc, what);
}

void dbi_done(sqlite3_stmt *st)
{
    if (st != NULL)
        (void)sqlite3_reset(st); /* see dbi_stmt: the error was seen at step */
}

db_status dbi_exec(db_store *db, dbi_stmt_id id, const char *what)
{
    sqlite3_stmt *st = dbi_stmt(db, id);
    int has_row = 0;
    db_status res = dbi_step(db, st, &has_row, what);

    dbi_done(st);
    return res;
}

db_status dbi_step_coupon(db_store *db, sqlite3_stmt *st, int64_t coupon_id, const char *what)
{
    int has_row = 0;
    db_status res = dbi_bind_int64(db, st, 1, coupon_id);

    if (res == DB_OK)
        res = dbi_step(db, st, &has_row, what);
    if (res == DB_OK && !has_row) {
        dbi_set_error(db, "no coupon with id %lld", (long long)coupon_id);
        res = DB_NOT_FOUND;
    }
    return res;
}
