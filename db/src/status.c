/* status.c - status texts, the per-handle error detail, and the mapping of
 * SQLite result codes to db_status. */
#include <stdarg.h>
#include <stdio.h>

#include "db_internal.h"

const char *db_status_str(db_status st)
{
    /* A switch without default: -Werror=switch flags a status added to the
     * enum but not here (the curl strerror habit). */
    switch (st) {
    case DB_OK:
        return "ok";
    case DB_NOT_FOUND:
        return "no such coupon";
    case DB_SOLD_OUT:
        return "sold out";
    case DB_USER_LIMIT:
        return "user reached the per-user limit";
    case DB_STALE_FENCE:
        return "stale fence: a newer lock holder has written";
    case DB_BUSY:
        return "database busy";
    case DB_INVALID:
        return "invalid argument";
    case DB_ERROR:
        return "database error";
    }
    return "unknown db status";
}

const char *db_errmsg(const db_store *db)
{
    if (db == NULL)
        return "no database handle";
    return db->errmsg;
}

void dbi_set_error(db_store *db, const char *fmt, ...)
{
    va_list ap;

    if (db == NULL)
        return;
    va_start(ap, fmt);
    /* vsnprintf truncates into the fixed buffer: the error path never allocates. */
    (void)vsnprintf(db->errmsg, sizeof db->errmsg, fmt, ap);
    va_end(ap);
}

db_status dbi_fail(db_store *db, int rc, const char *what)
{
    int primary = rc & 0xff; /* extended codes are on: SQLITE_BUSY_SNAPSHOT etc. */
    const char *detail = sqlite3_errstr(rc);

    /* The connection's message is more precise ("no such table: coupon",
     * "CHECK constraint failed: ...") but only when it belongs to this rc. */
    if (db->conn != NULL && sqlite3_extended_errcode(db->conn) == rc)
        detail = sqlite3_errmsg(db->conn);
    dbi_set_error(db, "%s: %s (sqlite %d)", what, detail, rc);
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
        return DB_BUSY;
    return DB_ERROR;
}
