/* coupon_sqlite.c - the audit's DB side: our own read-only SQL over the
 * contract's schema (coupon, coupon_record), independent of db/. */
#include "loadtest.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define BUSY_TIMEOUT_MS 5000

struct lt_db {
    sqlite3 *db;
    lt_pg *pg;   /* non-NULL: a PostgreSQL URL (coupon_pg.c reads it) */
    char path[128];
};

static int is_pg_url(const char *path)
{
    return strncmp(path, "postgresql://", 13) == 0 || strncmp(path, "postgres://", 11) == 0;
}

int lt_db_open(const char *path, lt_db **out, char *err, size_t errlen)
{
    int rc = -1;
    lt_db *d = NULL;
    sqlite3_stmt *probe = NULL;
    *out = NULL;
    d = calloc(1, sizeof *d);
    if (d == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    snprintf(d->path, sizeof d->path, "%s", path);
    if (is_pg_url(path)) {
        /* A password in the URL stays out of the report: "scheme://...@host". */
        const char *at = strchr(path, '@');
        if (at != NULL)
            snprintf(d->path, sizeof d->path, "%.*s...%s", (int)(strstr(path, "://") - path + 3), path, at);
        if (lt_pg_open(path, &d->pg, err, errlen) != 0)
            goto out;
        *out = d;
        d = NULL;
        rc = 0;
        goto out;
    }
    /* READONLY: the audit must never create the file (a typo in --db would
     * otherwise give an empty DB and a misleading "no such coupon"), nor
     * take a write lock that stalls the servers' claims. */
    if (sqlite3_open_v2(path, &d->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open DB %s read-only: %s", path,
                 d->db ? sqlite3_errmsg(d->db) : "out of memory");
        goto out;
    }
    /* The servers write in short transactions; wait them out instead of failing. */
    if (sqlite3_busy_timeout(d->db, BUSY_TIMEOUT_MS) != SQLITE_OK) {
        snprintf(err, errlen, "DB %s: %s", path, sqlite3_errmsg(d->db));
        goto out;
    }
    /* A file that is not the coupon DB fails here, before any load is sent. */
    if (sqlite3_prepare_v2(d->db, "SELECT total, stock, per_user_limit FROM coupon LIMIT 0", -1,
                           &probe, NULL) != SQLITE_OK ||
        sqlite3_step(probe) != SQLITE_DONE) {
        snprintf(err, errlen, "DB %s is not a coupon database: %s", path, sqlite3_errmsg(d->db));
        goto out;
    }
    *out = d;
    d = NULL;
    rc = 0;
out:
    sqlite3_finalize(probe);
    lt_db_close(d);
    return rc;
}

void lt_db_close(lt_db *d)
{
    if (d == NULL)
        return;
    /* sqlite3_open_v2 hands back a handle even on failure; it must be closed too. */
    sqlite3_close(d->db);
    lt_pg_close(d->pg);
    free(d);
}

/* Run one statement binding ?1 = coupon id, ?2 = extra; copy up to two integer columns. */
static int query2(sqlite3 *db, const char *sql, int64_t coupon_id, int64_t extra, int64_t *a,
                  int64_t *b, int *found, char *err, size_t errlen)
{
    int rc = -1;
    int step;
    sqlite3_stmt *st = NULL;
    *found = 0;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "%s", sqlite3_errmsg(db));
        goto out;
    }
    if (sqlite3_bind_int64(st, 1, coupon_id) != SQLITE_OK ||
        (sqlite3_bind_parameter_count(st) >= 2 && sqlite3_bind_int64(st, 2, extra) != SQLITE_OK)) {
        snprintf(err, errlen, "%s", sqlite3_errmsg(db));
        goto out;
    }
    step = sqlite3_step(st);
    if (step == SQLITE_ROW) {
        *found = 1;
        *a = sqlite3_column_int64(st, 0);
        if (b != NULL)
            *b = sqlite3_column_int64(st, 1);
    } else if (step != SQLITE_DONE) {
        snprintf(err, errlen, "%s", sqlite3_errmsg(db));
        goto out;
    }
    rc = 0;
out:
    sqlite3_finalize(st);
    return rc;
}

int lt_db_read(lt_db *d, int64_t coupon_id, lt_coupon_view *v)
{
    int rc = -1;
    int in_txn = 0, found = 0;
    char detail[LT_ERR_MAX] = "";
    int64_t per_user_limit = 0;
    memset(v, 0, sizeof *v);
    snprintf(v->source, sizeof v->source, "db %s", d->path);
    if (d->pg != NULL) {
        if (lt_pg_read(d->pg, coupon_id, v, detail, sizeof detail) == 0 && !v->not_found) {
            v->has_users = 1;
            v->ok = 1;
            return 0;
        }
        if (v->not_found) {
            snprintf(v->err, sizeof v->err, "coupon %" PRId64 " does not exist in DB %s", coupon_id, d->path);
            return -1;
        }
        snprintf(v->err, sizeof v->err, "cannot read coupon %" PRId64 " from DB %s: %s", coupon_id, d->path,
                 detail[0] ? detail : "unknown error");
        return -1;
    }

    /* One read transaction: in WAL mode it is one snapshot, so total, stock
     * and the record counts are compared as of the same instant. */
    if (sqlite3_exec(d->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        snprintf(detail, sizeof detail, "%s", sqlite3_errmsg(d->db));
        goto out;
    }
    in_txn = 1;
    {
        sqlite3_stmt *st = NULL;
        int step;
        if (sqlite3_prepare_v2(d->db, "SELECT total, stock, per_user_limit FROM coupon WHERE id = ?1",
                               -1, &st, NULL) != SQLITE_OK ||
            sqlite3_bind_int64(st, 1, coupon_id) != SQLITE_OK) {
            snprintf(detail, sizeof detail, "%s", sqlite3_errmsg(d->db));
            sqlite3_finalize(st);
            goto out;
        }
        step = sqlite3_step(st);
        if (step == SQLITE_ROW) {
            v->total = sqlite3_column_int64(st, 0);
            v->stock = sqlite3_column_int64(st, 1);
            per_user_limit = sqlite3_column_int64(st, 2);
        } else if (step == SQLITE_DONE) {
            v->not_found = 1;
        } else {
            snprintf(detail, sizeof detail, "%s", sqlite3_errmsg(d->db));
        }
        sqlite3_finalize(st);
        if (v->not_found) {
            snprintf(v->err, sizeof v->err, "coupon %" PRId64 " does not exist in DB %s", coupon_id,
                     d->path);
            goto out;
        }
        if (detail[0])
            goto out;
    }
    v->per_user_limit = per_user_limit;
    if (query2(d->db, "SELECT COUNT(*) FROM coupon_record WHERE coupon_id = ?1", coupon_id, 0,
               &v->issued, NULL, &found, detail, sizeof detail) != 0)
        goto out;
    if (per_user_limit > 0) {
        /* Records beyond the limit, summed over users: two users one over
         * each is an excess of 2 coupons, not 1. */
        if (query2(d->db,
                   "SELECT COUNT(*), COALESCE(SUM(n - ?2), 0) FROM "
                   "(SELECT COUNT(*) AS n FROM coupon_record WHERE coupon_id = ?1 GROUP BY user_id) "
                   "WHERE n > ?2",
                   coupon_id, per_user_limit, &v->users_over_limit, &v->excess_records, &found,
                   detail, sizeof detail) != 0)
            goto out;
    }
    v->has_users = 1;
    v->ok = 1;
    rc = 0;
out:
    /* A read transaction has nothing to lose: if COMMIT fails, ROLLBACK just
     * ends it, so the next read takes a fresh snapshot instead of a stale one. */
    if (in_txn && sqlite3_exec(d->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        (void)sqlite3_exec(d->db, "ROLLBACK", NULL, NULL, NULL);
    if (!v->ok && !v->not_found)
        snprintf(v->err, sizeof v->err, "cannot read coupon %" PRId64 " from DB %s: %s", coupon_id,
                 d->path, detail[0] ? detail : "unknown error");
    return rc;
}

int lt_db_records(lt_db *d, const char *user_prefix, lt_record **out, size_t *n, char *err, size_t errlen)
{
    sqlite3_stmt *st = NULL;
    lt_record *recs = NULL;
    size_t len = 0, cap = 0;
    size_t plen = strlen(user_prefix);
    int rc = -1, step;

    *out = NULL;
    *n = 0;
    if (d->pg != NULL)
        return lt_pg_records(d->pg, user_prefix, out, n, err, errlen);
    /* substr(): an exact prefix match, where LIKE would read '_' as a wildcard. */
    if (sqlite3_prepare_v2(d->db,
                           "SELECT id, coupon_id, user_id FROM coupon_record WHERE substr(user_id, 1, ?2) = ?1 "
                           "ORDER BY id",
                           -1, &st, NULL) != SQLITE_OK ||
        sqlite3_bind_text(st, 1, user_prefix, -1, SQLITE_STATIC) != SQLITE_OK ||
        sqlite3_bind_int64(st, 2, (sqlite3_int64)plen) != SQLITE_OK) {
        snprintf(err, errlen, "DB %s: %s", d->path, sqlite3_errmsg(d->db));
        goto out;
    }
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 1024;
            lt_record *grown = realloc(recs, ncap * sizeof *recs);
            if (grown == NULL) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            recs = grown;
            cap = ncap;
        }
        const unsigned char *u = sqlite3_column_text(st, 2);
        recs[len].id = sqlite3_column_int64(st, 0);
        recs[len].coupon_id = sqlite3_column_int64(st, 1);
        snprintf(recs[len].user_id, sizeof recs[len].user_id, "%s", u != NULL ? (const char *)u : "");
        len++;
    }
    if (step != SQLITE_DONE) {
        snprintf(err, errlen, "DB %s: %s", d->path, sqlite3_errmsg(d->db));
        goto out;
    }
    *out = recs;
    *n = len;
    recs = NULL;
    rc = 0;
out:
    sqlite3_finalize(st);
    free(recs);
    return rc;
}
