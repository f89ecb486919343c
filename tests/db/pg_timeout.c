/* pg_timeout.c - PostgreSQL only: every statement is bounded. The server
 * process serving the store's session is frozen (SIGSTOP): a call returns
 * DB_BUSY within the store's timeout plus the client margin instead of
 * hanging; once the process runs again (SIGCONT) the next call opens a new
 * session by itself and the store works. A lock held by another session
 * is waited for at most the timeout (lock_timeout / statement_timeout),
 * answered DB_BUSY. A server that is gone when the store opens its dropped
 * session again is DB_BUSY too (the 503 kind: nothing was applied), at
 * once and not an internal error. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dbtest.h"
#include "procs.h"

TestSuite(db_pg_timeout, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 60);

#define SHORT_MS 400

/* The server process of the one session named coupon-db on our database
 * (the store's application_name), besides dbt_db's. */
static pid_t backend_of_new_session(db_store **db)
{
    char err[256], sql[256], out[32];

    /* Only this session and dbt_db's are ours; dbt_db's started first. */
    cr_assert_eq(db_open(dbt_path, SHORT_MS, db, err, sizeof err), DB_OK, "%s", err);
    snprintf(sql, sizeof sql,
             "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
             "AND application_name = 'coupon-db' ORDER BY backend_start DESC LIMIT 1");
    cr_assert_eq(pg_sql(dbt_path, sql, out, sizeof out), 0);
    cr_assert_gt(atoi(out), 0, "no backend found: '%s'", out);
    return (pid_t)atoi(out);
}

Test(db_pg_timeout, a_frozen_server_process_costs_at_most_the_timeout_then_the_store_reconnects)
{
    db_store *db = NULL;
    db_coupon c;
    int64_t id = dbt_create(dbt_db, "frozen", 5, 1);
    pid_t backend = backend_of_new_session(&db);
    int64_t t0, took;

    cr_assert_eq(db_get_coupon(db, id, &c), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(kill(backend, SIGSTOP), 0);
    t0 = test_now_ms();
    db_status st = db_get_coupon(db, id, &c);
    took = test_now_ms() - t0;
    cr_assert_eq(kill(backend, SIGCONT), 0);
    cr_assert_eq(st, DB_BUSY, "%s: %s", db_status_str(st), db_errmsg(db));
    cr_assert_not_null(strstr(db_errmsg(db), "no answer"), "%s", db_errmsg(db));
    /* The statement_timeout could not fire (its process was frozen): the
     * client deadline did, at SHORT_MS + 1 s. */
    cr_assert_geq(took, SHORT_MS, "%lld ms", (long long)took);
    cr_assert_lt(took, SHORT_MS + 1000 + 1500, "%lld ms", (long long)took);
    /* A fresh session, opened by the next call. */
    cr_assert_eq(db_get_coupon(db, id, &c), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(c.stock, 5);
    db_claim cl;
    cr_assert_eq(db_claim_atomic(db, id, "after", &cl), DB_OK, "%s", db_errmsg(db));
    db_close(db);
}

typedef struct holder_arg {
    const char *url;
    int64_t id;
} holder_arg;

static int hold_row_lock(int index, void *arg)
{
    holder_arg *h = arg;
    char sql[256];

    (void)index;
    /* One transaction holding the coupon's row lock for 2 s. */
    snprintf(sql, sizeof sql,
             "BEGIN; UPDATE coupon SET stock = stock WHERE id = %lld; SELECT pg_sleep(2); COMMIT;", (long long)h->id);
    return pg_sql(h->url, sql, NULL, 0) == 0 ? 0 : 1;
}

Test(db_pg_timeout, a_held_row_lock_is_waited_for_at_most_the_timeout)
{
    db_store *db = NULL;
    char err[256];
    db_claim c;
    int64_t id = dbt_create(dbt_db, "locked", 5, 1);
    holder_arg h = {dbt_path, id};
    int64_t t0, took;
    db_status st;
    pid_t pid;

    cr_assert_eq(db_open(dbt_path, SHORT_MS, &db, err, sizeof err), DB_OK, "%s", err);
    fflush(NULL);
    pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0)
        _exit(hold_row_lock(0, &h));
    test_sleep_ms(500); /* the holder has its lock */
    t0 = test_now_ms();
    st = db_claim_atomic(db, id, "waiter", &c);
    took = test_now_ms() - t0;
    cr_assert_eq(st, DB_BUSY, "%s: %s", db_status_str(st), db_errmsg(db));
    /* lock_timeout (55P03) or statement_timeout (57014): both are MS, and
     * whichever timer the server started first answers. */
    cr_assert(strstr(db_errmsg(db), "55P03") != NULL || strstr(db_errmsg(db), "57014") != NULL, "%s",
              db_errmsg(db));
    cr_assert_lt(took, 1500, "%lld ms", (long long)took);
    /* Nothing of the refused claim stayed, and the session still works once
     * the holder is gone. */
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);
    cr_assert_eq(db_claim_atomic(db, id, "waiter", &c), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(c.stock, 4);
    db_close(db);
}

Test(db_pg_timeout, a_server_gone_at_reconnect_is_busy_not_an_error)
{
    pg_proc own;
    db_store *db = NULL;
    db_coupon c;
    char err[256];
    int64_t t0, took;

    /* A server of its own: this test stops it. */
    cr_assert_eq(pg_start(&own), 0, "could not start a private postgres");
    cr_assert_eq(db_open(own.url, SHORT_MS, &db, err, sizeof err), DB_OK, "%s", err);
    cr_assert_eq(db_create_coupon(db, "gone", 5, 1, &c), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(pg_stop_server_only(&own), 0);
    /* The first call finds its session closed under it and drops it. */
    (void)db_get_coupon(db, c.id, &c);
    t0 = test_now_ms();
    db_status st = db_get_coupon(db, c.id, &c);
    took = test_now_ms() - t0;
    cr_assert_eq(st, DB_BUSY, "%s: %s", db_status_str(st), db_errmsg(db));
    cr_assert_not_null(strstr(db_errmsg(db), "connect"), "%s", db_errmsg(db));
    /* Refused at once (nobody listens): no wait for the connect timeout. */
    cr_assert_lt(took, 1500, "%lld ms", (long long)took);
    db_close(db);
    cr_assert_eq(pg_stop(&own), 0);
}

/* The batch's pipelines are bounded alike: a held row lock answers DB_BUSY
 * within the timeout, on the one-round-trip section (no business step) and
 * on the read of the stepped one, with nothing written and the session
 * usable afterwards (the aborted transaction rolled back). */
static void noop_step(void *arg, size_t n)
{
    (void)arg;
    (void)n;
}

Test(db_pg_timeout, a_held_row_lock_bounds_a_batch_on_both_paths)
{
    db_store *db = NULL;
    char err[256];
    int64_t id = dbt_create(dbt_db, "locked batch", 5, 1);
    holder_arg h = {dbt_path, id};
    db_claim_req reqs[3];
    const char *users[] = {"x", "y", "z"};
    int status = 0;
    pid_t pid;

    cr_assert_eq(db_open(dbt_path, SHORT_MS, &db, err, sizeof err), DB_OK, "%s", err);
    for (int with_step = 0; with_step < 2; with_step++) {
        memset(reqs, 0, sizeof reqs);
        for (int i = 0; i < 3; i++)
            reqs[i].user_id = users[i];
        fflush(NULL);
        pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0)
            _exit(hold_row_lock(0, &h));
        test_sleep_ms(500); /* the holder has its lock */
        int64_t t0 = test_now_ms();
        db_status st = db_claim_section(db, id, DB_FENCE_FULL, 7, reqs, 3, with_step ? noop_step : NULL, NULL);
        int64_t took = test_now_ms() - t0;
        cr_assert_eq(st, DB_BUSY, "step %d: %s: %s", with_step, db_status_str(st), db_errmsg(db));
        cr_assert(strstr(db_errmsg(db), "55P03") != NULL || strstr(db_errmsg(db), "57014") != NULL, "%s",
                  db_errmsg(db));
        cr_assert_lt(took, 1500, "step %d: %lld ms", with_step, (long long)took);
        for (int i = 0; i < 3; i++)
            cr_assert_eq(reqs[i].status, DB_BUSY);
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);
        cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 0, "the refused read left its fence");
    }
    /* The same session, the lock gone: the batch goes through. */
    cr_assert_eq(db_claim_section(db, id, DB_FENCE_FULL, 7, reqs, 3, NULL, NULL), DB_OK, "%s", db_errmsg(db));
    for (int i = 0; i < 3; i++)
        cr_assert_eq(reqs[i].status, DB_OK);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT stock FROM coupon"), 2);
    db_close(db);
}

/* A frozen server process mid-batch: the pipeline's client deadline drops
 * the session (DB_BUSY, "no answer"), and the next batch opens a new one. */
Test(db_pg_timeout, a_frozen_server_process_bounds_a_batch_then_the_store_reconnects)
{
    db_store *db = NULL;
    int64_t id = dbt_create(dbt_db, "frozen batch", 5, 1);
    pid_t backend = backend_of_new_session(&db);
    db_claim_req reqs[2];
    const char *users[] = {"p", "q"};

    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < 2; i++)
        reqs[i].user_id = users[i];
    cr_assert_eq(kill(backend, SIGSTOP), 0);
    int64_t t0 = test_now_ms();
    db_status st = db_claim_section(db, id, DB_FENCE_FULL, 3, reqs, 2, NULL, NULL);
    int64_t took = test_now_ms() - t0;
    cr_assert_eq(kill(backend, SIGCONT), 0);
    cr_assert_eq(st, DB_BUSY, "%s: %s", db_status_str(st), db_errmsg(db));
    cr_assert_not_null(strstr(db_errmsg(db), "no answer"), "%s", db_errmsg(db));
    cr_assert_lt(took, SHORT_MS + 1000 + 1500, "%lld ms", (long long)took);
    /* The frozen process got the whole pipeline before it froze, and may
     * run it once thawed, as any COMMIT whose answer never came may have
     * applied (deployment.md): then p and q are at their limit now. Either
     * way each holds one record, sold once. */
    cr_assert_eq(db_claim_section(db, id, DB_FENCE_FULL, 4, reqs, 2, NULL, NULL), DB_OK, "%s", db_errmsg(db));
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 2);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(DISTINCT user_id) FROM coupon_record"), 2);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT stock FROM coupon"), 3);
    db_close(db);
}
