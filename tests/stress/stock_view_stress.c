/* stock_view_stress.c - the stock view (app/src/claim/stock_view.c) under
 * threads, on a real SQLite file, one store per thread as in the server:
 *
 *   1. "not found" is never stale: askers hammer an id while another
 *      thread creates that coupon (through the store, as another server
 *      would: the view is not told); no asker that started after the
 *      creation returned, or that saw the coupon in the store just before
 *      asking, may be answered "not found".
 *   2. "sold out" is never early: claimers sell a coupon of STOCK units
 *      with the atomic claim, feeding the view as strategy_atomic.c does,
 *      while askers ask; after a "sold out" the store must hold 0 (the
 *      stock only falls), none may come before the claim that sold the
 *      last unit started, and exactly STOCK claims succeed.
 *
 * A plain program (no Criterion) so that the TSan build runs it too. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "claim/stock_view.h"
#include "common.h"
#include "coupon_db.h"
#include "stress.h"

int stress_failures;

#define ASKERS 6
#define CLAIMERS 4
#define STOCK 300
#define BUSY_MS 10000

static char db_path[300];
static atomic_int phase_done;
static atomic_llong created_at_us;  /* phase 1: the creation returned (0: not yet) */
static atomic_llong late_not_found; /* phase 1: "not found" answers to askers that started after it */
static atomic_llong last_claim_start_us; /* phase 2: the call that sold the last unit started */
static atomic_llong first_sold_out_us;   /* phase 2: earliest return of a "sold out" answer */
static atomic_llong early_sold_out;     /* phase 2: "sold out" with stock left in the store after it */
static atomic_int sold;
static int64_t target_id;

static db_store *open_store(void)
{
    db_store *db = NULL;
    char err[256];

    if (db_open(db_path, BUSY_MS, &db, err, sizeof err) != DB_OK) {
        fprintf(stderr, "db_open %s: %s\n", db_path, err);
        exit(2);
    }
    return db;
}

static void *ask_not_found(void *arg)
{
    (void)arg;
    db_store *db = open_store();
    while (!atomic_load(&phase_done)) {
        int64_t t0 = cm_now_us(), stock = 0;
        /* Every other question first reads the store itself: a coupon seen
         * there exists for good, so "not found" after it is stale. */
        int seen = (t0 & 1) && db_peek_stock(db, target_id, &stock) == DB_OK;
        stock_answer a = stock_view_ask(db, target_id);
        int64_t created = atomic_load(&created_at_us);
        if (a == STOCK_NOT_FOUND && ((created != 0 && t0 > created) || seen))
            atomic_fetch_add(&late_not_found, 1);
    }
    db_close(db);
    return NULL;
}

static void *ask_sold_out(void *arg)
{
    (void)arg;
    db_store *db = open_store();
    while (!atomic_load(&phase_done)) {
        if (stock_view_ask(db, target_id) == STOCK_SOLD_OUT) {
            int64_t stock = 0;
            /* The stock only falls: if the store still has some after the
             * answer, it had some all along, and "sold out" was wrong. */
            if (db_peek_stock(db, target_id, &stock) == DB_OK && stock > 0)
                atomic_fetch_add(&early_sold_out, 1);
            long long now = cm_now_us(), seen = atomic_load(&first_sold_out_us);
            while ((seen == 0 || now < seen) && !atomic_compare_exchange_weak(&first_sold_out_us, &seen, now))
                ;
        }
    }
    db_close(db);
    return NULL;
}

static void *claim(void *arg)
{
    int idx = (int)(intptr_t)arg;
    db_store *db = open_store();
    for (int i = 0;; i++) {
        char user[32];
        db_claim out;
        snprintf(user, sizeof user, "c%d_%d", idx, i);
        int64_t t0 = cm_now_us();
        db_status st = db_claim_atomic(db, target_id, user, &out);
        if (st == DB_OK) {
            atomic_fetch_add(&sold, 1);
            if (out.stock == 0)
                atomic_store(&last_claim_start_us, t0);
            stock_view_learn(target_id, out.stock);
        } else if (st == DB_SOLD_OUT) {
            stock_view_learn(target_id, 0);
            break;
        } else if (st != DB_BUSY) {
            CHECK(0, "claim: %s", db_errmsg(db));
            break;
        }
    }
    db_close(db);
    return NULL;
}

static void run(void *(*fn)(void *), int n, pthread_t *th)
{
    for (int i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, fn, (void *)(intptr_t)i) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
}

static void join(int n, pthread_t *th)
{
    for (int i = 0; i < n; i++)
        (void)pthread_join(th[i], NULL);
}

/* argv[1], when given: a store to use instead of a fresh SQLite file (a
 * postgresql:// URL of an empty database: its round trips widen the window
 * in which a peek is in flight). */
int main(int argc, char **argv)
{
    char dir[] = "/tmp/stock-view-stress.XXXXXX";
    pthread_t askers[ASKERS], claimers[CLAIMERS];
    db_coupon c;

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(db_path, sizeof db_path, "%s", argc > 1 ? argv[1] : "");
    if (argc <= 1)
        snprintf(db_path, sizeof db_path, "%s/view.db", dir);
    /* Fresh for a minute and monotone (atomic-sql): the strictest view. */
    if (stock_view_setup(60000, 1, BUSY_MS) != 0) {
        fprintf(stderr, "stock_view_setup failed\n");
        return 2;
    }
    db_store *db = open_store();
    CHECK(db_create_coupon(db, "first", 1, 1, &c) == DB_OK, "create: %s", db_errmsg(db));
    target_id = c.id + 1; /* the next id the store hands out */

    /* 1. */
    run(ask_not_found, ASKERS, askers);
    (void)cm_sleep_ms(200);
    CHECK(db_create_coupon(db, "appears", 5, 1, &c) == DB_OK, "create: %s", db_errmsg(db));
    atomic_store(&created_at_us, cm_now_us());
    CHECK(c.id == target_id, "created id %" PRId64 ", expected %" PRId64, c.id, target_id);
    (void)cm_sleep_ms(300);
    atomic_store(&phase_done, 1);
    join(ASKERS, askers);
    CHECK(atomic_load(&late_not_found) == 0, "%lld \"not found\" answers after the coupon was created",
          (long long)atomic_load(&late_not_found));

    /* 2. */
    atomic_store(&phase_done, 0);
    CHECK(db_create_coupon(db, "sells", STOCK, 0, &c) == DB_OK, "create: %s", db_errmsg(db));
    target_id = c.id;
    run(ask_sold_out, ASKERS, askers);
    run(claim, CLAIMERS, claimers);
    join(CLAIMERS, claimers);
    (void)cm_sleep_ms(100);
    atomic_store(&phase_done, 1);
    join(ASKERS, askers);
    CHECK(atomic_load(&sold) == STOCK, "%d sold of %d", atomic_load(&sold), STOCK);
    long long last = atomic_load(&last_claim_start_us), first = atomic_load(&first_sold_out_us);
    CHECK(last != 0 && first != 0, "last sale at %lld, first sold-out answer at %lld", last, first);
    CHECK(first >= last, "\"sold out\" answered %lld us before the last unit's claim started", last - first);
    CHECK(atomic_load(&early_sold_out) == 0, "%lld \"sold out\" answers while the store had stock left",
          (long long)atomic_load(&early_sold_out));

    db_close(db);
    static const char *const files[] = {"view.db", "view.db-wal", "view.db-shm"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[400];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        (void)unlink(path); /* the -wal and -shm files may be gone already */
    }
    if (rmdir(dir) != 0)
        perror(dir);
    printf("stock_view_stress: %s\n", stress_failures == 0 ? "ok" : "FAILED");
    return stress_failures == 0 ? 0 : 1;
}
