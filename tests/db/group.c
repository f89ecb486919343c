/* group.c - group commit (db_claim_group): the sections of several coupons
 * in one transaction, each in its own savepoint.
 *   - three sections commit together: each coupon's stock, records, fence
 *     and per-user limit exactly as three separate sections would leave them;
 *   - a section whose fence is stale (a newer holder already read its
 *     coupon) is refused and undone alone, while the sections before and
 *     after it in the same group commit;
 *   - a section of no such coupon is refused alone the same way, and one
 *     that fails after its write leaves nothing of itself;
 *   - a group whose transaction cannot start (another connection holds the
 *     write lock past the busy timeout) fails every section, writing nothing. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "dbtest.h"

TestSuite(db_group, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 60);

static void section_init(db_group_section *s, int64_t coupon_id, uint64_t fence, db_claim_req *reqs, size_t n,
                         const char *const *users)
{
    memset(s, 0, sizeof *s);
    s->coupon_id = coupon_id;
    s->fence = fence;
    s->reqs = reqs;
    s->n = n;
    memset(reqs, 0, n * sizeof *reqs);
    for (size_t i = 0; i < n; i++)
        reqs[i].user_id = users[i];
}

static int64_t scalar(const char *fmt, int64_t id)
{
    char sql[256];
    snprintf(sql, sizeof sql, fmt, (long long)id);
    return dbt_scalar(dbt_path, sql);
}

static void assert_coupon(int64_t id, int64_t stock, int64_t records, int64_t last_fence)
{
    cr_expect_eq(scalar("SELECT stock FROM coupon WHERE id = %lld", id), stock, "coupon %lld stock",
                 (long long)id);
    cr_expect_eq(scalar("SELECT COUNT(*) FROM coupon_record WHERE coupon_id = %lld", id), records,
                 "coupon %lld records", (long long)id);
    cr_expect_eq(scalar("SELECT last_fence FROM coupon WHERE id = %lld", id), last_fence, "coupon %lld last_fence",
                 (long long)id);
    db_audit_row a = dbt_audit(dbt_db, id);
    cr_expect_eq(a.oversold_by, 0, "coupon %lld oversold by %lld", (long long)id, (long long)a.oversold_by);
}

Test(db_group, sections_of_three_coupons_commit_together)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 1), b = dbt_create(dbt_db, "b", 1, 0), c = dbt_create(dbt_db, "c", 3, 2);
    const char *ua[] = {"u1", "u2", "u1"}, *ub[] = {"u1", "u2"}, *uc[] = {"x", "x", "x"};
    db_claim_req ra[3], rb[2], rc[3];
    db_group_section sa, sb, sc;
    db_group_section *const secs[] = {&sa, &sb, &sc};

    cr_assert(db_group_supported(dbt_db));
    section_init(&sa, a, 7, ra, 3, ua);
    section_init(&sb, b, 3, rb, 2, ub);
    section_init(&sc, c, 9, rc, 3, uc);
    cr_assert_eq(db_claim_group(dbt_db, secs, 3), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(sa.status, DB_OK, "%s", sa.errmsg);
    cr_assert_eq(sb.status, DB_OK, "%s", sb.errmsg);
    cr_assert_eq(sc.status, DB_OK, "%s", sc.errmsg);
    /* a: limit 1, so u1's second claim is refused; b: one unit; c: limit 2. */
    cr_expect_eq(ra[0].status, DB_OK);
    cr_expect_eq(ra[1].status, DB_OK);
    cr_expect_eq(ra[2].status, DB_USER_LIMIT);
    cr_expect_eq(rb[0].status, DB_OK);
    cr_expect_eq(rb[1].status, DB_SOLD_OUT);
    cr_expect_eq(rc[0].status, DB_OK);
    cr_expect_eq(rc[1].status, DB_OK);
    cr_expect_eq(rc[2].status, DB_USER_LIMIT);
    cr_expect_eq(ra[1].claim.stock, 3);
    cr_expect_gt(ra[0].claim.record_id, 0);
    assert_coupon(a, 3, 2, 7);
    assert_coupon(b, 0, 1, 3);
    assert_coupon(c, 1, 2, 9);
    cr_expect_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE fence = 7"), 2);
}

/* The middle section's coupon was read by a newer holder (fence 20) after
 * its own holder (fence 10) took the lock: its lease ran out. */
Test(db_group, stale_section_rolls_back_alone)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 0), b = dbt_create(dbt_db, "b", 5, 0), c = dbt_create(dbt_db, "c", 5, 0);
    const char *u[] = {"alice", "bob"};
    db_claim_req ra[2], rb[2], rc[2], newer;
    db_group_section sa, sb, sc;
    db_group_section *const secs[] = {&sa, &sb, &sc};
    db_claim_view view;

    /* The newer holder of b registers fence 20 with its read. */
    memset(&newer, 0, sizeof newer);
    newer.user_id = "carol";
    cr_assert_eq(db_claim_read(dbt_db, b, DB_FENCE_FULL, 20, &newer, 1, &view), DB_OK, "%s", db_errmsg(dbt_db));

    section_init(&sa, a, 10, ra, 2, u);
    section_init(&sb, b, 10, rb, 2, u);
    section_init(&sc, c, 10, rc, 2, u);
    cr_assert_eq(db_claim_group(dbt_db, secs, 3), DB_OK, "%s", db_errmsg(dbt_db));
    cr_expect_eq(sa.status, DB_OK, "%s", sa.errmsg);
    cr_expect_eq(sb.status, DB_STALE_FENCE, "status %d", sb.status);
    cr_expect_eq(sc.status, DB_OK, "%s", sc.errmsg);
    cr_expect(strstr(sb.errmsg, "fence 10 is older than last_fence 20") != NULL, "errmsg: %s", sb.errmsg);
    cr_expect_eq(rb[0].status, DB_STALE_FENCE);
    cr_expect_eq(rb[1].status, DB_STALE_FENCE);
    cr_expect_eq(rb[0].claim.record_id, 0);
    assert_coupon(a, 3, 2, 10);
    assert_coupon(b, 5, 0, 20); /* untouched: the newer holder's fence stays */
    assert_coupon(c, 3, 2, 10);
}

/* Two holders of one coupon in one group (the older one's lease ran out and
 * the newer one took the lock meanwhile): the newer section registers its
 * fence first, so the older one's read is refused and undone alone. */
Test(db_group, older_holder_after_newer_in_one_group_is_refused)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 0);
    const char *u1[] = {"alice"}, *u2[] = {"bob"};
    db_claim_req r1[1], r2[1];
    db_group_section s1, s2;
    db_group_section *const secs[] = {&s1, &s2};

    section_init(&s1, a, 12, r1, 1, u1);
    section_init(&s2, a, 11, r2, 1, u2);
    cr_assert_eq(db_claim_group(dbt_db, secs, 2), DB_OK, "%s", db_errmsg(dbt_db));
    cr_expect_eq(s1.status, DB_OK, "%s", s1.errmsg);
    cr_expect_eq(s2.status, DB_STALE_FENCE, "status %d", s2.status);
    assert_coupon(a, 4, 1, 12);
}

/* A section that fails half-way, after its stock write and its first
 * record (a trigger refuses the second record's insert): its savepoint
 * undoes both, the other section commits. */
Test(db_group, failed_section_leaves_nothing_of_itself)
{
    int64_t a = dbt_create(dbt_db, "a", 5, 0), b = dbt_create(dbt_db, "b", 5, 0);
    const char *ua[] = {"fine", "boom"}, *ub[] = {"fine"};
    db_claim_req ra[2], rb[1];
    db_group_section sa, sb;
    db_group_section *const secs[] = {&sa, &sb};

    dbt_exec(dbt_path, "CREATE TRIGGER boom BEFORE INSERT ON coupon_record WHEN NEW.user_id = 'boom' "
                       "BEGIN SELECT RAISE(ABORT, 'boom refused'); END");
    section_init(&sa, a, 6, ra, 2, ua);
    section_init(&sb, b, 6, rb, 1, ub);
    cr_assert_eq(db_claim_group(dbt_db, secs, 2), DB_OK, "%s", db_errmsg(dbt_db));
    cr_expect_eq(sa.status, DB_ERROR, "status %d", sa.status);
    cr_expect(strstr(sa.errmsg, "boom refused") != NULL, "errmsg: %s", sa.errmsg);
    cr_expect_eq(ra[0].status, DB_ERROR, "the claim inserted before the failure is not reported issued");
    cr_expect_eq(sb.status, DB_OK, "%s", sb.errmsg);
    assert_coupon(a, 5, 0, 0); /* stock, record and fence all undone */
    assert_coupon(b, 4, 1, 6);
}

Test(db_group, missing_coupon_refused_alone)
{
    int64_t a = dbt_create(dbt_db, "a", 2, 0);
    const char *u[] = {"alice"};
    db_claim_req ra[1], rx[1];
    db_group_section sa, sx;
    db_group_section *const secs[] = {&sx, &sa};

    section_init(&sx, a + 100, 4, rx, 1, u);
    section_init(&sa, a, 4, ra, 1, u);
    cr_assert_eq(db_claim_group(dbt_db, secs, 2), DB_OK, "%s", db_errmsg(dbt_db));
    cr_expect_eq(sx.status, DB_NOT_FOUND, "status %d", sx.status);
    cr_expect_eq(sa.status, DB_OK, "%s", sa.errmsg);
    assert_coupon(a, 1, 1, 4);
}

/* Another connection holds the write lock: BEGIN IMMEDIATE waits out the
 * busy timeout, and every section fails with nothing written. */
Test(db_group, busy_store_fails_every_section)
{
    int64_t a = dbt_create(dbt_db, "a", 2, 0), b = dbt_create(dbt_db, "b", 2, 0);
    const char *u[] = {"alice"};
    db_claim_req ra[1], rb[1];
    db_group_section sa, sb;
    db_group_section *const secs[] = {&sa, &sb};
    db_store *quick = NULL;
    sqlite3 *holder = NULL;
    char err[256];

    cr_assert_eq(db_open(dbt_path, 50, &quick, err, sizeof err), DB_OK, "%s", err);
    cr_assert_eq(sqlite3_open(dbt_path, &holder), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(holder, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    section_init(&sa, a, 4, ra, 1, u);
    section_init(&sb, b, 4, rb, 1, u);
    cr_expect_eq(db_claim_group(quick, secs, 2), DB_BUSY, "%s", db_errmsg(quick));
    cr_expect_eq(sa.status, DB_BUSY);
    cr_expect_eq(sb.status, DB_BUSY);
    cr_expect_eq(ra[0].status, DB_BUSY);
    cr_expect_eq(sqlite3_exec(holder, "ROLLBACK", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(holder);
    db_close(quick);
    assert_coupon(a, 2, 0, 0);
    assert_coupon(b, 2, 0, 0);
}

/* db_adopt_error: a section run on another connection tells its failure on
 * the caller's own store. */
Test(db_group, adopted_error_reads_back)
{
    db_adopt_error(dbt_db, DB_FAULT_BUSY, "read refused: fence 1 is older than last_fence 2");
    cr_expect_str_eq(db_errmsg(dbt_db), "read refused: fence 1 is older than last_fence 2");
    cr_expect_eq(db_last_fault(dbt_db), DB_FAULT_BUSY);
}
