/* schema.c - opening the coupon store: schema creation at user_version
 * 1, idempotent reopen, refusal of foreign/newer/unreadable files, read-only
 * opens, and several processes creating one fresh file at the same time. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "dbtest.h"

TestSuite(db_schema, .init = dbt_setup, .fini = dbt_teardown, .timeout = 30);

static void assert_schema_v1(const char *path)
{
    cr_assert_eq(dbt_scalar(path, "PRAGMA user_version"), 1);
    cr_assert_eq(dbt_scalar(path, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name IN "
                                  "('coupon', 'coupon_record')"),
                 2);
    cr_assert_eq(dbt_scalar(path, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND "
                                  "tbl_name = 'coupon_record' AND sql LIKE '%(coupon_id, user_id)%'"),
                 1);
    /* Two tables and one index: nothing else is created, nothing twice. */
    cr_assert_eq(dbt_scalar(path, "SELECT COUNT(*) FROM sqlite_master"), 3);
    /* No CHECK on stock: the `none` strategy must be able to drive it negative. */
    cr_assert_eq(dbt_scalar(path, "SELECT COUNT(*) FROM sqlite_master WHERE name = 'coupon' AND "
                                  "sql LIKE '%CHECK (stock%'"),
                 0);
}

Test(db_schema, fresh_file_gets_schema_v1_in_wal_mode, .timeout = 30)
{
    db_store *db = dbt_open();

    cr_assert_eq(db_ping(db), DB_OK, "%s", db_errmsg(db));
    db_close(db);
    assert_schema_v1(dbt_path);
    /* WAL is stored in the file: a raw connection sees it too. */
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'"), 1);
}

Test(db_schema, reopen_is_idempotent_and_keeps_data, .timeout = 30)
{
    db_store *db = dbt_open();
    db_coupon c;
    int64_t id = dbt_create(db, "keep me", 7, 2);

    db_close(db);
    for (int i = 0; i < 3; i++) {
        db = dbt_open();
        cr_assert_eq(db_get_coupon(db, id, &c), DB_OK, "%s", db_errmsg(db));
        cr_assert_str_eq(c.name, "keep me");
        cr_assert_eq(c.stock, 7);
        db_close(db);
        assert_schema_v1(dbt_path);
    }
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon"), 1);
}

Test(db_schema, newer_schema_is_refused, .timeout = 30)
{
    db_store *db = NULL;
    char err[256];

    dbt_exec(dbt_path, "PRAGMA user_version = 99");
    cr_assert_eq(db_open(dbt_path, 1000, &db, err, sizeof err), DB_ERROR);
    cr_assert_null(db);
    cr_assert_not_null(strstr(err, "schema version 99"), "errbuf: %s", err);
    cr_assert_eq(dbt_scalar(dbt_path, "PRAGMA user_version"), 99);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM sqlite_master"), 0);
}

Test(db_schema, foreign_database_is_not_modified, .timeout = 30)
{
    db_store *db = NULL;
    char err[256];

    dbt_exec(dbt_path, "CREATE TABLE other(x INTEGER); INSERT INTO other VALUES (42);");
    cr_assert_eq(db_open(dbt_path, 1000, &db, err, sizeof err), DB_ERROR);
    cr_assert_null(db);
    cr_assert_not_null(strstr(err, "not a coupon database"), "errbuf: %s", err);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM sqlite_master"), 1);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT x FROM other"), 42);
    cr_assert_eq(dbt_scalar(dbt_path, "PRAGMA user_version"), 0);
}

Test(db_schema, unreachable_path_gives_one_line_reason, .timeout = 30)
{
    db_store *db = (db_store *)&db; /* must be overwritten with NULL */
    char err[256];

    cr_assert_eq(db_open("/nonexistent/dir/x.db", 1000, &db, err, sizeof err), DB_ERROR);
    cr_assert_null(db);
    cr_assert_not_null(strstr(err, "/nonexistent/dir/x.db"), "errbuf: %s", err);
    cr_assert_not_null(strstr(err, "No such file or directory"), "errbuf: %s", err);
    cr_assert_null(strchr(err, '\n'), "errbuf has a newline: %s", err);
}

Test(db_schema, newline_in_path_stays_one_line, .timeout = 30)
{
    db_store *db = NULL;
    char err[256];

    cr_assert_eq(db_open("/nonexistent/a\nb.db", 1000, &db, err, sizeof err), DB_ERROR);
    cr_assert_null(strchr(err, '\n'), "errbuf has a newline: %s", err);
    cr_assert_not_null(strstr(err, "/nonexistent/a?b.db"), "errbuf: %s", err);
}

Test(db_schema, non_database_file_is_refused, .timeout = 30)
{
    db_store *db = NULL;
    char err[256];
    FILE *f = fopen(dbt_path, "w");

    cr_assert_not_null(f);
    for (int i = 0; i < 200; i++)
        fputs("this is a text file, not SQLite\n", f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(db_open(dbt_path, 1000, &db, err, sizeof err), DB_ERROR);
    cr_assert_null(db);
    cr_assert_not_null(strstr(err, "not a database"), "errbuf: %s", err);
}

Test(db_schema, invalid_open_arguments, .timeout = 30)
{
    db_store *db = NULL;
    char err[256];

    cr_assert_eq(db_open(NULL, 1000, &db, err, sizeof err), DB_INVALID);
    cr_assert_null(db);
    cr_assert_neq(err[0], '\0');
    /* "" would be a private temporary database, never shared. */
    cr_assert_eq(db_open("", 1000, &db, err, sizeof err), DB_INVALID);
    cr_assert_eq(db_open(dbt_path, -1, &db, err, sizeof err), DB_INVALID);
    cr_assert_eq(db_open(dbt_path, 1000, NULL, err, sizeof err), DB_INVALID);
    cr_assert_eq(db_open_readonly(NULL, 1000, &db, NULL, 0), DB_INVALID);
    /* None of the refusals created the file. */
    cr_assert_eq(access(dbt_path, F_OK), -1);
}

Test(db_schema, in_memory_database_is_refused_without_wal, .timeout = 30)
{
    db_store *db = NULL;
    char err[256];

    cr_assert_eq(db_open(":memory:", 1000, &db, err, sizeof err), DB_ERROR);
    cr_assert_null(db);
    cr_assert_not_null(strstr(err, "WAL"), "errbuf: %s", err);
}

Test(db_schema, readonly_open_of_missing_file_fails_and_creates_nothing, .timeout = 30)
{
    db_store *db = NULL;
    char err[256];

    cr_assert_eq(db_open_readonly(dbt_path, 1000, &db, err, sizeof err), DB_ERROR);
    cr_assert_null(db);
    cr_assert_not_null(strstr(err, "read-only"), "errbuf: %s", err);
    cr_assert_not_null(strstr(err, "No such file or directory"), "errbuf: %s", err);
    cr_assert_eq(access(dbt_path, F_OK), -1);
}

Test(db_schema, readonly_open_of_foreign_file_fails, .timeout = 30)
{
    db_store *db = NULL;
    char err[256];

    dbt_exec(dbt_path, "CREATE TABLE other(x INTEGER)");
    cr_assert_eq(db_open_readonly(dbt_path, 1000, &db, err, sizeof err), DB_ERROR);
    cr_assert_null(db);
    cr_assert_not_null(strstr(err, "not a coupon database"), "errbuf: %s", err);
}

Test(db_schema, readonly_reads_and_refuses_writes, .timeout = 30)
{
    db_store *rw = dbt_open();
    db_store *ro = NULL;
    db_coupon c;
    db_claim claim;
    db_audit_row a;
    char err[256];
    int64_t id = dbt_create(rw, "ro", 5, 1);

    cr_assert_eq(db_claim_coupon(rw, id, "u1", 1, &claim), DB_OK, "%s", db_errmsg(rw));
    /* The writer stays open: the reader shares the WAL with it. */
    cr_assert_eq(db_open_readonly(dbt_path, 1000, &ro, err, sizeof err), DB_OK, "%s", err);
    cr_assert_eq(db_ping(ro), DB_OK);
    cr_assert_eq(db_get_coupon(ro, id, &c), DB_OK, "%s", db_errmsg(ro));
    cr_assert_eq(c.stock, 4);
    cr_assert_eq(c.issued, 1);
    cr_assert_eq(db_audit(ro, id, &a), DB_OK, "%s", db_errmsg(ro));
    cr_assert_eq(a.oversold_by, 0);
    cr_assert_eq(db_create_coupon(ro, "nope", 1, 1, &c), DB_ERROR);
    cr_assert_not_null(strstr(db_errmsg(ro), "readonly"), "errmsg: %s", db_errmsg(ro));
    cr_assert_eq(db_claim_coupon(ro, id, "u2", 2, &claim), DB_ERROR);
    cr_assert_eq(db_claim_atomic(ro, id, "u3", &claim), DB_ERROR);
    cr_assert_eq(dbt_claim_unfenced(ro, id, "u4", 0, &claim), DB_ERROR);
    db_close(ro);
    db_close(rw);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon"), 1);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT stock FROM coupon"), 4);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 1);
}

Test(db_schema, readonly_open_after_writers_closed, .timeout = 30)
{
    db_store *db = dbt_open();
    db_coupon c;
    char err[256];
    int64_t id = dbt_create(db, "closed", 3, 1);

    db_close(db);
    db = NULL;
    cr_assert_eq(db_open_readonly(dbt_path, 1000, &db, err, sizeof err), DB_OK, "%s", err);
    cr_assert_eq(db_get_coupon(db, id, &c), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(c.total, 3);
    db_close(db);
}

static int open_and_create(int index, void *arg)
{
    db_store *db = NULL;
    db_coupon c;
    char err[256];
    char name[32];

    (void)arg;
    if (db_open(dbt_path, 5000, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "child %d: %s\n", index, err);
        return 1;
    }
    snprintf(name, sizeof name, "child %d", index);
    if (db_create_coupon(db, name, 10, 1, &c) != DB_OK) {
        fprintf(stderr, "child %d: create: %s\n", index, db_errmsg(db));
        db_close(db);
        return 2;
    }
    db_close(db);
    return 0;
}

Test(db_schema, processes_opening_a_fresh_file_at_once_all_succeed, .timeout = 60)
{
    /* Several rounds, each on a new file: the race (two CREATE TABLEs, two
     * switches to WAL) only shows when the openers really overlap. */
    for (int round = 0; round < 8; round++) {
        snprintf(dbt_path, sizeof dbt_path, "%s/fresh%d.db", dbt_dir, round);
        cr_assert_eq(dbt_run_children(4, open_and_create, NULL, 20000), 4, "round %d", round);
        assert_schema_v1(dbt_path);
        cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon"), 4, "round %d", round);
    }
}

Test(db_schema, status_texts_and_null_handles, .timeout = 10)
{
    const char *seen[DB_ERROR + 1];

    for (int s = DB_OK; s <= DB_ERROR; s++) {
        seen[s] = db_status_str((db_status)s);
        cr_assert_not_null(seen[s]);
        cr_assert_neq(seen[s][0], '\0');
        for (int t = DB_OK; t < s; t++)
            cr_assert_str_neq(seen[s], seen[t]);
    }
    cr_assert_not_null(db_status_str((db_status)99));
    cr_assert_not_null(db_errmsg(NULL));
    db_close(NULL);
    cr_assert_eq(db_ping(NULL), DB_INVALID);
}
