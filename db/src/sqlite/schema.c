/* sqlite/schema.c - the coupon schema and its PRAGMA user_version migrations,
 * applied inside BEGIN IMMEDIATE so that processes opening one fresh file at
 * the same moment create it exactly once. */
#include <stdio.h>

#include "db_internal.h"

/* dbi_migrations[v] takes a file from user_version v to v + 1. A later
 * schema appends a step (v1 -> v2: ALTER TABLE / CREATE ...) and raises
 * DBI_SCHEMA_VERSION; a step that has shipped is never edited, because files
 * already at its version would never see the change. */
static const char *const dbi_migrations[] = {
    /* v0 -> v1: the first schema.
     *
     * No CHECK(stock >= 0) on coupon.stock, on purpose: the critical section
     * run without mutual exclusion (`none`, or a lock whose lease ran out
     * with the fence off) exists to show overselling, and its lost update
     * may drive the counts past the stock. A CHECK would turn that evidence
     * into a constraint error and hide the bug the audit must expose. total
     * is fixed at creation, so it does get a CHECK.
     *
     * last_fence: the highest fencing token the row has accepted; a read or
     * write carrying a lower one is refused by the statement itself
     * (section.c). */
    "CREATE TABLE coupon ("
    " id INTEGER PRIMARY KEY,"
    " name TEXT NOT NULL,"
    " total INTEGER NOT NULL CHECK (total >= 0),"
    " stock INTEGER NOT NULL,"
    " per_user_limit INTEGER NOT NULL DEFAULT 1 CHECK (per_user_limit >= 0),"
    " last_fence INTEGER NOT NULL DEFAULT 0,"
    " created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ");"
    "CREATE TABLE coupon_record ("
    " id INTEGER PRIMARY KEY,"
    " coupon_id INTEGER NOT NULL REFERENCES coupon(id),"
    " user_id TEXT NOT NULL,"
    " fence INTEGER NOT NULL DEFAULT 0,"
    " created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))"
    ");"
    /* Serves both hot reads: a user's count for one coupon (the per-user
     * limit) and the records of one coupon (issued, the audit). */
    "CREATE INDEX coupon_record_by_coupon_user ON coupon_record(coupon_id, user_id);",
};

_Static_assert(sizeof dbi_migrations / sizeof dbi_migrations[0] == DBI_SCHEMA_VERSION,
               "one migration step per schema version");

db_status dbi_user_version(db_store *db, int *version)
{
    db_status res = DB_ERROR;
    sqlite3_stmt *st = NULL;
    int has_row = 0;
    int rc;

    *version = 0;
    /* Prepared here, not in the statement table: it runs before the tables
     * that table's statements refer to exist. */
    rc = sqlite3_prepare_v2(db->conn, "PRAGMA user_version", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        res = dbi_fail(db, rc, "read user_version");
        goto out;
    }
    res = dbi_step(db, st, &has_row, "read user_version");
    if (res != DB_OK)
        goto out;
    if (!has_row) {
        dbi_set_error(db, "read user_version: no row");
        res = DB_ERROR;
        goto out;
    }
    *version = sqlite3_column_int(st, 0);
out:
    (void)sqlite3_finalize(st); /* its error, if any, was reported by the step */
    return res;
}

/* Objects in a file at user_version 0: 0 for a fresh file. */
static db_status count_schema_objects(db_store *db, int *count)
{
    db_status res = DB_ERROR;
    sqlite3_stmt *st = NULL;
    int has_row = 0;
    int rc;

    *count = 0;
    rc = sqlite3_prepare_v2(db->conn, "SELECT COUNT(*) FROM sqlite_master", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        res = dbi_fail(db, rc, "read schema");
        goto out;
    }
    res = dbi_step(db, st, &has_row, "read schema");
    if (res == DB_OK && has_row)
        *count = sqlite3_column_int(st, 0);
out:
    (void)sqlite3_finalize(st);
    return res;
}

/* The migration runs before the statement table is prepared (its statements
 * name tables that do not exist yet), so it runs its fixed SQL text here. */
static db_status exec_sql(db_store *db, const char *sql, const char *what)
{
    int rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return dbi_fail(db, rc, what);
    return DB_OK;
}

static db_status set_user_version(db_store *db, int version)
{
    char sql[48];

    /* PRAGMA takes no bound parameters; the number is our own loop counter,
     * never input, so formatting it into the text is safe. */
    (void)snprintf(sql, sizeof sql, "PRAGMA user_version = %d", version);
    return exec_sql(db, sql, "set user_version");
}

db_status dbi_migrate(db_store *db)
{
    db_status res = DB_ERROR;
    int version = 0;
    int objects = 0;

    /* Fast path without the write lock: every open after the first finds the
     * schema current, and a server's N worker connections should not queue
     * behind each other's BEGIN IMMEDIATE just to learn that. */
    res = dbi_user_version(db, &version);
    if (res != DB_OK || version == DBI_SCHEMA_VERSION)
        return res;
    if (version > DBI_SCHEMA_VERSION) {
        dbi_set_error(db, "schema version %d is newer than this build understands (%d)", version,
                      DBI_SCHEMA_VERSION);
        return DB_ERROR;
    }

    res = exec_sql(db, "BEGIN IMMEDIATE", "begin schema migration");
    if (res != DB_OK)
        return res;
    /* Re-read under the write lock: another process opening the same fresh
     * file may have migrated it between our first read and our BEGIN, and
     * running CREATE TABLE twice would fail ("table coupon already exists"). */
    res = dbi_user_version(db, &version);
    if (res != DB_OK)
        goto out;
    if (version > DBI_SCHEMA_VERSION) {
        dbi_set_error(db, "schema version %d is newer than this build understands (%d)", version,
                      DBI_SCHEMA_VERSION);
        res = DB_ERROR;
        goto out;
    }
    if (version == 0) {
        /* A SQLite file with tables but user_version 0 belongs to someone
         * else: adding our tables to it would damage their database. */
        res = count_schema_objects(db, &objects);
        if (res != DB_OK)
            goto out;
        if (objects != 0) {
            dbi_set_error(db, "not a coupon database (user_version 0 but %d schema objects); refusing to modify it",
                          objects);
            res = DB_ERROR;
            goto out;
        }
    }
    for (; version < DBI_SCHEMA_VERSION; version++) {
        res = exec_sql(db, dbi_migrations[version], "schema migration");
        if (res != DB_OK)
            goto out;
        res = set_user_version(db, version + 1);
        if (res != DB_OK)
            goto out;
    }
    res = exec_sql(db, "COMMIT", "commit schema migration");
out:
    /* Nothing of a failed migration may stay: the next opener starts again
     * from the same user_version. Its own error is not the one to report. */
    if (res != DB_OK && !sqlite3_get_autocommit(db->conn))
        (void)sqlite3_exec(db->conn, "ROLLBACK", NULL, NULL, NULL);
    return res;
}
