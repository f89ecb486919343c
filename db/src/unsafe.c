/* unsafe.c - db_claim_unsafe, the `none` strategy: read-then-write with no
 * lock, which oversells under concurrency ON PURPOSE. It exists so the demo,
 * the load tester and the tests can show the bug every other strategy fixes.
 * Do not repair it: a repaired version would make the demonstration lie. */
#include <errno.h>
#include <time.h>

#include "db_internal.h"

static void sleep_us(unsigned us)
{
    struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000L};

    /* Restart on EINTR with what is left: the window must stay as wide as asked. */
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

db_status db_claim_unsafe(db_store *db, int64_t coupon_id, const char *user_id, unsigned delay_us,
                          db_claim *out)
{
    db_status res = dbi_check_claim_args(db, coupon_id, user_id, out);
    int64_t stock = 0;
    int64_t limit = 0;
    int64_t last_fence = 0;
    int changed = 0;

    if (res != DB_OK)
        return res;

    /* Transaction 1: a plain read. Its checks hold for this snapshot only;
     * nothing stops another process from claiming the same unit before
     * transaction 2 writes. */
    res = dbi_begin_deferred(db);
    if (res != DB_OK)
        return res;
    res = dbi_select_coupon(db, coupon_id, &stock, &limit, &last_fence);
    if (res == DB_OK && stock <= 0)
        res = dbi_sold_out(db, coupon_id);
    if (res == DB_OK)
        res = dbi_check_user_limit(db, coupon_id, user_id, limit);
    if (res == DB_OK)
        res = dbi_commit(db);
    if (res != DB_OK)
        goto out;

    /* THE BUG, on purpose: time passes between the read and the write,
     * outside any transaction (think of a slow call to another service).
     * Every concurrent caller that read the same stock writes the same value. */
    if (delay_us > 0)
        sleep_us(delay_us);

    /* Transaction 2: IMMEDIATE only so the write cannot fail halfway on
     * SQLITE_BUSY; it cannot help, the decision was made on a stale read. */
    res = dbi_begin_immediate(db);
    if (res != DB_OK)
        goto out;
    /* The lost update: `stock = <what we read> - 1`, not `stock = stock - 1`,
     * so two callers that both read 5 both write 4, and two records exist for
     * one unit. */
    res = dbi_update_stock(db, DBI_UNSAFE_SET_STOCK, coupon_id, stock - 1, &changed, "write stock");
out:
    return dbi_end_claim(db, res, coupon_id, user_id, 0, stock - 1, out);
}
