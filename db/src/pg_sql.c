/* pg_sql.c - the PostgreSQL texts of the store's statements: the same
 * statements as SQLite's table (stmt.c), in PostgreSQL's dialect ($n
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
