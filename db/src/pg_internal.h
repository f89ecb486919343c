/* pg_internal.h - the PostgreSQL backend of the coupon store: the
 * connection, its statement table and the bounded statement runner. Only
 * pg_*.c include it (libpq's types stay out of the SQLite files). */
#ifndef COUPON_DB_PG_INTERNAL_H
#define COUPON_DB_PG_INTERNAL_H

#include <libpq-fe.h>

#include "db_internal.h"

struct dbpg {
    PGconn *conn;      /* NULL after a failure dropped it; the next call connects again */
    char *conninfo;    /* the caller's URL (malloc'd), for reconnecting */
    char *options;     /* the session settings we add to it (malloc'd) */
    char connect_timeout[16]; /* seconds, or "" when the URL sets its own */
    int timeout_ms;    /* the bound of every statement, server side and client side */
    int readonly;      /* a read-only session: no schema creation */
};

/* The statement texts, indexed like SQLite's (dbi_stmt_id). */
typedef struct dbpg_sql {
    const char *name;   /* for error detail */
    const char *sql;    /* $1, $2 ...; NULL: not needed by this backend */
    const char *params; /* one letter per parameter: 'i' bigint, 't' text */
} dbpg_sql;
extern const dbpg_sql dbpg_statements[DBI_STMT_COUNT]; /* pg_sql.c */

/* pg_exec.c: (re)connect if the connection was dropped, and prepare the
 * statement table on it. */
db_status dbpg_connect(db_store *db);
/* pg_exec.c: the two halves of dbpg_connect: open the session (bounded by
 * connect_timeout), prepare the statement table (the tables must exist). */
db_status dbpg_connect_raw(db_store *db);
db_status dbpg_prepare_all(db_store *db);
/* pg_exec.c: run statement id with its parameters (text form; NULL values
 * are not used), bounded by the store's timeout. DB_OK and *out (the result,
 * the caller PQclear()s it; may be NULL when the caller needs no rows), or
 * the mapped failure with detail in db->errmsg and *out NULL. */
db_status dbpg_run(db_store *db, dbi_stmt_id id, const char *const *values, PGresult **out);
/* pg_exec.c: run fixed SQL text (the simple protocol, several statements
 * allowed), bounded likewise; for the schema. */
db_status dbpg_run_text(db_store *db, const char *sql, const char *what, PGresult **out);
/* pg_exec.c: the connection went away (timeout, server gone): close it; the
 * next dbpg_connect opens a fresh one. */
void dbpg_drop(db_store *db);

/* pg_schema.c: create the tables if absent (once, under an advisory lock),
 * check the schema version. */
db_status dbpg_migrate(db_store *db);
db_status dbpg_check_schema(db_store *db);

/* pg_open.c: release the connection and the settings (not db itself). */
void dbpg_close(db_store *db);

/* pg_ops.c: a result's integer cell, checked. */
db_status dbpg_int64(db_store *db, const PGresult *r, int row, int col, int64_t *v);

#endif /* COUPON_DB_PG_INTERNAL_H */
