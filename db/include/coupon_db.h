/* coupon_db.h - the coupon stock store: the schema, the claim's critical
 * section (read / work / write, with the fence enforced by the database),
 * the lock-free atomic claim, and the audit. It runs on SQLite (a file
 * path, the embedded default) or PostgreSQL (a postgresql:// URL, through
 * libpq).
 *
 * Knows SQL only: nothing of Redis or HTTP. The fence a caller passes is
 * an opaque, per-coupon increasing number (libdlock's fencing token).
 *
 * Conventions: every function returns a db_status (DB_OK == 0); out
 * parameters are set on every path; detail of the last failure is read with
 * db_errmsg(). One db_store is one connection (SQLite or libpq): use it from
 * one thread at a time (open one per worker thread; many processes may share
 * the file or the database).
 */
#ifndef COUPON_DB_H
#define COUPON_DB_H

#include <stddef.h>
#include <stdint.h>

#define DB_NAME_MAX 128   /* longest coupon name, bytes */
#define DB_USER_MAX 64    /* longest user id, bytes */

typedef enum db_status {
    DB_OK = 0,
    DB_NOT_FOUND = 1,   /* no such coupon */
    DB_SOLD_OUT = 2,    /* stock is 0 */
    DB_USER_LIMIT = 3,  /* the user already holds per_user_limit records of this coupon */
    DB_STALE_FENCE = 4, /* our fence is lower than one the row has accepted: a newer lock holder
                           read or wrote it (our lease ran out); nothing was changed */
    DB_BUSY = 5,        /* the database stayed locked past the busy timeout (PostgreSQL: a
                           statement or lock timeout, a serialization failure, or the server
                           unreachable when a dropped connection is opened again) */
    DB_INVALID = 6,     /* bad argument (NULL, negative stock, name too long, ...) */
    DB_ERROR = 7        /* any other database failure (see db_errmsg) */
} db_status;

typedef struct db_store db_store;

typedef struct db_coupon {
    int64_t id;
    char name[DB_NAME_MAX + 1];
    int64_t total;
    int64_t stock;
    int64_t issued;         /* COUNT of coupon_record rows for this coupon */
    int64_t per_user_limit; /* 0 = unlimited */
    int64_t last_fence;     /* highest fence the row has accepted (0 = none yet) */
} db_coupon;

typedef struct db_claim {
    int64_t record_id; /* id of the new coupon_record row */
    int64_t stock;     /* stock left after this claim */
} db_claim;

typedef struct db_audit_row {
    int64_t coupon_id;
    int64_t total;
    int64_t stock;
    int64_t issued;           /* COUNT(coupon_record) */
    int64_t users_over_limit; /* users holding more than per_user_limit (0 when unlimited) */
    int64_t excess_records;   /* records beyond the per-user limits, summed over users */
    int64_t oversold_by;      /* max(issued - total, -stock, |stock + issued - total|, excess_records), >= 0 */
} db_audit_row;

/* Static text for a status; never NULL. */
const char *db_status_str(db_status st);

/* What kind of failure the last DB_BUSY / DB_ERROR of a store was, in
 * words that may leave the process: db_errmsg() carries the library's text
 * and the file's name, which belong in the server's log, not in a reply. */
typedef enum db_fault {
    DB_FAULT_NONE = 0,     /* no failure recorded yet */
    DB_FAULT_BUSY = 1,     /* locked by another writer, or a timeout, past the busy timeout */
    DB_FAULT_READONLY = 2, /* the file, its WAL or the session refuses writes */
    DB_FAULT_FULL = 3,     /* no space left for the write */
    DB_FAULT_IO = 4,       /* any other I/O error */
    DB_FAULT_OTHER = 5     /* anything else (a constraint, a corrupt file, a bad argument) */
} db_fault;

/* The class of the last failure of db (DB_FAULT_NONE for NULL). */
db_fault db_last_fault(const db_store *db);
/* Fixed text for a class ("read-only", "full", ...); never NULL, never a
 * path or a library message. */
const char *db_fault_str(db_fault f);

/* Open (creating the file and its schema if absent, migrating older
 * user_versions) with WAL and a busy timeout of busy_timeout_ms.
 * A path starting with "postgresql://" or "postgres://" is a libpq URL
 * instead: the schema is created if absent. busy_timeout_ms then bounds
 * every statement (statement_timeout, lock_timeout, and a client-side
 * deadline that drops a connection that stopped answering) and the connect
 * (connect_timeout, unless the URL sets one). A dropped connection is
 * opened again by the next call.
 * On failure *out is NULL and errbuf (if not NULL) gets a one-line reason.
 * The caller owns *out: close with db_close(). */
db_status db_open(const char *path, int busy_timeout_ms, db_store **out, char *errbuf, size_t errbuf_len);
/* Same, but read-only (no schema creation): for audits. */
db_status db_open_readonly(const char *path, int busy_timeout_ms, db_store **out, char *errbuf, size_t errbuf_len);
void db_close(db_store *db); /* NULL ok */
const char *db_errmsg(const db_store *db); /* borrowed; last failure's detail */

/* A trivial query, for health checks. */
db_status db_ping(db_store *db);
/* Can this store write now? DB_OK, or DB_ERROR for a read-only file or
 * session (or a PostgreSQL standby), a full disk or an I/O error, DB_BUSY
 * when another writer holds the lock past the timeout (detail in db_errmsg,
 * class in db_last_fault). No data changes: SQLite commits a one-page
 * no-op (user_version rewritten with its own value), because only a real
 * write meets a full disk or a file that stopped taking writes;
 * PostgreSQL runs an UPDATE that matches no row. For health checks and the
 * start-up check (db/src/probe.c). */
db_status db_write_probe(db_store *db);

db_status db_create_coupon(db_store *db, const char *name, int64_t stock, int64_t per_user_limit,
                           db_coupon *out);
db_status db_get_coupon(db_store *db, int64_t coupon_id, db_coupon *out);
/* *out is a malloc'd array the caller frees with free(); *n its length. */
db_status db_list_coupons(db_store *db, db_coupon **out, size_t *n);
/* Cheap read of the stock column only (the sold-out fast path). */
db_status db_peek_stock(db_store *db, int64_t coupon_id, int64_t *stock);

/* ---- The critical section: the same read / work / write for every strategy.
 *
 * Written the way business code is (read the stock, do the business step,
 * write the stock back minus what was sold), with NO transaction, `stock > 0`
 * condition or compare-and-set spanning the read and the write. Two callers
 * that overlap both read the same stock and both write it minus one: the
 * lost update, i.e. an oversell. Mutual exclusion (a lock) is what makes it
 * safe; the fence is what refuses a holder whose lease ran out. */

/* How much of the section the store fences with the caller's token. */
typedef enum db_fence_mode {
    DB_FENCE_OFF = 0,   /* no check: a holder whose lease ran out writes anyway */
    DB_FENCE_WRITE = 1, /* the write applies only if the row's last_fence <= fence */
    DB_FENCE_FULL = 2   /* the read registers the fence too: once a newer holder has
                           read, every read or write of an older one is refused */
} db_fence_mode;

/* "off", "write", "full"; NULL for an unknown mode. */
const char *db_fence_mode_name(db_fence_mode m);
/* 0 and *out set, or -1 for an unknown name. */
int db_fence_mode_parse(const char *name, db_fence_mode *out);

/* What step 1 saw of the coupon. */
typedef struct db_claim_view {
    int64_t stock;          /* the stock as read: step 3 writes this minus the claims */
    int64_t per_user_limit; /* 0 = unlimited */
} db_claim_view;

/* One claim of a section (a section may carry a batch of them under one
 * lock acquisition). user_id is the input; the rest is output. */
typedef struct db_claim_req {
    const char *user_id;
    int64_t held;     /* the user's records as read in step 1 */
    db_status status; /* DB_OK, DB_SOLD_OUT, DB_USER_LIMIT, or the section's failure */
    db_claim claim;   /* on DB_OK: the record id and the stock left after this claim */
} db_claim_req;

/* Step 1, the read: the coupon's stock and per-user limit and each user's
 * record count. DB_FENCE_FULL turns it into `UPDATE coupon SET last_fence =
 * fence WHERE ... last_fence <= fence RETURNING ...`, so a holder older than
 * one that already read gets DB_STALE_FENCE. Sets view and reqs[i].held. */
db_status db_claim_read(db_store *db, int64_t coupon_id, db_fence_mode mode, uint64_t fence, db_claim_req *reqs,
                        size_t n, db_claim_view *view);
/* Step 1's decision, in memory: for each claim in order, DB_SOLD_OUT once
 * the stock read is used up, DB_USER_LIMIT once the user's records (read +
 * earlier claims of this batch) reach the limit, else DB_OK. Returns the
 * number of DB_OK claims. */
size_t db_claim_decide(const db_claim_view *view, db_claim_req *reqs, size_t n);
/* Step 3, the write, in one short transaction: stock := view->stock - (the
 * DB_OK claims) and one record per DB_OK claim (with fence), filling their
 * record id and stock left. DB_FENCE_WRITE / FULL: applies only if the row's
 * last_fence <= fence, else DB_STALE_FENCE and nothing changes. */
db_status db_claim_write(db_store *db, int64_t coupon_id, db_fence_mode mode, uint64_t fence,
                         const db_claim_view *view, db_claim_req *reqs, size_t n);

/* The business step between the read and the write (may be NULL). */
typedef void (*db_work_fn)(void *arg, size_t n_claims);

/* The whole critical section: read, decide, work(arg, accepted) when at
 * least one claim was accepted, write. Returns the section's status: DB_OK
 * when it ran (each reqs[i].status then says DB_OK / DB_SOLD_OUT /
 * DB_USER_LIMIT), else the failure (DB_NOT_FOUND, DB_STALE_FENCE, DB_BUSY,
 * DB_INVALID, DB_ERROR), which is also every reqs[i].status, and nothing was
 * written. Safe only under mutual exclusion: that is the lesson. */
db_status db_claim_section(db_store *db, int64_t coupon_id, db_fence_mode mode, uint64_t fence, db_claim_req *reqs,
                           size_t n, db_work_fn work, void *work_arg);
/* One claim through db_claim_section with no business step, fully fenced:
 * the section's status or the claim's. For tests and tools. */
db_status db_claim_coupon(db_store *db, int64_t coupon_id, const char *user_id, uint64_t fence, db_claim *out);

/* ---- Group commit: the sections of several coupons, each under its own
 * lock, in one write transaction (BEGIN IMMEDIATE ... COMMIT), each inside
 * its own SAVEPOINT with its own fenced read, per-user check, fenced write
 * and inserts. A section refused (a stale fence, no such coupon) or failed
 * is undone alone (ROLLBACK TO its savepoint); the others commit. One
 * commit instead of two write transactions per section. */
typedef struct db_group_section {
    int64_t coupon_id;   /* in */
    uint64_t fence;      /* in: this section's lock's fence (DB_FENCE_FULL) */
    db_claim_req *reqs;  /* in/out: as db_claim_section's, no business step */
    size_t n;
    db_status status;    /* out: as db_claim_section's return */
    db_fault fault;      /* out: the failure's class when status is a failure */
    char errmsg[256];    /* out: the failure's detail, "" when none */
} db_group_section;

/* 1 when db can run db_claim_group (SQLite), 0 otherwise (PostgreSQL keeps
 * its one-round-trip section per coupon). */
int db_group_supported(const db_store *db);
/* Runs the n sections in one transaction, in order. DB_OK when it
 * committed: each secs[i]->status then says what its section did (DB_OK and
 * its reqs' statuses, or its own refusal, which left nothing). Otherwise
 * the transaction's failure (BEGIN, a savepoint, COMMIT, or a failure that
 * ended the transaction), which is then every section's status too, and
 * nothing of any section was written. */
db_status db_claim_group(db_store *db, db_group_section *const *secs, size_t n);
/* Records msg and its class as db's last failure: for a caller whose
 * section another connection ran (db_claim_group), so that db_errmsg and
 * db_last_fault of its own store tell it. */
void db_adopt_error(db_store *db, db_fault fault, const char *msg);

/* The `atomic-sql` strategy: no lock, one conditional UPDATE ... WHERE
 * stock > 0 plus the record insert in one transaction. Fence stored as 0.
 * The baseline a distributed lock is measured against: possible only
 * because this whole check-and-write fits one statement. */
db_status db_claim_atomic(db_store *db, int64_t coupon_id, const char *user_id, db_claim *out);

/* Audit one coupon from the tables (see db_audit_row). */
db_status db_audit(db_store *db, int64_t coupon_id, db_audit_row *out);

#endif /* COUPON_DB_H */
