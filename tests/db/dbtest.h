/* dbtest.h - shared helpers for the coupon store suites: a temp dir per test
 * (mkdtemp in .init, removed in .fini), raw SQLite access to check exact
 * table state behind the API's back, and forked worker processes started
 * together through a pipe barrier. */
#ifndef TESTS_DBTEST_H
#define TESTS_DBTEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "coupon_db.h"

/* Built twice: as the SQLite suites (db_<name>) and, with DBT_PG=1, as the
 * PostgreSQL suites (db_pg_<name>), where dbt_path is the URL of a fresh
 * database on the suite's own postgres server (tests/support/pg_proc.c)
 * and dbt_scalar / dbt_exec run their SQL through libpq. */
#ifndef DBT_PG
#define DBT_PG 0
#endif

/* Set by dbt_setup: the test's temp dir and "<dir>/coupon.db" (not created),
 * or with DBT_PG the URL of the test's own database (created). */
extern char dbt_dir[256];
extern char dbt_path[320];

/* .init / .fini: make (under $TMPDIR, else /tmp) / remove (recursively) the
 * temp dir. */
void dbt_setup(void);
void dbt_teardown(void);

/* The store of the suites that use one connection per test: .init =
 * dbt_setup_open (temp dir, then dbt_db = dbt_open()), .fini =
 * dbt_teardown_close (close dbt_db, set it NULL, remove the temp dir). */
extern db_store *dbt_db;
void dbt_setup_open(void);
void dbt_teardown_close(void);

/* Open dbt_path read-write (busy timeout 5 s); asserts success. */
db_store *dbt_open(void);
/* Create a coupon; asserts DB_OK and returns its id. */
int64_t dbt_create(db_store *db, const char *name, int64_t stock, int64_t per_user_limit);
/* db_audit of the coupon; asserts DB_OK. */
db_audit_row dbt_audit(db_store *db, int64_t coupon_id);

/* The critical section with no fence (DB_FENCE_OFF, fence 0) and a business
 * step of delay_us between the read and the write: what the `none` strategy
 * runs. One claim; returns the section's status or the claim's. */
db_status dbt_claim_unfenced(db_store *db, int64_t coupon_id, const char *user_id, unsigned delay_us,
                             db_claim *out);

/* Raw SQL on path (SQLite, or PostgreSQL with DBT_PG), bypassing coupondb: one integer from a query with no
 * parameters (asserts one row), and a statement run for its effect. */
int64_t dbt_scalar(const char *path, const char *sql);
void dbt_exec(const char *path, const char *sql);

/* Run fn(index, arg) in n forked processes that all start at the same moment
 * (they block on a pipe until every one is forked). fn's return value is the
 * child's exit status. Returns how many children exited with status 0; every
 * child is reaped (bounded: each is SIGKILLed after timeout_ms). */
typedef int (*dbt_child_fn)(int index, void *arg);
int dbt_run_children(int n, dbt_child_fn fn, void *arg, int timeout_ms);

/* Anonymous shared memory visible to forked children; dbt_shared_free unmaps. */
void *dbt_shared_alloc(size_t size);
void dbt_shared_free(void *p, size_t size);

#endif /* TESTS_DBTEST_H */
