/* db_internal.h - private declarations of the coupon store: the db_store
 * handle, the prepared-statement table, and the error/transaction helpers
 * shared by the files in db/src/. Not installed, not seen by callers. */
#ifndef COUPON_DB_INTERNAL_H
#define COUPON_DB_INTERNAL_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "coupon_db.h"

/* The schema version this build creates and understands (PRAGMA user_version). */
#define DBI_SCHEMA_VERSION 1

/* Every statement the store runs, prepared once per db_store (sqlite/stmt.c). */
typedef enum dbi_stmt_id {
    DBI_BEGIN_IMMEDIATE,
    DBI_BEGIN_DEFERRED,
    DBI_COMMIT,
    DBI_ROLLBACK,
    DBI_PING,
    DBI_COUPON_INSERT,
    DBI_COUPON_GET,
    DBI_COUPON_LIST,
    DBI_STOCK_PEEK,
    DBI_CLAIM_SELECT,
    DBI_USER_COUNT,
    DBI_FENCED_READ,
    DBI_WRITE_STOCK,
    DBI_FENCED_WRITE_STOCK,
    DBI_ATOMIC_DECREMENT,
    DBI_RECORD_INSERT,
    DBI_AUDIT_COUPON,
    DBI_AUDIT_USERS,
    DBI_STMT_COUNT
} dbi_stmt_id;

/* The savepoint steps of a group's section (savepoints.c). */
typedef enum dbi_savepoint_op {
    DBI_SAVEPOINT_OPEN,     /* SAVEPOINT */
    DBI_SAVEPOINT_RELEASE,  /* RELEASE: keep its changes in the transaction */
    DBI_SAVEPOINT_UNDO      /* ROLLBACK TO, then RELEASE: none of its changes stay */
} dbi_savepoint_op;

/* The backend of a db_store: the few statements whose text or driver
 * differs between SQLite and PostgreSQL. Everything above this layer (the
 * section and its fence rules, the decisions, the argument checks, the audit
 * arithmetic) is shared, so both stores run the very same critical section.
 * Adding an operation: one slot here, one function per backend (open.c for
 * SQLite's table, pg/ops.c for PostgreSQL's). Every slot fills db->errmsg
 * when it fails and sets its out parameters on every path. */
typedef struct dbi_ops {
    const char *name;                                       /* "sqlite", "postgresql" */
    void (*close)(db_store *db);                            /* release the connection (not db) */
    /* A statement with no parameter and no row the caller needs: BEGIN,
     * COMMIT, ROLLBACK, the ping. */
    db_status (*exec)(db_store *db, dbi_stmt_id id, const char *what);
    int (*in_transaction)(db_store *db);                    /* nonzero while a transaction is open */
    db_status (*write_probe)(db_store *db);                 /* could a write start now? nothing written */
    db_status (*insert_coupon)(db_store *db, const char *name, int64_t stock, int64_t per_user_limit,
                               int64_t *id);
    db_status (*get_coupon)(db_store *db, int64_t coupon_id, db_coupon *out);
    db_status (*list_coupons)(db_store *db, db_coupon **out, size_t *n); /* *out malloc'd */
    db_status (*peek_stock)(db_store *db, int64_t coupon_id, int64_t *stock);
    db_status (*select_coupon)(db_store *db, int64_t coupon_id, int64_t *stock, int64_t *limit,
                               int64_t *last_fence);
    /* DBI_FENCED_READ: *has_row 0 when the row refused the fence or is absent. */
    db_status (*fenced_read)(db_store *db, int64_t coupon_id, int64_t fence, int64_t *stock, int64_t *limit,
                             int *has_row);
    db_status (*count_user_records)(db_store *db, int64_t coupon_id, const char *user_id, int64_t *held);
    db_status (*update_stock)(db_store *db, dbi_stmt_id id, int64_t coupon_id, const int64_t *values,
                              int n_values, int *changed, const char *what);
    db_status (*insert_record)(db_store *db, int64_t coupon_id, const char *user_id, int64_t fence,
                               int64_t *record_id);
    /* DBI_AUDIT_COUPON; *found 0 when there is no such coupon. */
    db_status (*audit_coupon)(db_store *db, int64_t coupon_id, int64_t *total, int64_t *stock, int64_t *limit,
                              int64_t *issued, int *found);
    db_status (*audit_users)(db_store *db, int64_t coupon_id, int64_t limit, int64_t *users_over,
                             int64_t *excess);
    /* The section's read and write whole, for a backend where each statement
     * is a round trip (NULL: section.c runs the statements above one by one).
     * section_read: as db_claim_read's transaction. *has_row is 0 when the
     * fenced read refused the fence or found no coupon (DB_NOT_FOUND itself
     * for an unfenced read of no coupon). section_write: stock := stock and
     * one record per DB_OK claim (their record_id set) in one transaction,
     * fenced unless DB_FENCE_OFF. *changed is 0 when the UPDATE changed no
     * row, and then nothing was written. */
    db_status (*section_read)(db_store *db, int64_t coupon_id, db_fence_mode mode, int64_t fence,
                              db_claim_req *reqs, size_t n, db_claim_view *view, int *has_row);
    db_status (*section_write)(db_store *db, int64_t coupon_id, db_fence_mode mode, int64_t fence, int64_t stock,
                               db_claim_req *reqs, size_t n, int *changed);
    /* The whole section under DB_FENCE_FULL when there is no business step
     * (NULL: read, decide, write as above): fenced read, db_claim_decide and
     * fenced write in one transaction, every reqs[i] filled (held, status,
     * claim). *has_row is 0 when the fenced read refused or found no
     * coupon, and then nothing was written. */
    db_status (*section_whole)(db_store *db, int64_t coupon_id, int64_t fence, db_claim_req *reqs, size_t n,
                               int *has_row);
    /* A savepoint inside the open transaction, for db_claim_group (NULL: the
     * backend runs no group, db_group_supported says 0). */
    db_status (*savepoint)(db_store *db, dbi_savepoint_op op);
} dbi_ops;

extern const dbi_ops dbi_sqlite_ops; /* open.c */
extern const dbi_ops dbi_pg_ops;     /* pg/ops.c */

struct dbpg; /* pg_internal.h: the PostgreSQL connection and its settings */

struct db_store {
    const dbi_ops *ops;                    /* the backend; set first, before anything can fail */
    sqlite3 *conn;                         /* SQLite: the one connection; NULL only while opening */
    int readonly;                          /* opened with SQLITE_OPEN_READONLY / a read-only session */
    sqlite3_stmt *stmt[DBI_STMT_COUNT];    /* SQLite: prepared at open, reused until db_close */
    struct dbpg *pg;                       /* PostgreSQL: the connection; NULL for SQLite */
    char errmsg[256];                      /* last failure's detail, "" when none yet */
    db_fault fault;                        /* last failure's class (db_last_fault) */
};

/* open.c: a "postgresql://" or "postgres://" URL (libpq's URI forms) names
 * a PostgreSQL database; anything else is a SQLite file path. */
int dbi_is_pg_url(const char *path);
/* status.c: one line "database '<path>': <reason>" into errbuf, control
 * characters replaced (a path may hold a newline). */
void dbi_copy_one_line(char *dst, size_t dst_len, const char *path, const char *reason);
/* pg/open.c: the PostgreSQL side of db_open / db_open_readonly; same contract. */
db_status dbpg_open(const char *url, int timeout_ms, int readonly, db_store **out, char *errbuf, size_t errbuf_len);

/* status.c: record detail in db->errmsg (printf-style, truncated, no
 * allocation); the failure's class becomes DB_FAULT_OTHER until the caller
 * names a finer one (dbi_set_fault). */
void dbi_set_error(db_store *db, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* status.c: the class of the failure just recorded. */
void dbi_set_fault(db_store *db, db_fault f);
/* status.c: record "what: <sqlite message> (<code name>)" for SQLite result rc
 * with its class, and map rc to a status: BUSY/LOCKED -> DB_BUSY, anything
 * else -> DB_ERROR. */
db_status dbi_fail(db_store *db, int rc, const char *what);

/* sqlite/stmt.c: prepare / finalize the whole table (finalize accepts a partly filled one). */
db_status dbi_prepare_all(db_store *db);
void dbi_finalize_all(db_store *db);
/* sqlite/stmt.c: the statement, reset and with its bindings cleared, ready to bind. */
sqlite3_stmt *dbi_stmt(db_store *db, dbi_stmt_id id);
/* sqlite/stmt.c: checked binds; on failure the detail is in db->errmsg. */
db_status dbi_bind_int64(db_store *db, sqlite3_stmt *st, int idx, int64_t v);
db_status dbi_bind_text(db_store *db, sqlite3_stmt *st, int idx, const char *s);
/* sqlite/stmt.c: step once. DB_OK with *has_row set (1 = SQLITE_ROW, 0 = SQLITE_DONE),
 * or the mapped failure. what names the statement in the error detail. */
db_status dbi_step(db_store *db, sqlite3_stmt *st, int *has_row, const char *what);
/* sqlite/stmt.c: finish with a statement (sqlite3_reset), so that a finished SELECT
 * does not keep its read transaction, and with it an old WAL snapshot, open. */
void dbi_done(sqlite3_stmt *st);
/* sqlite/stmt.c: run a statement that returns no row the caller needs (BEGIN, COMMIT,
 * UPDATE, INSERT); the statement is reset afterwards. */
db_status dbi_exec(db_store *db, dbi_stmt_id id, const char *what);
/* sqlite/stmt.c: bind ?1 = coupon_id and step st once; DB_NOT_FOUND ("no coupon
 * with id <id>") when there is no row, else the row is ready to read. */
db_status dbi_step_coupon(db_store *db, sqlite3_stmt *st, int64_t coupon_id, const char *what);

/* probe.c: SQLite's write probe (BEGIN IMMEDIATE; ROLLBACK). */
db_status dbi_sqlite_write_probe(db_store *db);

/* txn.c: through the backend's exec (BEGIN IMMEDIATE is a plain BEGIN on
 * PostgreSQL, whose row locks order the writers; BEGIN is a snapshot there). */
db_status dbi_begin_immediate(db_store *db);
db_status dbi_begin_deferred(db_store *db);
db_status dbi_commit(db_store *db);
/* Roll back if a transaction is open; keeps the earlier error detail. */
void dbi_rollback(db_store *db);

/* sqlite/schema.c: bring the file to DBI_SCHEMA_VERSION (safe against concurrent openers). */
db_status dbi_migrate(db_store *db);
/* sqlite/schema.c: read PRAGMA user_version. */
db_status dbi_user_version(db_store *db, int *version);

/* claim_steps.c: the steps of the claim transactions (run inside the caller's
 * transaction; each fills db->errmsg when it refuses or fails). */
/* A text argument: DB_INVALID with "<label> must not be empty" or "<label>
 * longer than <max> bytes"; *len gets its length (0 when refused). */
db_status dbi_check_text(db_store *db, const char *s, int max, const char *label, size_t *len);
/* Argument check; zeroes *out. */
db_status dbi_check_claim_args(db_store *db, int64_t coupon_id, const char *user_id, db_claim *out);
/* The coupon's stock, per_user_limit and last_fence; DB_NOT_FOUND if absent. */
db_status dbi_select_coupon(db_store *db, int64_t coupon_id, int64_t *stock, int64_t *limit,
                            int64_t *last_fence);
/* *held gets the user's record count of the coupon. */
db_status dbi_count_user_records(db_store *db, int64_t coupon_id, const char *user_id, int64_t *held);
/* DB_USER_LIMIT when the user already holds `limit` records (0 = unlimited). */
db_status dbi_check_user_limit(db_store *db, int64_t coupon_id, const char *user_id, int64_t limit);
/* Run a stock UPDATE: ?1 = coupon_id, then the statement's other
 * parameters ?2.. from values[] (as many as it has, at most n_values);
 * *changed gets the number of rows it changed (0 or 1); what names it in an
 * error. */
db_status dbi_update_stock(db_store *db, dbi_stmt_id id, int64_t coupon_id, const int64_t *values,
                           int n_values, int *changed, const char *what);
/* Insert one coupon_record row; *record_id gets its id. */
db_status dbi_insert_record(db_store *db, int64_t coupon_id, const char *user_id, int64_t fence,
                            int64_t *record_id);
/* Record "coupon <id> is sold out" and return DB_SOLD_OUT. */
db_status dbi_sold_out(db_store *db, int64_t coupon_id);
/* Finish a claim transaction given the result of its checks so far: when res
 * is DB_OK, insert the record (with fence), commit and fill *out (record id,
 * stock_left); on any failure roll back. Returns the final status. */
db_status dbi_end_claim(db_store *db, db_status res, int64_t coupon_id, const char *user_id, int64_t fence,
                        int64_t stock_left, db_claim *out);

/* section.c: the section's argument checks (DB_INVALID with the detail). */
db_status dbi_check_section_args(db_store *db, db_fence_mode mode, uint64_t fence, const db_claim_req *reqs,
                                 size_t n);
/* section.c: after a fenced statement changed no row: DB_NOT_FOUND, or
 * DB_STALE_FENCE with "<step> refused: fence ... is older than ...". */
db_status dbi_missing_or_stale(db_store *db, int64_t coupon_id, uint64_t fence, const char *step);

#endif /* COUPON_DB_INTERNAL_H */
