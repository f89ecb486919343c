/* probe.c - db_write_probe: can this store write right now? For health
 * checks that must tell "reads answer" from "writes fail or would block"
 * (another process holding SQLite's write lock past the busy timeout, a
 * full disk, a file that stopped taking writes, a PostgreSQL server that
 * went read-only). No data ever changes. */
#include <stdio.h>

#include "db_internal.h"

/* Inside BEGIN IMMEDIATE: rewrite user_version with the value it has. The
 * header page is written to the WAL and committed, so the probe meets
 * whatever a claim's commit would meet (a full disk, a file that stopped
 * taking writes), yet no data changes. */
static db_status rewrite_user_version(db_store *db)
{
    char sql[64];
    int version = 0;
    db_status res = dbi_user_version(db, &version);

    if (res != DB_OK)
        return res;
    /* A PRAGMA takes no bound parameter; the value is an int this file just
     * gave us, not input. */
    (void)snprintf(sql, sizeof sql, "PRAGMA user_version = %d", version);
    int rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return dbi_fail(db, rc, "write probe");
    return DB_OK;
}

db_status dbi_sqlite_write_probe(db_store *db)
{
    db_status res;

    /* SQLite opens a file it may not write read-only without a word, and
     * BEGIN IMMEDIATE then still succeeds (the reserved lock is taken
     * before any page is written), so the connection itself is asked. */
    if (db->readonly || sqlite3_db_readonly(db->conn, "main") == 1) {
        dbi_set_error(db, "the database file is read-only");
        dbi_set_fault(db, DB_FAULT_READONLY);
        return DB_ERROR;
    }
    /* BEGIN IMMEDIATE takes the write lock (waiting up to the busy timeout)
     * or fails with DB_BUSY. BEGIN IMMEDIATE; ROLLBACK alone passed on a
     * full disk and on an immutable file (nothing reaches the file), and
     * /healthz said ok while every claim failed: the probe commits. */
    res = dbi_begin_immediate(db);
    if (res != DB_OK)
        return res;
    res = rewrite_user_version(db);
    if (res == DB_OK)
        res = dbi_commit(db);
    if (res != DB_OK)
        dbi_rollback(db); /* a failed COMMIT may leave the transaction open */
    return res;
}

db_status db_write_probe(db_store *db)
{
    if (db == NULL)
        return DB_INVALID;
    return db->ops->write_probe(db);
}
