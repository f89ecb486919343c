/* probe.c - db_write_probe: could this store start a write right now? For
 * health checks that must tell "reads answer" from "writes would block"
 * (another process holding SQLite's write lock past the busy timeout, a
 * PostgreSQL server that went read-only). Nothing is ever written. */
#include "db_internal.h"

db_status dbi_sqlite_write_probe(db_store *db)
{
    db_status res;

    /* SQLite opens a file it may not write read-only without a word, and
     * BEGIN IMMEDIATE then still succeeds (the reserved lock is taken
     * before any page is written), so the connection itself is asked. */
    if (db->readonly || sqlite3_db_readonly(db->conn, "main") == 1) {
        dbi_set_error(db, "the database file is read-only");
        return DB_ERROR;
    }
    /* BEGIN IMMEDIATE takes the write lock (waiting up to the busy timeout)
     * or fails with DB_BUSY; the ROLLBACK gives it back at once. */
    res = dbi_begin_immediate(db);

    if (res != DB_OK)
        return res;
    dbi_rollback(db);
    return DB_OK;
}

db_status db_write_probe(db_store *db)
{
    if (db == NULL)
        return DB_INVALID;
    return db->ops->write_probe(db);
}
