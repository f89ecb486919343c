/* status.c - status texts, the per-handle error detail, the mapping of
 * SQLite result codes to db_status, and the one-line open error both
 * backends give. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

const char *db_fault_str(db_fault f)
{
    switch (f) {
    case DB_FAULT_NONE: return "none";
    case DB_FAULT_BUSY: return "locked by another writer or busy past the timeout";
    case DB_FAULT_READONLY: return "read-only: writes are refused";
    case DB_FAULT_FULL: return "full: no space left for writes";
    case DB_FAULT_IO: return "I/O error";
    case DB_FAULT_OTHER: return "store error";
    }
    return "store error";
}

db_fault db_last_fault(const db_store *db)
{
    return db != NULL ? db->fault : DB_FAULT_NONE;
}

void dbi_set_fault(db_store *db, db_fault f)
{
    if (db != NULL)
        db->fault = f;
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
    db->fault = DB_FAULT_OTHER;
}

/* Does the file or its WAL refuse writes now? SQLite's errno of a failed
 * COMMIT is often gone by the time it returns (its own rollback ran
 * since), so the files are asked: access(W_OK) fails with EPERM for an
 * immutable file and EROFS on a read-only mount, for root too. Only on the
 * error path. */
static int files_refuse_writes(db_store *db)
{
    const char *path = db->conn != NULL ? sqlite3_db_filename(db->conn, "main") : NULL;
    char wal[4096];

    if (path == NULL || path[0] == '\0')
        return 0;
    if (access(path, W_OK) != 0 && (errno == EPERM || errno == EROFS || errno == EACCES))
        return 1;
    int n = snprintf(wal, sizeof wal, "%s-wal", path);
    /* No WAL file (checkpointed away) is no refusal. */
    return n > 0 && (size_t)n < sizeof wal && access(wal, W_OK) != 0 &&
           (errno == EPERM || errno == EROFS || errno == EACCES);
}

/* The class of SQLite result rc. An I/O error says little by itself: the
 * errno behind it tells a file that stopped taking writes (EPERM from an
 * immutable file, EROFS, EACCES) or a full disk (ENOSPC, EDQUOT: SQLite
 * reports most of those as SQLITE_FULL, some as a write error) apart. */
static db_fault sqlite_fault(db_store *db, int rc)
{
    int sys = db->conn != NULL ? sqlite3_system_errno(db->conn) : 0;

    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return DB_FAULT_BUSY;
    case SQLITE_READONLY: return DB_FAULT_READONLY;
    case SQLITE_FULL: return DB_FAULT_FULL;
    case SQLITE_IOERR:
        if (sys == EPERM || sys == EROFS || sys == EACCES || files_refuse_writes(db))
            return DB_FAULT_READONLY;
        if (sys == ENOSPC || sys == EDQUOT)
            return DB_FAULT_FULL;
        return DB_FAULT_IO;
    default: return DB_FAULT_OTHER;
    }
}

db_status dbi_fail(db_store *db, int rc, const char *what)
{
    int primary = rc & 0xff; /* extended codes are on: SQLITE_BUSY_SNAPSHOT etc. */
    const char *detail = sqlite3_errstr(rc);

    /* The connection's message is more precise ("no such table: coupon",
     * "CHECK constraint failed: ...") but only when it belongs to this rc. */
    if (db->conn != NULL && sqlite3_extended_errcode(db->conn) == rc)
        detail = sqlite3_errmsg(db->conn);
    db_fault fault = sqlite_fault(db, rc);
    int sys = db->conn != NULL ? sqlite3_system_errno(db->conn) : 0;

    /* errno says why the I/O failed ("No space left on device"); SQLite's
     * own text does not, and after a failed COMMIT errno may be gone. */
    const char *why = NULL;
    if ((primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN) && sys != 0)
        why = strerror(sys);
    else if (primary == SQLITE_IOERR && fault == DB_FAULT_READONLY)
        why = "the file or its WAL refuses writes";
    if (why != NULL)
        dbi_set_error(db, "%s: %s (sqlite %d; %s)", what, detail, rc, why);
    else
        dbi_set_error(db, "%s: %s (sqlite %d)", what, detail, rc);
    db->fault = fault;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED)
        return DB_BUSY;
    return DB_ERROR;
}

void db_adopt_error(db_store *db, db_fault fault, const char *msg)
{
    if (db == NULL)
        return;
    dbi_set_error(db, "%s", msg != NULL ? msg : "");
    dbi_set_fault(db, fault);
}

/* One line for the caller's errbuf: control characters (a newline in a
 * path) would break the "one-line reason" the server prints before exit 2. */
void dbi_copy_one_line(char *dst, size_t dst_len, const char *path, const char *reason)
{
    if (dst == NULL || dst_len == 0)
        return;
    (void)snprintf(dst, dst_len, "database '%s': %s", path != NULL ? path : "(null)", reason);
    for (char *p = dst; *p != '\0'; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}
