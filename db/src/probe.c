/* probe.c - db_write_probe: can this connection write right now? For the
 * health check and the start-up check; it changes nothing. */
#include "db_internal.h"

db_status db_write_probe(db_store *db)
{
    if (db == NULL)
        return DB_INVALID;
    /* SQLite opens a file it may not write read-only without a word, and
     * BEGIN IMMEDIATE then still succeeds (the reserved lock is taken
     * before any page is written), so the connection itself is asked. */
    if (db->readonly || sqlite3_db_readonly(db->conn, "main") == 1) {
        dbi_set_error(db, "the database file is read-only");
        return DB_ERROR;
    }
    /* The write lock: a disk that refuses, or a writer that holds the lock
     * past the busy timeout, fails here as a claim's write would. */
    db_status res = dbi_exec(db, DBI_BEGIN_IMMEDIATE, "write probe: begin immediate");
    if (res != DB_OK)
        return res;
    return dbi_exec(db, DBI_ROLLBACK, "write probe: rollback");
}
