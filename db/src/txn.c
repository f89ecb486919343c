/* txn.c - transaction boundaries: BEGIN IMMEDIATE for every write, BEGIN for
 * consistent multi-statement reads, COMMIT, and a ROLLBACK that keeps the
 * error which caused it. */
#include <string.h>

#include "db_internal.h"

db_status dbi_begin_immediate(db_store *db)
{
    /* IMMEDIATE takes the write lock now: a second writer waits here (busy
     * timeout) instead of failing with SQLITE_BUSY halfway through a
     * read-check-write, and no two writers' read-check-write can interleave. */
    return db->ops->exec(db, DBI_BEGIN_IMMEDIATE, "begin immediate");
}

db_status dbi_begin_deferred(db_store *db)
{
    return db->ops->exec(db, DBI_BEGIN_DEFERRED, "begin");
}

db_status dbi_commit(db_store *db)
{
    return db->ops->exec(db, DBI_COMMIT, "commit");
}

void dbi_rollback(db_store *db)
{
    char saved[sizeof db->errmsg];
    db_fault saved_fault = db->fault;
    db_status res;

    /* No transaction open: the database already ended it (some errors roll
     * back by themselves); a second ROLLBACK would only add a misleading error. */
    if (!db->ops->in_transaction(db))
        return;
    memcpy(saved, db->errmsg, sizeof saved);
    res = db->ops->exec(db, DBI_ROLLBACK, "rollback");
    /* The caller reports the failure that made it roll back, not this one;
     * a failed ROLLBACK still ends the transaction when the handle is closed. */
    memcpy(db->errmsg, saved, sizeof saved);
    db->fault = saved_fault;
    (void)res;
}
