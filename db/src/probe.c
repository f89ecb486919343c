/* probe.c - db_write_probe: could this store start a write right now? For
 * health checks that must tell "reads answer" from "writes would block"
 * (another process holding SQLite's write lock past the busy timeout, a
 * PostgreSQL server that went read-only). Nothing is ever written. */
#include "db_internal.h"

db_status dbi_sqlite_write_probe(db_store *db)
{
    /* BEGIN IMMEDIATE takes the write lock (waiting up to the busy timeout)
     * or fails with DB_BUSY; the ROLLBACK gives it back at once. */
    db_status res = dbi_begin_immediate(db);

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
