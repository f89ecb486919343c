/* write_probe.c - db_write_probe: "can a write go through now?"
 *   - it answers DB_OK on an idle store and changes no data;
 *   - SQLite answers DB_BUSY while another connection holds the write
 *     lock, and DB_ERROR (class DB_FAULT_FULL) on a full disk, recovering
 *     once space is back;
 *   - PostgreSQL refuses it on a read-only database while reads (db_ping)
 *     still answer. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

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
    cr_assert_eq(db_last_fault(db), DB_FAULT_BUSY, "%s", db_errmsg(db));
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
    cr_assert_eq(db_last_fault(ro), DB_FAULT_READONLY);
    db_close(ro);
}

/* A full disk: BEGIN IMMEDIATE; ROLLBACK alone writes nothing and passed
 * it; the probe's one-page commit does not. The store is on a 2 MiB tmpfs
 * (unmounted by the test's .fini on every exit path). */
static char small_mnt[300];

static void unmount_small(void)
{
    if (small_mnt[0] != '\0' && umount2(small_mnt, MNT_DETACH) != 0)
        fprintf(stderr, "db_write_probe: umount %s: %s\n", small_mnt, strerror(errno));
    small_mnt[0] = '\0';
}

Test(db_write_probe, full_disk_fails_the_probe_and_the_claim_then_both_recover, .fini = unmount_small)
{
    char path[360], filler[360], err[256];
    static char block[64 * 1024];
    db_store *db = NULL;
    db_claim c;

    snprintf(small_mnt, sizeof small_mnt, "%s/small", dbt_dir);
    cr_assert_eq(mkdir(small_mnt, 0700), 0, "%s", strerror(errno));
    if (mount("tmpfs", small_mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=2m") != 0) {
        int e = errno;
        small_mnt[0] = '\0';
        cr_skip_test("cannot mount a 2 MiB tmpfs to fill (%s): the full-disk probe is not run", strerror(e));
    }
    snprintf(path, sizeof path, "%s/full.db", small_mnt);
    snprintf(filler, sizeof filler, "%s/filler", small_mnt);
    cr_assert_eq(db_open(path, 1000, &db, err, sizeof err), DB_OK, "%s", err);
    int64_t id = dbt_create(db, "full", 10, 0);
    cr_assert_eq(db_write_probe(db), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(db_last_fault(db), DB_FAULT_NONE);

    int fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    ssize_t w = 0;
    for (int i = 0; i < 4096 && (w = write(fd, block, sizeof block)) > 0; i++) {
    }
    cr_assert(w < 0 && errno == ENOSPC, "the tmpfs did not fill up");
    close(fd);

    cr_assert_eq(db_write_probe(db), DB_ERROR, "the probe passed on a full disk");
    cr_assert_eq(db_last_fault(db), DB_FAULT_FULL, "%s", db_errmsg(db));
    cr_assert_not_null(strstr(db_errmsg(db), "full"), "%s", db_errmsg(db));
    /* The class's words name neither the file nor SQLite. */
    cr_assert_null(strstr(db_fault_str(DB_FAULT_FULL), "sqlite"));
    cr_assert_null(strstr(db_fault_str(DB_FAULT_FULL), "/"));
    cr_assert_eq(db_claim_atomic(db, id, "u1", &c), DB_ERROR);
    cr_assert_eq(db_last_fault(db), DB_FAULT_FULL, "%s", db_errmsg(db));
    db_coupon got;
    cr_assert_eq(db_get_coupon(db, id, &got), DB_OK, "reads go on: %s", db_errmsg(db));
    cr_assert_eq(got.stock, 10);
    cr_assert_eq(got.issued, 0);

    cr_assert_eq(unlink(filler), 0);
    cr_assert_eq(db_write_probe(db), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(db_claim_atomic(db, id, "u1", &c), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(c.stock, 9);
    db_close(db);
}
#endif
