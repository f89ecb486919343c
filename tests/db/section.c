/* section.c - the critical section step by step, with two holders'
 * steps interleaved by hand (deterministic, one connection each):
 *   - the lease-outlived interleaving A.read(10) B.read(11) A.write B.write
 *     sells one unit twice under --fence off and --fence write, and is
 *     refused (A's write: DB_STALE_FENCE, nothing changed) under full;
 *   - a batch reads once, writes once, and keeps the per-user limit inside it;
 *   - the write is `read - sold`, never `stock - 1`: if it ever became atomic
 *     again, the off/write cases here would stop overselling and fail. */
#include <criterion/criterion.h>
#include <string.h>

#include "dbtest.h"

TestSuite(db_section, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 30);

typedef struct holder {
    db_store *db;
    uint64_t fence;
    db_claim_req req;
    db_claim_view view;
} holder;

static void holder_init(holder *h, db_store *db, uint64_t fence, const char *user)
{
    memset(h, 0, sizeof *h);
    h->db = db;
    h->fence = fence;
    h->req.user_id = user;
}

static db_status do_read(holder *h, int64_t id, db_fence_mode mode)
{
    db_status st = db_claim_read(h->db, id, mode, h->fence, &h->req, 1, &h->view);
    if (st == DB_OK)
        cr_assert_eq(db_claim_decide(&h->view, &h->req, 1), 1);
    return st;
}

static db_status do_write(holder *h, int64_t id, db_fence_mode mode)
{
    return db_claim_write(h->db, id, mode, h->fence, &h->view, &h->req, 1);
}

/* The interleaving of docs/fencing.md, on two connections: A (fence 10)
 * reads, its lease runs out, B (fence 11) reads, A writes, B writes. */
static void lease_outlived(db_fence_mode mode, db_status *a_write, db_status *b_write, int64_t *id_out)
{
    db_store *other = dbt_open();
    holder a, b;
    int64_t id = dbt_create(dbt_db, "hot", 5, 0);

    holder_init(&a, dbt_db, 10, "alice");
    holder_init(&b, other, 11, "bob");
    cr_assert_eq(do_read(&a, id, mode), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(do_read(&b, id, mode), DB_OK, "%s", db_errmsg(other));
    cr_assert_eq(a.view.stock, 5);
    cr_assert_eq(b.view.stock, 5, "both read the same stock: the race is open");
    *a_write = do_write(&a, id, mode);
    *b_write = do_write(&b, id, mode);
    db_close(other);
    *id_out = id;
}

Test(db_section, fence_off_sells_one_unit_twice)
{
    db_status wa, wb;
    int64_t id;

    lease_outlived(DB_FENCE_OFF, &wa, &wb, &id);
    cr_assert_eq(wa, DB_OK);
    cr_assert_eq(wb, DB_OK);
    db_audit_row a = dbt_audit(dbt_db, id);
    cr_assert_eq(a.issued, 2);
    cr_assert_eq(a.stock, 4, "both wrote 5 - 1: the lost update");
    cr_assert_eq(a.oversold_by, 1);
}

Test(db_section, fence_on_write_only_still_sells_one_unit_twice)
{
    db_status wa, wb;
    int64_t id;

    /* A's write passes (no newer write yet), B's passes (11 >= 10): the
     * fence ordered the writes, but both came from the same read. */
    lease_outlived(DB_FENCE_WRITE, &wa, &wb, &id);
    cr_assert_eq(wa, DB_OK);
    cr_assert_eq(wb, DB_OK);
    db_audit_row a = dbt_audit(dbt_db, id);
    cr_assert_eq(a.issued, 2);
    cr_assert_eq(a.stock, 4);
    cr_assert_eq(a.oversold_by, 1);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 11);
}

Test(db_section, full_fence_refuses_the_stale_holder_and_changes_nothing)
{
    db_status wa, wb;
    int64_t id;

    lease_outlived(DB_FENCE_FULL, &wa, &wb, &id);
    cr_assert_eq(wa, DB_STALE_FENCE, "B read with fence 11: A (10) must not write");
    cr_assert_eq(wb, DB_OK);
    db_audit_row a = dbt_audit(dbt_db, id);
    cr_assert_eq(a.issued, 1);
    cr_assert_eq(a.stock, 4);
    cr_assert_eq(a.oversold_by, 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE user_id = 'alice'"), 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT fence FROM coupon_record"), 11);
}

Test(db_section, full_fence_refuses_an_older_read)
{
    holder a, b;
    int64_t id = dbt_create(dbt_db, "hot", 5, 0);

    holder_init(&a, dbt_db, 10, "alice");
    holder_init(&b, dbt_db, 11, "bob");
    cr_assert_eq(do_read(&b, id, DB_FENCE_FULL), DB_OK);
    cr_assert_eq(do_read(&a, id, DB_FENCE_FULL), DB_STALE_FENCE);
    cr_assert_not_null(strstr(db_errmsg(dbt_db), "older than last_fence 11"), "%s", db_errmsg(dbt_db));
    /* Under write-only fencing the same read is let through (nothing is
     * registered by reads): that is the gap `full` closes. */
    cr_assert_eq(do_read(&a, id, DB_FENCE_WRITE), DB_OK);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 11);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT stock FROM coupon"), 5);
}

Test(db_section, same_holder_reads_then_writes)
{
    holder a;
    int64_t id = dbt_create(dbt_db, "hot", 5, 0);

    /* `<=`: the fence the read registered lets the same holder write. */
    holder_init(&a, dbt_db, 7, "alice");
    cr_assert_eq(do_read(&a, id, DB_FENCE_FULL), DB_OK);
    cr_assert_eq(do_write(&a, id, DB_FENCE_FULL), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(a.req.claim.stock, 4);
    cr_assert_gt(a.req.claim.record_id, 0);
}

Test(db_section, batch_reads_once_writes_once_and_keeps_the_user_limit)
{
    int64_t id = dbt_create(dbt_db, "batch", 4, 2);
    db_claim_req reqs[6];
    const char *users[6] = {"u1", "u1", "u1", "u2", "u3", "u4"};

    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < 6; i++)
        reqs[i].user_id = users[i];
    cr_assert_eq(db_claim_section(dbt_db, id, DB_FENCE_FULL, 3, reqs, 6, NULL, NULL), DB_OK, "%s",
                 db_errmsg(dbt_db));
    /* u1 twice (its limit), the third u1 refused; then stock runs out. */
    db_status want[6] = {DB_OK, DB_OK, DB_USER_LIMIT, DB_OK, DB_OK, DB_SOLD_OUT};
    int64_t left[6] = {3, 2, 0, 1, 0, 0};
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(reqs[i].status, want[i], "claim %d: %s", i, db_status_str(reqs[i].status));
        cr_assert_eq(reqs[i].claim.stock, left[i], "claim %d stock left %lld", i, (long long)reqs[i].claim.stock);
    }
    db_audit_row a = dbt_audit(dbt_db, id);
    cr_assert_eq(a.issued, 4);
    cr_assert_eq(a.stock, 0);
    cr_assert_eq(a.oversold_by, 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE fence = 3"), 4);
}

Test(db_section, stale_batch_applies_nothing)
{
    int64_t id = dbt_create(dbt_db, "batch", 10, 0);
    db_claim_req reqs[3];
    db_claim c;

    cr_assert_eq(db_claim_coupon(dbt_db, id, "newer", 9, &c), DB_OK);
    memset(reqs, 0, sizeof reqs);
    reqs[0].user_id = "a";
    reqs[1].user_id = "b";
    reqs[2].user_id = "c";
    cr_assert_eq(db_claim_section(dbt_db, id, DB_FENCE_FULL, 8, reqs, 3, NULL, NULL), DB_STALE_FENCE);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(reqs[i].status, DB_STALE_FENCE);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 1);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT stock FROM coupon"), 9);
}

typedef struct interleave {
    db_store *other;
    int64_t id;
    db_status other_result;
} interleave;

/* Runs a whole second claim (fence 20) inside the first one's business step. */
static void claim_in_between(void *arg, size_t n)
{
    interleave *x = arg;
    db_claim c;

    cr_assert_eq(n, 1);
    x->other_result = db_claim_coupon(x->other, x->id, "bob", 20, &c);
}

Test(db_section, a_claim_inside_the_business_step_is_a_lost_update_without_full_fence)
{
    db_fence_mode modes[3] = {DB_FENCE_OFF, DB_FENCE_WRITE, DB_FENCE_FULL};
    db_status first_want[3] = {DB_OK, DB_STALE_FENCE, DB_STALE_FENCE};
    int64_t oversold_want[3] = {1, 0, 0};

    for (int m = 0; m < 3; m++) {
        interleave x = {dbt_open(), dbt_create(dbt_db, "hot", 3, 0), DB_ERROR};
        db_claim_req req;

        memset(&req, 0, sizeof req);
        req.user_id = "alice";
        /* Alice (fence 10) reads 3; Bob (20) claims completely while she
         * works; she then writes 3 - 1 over Bob's 2 - unless fenced. */
        db_status st = db_claim_section(dbt_db, x.id, modes[m], 10, &req, 1, claim_in_between, &x);
        cr_assert_eq(x.other_result, DB_OK, "%s", db_errmsg(x.other));
        cr_assert_eq(st, first_want[m], "mode %s: %s", db_fence_mode_name(modes[m]), db_status_str(st));
        db_audit_row a = dbt_audit(dbt_db, x.id);
        cr_assert_eq(a.oversold_by, oversold_want[m], "mode %s", db_fence_mode_name(modes[m]));
        db_close(x.other);
    }
}

Test(db_section, fence_mode_names_round_trip)
{
    db_fence_mode m;

    cr_assert_eq(db_fence_mode_parse("off", &m), 0);
    cr_assert_eq(m, DB_FENCE_OFF);
    cr_assert_eq(db_fence_mode_parse("write", &m), 0);
    cr_assert_eq(m, DB_FENCE_WRITE);
    cr_assert_eq(db_fence_mode_parse("full", &m), 0);
    cr_assert_eq(m, DB_FENCE_FULL);
    cr_assert_eq(db_fence_mode_parse("FULL", &m), -1);
    cr_assert_eq(db_fence_mode_parse(NULL, &m), -1);
    cr_assert_null(db_fence_mode_name((db_fence_mode)7));
}
