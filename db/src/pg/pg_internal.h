/* pg_internal.h - the PostgreSQL backend of the coupon store: the
 * connection, its statement table and the bounded statement runner. Only
 * pg_*.c include it (libpq's types stay out of the SQLite files). */
#ifndef COUPON_DB_PG_INTERNAL_H
#define COUPON_DB_PG_INTERNAL_H

#include <libpq-fe.h>
#include <stdio.h>

#include "db_internal.h"

struct dbpg {
    PGconn *conn;      /* NULL after a failure dropped it; the next call connects again */
    char *conninfo;    /* the caller's URL (malloc'd), for reconnecting */
    char *options;     /* the session settings we add to it (malloc'd) */
    char connect_timeout[16]; /* seconds, or "" when the URL sets its own */
    int timeout_ms;    /* the bound of every statement, server side and client side */
    int readonly;      /* a read-only session: no schema creation */
    FILE *trace;       /* $COUPON_DB_PG_TRACE: libpq's message trace, appended; NULL when off */
};

/* The statement texts, indexed like SQLite's (dbi_stmt_id). */
typedef struct dbpg_sql {
    const char *name;   /* for error detail */
    const char *sql;    /* $1, $2 ...; NULL: not needed by this backend */
    const char *params; /* one letter per parameter: 'i' bigint, 't' text */
} dbpg_sql;
extern const dbpg_sql dbpg_statements[DBI_STMT_COUNT]; /* pg/sql.c */

/* The statements only PostgreSQL runs: a whole batch's per-user counts and
 * its write each in one statement, their users as one text[] parameter
 * ('a'). Prepared with the table above, as "coupon_b<id>". */
typedef enum dbpg_batch_id {
    DBPG_USER_COUNTS,        /* $1 coupon, $2 users: one count per user, in order */
    DBPG_BATCH_WRITE,        /* $1 coupon, $2 stock, $3 fence, $4 users: the unfenced write + inserts */
    DBPG_BATCH_FENCED_WRITE, /* the same, applied only if last_fence <= $3 */
    DBPG_BATCH_SECTION,      /* $1 coupon, $2 fence, $3 users: decide and write, after the fenced read */
    DBPG_BATCH_COUNT
} dbpg_batch_id;
extern const dbpg_sql dbpg_batch_statements[DBPG_BATCH_COUNT]; /* pg/sql.c */

/* One statement of a pipeline (dbpg_run_pipeline): its text and
 * parameters, and the name it was prepared under ("" when it has no
 * parameter: sent unnamed, like BEGIN and COMMIT). */
typedef struct dbpg_step {
    const dbpg_sql *sql;
    char prepared[16];
    const char *const *values;
} dbpg_step;
/* pg/exec.c: a step of the common table / of the batch table. */
dbpg_step dbpg_stmt_step(dbi_stmt_id id, const char *const *values);
dbpg_step dbpg_batch_step(dbpg_batch_id id, const char *const *values);

/* pg/exec.c: (re)connect if the connection was dropped, and prepare the
 * statement table on it. */
db_status dbpg_connect(db_store *db);
/* pg/exec.c: the two halves of dbpg_connect: open the session (bounded by
 * connect_timeout), prepare the statement table (the tables must exist). */
db_status dbpg_connect_raw(db_store *db);
db_status dbpg_prepare_all(db_store *db);
/* pg/exec.c: run statement id with its parameters (text form; NULL values
 * are not used), bounded by the store's timeout. DB_OK and *out (the result,
 * the caller PQclear()s it; may be NULL when the caller needs no rows), or
 * the mapped failure with detail in db->errmsg and *out NULL. */
db_status dbpg_run(db_store *db, dbi_stmt_id id, const char *const *values, PGresult **out);
/* pg/exec.c: run n statements in one round trip (libpq pipeline mode, one
 * Sync), each still bounded by statement_timeout on the server, the whole
 * by the client deadline. DB_OK and out[i] the result of step i (the
 * caller PQclear()s each; out may be NULL), or the first failure mapped as
 * dbpg_run does, every out[i] NULL. A failed step makes the server skip
 * the rest: a transaction the steps opened is left aborted, for the
 * caller's ROLLBACK. */
db_status dbpg_run_pipeline(db_store *db, const dbpg_step *steps, int n, PGresult **out, const char *what);
/* pg/exec.c: run fixed SQL text (the simple protocol, several statements
 * allowed), bounded likewise; for the schema. */
db_status dbpg_run_text(db_store *db, const char *sql, const char *what, PGresult **out);
/* pg/exec.c: the connection went away (timeout, server gone): close it; the
 * next dbpg_connect opens a fresh one. */
void dbpg_drop(db_store *db);

/* pg/schema.c: create the tables if absent (once, under an advisory lock),
 * check the schema version. */
db_status dbpg_migrate(db_store *db);
db_status dbpg_check_schema(db_store *db);

/* pg/open.c: release the connection and the settings (not db itself). */
void dbpg_close(db_store *db);

/* pg/ops.c: a result's integer cell, checked. */
db_status dbpg_int64(db_store *db, const PGresult *r, int row, int col, int64_t *v);

/* pg/section.c: the section's read and write, each one round trip (the
 * dbi_ops slots section_read / section_write). */
db_status dbpg_section_read(db_store *db, int64_t coupon_id, db_fence_mode mode, int64_t fence, db_claim_req *reqs,
                            size_t n, db_claim_view *view, int *has_row);
db_status dbpg_section_write(db_store *db, int64_t coupon_id, db_fence_mode mode, int64_t fence, int64_t stock,
                             db_claim_req *reqs, size_t n, int *changed);
/* pg/section.c: the whole section with no business step (slot section_whole). */
db_status dbpg_section_whole(db_store *db, int64_t coupon_id, int64_t fence, db_claim_req *reqs, size_t n,
                             int *has_row);

#endif /* COUPON_DB_PG_INTERNAL_H */
