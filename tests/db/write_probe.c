/* write_probe.c - db_write_probe: "could a write start now?" answers DB_OK
 * on an idle store and writes nothing; SQLite answers DB_BUSY while another
 * connection holds the write lock; PostgreSQL refuses it on a read-only
 * database while reads (db_ping) still answer. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "dbtest.h"

TestSuite(db_write_probe, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 30);

Test(db_write_probe, idle_store_can_write_and_nothing_is_written)
{
    int64_t id = dbt_create(dbt_db, "probe", 3, 1);

    cr_assert_eq(db_write_probe(dbt_db), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_write_probe(dbt_db), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon"), 1);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);
    /* No transaction was left open: a claim still goes through. */
    db_claim c;
    cr_assert_eq(db_claim_atomic(dbt_db, id, "u", &c), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_write_probe(NULL), DB_INVALID);
}

#if DBT_PG
Test(db_write_probe, read_only_database_refuses_the_probe_but_answers_reads)
{
    char sql[160];
    db_store *db;

    dbt_create(dbt_db, "probe", 3, 1);
    /* New sessions of this database start read-only (as on a standby). */
    snprintf(sql, sizeof sql, "ALTER DATABASE %s SET default_transaction_read_only = on", strrchr(dbt_path, '/') + 1);
    dbt_exec(dbt_path, sql);
    db = dbt_open();
    cr_assert_eq(db_ping(db), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(db_write_probe(db), DB_ERROR);
    cr_assert_not_null(strstr(db_errmsg(db), "read-only"), "%s", db_errmsg(db));
    /* The refused probe left the session usable. */
    cr_assert_eq(db_ping(db), DB_OK, "%s", db_errmsg(db));
    db_close(db);
}
#else
Test(db_write_probe, held_write_lock_is_busy)
{
    sqlite3 *other = NULL;
    db_store *db = NULL;
    char err[256];

    dbt_create(dbt_db, "probe", 3, 1);
    cr_assert_eq(sqlite3_open_v2(dbt_path, &other, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(other, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    /* A short busy timeout: the probe waits that long, then says busy. */
    cr_assert_eq(db_open(dbt_path, 50, &db, err, sizeof err), DB_OK, "%s", err);
    cr_assert_eq(db_ping(db), DB_OK, "reads still answer: %s", db_errmsg(db));
    cr_assert_eq(db_write_probe(db), DB_BUSY);
    cr_assert_eq(sqlite3_exec(other, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    cr_assert_eq(db_write_probe(db), DB_OK, "%s", db_errmsg(db));
    db_close(db);
    cr_assert_eq(sqlite3_close(other), SQLITE_OK);
}
#endif

#if !DBT_PG
Test(db_write_probe, read_only_handle_refuses_the_probe)
{
    db_store *ro = NULL;
    char err[256];

    dbt_create(dbt_db, "probe", 3, 1);
    cr_assert_eq(db_open_readonly(dbt_path, 100, &ro, err, sizeof err), DB_OK, "%s", err);
    cr_assert_eq(db_ping(ro), DB_OK, "%s", db_errmsg(ro));
    cr_assert_eq(db_write_probe(ro), DB_ERROR);
    cr_assert_not_null(strstr(db_errmsg(ro), "read-only"), "%s", db_errmsg(ro));
    db_close(ro);
}
#endif
