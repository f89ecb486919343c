/* pg/section.c - the critical section's read and write on PostgreSQL, one
 * round trip each, whatever the batch's size (section.c calls them through
 * dbi_ops.section_read / section_write; SQLite runs its statements one by
 * one, in process, where a statement costs no round trip).
 *
 * The read is today's transaction, pipelined: BEGIN, the (fenced) read of
 * the coupon, the batch's per-user counts as one statement, COMMIT, all sent
 * before the first answer (libpq pipeline mode, one Sync). The counts still
 * run after the fenced read, in its READ COMMITTED transaction, so they see
 * every record committed before the row let our fence in, as before.
 *
 * The write is one statement in its transaction: the fenced UPDATE of the
 * stock and the INSERT of the batch's records, which reads the UPDATE's row
 * (pg/sql.c), so a write the fence refuses inserts nothing. A transaction
 * that inserts records commits in a round trip of its own (commit_apart). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_internal.h"

#define I64_TEXT 24

/* The user ids of reqs (only the DB_OK ones when accepted_only) as a
 * PostgreSQL array literal, every element quoted and its '"' and '\'
 * escaped, so any user id travels as itself. malloc'd; NULL when out of
 * memory (detail set). */
static char *users_array(db_store *db, const db_claim_req *reqs, size_t n, int accepted_only)
{
    size_t len = 3, at = 0;
    char *s;

    for (size_t i = 0; i < n; i++)
        len += 2 * strlen(reqs[i].user_id) + 3; /* quotes, comma, every byte escaped at worst */
    s = malloc(len);
    if (s == NULL) {
        dbi_set_error(db, "claim: out of memory for %zu user ids", n);
        return NULL;
    }
    s[at++] = '{';
    for (size_t i = 0; i < n; i++) {
        if (accepted_only && reqs[i].status != DB_OK)
            continue;
        if (at > 1)
            s[at++] = ',';
        s[at++] = '"';
        for (const char *p = reqs[i].user_id; *p != '\0'; p++) {
            if (*p == '"' || *p == '\\')
                s[at++] = '\\';
            s[at++] = *p;
        }
        s[at++] = '"';
    }
    s[at++] = '}';
    s[at] = '\0';
    return s;
}

db_status dbpg_section_read(db_store *db, int64_t coupon_id, db_fence_mode mode, int64_t fence, db_claim_req *reqs,
                            size_t n, db_claim_view *view, int *has_row)
{
    char cid[I64_TEXT], f[I64_TEXT];
    const char *read_values[] = {cid, f};
    const char *count_values[] = {cid, NULL};
    PGresult *r[4] = {NULL};
    int full = mode == DB_FENCE_FULL;
    db_status res;

    *has_row = 0;
    (void)snprintf(cid, sizeof cid, "%" PRId64, coupon_id);
    (void)snprintf(f, sizeof f, "%" PRId64, fence);
    count_values[1] = users_array(db, reqs, n, 0);
    if (count_values[1] == NULL)
        return DB_ERROR;
    /* As the statement-by-statement read (section.c): under `full` a write
     * transaction (the read registers the fence), else one snapshot. */
    dbpg_step steps[] = {
        dbpg_stmt_step(full ? DBI_BEGIN_IMMEDIATE : DBI_BEGIN_DEFERRED, NULL),
        dbpg_stmt_step(full ? DBI_FENCED_READ : DBI_CLAIM_SELECT, read_values),
        dbpg_batch_step(DBPG_USER_COUNTS, count_values),
        dbpg_stmt_step(DBI_COMMIT, NULL),
    };
    res = dbpg_run_pipeline(db, steps, 4, r, "claim read");
    free((void *)count_values[1]);
    if (res == DB_OK && PQntuples(r[1]) > 0) {
        *has_row = 1;
        res = dbpg_int64(db, r[1], 0, 0, &view->stock);
        if (res == DB_OK)
            res = dbpg_int64(db, r[1], 0, 1, &view->per_user_limit);
    }
    if (res == DB_OK && *has_row && PQntuples(r[2]) != (int)n) {
        dbi_set_error(db, "count users' records: %d rows for %zu claims", PQntuples(r[2]), n);
        res = DB_ERROR;
    }
    for (size_t i = 0; res == DB_OK && *has_row && i < n; i++)
        res = dbpg_int64(db, r[2], (int)i, 0, &reqs[i].held);
    for (int i = 0; i < 4; i++)
        PQclear(r[i]);
    if (res == DB_OK && !*has_row && !full) {
        dbi_set_error(db, "no coupon with id %" PRId64, coupon_id);
        res = DB_NOT_FOUND;
    }
    return res;
}

/* The COMMIT of a transaction that inserts records, in a round trip of its
 * own once the statements answered. Sent with them, it would be applied
 * by a server that got the pipeline just before the network to it was cut,
 * while the answer is lost: claims answered 503 that hold a record. Apart,
 * that can only happen while the COMMIT itself is in flight, as for a
 * statement-by-statement transaction; a transaction the cut leaves open
 * is rolled back by the server (idle_in_transaction_session_timeout). */
static db_status commit_apart(db_store *db, db_status res)
{
    return res == DB_OK ? dbi_commit(db) : res;
}

db_status dbpg_section_write(db_store *db, int64_t coupon_id, db_fence_mode mode, int64_t fence, int64_t stock,
                             db_claim_req *reqs, size_t n, int *changed)
{
    char cid[I64_TEXT], s[I64_TEXT], f[I64_TEXT];
    const char *values[] = {cid, s, f, NULL};
    PGresult *r[2] = {NULL};
    size_t sold = 0;
    int rows;
    db_status res;

    *changed = 0;
    for (size_t i = 0; i < n; i++) {
        sold += reqs[i].status == DB_OK;
        reqs[i].claim.record_id = 0; /* 0: no record yet (identity ids start at 1) */
    }
    (void)snprintf(cid, sizeof cid, "%" PRId64, coupon_id);
    (void)snprintf(s, sizeof s, "%" PRId64, stock);
    (void)snprintf(f, sizeof f, "%" PRId64, fence);
    values[3] = users_array(db, reqs, n, 1);
    if (values[3] == NULL)
        return DB_ERROR;
    /* BEGIN around the one statement: READ COMMITTED, whatever the server's
     * default isolation, as the statement-by-statement write. */
    dbpg_step steps[] = {
        dbpg_stmt_step(DBI_BEGIN_IMMEDIATE, NULL),
        dbpg_batch_step(mode == DB_FENCE_OFF ? DBPG_BATCH_WRITE : DBPG_BATCH_FENCED_WRITE, values),
    };
    res = dbpg_run_pipeline(db, steps, 2, r, "claim write");
    free((void *)values[3]);
    rows = res == DB_OK ? PQntuples(r[1]) : 0;
    /* Every record or none: none is the UPDATE refused (or no coupon). */
    if (res == DB_OK && rows != 0 && (size_t)rows != sold) {
        dbi_set_error(db, "write batch: %d records for %zu claims", rows, sold);
        res = DB_ERROR;
    }
    *changed = res == DB_OK && rows > 0;
    /* The ids back to their claims: the claims of one user are alike (same
     * coupon, user and fence), so row k of user u is u's k-th accepted
     * claim, whatever order the rows come back in. */
    for (int k = 0; res == DB_OK && k < rows; k++) {
        const char *user = PQgetvalue(r[1], k, 1);
        size_t i = 0;
        while (i < n && !(reqs[i].status == DB_OK && reqs[i].claim.record_id == 0 &&
                          strcmp(reqs[i].user_id, user) == 0))
            i++;
        if (i == n) {
            dbi_set_error(db, "write batch: a record for user '%.64s' that no claim asked for", user);
            res = DB_ERROR;
            break;
        }
        res = dbpg_int64(db, r[1], k, 0, &reqs[i].claim.record_id);
    }
    for (int i = 0; i < 2; i++)
        PQclear(r[i]);
    /* Only a write read back whole commits; else section.c rolls back. */
    res = commit_apart(db, res);
    if (res != DB_OK)
        *changed = 0;
    return res;
}

/* One claim from a row of DBPG_BATCH_SECTION: status, held, stock left,
 * record id (NULL unless accepted). */
static db_status whole_row(db_store *db, const PGresult *r, int row, db_claim_req *req)
{
    int64_t status = 0;
    db_status res = dbpg_int64(db, r, row, 0, &status);

    if (res == DB_OK)
        res = dbpg_int64(db, r, row, 1, &req->held);
    if (res != DB_OK)
        return res;
    switch (status) {
    case 0:
        req->status = DB_OK;
        res = dbpg_int64(db, r, row, 2, &req->claim.stock);
        if (res == DB_OK)
            res = dbpg_int64(db, r, row, 3, &req->claim.record_id);
        return res;
    case 2:
        req->status = DB_SOLD_OUT;
        return DB_OK;
    case 3:
        req->status = DB_USER_LIMIT;
        return DB_OK;
    default:
        dbi_set_error(db, "claim batch: unknown outcome %" PRId64, status);
        return DB_ERROR;
    }
}

db_status dbpg_section_whole(db_store *db, int64_t coupon_id, int64_t fence, db_claim_req *reqs, size_t n,
                             int *has_row)
{
    char cid[I64_TEXT], f[I64_TEXT];
    const char *read_values[] = {cid, f};
    const char *batch_values[] = {cid, f, NULL};
    PGresult *r[3] = {NULL};
    db_status res;

    *has_row = 0;
    (void)snprintf(cid, sizeof cid, "%" PRId64, coupon_id);
    (void)snprintf(f, sizeof f, "%" PRId64, fence);
    batch_values[2] = users_array(db, reqs, n, 0);
    if (batch_values[2] == NULL)
        return DB_ERROR;
    /* The fenced read first, as its own statement: it takes the row lock
     * (waiting for a writer still at it) before the batch statement takes
     * its snapshot. */
    dbpg_step steps[] = {
        dbpg_stmt_step(DBI_BEGIN_IMMEDIATE, NULL),
        dbpg_stmt_step(DBI_FENCED_READ, read_values),
        dbpg_batch_step(DBPG_BATCH_SECTION, batch_values),
    };
    res = dbpg_run_pipeline(db, steps, 3, r, "claim batch");
    free((void *)batch_values[2]);
    if (res == DB_OK && PQntuples(r[1]) > 0) {
        *has_row = 1;
        if (PQntuples(r[2]) != (int)n) {
            dbi_set_error(db, "claim batch: %d outcomes for %zu claims", PQntuples(r[2]), n);
            res = DB_ERROR;
        }
    }
    for (size_t i = 0; res == DB_OK && *has_row && i < n; i++)
        res = whole_row(db, r[2], (int)i, &reqs[i]);
    for (int i = 0; i < 3; i++)
        PQclear(r[i]);
    /* Only outcomes read back whole commit; else section.c rolls back. */
    return commit_apart(db, res);
}
