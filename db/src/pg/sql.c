/* pg/sql.c - the PostgreSQL texts of the store's statements: the same
 * statements as SQLite's table (sqlite/stmt.c), in PostgreSQL's dialect ($n
 * parameters, RETURNING for new ids, bigint sums). Every value is a bound
 * parameter: no SQL text is ever built from input. */
#include "pg_internal.h"

#define PG_ISSUED_SUBQUERY "(SELECT COUNT(*) FROM coupon_record r WHERE r.coupon_id = c.id)"
#define PG_COUPON_COLUMNS \
    "c.id, c.name, c.total, c.stock, c.per_user_limit, c.last_fence, " PG_ISSUED_SUBQUERY

const dbpg_sql dbpg_statements[DBI_STMT_COUNT] = {
    /* READ COMMITTED for the writes: each statement sees the rows committed
     * before it, and an UPDATE waits for a concurrent writer of the same
     * row, then re-checks its WHERE (fence, stock > 0) on the row as that
     * writer left it. The row lock it takes orders the writers as SQLite's
     * BEGIN IMMEDIATE does, per coupon instead of per file. */
    [DBI_BEGIN_IMMEDIATE] = {"begin", "BEGIN ISOLATION LEVEL READ COMMITTED", ""},
    /* The multi-statement reads (the section's unfenced read, the audit)
     * need one snapshot, as SQLite's WAL read transaction gives. */
    [DBI_BEGIN_DEFERRED] = {"begin read", "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", ""},
    [DBI_COMMIT] = {"commit", "COMMIT", ""},
    [DBI_ROLLBACK] = {"rollback", "ROLLBACK", ""},
    [DBI_PING] = {"ping", "SELECT 1 FROM coupon LIMIT 1", ""},
    [DBI_COUPON_INSERT] = {"insert coupon",
                           "INSERT INTO coupon(name, total, stock, per_user_limit) VALUES ($1, $2, $2, $3) "
                           "RETURNING id",
                           "tii"},
    [DBI_COUPON_GET] = {"get coupon", "SELECT " PG_COUPON_COLUMNS " FROM coupon c WHERE c.id = $1", "i"},
    [DBI_COUPON_LIST] = {"list coupons", "SELECT " PG_COUPON_COLUMNS " FROM coupon c ORDER BY c.id", ""},
    [DBI_STOCK_PEEK] = {"peek stock", "SELECT stock FROM coupon WHERE id = $1", "i"},
    [DBI_CLAIM_SELECT] = {"select coupon for claim",
                          "SELECT stock, per_user_limit, last_fence FROM coupon WHERE id = $1", "i"},
    [DBI_USER_COUNT] = {"count user records",
                        "SELECT COUNT(*) FROM coupon_record WHERE coupon_id = $1 AND user_id = $2", "it"},
    /* The fenced read (section.c): one statement registers the fence and
     * returns the stock. */
    [DBI_FENCED_READ] = {"fenced read",
                         "UPDATE coupon SET last_fence = $2 WHERE id = $1 AND last_fence <= $2 "
                         "RETURNING stock, per_user_limit",
                         "ii"},
    /* The section's write: the value read minus what was sold. */
    [DBI_WRITE_STOCK] = {"write stock", "UPDATE coupon SET stock = $2 WHERE id = $1", "ii"},
    [DBI_FENCED_WRITE_STOCK] = {"fenced write stock",
                                "UPDATE coupon SET stock = $2, last_fence = $3 WHERE id = $1 AND last_fence <= $3",
                                "iii"},
    /* atomic-sql: the whole check-and-decrement in one conditional UPDATE. */
    [DBI_ATOMIC_DECREMENT] = {"conditional decrement",
                              "UPDATE coupon SET stock = stock - 1 WHERE id = $1 AND stock > 0", "i"},
    [DBI_RECORD_INSERT] = {"insert record",
                           "INSERT INTO coupon_record(coupon_id, user_id, fence) VALUES ($1, $2, $3) RETURNING id",
                           "iti"},
    [DBI_AUDIT_COUPON] = {"audit coupon",
                          "SELECT c.total, c.stock, c.per_user_limit, " PG_ISSUED_SUBQUERY
                          " FROM coupon c WHERE c.id = $1",
                          "i"},
    /* SUM of bigint is numeric in PostgreSQL: cast back, the values fit. */
    [DBI_AUDIT_USERS] = {"audit users",
                         "SELECT COUNT(*), COALESCE(SUM(n - $2), 0)::bigint FROM "
                         "(SELECT COUNT(*) AS n FROM coupon_record WHERE coupon_id = $1 GROUP BY user_id) u "
                         "WHERE $2 > 0 AND n > $2",
                         "ii"},
};

/* The user ids of a batch travel as one text[] parameter, unnested WITH
 * ORDINALITY to keep the batch's order: a batch costs one statement, not one
 * per claim. */

const dbpg_sql dbpg_batch_statements[DBPG_BATCH_COUNT] = {
    /* DBI_USER_COUNT for every claim of the batch at once; run after the
     * fenced read in the same READ COMMITTED transaction, as the per-claim
     * counts were, so it sees every record committed before the read. */
    [DBPG_USER_COUNTS] = {"count users' records",
                          "SELECT (SELECT COUNT(*) FROM coupon_record r WHERE r.coupon_id = $1 "
                          "AND r.user_id = u.user_id) FROM unnest($2::text[]) WITH ORDINALITY AS u(user_id, ord) "
                          "ORDER BY u.ord",
                          "ia"},
    /* The section's write and its records as one statement: the INSERT
     * reads the UPDATE's row. So when the UPDATE changes nothing (no such
     * coupon; with the fence, a newer holder's fence on the row), no record
     * is inserted and no row comes back: nothing of the batch is written.
     * ORDER BY ord: the records get their ids in the batch's order. */
    [DBPG_BATCH_WRITE] = {"write batch",
                          "WITH w AS (UPDATE coupon SET stock = $2 WHERE id = $1 RETURNING id) "
                          "INSERT INTO coupon_record(coupon_id, user_id, fence) "
                          "SELECT w.id, u.user_id, $3 FROM w CROSS JOIN unnest($4::text[]) WITH ORDINALITY "
                          "AS u(user_id, ord) ORDER BY u.ord RETURNING id, user_id",
                          "iiia"},
    [DBPG_BATCH_FENCED_WRITE] = {"fenced write batch",
                                 "WITH w AS (UPDATE coupon SET stock = $2, last_fence = $3 "
                                 "WHERE id = $1 AND last_fence <= $3 RETURNING id) "
                                 "INSERT INTO coupon_record(coupon_id, user_id, fence) "
                                 "SELECT w.id, u.user_id, $3 FROM w CROSS JOIN unnest($4::text[]) WITH ORDINALITY "
                                 "AS u(user_id, ord) ORDER BY u.ord RETURNING id, user_id",
                                 "iiia"},
    /* The whole section of a batch with no business step, run right after
     * DBI_FENCED_READ in its transaction, which registered our fence and
     * holds the row lock. This statement's snapshot is taken after it, so
     * it sees every record committed before the row let our fence in.
     *   c  the coupon as our fenced read left it (last_fence = $2; no row
     *      when the read was refused, and then nothing below happens);
     *   u  each claim's user, its records (held) and its rank among the
     *      batch's claims of that user (nth);
     *   d  db_claim_decide (section.c) in one pass: a claim fits the per-user
     *      limit when held + nth <= limit; `before` is how many fitting
     *      claims precede it: once they reach the stock it is sold out
     *      (2), else it is accepted (0) or over the limit (3);
     *   w  the write, fenced: the stock read minus the accepted claims;
     *   i  one record per accepted claim, in the batch's order.
     * One row per claim, in order: status, held, stock left, record id (the
     * k-th record of a user is that user's k-th accepted claim). */
    [DBPG_BATCH_SECTION] = {
        "claim batch",
        "WITH c AS (SELECT id, stock, per_user_limit FROM coupon WHERE id = $1 AND last_fence = $2), "
        "u AS (SELECT u.user_id, u.ord, "
        "(SELECT COUNT(*) FROM coupon_record r WHERE r.coupon_id = $1 AND r.user_id = u.user_id) AS held, "
        "row_number() OVER (PARTITION BY u.user_id ORDER BY u.ord) AS nth "
        "FROM unnest($3::text[]) WITH ORDINALITY AS u(user_id, ord)), "
        "f AS (SELECT u.*, c.stock, (c.per_user_limit = 0 OR u.held + u.nth <= c.per_user_limit) AS fits "
        "FROM u CROSS JOIN c), "
        "d AS (SELECT f.*, COALESCE(SUM(f.fits::int) OVER (ORDER BY f.ord ROWS BETWEEN UNBOUNDED PRECEDING "
        "AND 1 PRECEDING), 0) AS before FROM f), "
        "s AS (SELECT d.*, CASE WHEN d.before >= d.stock THEN 2 WHEN d.fits THEN 0 ELSE 3 END AS status, "
        "row_number() OVER (PARTITION BY d.user_id, d.before < d.stock AND d.fits ORDER BY d.ord) AS k FROM d), "
        "w AS (UPDATE coupon SET stock = c.stock - (SELECT COUNT(*) FROM s WHERE s.status = 0) FROM c "
        "WHERE coupon.id = c.id AND coupon.last_fence <= $2 AND EXISTS (SELECT 1 FROM s WHERE s.status = 0) "
        "RETURNING coupon.id), "
        "i AS (INSERT INTO coupon_record(coupon_id, user_id, fence) SELECT w.id, s.user_id, $2 "
        "FROM w CROSS JOIN s WHERE s.status = 0 ORDER BY s.ord RETURNING id, user_id), "
        "ik AS (SELECT i.id, i.user_id, row_number() OVER (PARTITION BY i.user_id ORDER BY i.id) AS k FROM i) "
        "SELECT s.status, s.held, s.stock - s.before - 1, ik.id FROM s "
        "LEFT JOIN ik ON s.status = 0 AND ik.user_id = s.user_id AND ik.k = s.k ORDER BY s.ord",
        "iia"},
};
