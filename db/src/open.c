/* open.c - opening and closing a db_store: the connection settings (WAL,
 * busy timeout, synchronous, foreign keys), the schema step, the statement
 * table, the read-only variant for audits, and the health ping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "db_internal.h"

static db_status exec_pragma(db_store *db, const char *sql)
{
    int rc = sqlite3_exec(db->conn, sql, NULL, NULL, NULL);
    if (rc != SQLITE_OK)
        return dbi_fail(db, rc, sql);
    return DB_OK;
}

/* journal_mode=WAL: readers never block the writer and the writer never
 * blocks readers, so health checks, GETs and the audit keep answering while
 * claims queue for the write lock. */
static db_status set_wal(db_store *db, int busy_timeout_ms)
{
    db_status res = DB_ERROR;
    sqlite3_stmt *st = NULL;
    int has_row = 0;
    int rc;
    /* The switch to WAL needs a moment of exclusive access, and SQLite may
     * answer SQLITE_BUSY at once, without the busy handler, while another
     * process is making the same switch on a fresh file. Retry for as long
     * as the caller's busy timeout allows, in 10 ms steps. Without this loop
     * most runs of db_schema::processes_opening_a_fresh_file_at_once_all_succeed
     * fail with "set journal_mode=WAL: database is locked". */
    long attempts = busy_timeout_ms / 10 + 1;

    rc = sqlite3_prepare_v2(db->conn, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc != SQLITE_OK) {
        res = dbi_fail(db, rc, "set journal_mode=WAL");
        goto out;
    }
    for (long i = 0; i < attempts; i++) {
        (void)sqlite3_reset(st);
        res = dbi_step(db, st, &has_row, "set journal_mode=WAL");
        if (res != DB_BUSY)
            break;
        (void)cm_sleep_ms(10); /* only EINTR can fail it, and that resumes */
    }
    if (res != DB_OK)
        goto out;
    if (!has_row || sqlite3_column_text(st, 0) == NULL ||
        strcasecmp((const char *)sqlite3_column_text(st, 0), "wal") != 0) {
        /* e.g. ":memory:" or a file system without shared memory: without WAL
         * every claim would block every reader, so refuse rather than limp. */
        dbi_set_error(db, "journal_mode=WAL refused (mode is '%s')",
                      has_row && sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "?");
        res = DB_ERROR;
        goto out;
    }
    res = DB_OK;
out:
    (void)sqlite3_finalize(st); /* its error, if any, was reported by the step */
    return res;
}

static db_status configure_readwrite(db_store *db, int busy_timeout_ms)
{
    db_status res = set_wal(db, busy_timeout_ms);

    /* synchronous=NORMAL is safe with WAL: a commit is appended to the WAL
     * and survives any crash of our process. Only an OS crash or power cut
     * may lose the last commits. Each claim's decrement and record are in
     * one transaction, so such a loss drops whole claims and never breaks
     * stock + issued == total (no oversell, no corruption). FULL would add an
     * fsync to every claim, inside the lock's critical section. */
    if (res == DB_OK)
        res = exec_pragma(db, "PRAGMA synchronous=NORMAL");
    /* Per connection, off by default: without it coupon_record.coupon_id
     * could name a coupon that does not exist. */
    if (res == DB_OK)
        res = exec_pragma(db, "PRAGMA foreign_keys=ON");
    if (res == DB_OK)
        res = dbi_migrate(db);
    return res;
}

static db_status check_readonly_schema(db_store *db)
{
    int version = 0;
    db_status res = dbi_user_version(db, &version);

    if (res != DB_OK)
        return res;
    if (version == 0) {
        dbi_set_error(db, "not a coupon database (user_version 0)");
        return DB_ERROR;
    }
    if (version != DBI_SCHEMA_VERSION) {
        /* A read-only handle cannot migrate; guessing at another version's
         * columns would give a wrong audit, which is worse than none. */
        dbi_set_error(db, "schema version %d, this build reads version %d", version, DBI_SCHEMA_VERSION);
        return DB_ERROR;
    }
    return DB_OK;
}

static db_status open_store(const char *path, int busy_timeout_ms, int readonly, db_store **out,
                            char *errbuf, size_t errbuf_len)
{
    db_status res = DB_ERROR;
    db_store *db = NULL;
    const char *reason = "out of memory";
    int flags;
    int rc;

    if (out != NULL)
        *out = NULL;
    if (errbuf != NULL && errbuf_len > 0)
        errbuf[0] = '\0';
    /* "" would open a private temporary database: every process would get
     * its own, and nothing would be shared or kept. */
    if (out == NULL || path == NULL || path[0] == '\0' || busy_timeout_ms < 0) {
        reason = "invalid argument (path must be non-empty, busy timeout >= 0)";
        res = DB_INVALID;
        goto out;
    }
    db = calloc(1, sizeof *db);
    if (db == NULL)
        goto out;
    db->ops = &dbi_sqlite_ops;
    db->readonly = readonly;
    /* NOMUTEX: a db_store is used by one thread at a time (coupon_db.h), so
     * SQLite's per-connection mutex would only cost time. */
    flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;
    rc = sqlite3_open_v2(path, &db->conn, flags, NULL);
    if (rc != SQLITE_OK) {
        int sys = db->conn != NULL ? sqlite3_system_errno(db->conn) : 0;
        /* SQLite's text ("unable to open database file") does not say why;
         * errno does ("No such file or directory", "Permission denied"). */
        dbi_set_error(db, "cannot open%s: %s%s%s%s", readonly ? " read-only" : "", sqlite3_errstr(rc),
                      sys != 0 ? " (" : "", sys != 0 ? strerror(sys) : "", sys != 0 ? ")" : "");
        res = DB_ERROR;
        goto fail;
    }
    /* Extended codes tell SQLITE_BUSY_SNAPSHOT and SQLITE_CONSTRAINT_CHECK
     * apart in the error detail; dbi_fail maps on the primary code. */
    rc = sqlite3_extended_result_codes(db->conn, 1);
    if (rc != SQLITE_OK) {
        res = dbi_fail(db, rc, "extended result codes");
        goto fail;
    }
    /* Without a busy timeout a second process gets SQLITE_BUSY at once
     * whenever another one holds the write lock, even for a millisecond. */
    rc = sqlite3_busy_timeout(db->conn, busy_timeout_ms);
    if (rc != SQLITE_OK) {
        res = dbi_fail(db, rc, "busy timeout");
        goto fail;
    }
    res = readonly ? check_readonly_schema(db) : configure_readwrite(db, busy_timeout_ms);
    if (res == DB_OK)
        res = dbi_prepare_all(db);
    if (res != DB_OK)
        goto fail;
    *out = db;
    db = NULL;
    res = DB_OK;
    goto out;
fail:
    reason = db->errmsg;
out:
    if (res != DB_OK)
        dbi_copy_one_line(errbuf, errbuf_len, path, reason);
    db_close(db);
    return res;
}

int dbi_is_pg_url(const char *path)
{
    return path != NULL && (strncmp(path, "postgresql://", 13) == 0 || strncmp(path, "postgres://", 11) == 0);
}

/* busy_timeout_ms is, for PostgreSQL, the bound of every statement and of
 * the connect (pg/open.c): the same "how long may the store keep a claim
 * waiting" in both backends. */
db_status db_open(const char *path, int busy_timeout_ms, db_store **out, char *errbuf, size_t errbuf_len)
{
    if (dbi_is_pg_url(path))
        return dbpg_open(path, busy_timeout_ms, 0, out, errbuf, errbuf_len);
    return open_store(path, busy_timeout_ms, 0, out, errbuf, errbuf_len);
}

db_status db_open_readonly(const char *path, int busy_timeout_ms, db_store **out, char *errbuf,
                           size_t errbuf_len)
{
    if (dbi_is_pg_url(path))
        return dbpg_open(path, busy_timeout_ms, 1, out, errbuf, errbuf_len);
    return open_store(path, busy_timeout_ms, 1, out, errbuf, errbuf_len);
}

void db_close(db_store *db)
{
    if (db == NULL)
        return;
    /* ops is set right after the allocation, before anything can fail. */
    db->ops->close(db);
    free(db);
}

db_status db_ping(db_store *db)
{
    if (db == NULL)
        return DB_INVALID;
    return db->ops->exec(db, DBI_PING, "ping");
}
