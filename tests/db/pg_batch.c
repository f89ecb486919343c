/* pg_batch.c - PostgreSQL only. A batch of claims costs two round trips to
 * the server with no business step (fenced read, decision and fenced write
 * in one pipeline, then its COMMIT). It costs three with one (the read,
 * then the write and its COMMIT), whatever the batch's size. They are
 * counted from libpq's own trace of the messages ($COUPON_DB_PG_TRACE):
 * each round trip is one run of messages sent (F) followed by the answers
 * (B). Both paths give the same outcomes as db_claim_decide: sold out,
 * per-user limit (records held and earlier claims of the batch), the stock
 * left per claim, one record per accepted claim with its user. A stale
 * fence refuses the whole batch and writes nothing. User ids with quotes,
 * backslashes, commas and braces travel as themselves. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbtest.h"

TestSuite(db_pg_batch, .init = dbt_setup_open, .fini = dbt_teardown_close, .timeout = 60);

/* The two paths of db_claim_section: no business step (the store may run
 * the section as one transaction), and one (read, step, write). */
typedef enum path { WHOLE, STEPPED } path;

static void business_step(void *arg, size_t n_claims)
{
    *(size_t *)arg = n_claims;
}

static db_status section(db_store *db, path p, int64_t id, uint64_t fence, db_claim_req *reqs, size_t n)
{
    size_t stepped = 0;
    db_status st;

    for (size_t i = 0; i < n; i++)
        memset(&reqs[i].claim, 0xff, sizeof reqs[i].claim); /* garbage the section must overwrite */
    st = db_claim_section(db, id, DB_FENCE_FULL, fence, reqs, n, p == WHOLE ? NULL : business_step, &stepped);
    if (p == STEPPED && st == DB_OK) {
        size_t ok = 0;
        for (size_t i = 0; i < n; i++)
            ok += reqs[i].status == DB_OK;
        cr_assert_eq(stepped, ok, "the business step ran for the %zu accepted claims", ok);
    }
    return st;
}

static long file_size(const char *file)
{
    FILE *f = fopen(file, "r");
    long n;

    if (f == NULL)
        return 0;
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    n = ftell(f);
    fclose(f);
    return n;
}

/* Round trips in the trace after offset: runs of sent messages ("F\t...")
 * each followed by answers ("B\t..."). */
static int round_trips(const char *file, long offset)
{
    FILE *f = fopen(file, "r");
    char line[4096];
    int trips = 0, sending = 0, answered = 0;

    cr_assert_not_null(f, "no trace at %s", file);
    cr_assert_eq(fseek(f, offset, SEEK_SET), 0);
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "F\t", 2) == 0) {
            if (!sending)
                trips++;
            sending = 1;
        } else if (strncmp(line, "B\t", 2) == 0) {
            sending = 0;
            answered++;
        }
    }
    fclose(f);
    cr_assert_gt(answered, 0, "the trace holds no answer: is it libpq's format?");
    return trips;
}

/* A store whose session is traced into <dir>/trace. */
static db_store *traced_store(char *trace, size_t len)
{
    db_store *db;

    snprintf(trace, len, "%s/trace", dbt_dir);
    cr_assert_eq(setenv("COUPON_DB_PG_TRACE", trace, 1), 0);
    db = dbt_open();
    cr_assert_eq(unsetenv("COUPON_DB_PG_TRACE"), 0);
    cr_assert_gt(file_size(trace), 0, "the store did not trace its session");
    return db;
}

/* n claims of n users named "<tag>-<i>". */
static void batch_of(db_claim_req *reqs, char users[][16], size_t n, int tag)
{
    memset(reqs, 0, n * sizeof *reqs);
    for (size_t i = 0; i < n; i++) {
        snprintf(users[i], 16, "u%d-%zu", tag, i);
        reqs[i].user_id = users[i];
    }
}

static void check_round_trips(path p, int expected)
{
    char trace[400], users[32][16];
    db_claim_req reqs[32];
    db_store *db = traced_store(trace, sizeof trace);
    int64_t id = dbt_create(dbt_db, "hot", 100, 1);
    uint64_t fence = 10;

    for (size_t n = 1; n <= 32; n *= 2) {
        long at = file_size(trace);
        batch_of(reqs, users, n, (int)n);
        cr_assert_eq(section(db, p, id, fence++, reqs, n), DB_OK, "%s", db_errmsg(db));
        for (size_t i = 0; i < n; i++)
            cr_assert_eq(reqs[i].status, DB_OK, "claim %zu of %zu: %s", i, n, db_status_str(reqs[i].status));
        cr_assert_eq(round_trips(trace, at), expected, "a batch of %zu claims", n);
    }
    /* 1 + 2 + 4 + 8 + 16 + 32 claims, every one a record. */
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 63);
    cr_assert_eq(dbt_audit(dbt_db, id).stock, 37);
    cr_assert_eq(dbt_audit(dbt_db, id).oversold_by, 0);
    db_close(db);
}

Test(db_pg_batch, a_batch_without_business_step_is_two_round_trips)
{
    check_round_trips(WHOLE, 2);
}

Test(db_pg_batch, a_batch_with_a_business_step_is_three_round_trips)
{
    check_round_trips(STEPPED, 3);
}

/* Stock 3, limit 2, "a" already holds one record: a OK (stock 2), b OK (1),
 * a over the limit, b OK (0), then sold out for b, c and the user ids
 * that need escaping. The same on both paths. */
static void check_mixed(path p)
{
    const char *users[] = {"a", "b", "a", "b", "b", "c", "q\"u,o{t}e\\d"};
    const db_status want[] = {DB_OK, DB_OK, DB_USER_LIMIT, DB_OK, DB_SOLD_OUT, DB_SOLD_OUT, DB_SOLD_OUT};
    const int64_t held[] = {1, 0, 1, 0, 0, 0, 0};
    const int64_t left[] = {2, 1, -1, 0, -1, -1, -1};
    db_claim_req reqs[7];
    db_claim first;
    int64_t id = dbt_create(dbt_db, "mixed", 4, 2);
    char sql[256];

    cr_assert_eq(db_claim_coupon(dbt_db, id, "a", 5, &first), DB_OK, "%s", db_errmsg(dbt_db));
    memset(reqs, 0, sizeof reqs);
    for (size_t i = 0; i < 7; i++)
        reqs[i].user_id = users[i];
    cr_assert_eq(section(dbt_db, p, id, 6, reqs, 7), DB_OK, "%s", db_errmsg(dbt_db));
    for (size_t i = 0; i < 7; i++) {
        cr_assert_eq(reqs[i].status, want[i], "claim %zu (%s): %s", i, users[i], db_status_str(reqs[i].status));
        cr_assert_eq(reqs[i].held, held[i], "claim %zu held %lld", i, (long long)reqs[i].held);
        if (want[i] != DB_OK) {
            cr_assert_eq(reqs[i].claim.record_id, 0, "claim %zu", i);
            continue;
        }
        cr_assert_eq(reqs[i].claim.stock, left[i], "claim %zu left %lld", i, (long long)reqs[i].claim.stock);
        /* Its record is its own: its user, this batch's fence. */
        snprintf(sql, sizeof sql,
                 "SELECT COUNT(*) FROM coupon_record WHERE id = %lld AND user_id = '%s' AND fence = 6",
                 (long long)reqs[i].claim.record_id, users[i]);
        cr_assert_eq(dbt_scalar(dbt_path, sql), 1, "claim %zu: record %lld", i, (long long)reqs[i].claim.record_id);
    }
    db_audit_row a = dbt_audit(dbt_db, id);
    cr_assert_eq(a.stock, 0);
    cr_assert_eq(a.issued, 4);
    cr_assert_eq(a.oversold_by, 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 6);
}

Test(db_pg_batch, mixed_outcomes_in_one_transaction)
{
    check_mixed(WHOLE);
}

Test(db_pg_batch, mixed_outcomes_read_then_write)
{
    check_mixed(STEPPED);
}

/* Escaping both ways: every accepted user id is stored as given. */
static void check_odd_user_ids(path p)
{
    const char *users[] = {"\"", "\\", "a,b", "{}", "NULL", "x\"y\\\"z", " lead", "tab\there"};
    db_claim_req reqs[8];
    int64_t id = dbt_create(dbt_db, "odd", 10, 1);
    char sql[256];

    memset(reqs, 0, sizeof reqs);
    for (size_t i = 0; i < 8; i++)
        reqs[i].user_id = users[i];
    cr_assert_eq(section(dbt_db, p, id, 3, reqs, 8), DB_OK, "%s", db_errmsg(dbt_db));
    for (size_t i = 0; i < 8; i++) {
        cr_assert_eq(reqs[i].status, DB_OK, "user '%s': %s", users[i], db_status_str(reqs[i].status));
        snprintf(sql, sizeof sql, "SELECT octet_length(user_id) FROM coupon_record WHERE id = %lld",
                 (long long)reqs[i].claim.record_id);
        cr_assert_eq(dbt_scalar(dbt_path, sql), (int64_t)strlen(users[i]), "user '%s'", users[i]);
    }
    /* NULL is a user id like any other, not SQL's NULL: one record of it. */
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE user_id = 'NULL'"), 1);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record WHERE user_id = 'x\"y\\\"z'"), 1);
    /* The limit holds per exact id on the next batch. */
    cr_assert_eq(section(dbt_db, p, id, 4, reqs, 8), DB_OK, "%s", db_errmsg(dbt_db));
    for (size_t i = 0; i < 8; i++)
        cr_assert_eq(reqs[i].status, DB_USER_LIMIT, "user '%s': %s", users[i], db_status_str(reqs[i].status));
}

Test(db_pg_batch, user_ids_travel_as_themselves_in_one_transaction)
{
    check_odd_user_ids(WHOLE);
}

Test(db_pg_batch, user_ids_travel_as_themselves_read_then_write)
{
    check_odd_user_ids(STEPPED);
}

/* A newer holder's fence on the row: the whole batch is refused, every
 * claim DB_STALE_FENCE, nothing written, the row's fence unchanged. */
static void check_stale_batch(path p)
{
    char users[5][16];
    db_claim_req reqs[5];
    db_claim c;
    int64_t id = dbt_create(dbt_db, "stale", 10, 0);

    cr_assert_eq(db_claim_coupon(dbt_db, id, "newer", 20, &c), DB_OK, "%s", db_errmsg(dbt_db));
    batch_of(reqs, users, 5, 0);
    cr_assert_eq(section(dbt_db, p, id, 19, reqs, 5), DB_STALE_FENCE, "%s", db_errmsg(dbt_db));
    cr_assert(strstr(db_errmsg(dbt_db), "fence 19") != NULL, "%s", db_errmsg(dbt_db));
    for (size_t i = 0; i < 5; i++) {
        cr_assert_eq(reqs[i].status, DB_STALE_FENCE, "claim %zu", i);
        cr_assert_eq(reqs[i].claim.record_id, 0, "claim %zu", i);
    }
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 1);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT stock FROM coupon"), 9);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT last_fence FROM coupon"), 20);
    /* The same fence is still welcome: `<=` (section.c). */
    cr_assert_eq(section(dbt_db, p, id, 20, reqs, 5), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 6);
}

Test(db_pg_batch, a_stale_fence_refuses_the_whole_batch_in_one_transaction)
{
    check_stale_batch(WHOLE);
}

Test(db_pg_batch, a_stale_fence_refuses_the_whole_batch_read_then_write)
{
    check_stale_batch(STEPPED);
}

/* The fence on the write: A reads a batch (fence 10), B reads (11), A's
 * write is refused whole; B's applies. */
Test(db_pg_batch, the_write_of_an_outlived_batch_is_refused_whole)
{
    char ua[3][16], ub[2][16];
    db_claim_req a[3], b[2];
    db_claim_view va, vb;
    db_store *other = dbt_open();
    int64_t id = dbt_create(dbt_db, "race", 10, 0);

    batch_of(a, ua, 3, 1);
    batch_of(b, ub, 2, 2);
    cr_assert_eq(db_claim_read(dbt_db, id, DB_FENCE_FULL, 10, a, 3, &va), DB_OK, "%s", db_errmsg(dbt_db));
    cr_assert_eq(db_claim_decide(&va, a, 3), 3);
    cr_assert_eq(db_claim_read(other, id, DB_FENCE_FULL, 11, b, 2, &vb), DB_OK, "%s", db_errmsg(other));
    cr_assert_eq(db_claim_decide(&vb, b, 2), 2);
    cr_assert_eq(db_claim_write(dbt_db, id, DB_FENCE_FULL, 10, &va, a, 3), DB_STALE_FENCE, "%s",
                 db_errmsg(dbt_db));
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(a[i].claim.record_id, 0);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);
    cr_assert_eq(db_claim_write(other, id, DB_FENCE_FULL, 11, &vb, b, 2), DB_OK, "%s", db_errmsg(other));
    db_audit_row r = dbt_audit(dbt_db, id);
    cr_assert_eq(r.issued, 2);
    cr_assert_eq(r.stock, 8);
    cr_assert_eq(r.oversold_by, 0);
    db_close(other);
}

static void check_not_found(path p)
{
    char users[3][16];
    db_claim_req reqs[3];

    batch_of(reqs, users, 3, 0);
    cr_assert_eq(section(dbt_db, p, 4242, 1, reqs, 3), DB_NOT_FOUND, "%s", db_errmsg(dbt_db));
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(reqs[i].status, DB_NOT_FOUND);
    cr_assert_eq(dbt_scalar(dbt_path, "SELECT COUNT(*) FROM coupon_record"), 0);
}

Test(db_pg_batch, no_such_coupon_in_one_transaction)
{
    check_not_found(WHOLE);
}

Test(db_pg_batch, no_such_coupon_read_then_write)
{
    check_not_found(STEPPED);
}
