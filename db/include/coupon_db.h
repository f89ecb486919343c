/* coupon_db.h - the coupon stock store: SQLite schema, claim transactions
 * (with the fencing check enforced by the database), and the audit.
 *
 * Knows SQLite only: nothing of Redis or HTTP. The fence a caller passes is
 * an opaque, per-coupon increasing number (libdlock's fencing token).
 *
 * Conventions: every function returns a db_status (DB_OK == 0); out
 * parameters are set on every path; detail of the last failure is read with
 * db_errmsg(). One db_store is one SQLite connection: use it from one thread
 * at a time (open one per worker thread; many processes may share the file).
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
    DB_STALE_FENCE = 4, /* our fence is lower than one the row has seen: a newer lock holder wrote */
    DB_BUSY = 5,        /* the database stayed locked past the busy timeout */
    DB_INVALID = 6,     /* bad argument (NULL, negative stock, name too long, ...) */
    DB_ERROR = 7        /* any other SQLite failure (see db_errmsg) */
} db_status;

typedef struct db_store db_store;

typedef struct db_coupon {
    int64_t id;
    char name[DB_NAME_MAX + 1];
    int64_t total;
    int64_t stock;
    int64_t issued;         /* COUNT of coupon_record rows for this coupon */
    int64_t per_user_limit; /* 0 = unlimited */
    int64_t last_fence;     /* highest fence a claim has written (0 = none yet) */
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

/* Open (creating the file and its schema if absent, migrating older
 * user_versions) with WAL and a busy timeout of busy_timeout_ms.
 * On failure *out is NULL and errbuf (if not NULL) gets a one-line reason.
 * The caller owns *out: close with db_close(). */
db_status db_open(const char *path, int busy_timeout_ms, db_store **out, char *errbuf, size_t errbuf_len);
/* Same, but read-only (no schema creation): for audits. */
db_status db_open_readonly(const char *path, int busy_timeout_ms, db_store **out, char *errbuf, size_t errbuf_len);
void db_close(db_store *db); /* NULL ok */
const char *db_errmsg(const db_store *db); /* borrowed; last failure's detail */

/* A trivial query, for health checks. */
db_status db_ping(db_store *db);

db_status db_create_coupon(db_store *db, const char *name, int64_t stock, int64_t per_user_limit,
                           db_coupon *out);
db_status db_get_coupon(db_store *db, int64_t coupon_id, db_coupon *out);
/* *out is a malloc'd array the caller frees with free(); *n its length. */
db_status db_list_coupons(db_store *db, db_coupon **out, size_t *n);
/* Cheap read of the stock column only (the sold-out fast path). */
db_status db_peek_stock(db_store *db, int64_t coupon_id, int64_t *stock);

/* The claim under a distributed lock: one BEGIN IMMEDIATE transaction that
 * checks the coupon exists, stock > 0, the user is under the limit, and that
 * `fence` is not lower than the row's last_fence, then decrements stock,
 * raises last_fence and inserts the record. Nothing changes unless DB_OK. */
db_status db_claim_coupon(db_store *db, int64_t coupon_id, const char *user_id, uint64_t fence,
                          db_claim *out);
/* The `atomic-sql` strategy: no lock, one conditional UPDATE ... WHERE
 * stock > 0 plus the record insert in one transaction. Fence stored as 0. */
db_status db_claim_atomic(db_store *db, int64_t coupon_id, const char *user_id, db_claim *out);
/* The `none` strategy, unsafe on purpose: reads stock and the user's count in
 * one transaction, sleeps delay_us, then writes stock = read - 1 and the record
 * in another. Concurrent callers oversell: this demonstrates the bug. */
db_status db_claim_unsafe(db_store *db, int64_t coupon_id, const char *user_id, unsigned delay_us,
                          db_claim *out);

/* Audit one coupon from the tables (see db_audit_row). */
db_status db_audit(db_store *db, int64_t coupon_id, db_audit_row *out);

#endif /* COUPON_DB_H */
