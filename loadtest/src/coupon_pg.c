/* coupon_pg.c - the audit's DB side on PostgreSQL (--db postgresql://...):
 * our own read-only SQL over the contract's schema through libpq,
 * independent of db/, in one REPEATABLE READ READ ONLY transaction (one
 * snapshot). Every statement is sent asynchronously and waited for with a
 * deadline, so a server that stops answering cannot hang the audit. */
#include "common.h"
#include "loadtest.h"

#include <errno.h>
#include <inttypes.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LT_PG_TIMEOUT_MS 5000

struct lt_pg {
    PGconn *conn;
};

static void one_line(char *dst, size_t len, const char *msg)
{
    size_t n = strcspn(msg != NULL ? msg : "", "\n");
    snprintf(dst, len, "%.*s", (int)n, msg != NULL ? msg : "");
}

/* Send sql with up to two bigint parameters; wait (bounded) for its result. */
static PGresult *run(PGconn *c, const char *sql, int n, const int64_t *params, char *err, size_t errlen)
{
    char text[2][24];
    const char *vals[2] = {text[0], text[1]};
    int64_t deadline = cm_now_ms() + LT_PG_TIMEOUT_MS + 1000;
    PGresult *r, *kept = NULL;

    for (int i = 0; i < n && i < 2; i++)
        snprintf(text[i], sizeof text[i], "%" PRId64, params[i]);
    if (!PQsendQueryParams(c, sql, n, NULL, vals, NULL, NULL, 0)) {
        one_line(err, errlen, PQerrorMessage(c));
        return NULL;
    }
    for (;;) {
        while (PQisBusy(c)) {
            struct pollfd p = {.fd = PQsocket(c), .events = POLLIN};
            int64_t left = deadline - cm_now_ms();
            int w;
            if (left <= 0) {
                snprintf(err, errlen, "no answer from PostgreSQL within %d ms", LT_PG_TIMEOUT_MS + 1000);
                PQclear(kept);
                return NULL;
            }
            w = poll(&p, 1, (int)left);
            if ((w < 0 && errno != EINTR) || (w > 0 && !PQconsumeInput(c))) {
                one_line(err, errlen, w < 0 ? strerror(errno) : PQerrorMessage(c));
                PQclear(kept);
                return NULL;
            }
        }
        r = PQgetResult(c);
        if (r == NULL)
            break;
        PQclear(kept);
        kept = r;
    }
    if (kept == NULL || (PQresultStatus(kept) != PGRES_TUPLES_OK && PQresultStatus(kept) != PGRES_COMMAND_OK)) {
        one_line(err, errlen, kept != NULL ? PQresultErrorMessage(kept) : PQerrorMessage(c));
        PQclear(kept);
        return NULL;
    }
    return kept;
}

static int cell(const PGresult *r, int col, int64_t *v)
{
    char *end = NULL;
    const char *s;
    if (PQntuples(r) < 1 || col >= PQnfields(r) || PQgetisnull(r, 0, col))
        return -1;
    s = PQgetvalue(r, 0, col);
    errno = 0;
    *v = strtoll(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' ? 0 : -1;
}

int lt_pg_open(const char *url, lt_pg **out, char *err, size_t errlen)
{
    /* The URL is expanded in place of dbname; the keywords after it add
     * bounds and make the session read-only (the audit never writes). */
    const char *keys[] = {"dbname", "connect_timeout", "options", "application_name", NULL};
    const char *vals[] = {url, "5",
                          "-c statement_timeout=5000 -c default_transaction_read_only=on "
                          "-c client_min_messages=warning",
                          "coupon-loadtest", NULL};
    lt_pg *p = calloc(1, sizeof *p);
    PGresult *r = NULL;
    int rc = -1;

    *out = NULL;
    if (p == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    p->conn = PQconnectdbParams(keys, vals, 1);
    if (p->conn == NULL || PQstatus(p->conn) != CONNECTION_OK) {
        char m[160];
        one_line(m, sizeof m, p->conn != NULL ? PQerrorMessage(p->conn) : "out of memory");
        snprintf(err, errlen, "cannot connect to the PostgreSQL DB: %s", m);
        goto out;
    }
    if (PQsetnonblocking(p->conn, 1) != 0) {
        snprintf(err, errlen, "PostgreSQL: cannot switch to non-blocking mode");
        goto out;
    }
    /* A database without the coupon schema fails here, before any load. */
    r = run(p->conn, "SELECT total, stock, per_user_limit FROM coupon LIMIT 0", 0, NULL, err, errlen);
    if (r == NULL) {
        char m[LT_ERR_MAX];
        snprintf(m, sizeof m, "%s", err);
        snprintf(err, errlen, "the PostgreSQL DB is not a coupon database: %s", m);
        goto out;
    }
    *out = p;
    p = NULL;
    rc = 0;
out:
    PQclear(r);
    lt_pg_close(p);
    return rc;
}

void lt_pg_close(lt_pg *p)
{
    if (p == NULL)
        return;
    PQfinish(p->conn);
    free(p);
}

int lt_pg_read(lt_pg *p, int64_t coupon_id, lt_coupon_view *v, char *detail, size_t dlen)
{
    PGresult *r = NULL;
    int64_t params[2] = {coupon_id, 0};
    char scratch[LT_ERR_MAX];
    int rc = -1;

    /* One snapshot: total, stock and the record counts of one instant. */
    r = run(p->conn, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", 0, NULL, detail, dlen);
    if (r == NULL)
        return -1;
    PQclear(r);
    r = run(p->conn, "SELECT total, stock, per_user_limit FROM coupon WHERE id = $1::bigint", 1, params, detail,
            dlen);
    if (r == NULL)
        goto out;
    if (PQntuples(r) == 0) {
        v->not_found = 1;
        rc = 0;
        goto out;
    }
    if (cell(r, 0, &v->total) != 0 || cell(r, 1, &v->stock) != 0 || cell(r, 2, &v->per_user_limit) != 0) {
        snprintf(detail, dlen, "coupon row is not integers");
        goto out;
    }
    PQclear(r);
    r = run(p->conn, "SELECT COUNT(*) FROM coupon_record WHERE coupon_id = $1::bigint", 1, params, detail, dlen);
    if (r == NULL || cell(r, 0, &v->issued) != 0)
        goto out;
    if (v->per_user_limit > 0) {
        params[1] = v->per_user_limit;
        PQclear(r);
        /* Records beyond the limit, summed over users (as coupon_sqlite.c). */
        r = run(p->conn,
                "SELECT COUNT(*), COALESCE(SUM(n - $2::bigint), 0)::bigint FROM "
                "(SELECT COUNT(*) AS n FROM coupon_record WHERE coupon_id = $1::bigint GROUP BY user_id) u "
                "WHERE n > $2::bigint",
                2, params, detail, dlen);
        if (r == NULL || cell(r, 0, &v->users_over_limit) != 0 || cell(r, 1, &v->excess_records) != 0)
            goto out;
    }
    rc = 0;
out:
    PQclear(r);
    /* A read-only transaction has nothing to keep: end it either way (its
     * own failure would only hide the one in detail). */
    r = run(p->conn, "ROLLBACK", 0, NULL, scratch, sizeof scratch);
    PQclear(r);
    return rc;
}

int lt_pg_records(lt_pg *p, const char *user_prefix, lt_record **out, size_t *n, char *err, size_t errlen)
{
    char sql[256];
    PGresult *r;

    *out = NULL;
    *n = 0;
    /* The prefix is [A-Za-z0-9_.:-] only (the API's user id rule, checked
     * by the caller), so it is safe as a literal; left() is an exact
     * prefix match where LIKE would read '_' as a wildcard. */
    snprintf(sql, sizeof sql,
             "SELECT id, coupon_id, user_id FROM coupon_record WHERE left(user_id, %zu) = '%s' ORDER BY id",
             strlen(user_prefix), user_prefix);
    r = run(p->conn, sql, 0, NULL, err, errlen);
    if (r == NULL)
        return -1;
    size_t rows = (size_t)PQntuples(r);
    lt_record *recs = calloc(rows ? rows : 1, sizeof *recs);
    if (recs == NULL) {
        snprintf(err, errlen, "out of memory");
        PQclear(r);
        return -1;
    }
    for (size_t i = 0; i < rows; i++) {
        recs[i].id = strtoll(PQgetvalue(r, (int)i, 0), NULL, 10);
        recs[i].coupon_id = strtoll(PQgetvalue(r, (int)i, 1), NULL, 10);
        snprintf(recs[i].user_id, sizeof recs[i].user_id, "%s", PQgetvalue(r, (int)i, 2));
    }
    PQclear(r);
    *out = recs;
    *n = rows;
    return 0;
}
