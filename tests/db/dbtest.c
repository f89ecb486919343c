/* dbtest.c - shared helpers for the coupon store suites (see dbtest.h). */
#include "dbtest.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <criterion/hooks.h>
#include <libpq-fe.h>

#include "procs.h"

char dbt_dir[256];
char dbt_path[320];

#if DBT_PG
/* One PostgreSQL server for the whole suite binary, started before the
 * first test and stopped after the last by the runner process; the tests
 * (Criterion runs each in its own worker process) learn its port from the
 * environment, which the workers inherit. Each test gets a fresh database. */
static pg_proc dbt_pg;
static char dbt_dbname[64];

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    char bindir[256];

    (void)set;
    if (pg_bindir(bindir, sizeof bindir) != 0)
        return; /* each test skips, saying why */
    if (pg_start(&dbt_pg) != 0) {
        fprintf(stderr, "dbtest: PostgreSQL did not start (see above); every test will fail\n");
        setenv("DBT_PG_PORT", "-1", 1);
        return;
    }
    char port[16];
    snprintf(port, sizeof port, "%d", dbt_pg.port);
    setenv("DBT_PG_PORT", port, 1);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    (void)pg_stop(&dbt_pg);
}

/* The suite's server as seen from a worker process (port only: the rest of
 * pg_proc lives in the runner). */
static void dbt_pg_of_worker(pg_proc *p)
{
    const char *port = getenv("DBT_PG_PORT");
    char bindir[256];

    if (port == NULL) {
        cr_assert_neq(pg_bindir(bindir, sizeof bindir), 0, "PostgreSQL binaries found, but no server was started");
        cr_skip_test("PostgreSQL server binaries not installed (apt-get install postgresql): skipped");
    }
    memset(p, 0, sizeof *p);
    p->port = atoi(port);
    cr_assert_gt(p->port, 0, "the suite's PostgreSQL server did not start (see stderr)");
    snprintf(p->url, sizeof p->url, "postgresql://postgres@127.0.0.1:%d/postgres", p->port);
}
#endif

void dbt_setup(void)
{
    cr_assert_eq(test_mkdtemp(dbt_dir, sizeof dbt_dir, "dbtest."), 0, "no temp dir (see stderr)");
#if DBT_PG
    pg_proc p;
    static int n;
    dbt_pg_of_worker(&p);
    /* Unique while this worker lives: one test per worker process at a time. */
    snprintf(dbt_dbname, sizeof dbt_dbname, "dbt_%d_%d", (int)getpid(), n++);
    cr_assert_eq(pg_create_db(&p, dbt_dbname, dbt_path, sizeof dbt_path), 0, "CREATE DATABASE (see stderr)");
#else
    snprintf(dbt_path, sizeof dbt_path, "%s/coupon.db", dbt_dir);
#endif
}

void dbt_teardown(void)
{
#if DBT_PG
    pg_proc p;
    if (dbt_dbname[0] != '\0') {
        dbt_pg_of_worker(&p);
        (void)pg_drop_db(&p, dbt_dbname);
        dbt_dbname[0] = '\0';
    }
#endif
    /* The db and its -wal, -shm files with it. */
    test_rmtree(dbt_dir);
    dbt_dir[0] = '\0';
}

db_store *dbt_db;

void dbt_setup_open(void)
{
    dbt_setup();
    dbt_db = dbt_open();
}

void dbt_teardown_close(void)
{
    db_close(dbt_db);
    dbt_db = NULL;
    dbt_teardown();
}

db_store *dbt_open(void)
{
    db_store *db = NULL;
    char err[256];
    db_status st = db_open(dbt_path, 5000, &db, err, sizeof err);

    cr_assert_eq(st, DB_OK, "db_open(%s): %s", dbt_path, err);
    cr_assert_not_null(db);
    return db;
}

int64_t dbt_create(db_store *db, const char *name, int64_t stock, int64_t per_user_limit)
{
    db_coupon c;
    db_status st = db_create_coupon(db, name, stock, per_user_limit, &c);

    cr_assert_eq(st, DB_OK, "db_create_coupon: %s", db_errmsg(db));
    cr_assert_gt(c.id, 0);
    return c.id;
}

db_audit_row dbt_audit(db_store *db, int64_t coupon_id)
{
    db_audit_row a;

    cr_assert_eq(db_audit(db, coupon_id, &a), DB_OK, "%s", db_errmsg(db));
    return a;
}

#if DBT_PG
int64_t dbt_scalar(const char *path, const char *sql)
{
    char out[64];
    char *end = NULL;
    long long v;

    cr_assert_eq(pg_sql(path, sql, out, sizeof out), 0, "raw query %s (see stderr)", sql);
    /* A boolean comes back as t / f: read as SQLite's 1 / 0. */
    if (strcmp(out, "t") == 0)
        return 1;
    if (strcmp(out, "f") == 0)
        return 0;
    v = strtoll(out, &end, 10);
    cr_assert(end != out && *end == '\0', "raw query %s: '%s' is not an integer", sql, out);
    return v;
}

void dbt_exec(const char *path, const char *sql)
{
    cr_assert_eq(pg_sql(path, sql, NULL, 0), 0, "raw exec %s (see stderr)", sql);
}
#else
/* Raw read-write connection to path (busy timeout 5 s); asserts. */
static sqlite3 *raw_open(const char *path, int flags)
{
    sqlite3 *conn = NULL;
    int rc = sqlite3_open_v2(path, &conn, flags, NULL);

    cr_assert_eq(rc, SQLITE_OK, "raw open %s: %s", path, sqlite3_errstr(rc));
    cr_assert_eq(sqlite3_busy_timeout(conn, 5000), SQLITE_OK);
    return conn;
}

int64_t dbt_scalar(const char *path, const char *sql)
{
    sqlite3 *conn = raw_open(path, SQLITE_OPEN_READWRITE);
    sqlite3_stmt *st = NULL;
    int64_t v;
    int rc = sqlite3_prepare_v2(conn, sql, -1, &st, NULL);
    cr_assert_eq(rc, SQLITE_OK, "raw prepare %s: %s", sql, sqlite3_errmsg(conn));
    rc = sqlite3_step(st);
    cr_assert_eq(rc, SQLITE_ROW, "raw step %s: %s", sql, sqlite3_errmsg(conn));
    v = sqlite3_column_int64(st, 0);
    cr_assert_eq(sqlite3_finalize(st), SQLITE_OK);
    cr_assert_eq(sqlite3_close(conn), SQLITE_OK);
    return v;
}

void dbt_exec(const char *path, const char *sql)
{
    sqlite3 *conn = raw_open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    char *err = NULL;
    int rc = sqlite3_exec(conn, sql, NULL, NULL, &err);
    cr_assert_eq(rc, SQLITE_OK, "raw exec %s: %s", sql, err != NULL ? err : sqlite3_errstr(rc));
    sqlite3_free(err);
    cr_assert_eq(sqlite3_close(conn), SQLITE_OK);
}
#endif

int dbt_run_children(int n, dbt_child_fn fn, void *arg, int timeout_ms)
{
    pid_t pids[64];
    int barrier[2];
    int ok = 0;
    int64_t deadline;

    cr_assert(n > 0 && n <= 64);
    cr_assert_eq(pipe(barrier), 0, "pipe: %s", strerror(errno));
    /* Criterion's output buffers must not be flushed twice (once per child). */
    fflush(NULL);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
        if (pid == 0) {
            char c;
            ssize_t r;
            close(barrier[1]);
            /* EOF arrives when the parent closes its write end after the
             * last fork: every child leaves this read at the same moment. */
            do
                r = read(barrier[0], &c, 1);
            while (r < 0 && errno == EINTR);
            close(barrier[0]);
            /* _exit: no atexit handlers, no Criterion teardown in the child. */
            _exit(fn(i, arg));
        }
        pids[i] = pid;
    }
    close(barrier[0]);
    close(barrier[1]);

    deadline = test_now_ms() + timeout_ms;
    for (int left = n; left > 0;) {
        for (int i = 0; i < n; i++) {
            int status = 0;
            pid_t r;
            if (pids[i] == 0)
                continue;
            r = waitpid(pids[i], &status, WNOHANG);
            if (r == pids[i]) {
                if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                    ok++;
                else
                    cr_log_warn("child %d exited with status 0x%x", i, status);
                pids[i] = 0;
                left--;
            }
        }
        if (left > 0 && test_now_ms() > deadline) {
            for (int i = 0; i < n; i++) {
                if (pids[i] != 0) {
                    int status;
                    cr_log_error("child %d still running after %d ms: killing it", i, timeout_ms);
                    kill(pids[i], SIGKILL);
                    (void)waitpid(pids[i], &status, 0);
                    pids[i] = 0;
                }
            }
            break;
        }
        if (left > 0)
            test_sleep_ms(5);
    }
    return ok;
}

void *dbt_shared_alloc(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    cr_assert_neq(p, MAP_FAILED, "mmap: %s", strerror(errno));
    memset(p, 0, size);
    return p;
}

void dbt_shared_free(void *p, size_t size)
{
    if (p != NULL)
        cr_assert_eq(munmap(p, size), 0);
}

static void sleep_work(void *arg, size_t n_claims)
{
    (void)n_claims;
    usleep(*(const unsigned *)arg);
}

db_status dbt_claim_unfenced(db_store *db, int64_t coupon_id, const char *user_id, unsigned delay_us,
                             db_claim *out)
{
    db_claim_req req;

    if (out == NULL)
        return DB_INVALID;
    memset(&req, 0, sizeof req);
    req.user_id = user_id;
    memset(out, 0, sizeof *out);
    db_status st = db_claim_section(db, coupon_id, DB_FENCE_OFF, 0, &req, 1, sleep_work, &delay_us);
    if (st != DB_OK)
        return st;
    *out = req.claim;
    return req.status;
}
