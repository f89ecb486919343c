/* pg/exec.c - the PostgreSQL connection and the one way a statement runs on
 * it: sent asynchronously and waited for with poll() up to a deadline, so
 * that no libpq call can block longer than the store's timeout, whatever the
 * network or the server does. The server's own statement_timeout and
 * lock_timeout (same value) normally answer first, with an error that keeps
 * the connection usable; the client deadline, a little later, covers a
 * server that stopped answering at all: the connection is dropped and the
 * next call opens a new one. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "pg_internal.h"

/* The client deadline's margin over statement_timeout: the server's timeout
 * error should arrive first (it says which statement, and the connection
 * survives it). */
#define DBPG_GRACE_MS 1000

/* One line of libpq's message: its messages end with a newline, and some
 * carry a second line (DETAIL, HINT) that would break the one-line error. */
static void set_conn_error(db_store *db, const char *what, const char *msg)
{
    size_t n = strcspn(msg != NULL ? msg : "", "\n");
    dbi_set_error(db, "%s: %.*s", what, (int)n, msg != NULL ? msg : "");
}

void dbpg_drop(db_store *db)
{
    /* PQfinish sends a Terminate message if it can and closes the socket: the
     * server ends the session and rolls back its open transaction. */
    PQfinish(db->pg->conn);
    db->pg->conn = NULL;
    if (db->pg->trace != NULL) {
        (void)fclose(db->pg->trace); /* a diagnostic: nothing to do if it fails */
        db->pg->trace = NULL;
    }
}

/* $COUPON_DB_PG_TRACE names a file that gets libpq's trace of every
 * message the session sends (F) and receives (B), appended, one per line:
 * a diagnostic, and how db_pg_batch counts round trips. */
static void start_trace(struct dbpg *pg)
{
    const char *path = getenv("COUPON_DB_PG_TRACE");

    if (path == NULL || path[0] == '\0')
        return;
    pg->trace = fopen(path, "a");
    if (pg->trace == NULL)
        return; /* a diagnostic only: the store works without it */
    /* Line-buffered: a reader sees each message once it is traced. */
    (void)setvbuf(pg->trace, NULL, _IOLBF, 0);
    PQtrace(pg->conn, pg->trace);
    PQsetTraceFlags(pg->conn, PQTRACE_SUPPRESS_TIMESTAMPS);
}

/* Wait until the socket is ready for events or the deadline passes:
 * 1 ready, 0 timed out, -1 failed (detail set). */
static int wait_socket(db_store *db, short events, int64_t deadline, const char *what)
{
    struct pollfd p = {.fd = PQsocket(db->pg->conn), .events = events};

    if (p.fd < 0) {
        set_conn_error(db, what, PQerrorMessage(db->pg->conn));
        return -1;
    }
    for (;;) {
        int64_t left = deadline - cm_now_ms();
        int n;
        if (left <= 0)
            return 0;
        n = poll(&p, 1, left > 60000 ? 60000 : (int)left);
        if (n > 0)
            return 1;
        if (n < 0 && errno != EINTR) {
            dbi_set_error(db, "%s: poll: %s", what, strerror(errno));
            return -1;
        }
    }
}

/* Map a failed result: a timeout, a lock not granted in time, a
 * serialization failure or a deadlock are the "retry later" kind (DB_BUSY,
 * as SQLite's BUSY); everything else is DB_ERROR. */
static db_status result_status(db_store *db, PGresult *r, const char *what)
{
    ExecStatusType st = PQresultStatus(r);
    const char *state, *msg;

    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
        return DB_OK;
    state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
    msg = PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
    if (msg == NULL)
        msg = PQresultErrorMessage(r);
    {
        size_t n = strcspn(msg != NULL ? msg : "", "\n");
        dbi_set_error(db, "%s: %.*s (sqlstate %s)", what, (int)n, msg != NULL ? msg : PQresStatus(st),
                      state != NULL ? state : "none");
    }
    if (state != NULL && (strcmp(state, "57014") == 0 ||  /* query_canceled: statement_timeout */
                          strcmp(state, "55P03") == 0 ||  /* lock_not_available: lock_timeout */
                          strcmp(state, "40001") == 0 ||  /* serialization_failure */
                          strcmp(state, "40P01") == 0)) { /* deadlock_detected */
        dbi_set_fault(db, DB_FAULT_BUSY);
        return DB_BUSY;
    }
    /* The classes a reply may name (db_fault): a read-only transaction (a
     * standby), 53100 (disk full), class 58 (I/O). */
    if (state != NULL && strcmp(state, "25006") == 0)
        dbi_set_fault(db, DB_FAULT_READONLY);
    else if (state != NULL && strcmp(state, "53100") == 0)
        dbi_set_fault(db, DB_FAULT_FULL);
    else if (state != NULL && strncmp(state, "58", 2) == 0)
        dbi_set_fault(db, DB_FAULT_IO);
    return DB_ERROR;
}

/* Send what libpq still buffers (non-blocking mode: the query may not have
 * left yet). 1 done, 0 the deadline passed, -1 failed (detail set). */
static int flush_out(db_store *db, int64_t deadline, const char *what)
{
    PGconn *c = db->pg->conn;

    for (;;) {
        int f = PQflush(c), w;
        if (f == 0)
            return 1;
        if (f < 0) {
            set_conn_error(db, what, PQerrorMessage(c));
            return -1;
        }
        w = wait_socket(db, POLLOUT | POLLIN, deadline, what);
        if (w <= 0)
            return w;
        if (!PQconsumeInput(c)) {
            set_conn_error(db, what, PQerrorMessage(c));
            return -1;
        }
    }
}

/* Wait until PQgetResult would not block, then take its result into *r
 * (NULL: the end of a query's results). 1, 0 or -1 as flush_out. */
static int next_result(db_store *db, int64_t deadline, const char *what, PGresult **r)
{
    PGconn *c = db->pg->conn;

    *r = NULL;
    while (PQisBusy(c)) {
        int w = wait_socket(db, POLLIN, deadline, what);
        if (w <= 0)
            return w;
        if (!PQconsumeInput(c)) {
            set_conn_error(db, what, PQerrorMessage(c));
            return -1;
        }
    }
    *r = PQgetResult(c);
    return 1;
}

/* The deadline passed (w == 0) or the connection failed (w < 0): the
 * status to return; the caller drops the connection. */
static db_status lost(db_store *db, int w, const char *what)
{
    if (w != 0)
        return DB_ERROR;
    dbi_set_error(db, "%s: no answer from PostgreSQL within %d ms; connection dropped", what,
                  db->pg->timeout_ms + DBPG_GRACE_MS);
    dbi_set_fault(db, DB_FAULT_BUSY);
    return DB_BUSY;
}

/* Collect every result of what was sent, keeping the first error (or else
 * the last result), within the deadline. */
static db_status collect(db_store *db, const char *what, PGresult **out)
{
    PGconn *c = db->pg->conn;
    int64_t deadline = cm_now_ms() + db->pg->timeout_ms + DBPG_GRACE_MS;
    PGresult *kept = NULL;
    db_status res = DB_OK;
    int w = flush_out(db, deadline, what); /* the last wait's outcome: 0 = the deadline passed */

    if (w <= 0) {
        res = lost(db, w, what);
        goto fail;
    }
    for (;;) {
        PGresult *r;
        w = next_result(db, deadline, what, &r);
        if (w <= 0) {
            res = lost(db, w, what);
            goto fail;
        }
        if (r == NULL)
            break;
        if (kept != NULL && result_status(db, kept, what) != DB_OK) {
            PQclear(r); /* the first error is the one to report */
            continue;
        }
        PQclear(kept);
        kept = r;
    }
    if (kept == NULL) {
        set_conn_error(db, what, PQerrorMessage(c));
        res = DB_ERROR;
        goto fail;
    }
    res = result_status(db, kept, what);
    if (res != DB_OK)
        goto fail;
    if (out != NULL)
        *out = kept;
    else
        PQclear(kept);
    return DB_OK;

fail:
    PQclear(kept);
    /* A connection in an unknown state (half a reply read, or none) cannot
     * carry the next statement; a server-side error leaves it usable. */
    if (w <= 0 || PQstatus(c) != CONNECTION_OK || PQisBusy(c))
        dbpg_drop(db);
    return res;
}

static db_status send_check(db_store *db, int sent, const char *what)
{
    if (sent)
        return DB_OK;
    set_conn_error(db, what, PQerrorMessage(db->pg->conn));
    if (PQstatus(db->pg->conn) != CONNECTION_OK)
        dbpg_drop(db);
    return DB_ERROR;
}

/* Oids of the parameter letters: 't' text, 'a' text[], 'i' bigint. */
static Oid param_type(char letter)
{
    return letter == 't' ? 25 /* TEXTOID */ : letter == 'a' ? 1009 /* TEXTARRAYOID */ : 20 /* INT8OID */;
}

static db_status prepare_one(db_store *db, const dbpg_sql *s, const char *name)
{
    size_t n = strlen(s->params);
    Oid types[4];
    db_status res;

    if (n == 0)
        return DB_OK; /* run as text: BEGIN, COMMIT ... cannot all be prepared */
    for (size_t k = 0; k < n && k < 4; k++)
        types[k] = param_type(s->params[k]);
    res = send_check(db, PQsendPrepare(db->pg->conn, name, s->sql, (int)n, types), s->name);
    if (res == DB_OK)
        res = collect(db, s->name, NULL);
    return res;
}

dbpg_step dbpg_stmt_step(dbi_stmt_id id, const char *const *values)
{
    dbpg_step st = {.sql = &dbpg_statements[id], .values = values};

    if (st.sql->params[0] != '\0')
        (void)snprintf(st.prepared, sizeof st.prepared, "coupon_%d", (int)id);
    return st;
}

dbpg_step dbpg_batch_step(dbpg_batch_id id, const char *const *values)
{
    dbpg_step st = {.sql = &dbpg_batch_statements[id], .values = values};

    (void)snprintf(st.prepared, sizeof st.prepared, "coupon_b%d", (int)id);
    return st;
}

db_status dbpg_prepare_all(db_store *db)
{
    db_status res = DB_OK;

    for (int i = 0; res == DB_OK && i < DBI_STMT_COUNT; i++)
        res = prepare_one(db, &dbpg_statements[i], dbpg_stmt_step((dbi_stmt_id)i, NULL).prepared);
    for (int i = 0; res == DB_OK && i < DBPG_BATCH_COUNT; i++)
        res = prepare_one(db, &dbpg_batch_statements[i], dbpg_batch_step((dbpg_batch_id)i, NULL).prepared);
    return res;
}

db_status dbpg_connect_raw(db_store *db)
{
    struct dbpg *pg = db->pg;
    const char *keys[6];
    const char *vals[6];
    int k = 0;

    /* The URL is expanded in place of dbname; a keyword given after it
     * overrides the URL's (libpq: the last value wins), so connect_timeout
     * comes after it only when the URL set none (pg/open.c), and options
     * already holds the URL's own options after ours. */
    keys[k] = "application_name";
    vals[k++] = "coupon-db";
    keys[k] = "dbname";
    vals[k++] = pg->conninfo;
    if (pg->connect_timeout[0] != '\0') {
        keys[k] = "connect_timeout";
        vals[k++] = pg->connect_timeout;
    }
    keys[k] = "options";
    vals[k++] = pg->options;
    keys[k] = NULL;
    vals[k] = NULL;
    /* Blocking, but bounded: connect_timeout (per address tried). */
    pg->conn = PQconnectdbParams(keys, vals, 1);
    if (pg->conn == NULL) {
        dbi_set_error(db, "connect: out of memory");
        return DB_ERROR;
    }
    if (PQstatus(pg->conn) != CONNECTION_OK) {
        set_conn_error(db, "connect", PQerrorMessage(pg->conn));
        dbpg_drop(db);
        return DB_ERROR;
    }
    /* Every later call sends and then waits in poll() with a deadline. */
    if (PQsetnonblocking(pg->conn, 1) != 0) {
        set_conn_error(db, "connect: non-blocking mode", PQerrorMessage(pg->conn));
        dbpg_drop(db);
        return DB_ERROR;
    }
    start_trace(pg);
    return DB_OK;
}

db_status dbpg_connect(db_store *db)
{
    db_status res;

    if (db->pg->conn != NULL)
        return DB_OK;
    res = dbpg_connect_raw(db);
    /* A server that cannot be reached now (down, or cut off: refused, no
     * route, connect_timeout) is a backing service down, the "retry later"
     * kind (503) and not an internal error: a connect that failed cannot
     * have applied anything. The first connect (dbpg_open) still fails the
     * start with the reason. */
    if (res != DB_OK)
        return DB_BUSY;
    /* Prepared statements belong to a session: a new one prepares them again. */
    res = dbpg_prepare_all(db);
    if (res != DB_OK && db->pg->conn != NULL)
        dbpg_drop(db);
    return res;
}

/* Queue one step: unnamed with no parameter, else its prepared statement. */
static int send_step(PGconn *c, const dbpg_step *st)
{
    int n = (int)strlen(st->sql->params);

    if (n == 0)
        return PQsendQueryParams(c, st->sql->sql, 0, NULL, NULL, NULL, NULL, 0);
    return PQsendQueryPrepared(c, st->prepared, n, st->values, NULL, NULL, 0);
}

db_status dbpg_run(db_store *db, dbi_stmt_id id, const char *const *values, PGresult **out)
{
    dbpg_step st = dbpg_stmt_step(id, values);
    db_status res;

    if (out != NULL)
        *out = NULL;
    res = dbpg_connect(db);
    if (res != DB_OK)
        return res;
    res = send_check(db, send_step(db->pg->conn, &st), st.sql->name);
    if (res != DB_OK)
        return res;
    return collect(db, st.sql->name, out);
}

/* Read the results of a pipeline of n steps and its Sync: out[i] gets step
 * i's last result; the first failure is the one reported. */
static db_status collect_pipeline(db_store *db, const dbpg_step *steps, int n, PGresult **out, const char *what)
{
    PGconn *c = db->pg->conn;
    int64_t deadline = cm_now_ms() + db->pg->timeout_ms + DBPG_GRACE_MS;
    db_status res = DB_OK;
    PGresult *r = NULL;
    int w = flush_out(db, deadline, what);

    for (int i = 0; w > 0 && i < n; i++) {
        /* A step's results, then NULL; a step the server skipped after an
         * earlier failure answers PGRES_PIPELINE_ABORTED. */
        while ((w = next_result(db, deadline, what, &r)) > 0 && r != NULL) {
            if (res == DB_OK && PQresultStatus(r) != PGRES_PIPELINE_ABORTED)
                res = result_status(db, r, steps[i].sql->name);
            PQclear(out[i]);
            out[i] = r;
        }
    }
    /* The Sync's own result ends the pipeline. */
    if (w > 0) {
        w = next_result(db, deadline, what, &r);
        if (w > 0 && PQresultStatus(r) != PGRES_PIPELINE_SYNC) {
            set_conn_error(db, what, "pipeline out of step with its Sync");
            w = -1;
        }
        PQclear(r);
    }
    if (w > 0 && PQexitPipelineMode(c) != 1) {
        set_conn_error(db, what, PQerrorMessage(c));
        w = -1;
    }
    if (w <= 0) {
        res = lost(db, w, what);
        dbpg_drop(db); /* results half read, or none: the connection cannot go on */
    }
    return res;
}

db_status dbpg_run_pipeline(db_store *db, const dbpg_step *steps, int n, PGresult **out, const char *what)
{
    PGresult *results[8] = {NULL};
    db_status res;

    if (out != NULL)
        for (int i = 0; i < n; i++)
            out[i] = NULL;
    if (n <= 0 || n > 8) {
        dbi_set_error(db, "%s: %d statements in one pipeline", what, n);
        return DB_INVALID;
    }
    res = dbpg_connect(db);
    if (res != DB_OK)
        return res;
    res = send_check(db, PQenterPipelineMode(db->pg->conn), what);
    for (int i = 0; res == DB_OK && i < n; i++)
        res = send_check(db, send_step(db->pg->conn, &steps[i]), steps[i].sql->name);
    /* One Sync for all of them: the server answers once, after the last. */
    if (res == DB_OK)
        res = send_check(db, PQpipelineSync(db->pg->conn), what);
    if (res != DB_OK) {
        /* Nothing was read yet: the connection is in no known state. */
        if (db->pg->conn != NULL)
            dbpg_drop(db);
        return res;
    }
    res = collect_pipeline(db, steps, n, results, what);
    for (int i = 0; i < n; i++) {
        if (res == DB_OK && out != NULL)
            out[i] = results[i];
        else
            PQclear(results[i]);
    }
    return res;
}

db_status dbpg_run_text(db_store *db, const char *sql, const char *what, PGresult **out)
{
    db_status res;

    if (out != NULL)
        *out = NULL;
    /* After open, a dropped connection is opened again (as dbpg_run does). */
    res = dbpg_connect(db);
    if (res != DB_OK)
        return res;
    res = send_check(db, PQsendQuery(db->pg->conn, sql), what);
    if (res != DB_OK)
        return res;
    return collect(db, what, out);
}
