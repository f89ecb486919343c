/* selfheal.c - Redis loses its data mid-sale (FLUSHALL on every node: the
 * fence counters restart at 1 while the coupon row remembers a high fence;
 * the servers are paused for the flush so all nodes lose it together).
 * Two servers on three nodes keep selling: each refuses at most once before
 * it raises the counters to the row's fence (coupon_fence_heals_total), the
 * sale goes on, and the database holds exactly the stock: no oversell. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "app_util.h"

const app_suite_plan app_plan = {.db_name = "heal.db", .flags = APP_ENV_CURL};
TestSuite(app_selfheal, .init = app_suite_init, .fini = app_suite_fini, .timeout = 120);

#define STOCK 200
#define FLUSH_AT 60    /* records sold before Redis loses its data */
#define THREADS 4
#define MAX_REQS 2000  /* per thread: bounds the test if the sale never ends */

typedef struct sale_thread {
    int idx;
    long long coupon_id;
    int ok, sold_out, busy, stale, other;
    char first_other[512];
} sale_thread;

static atomic_int g_sold_out; /* a thread saw 1003: the sale is over */

static void *sale_worker(void *arg)
{
    sale_thread *t = arg;
    CURL *h = curl_easy_init();
    app_body b;

    if (h == NULL) {
        t->other++;
        snprintf(t->first_other, sizeof t->first_other, "curl_easy_init failed");
        return NULL;
    }
    for (int i = 0; i < MAX_REQS && !atomic_load(&g_sold_out); i++) {
        char url[256];
        long status = 0;
        /* Each thread keeps to one server: the two servers heal on their own. */
        snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=t%d",
                 g_app.srv[t->idx % 2].url, t->coupon_id, t->idx);
        CURLcode rc = app_curl_post(h, url, &b, 5000L, &status);
        json_t *root = NULL;
        long long code = rc == CURLE_OK ? app_body_code(&b, &root) : -1;
        json_decref(root);
        if (status == 200 && code == 0) {
            t->ok++;
        } else if (status == 409 && code == 1003) {
            t->sold_out++;
            atomic_store(&g_sold_out, 1);
        } else if (status == 503 && code == 1005) {
            t->busy++;
        } else if (status == 503 && code == 1010) {
            t->stale++;
        } else if (t->other++ == 0) {
            snprintf(t->first_other, sizeof t->first_other, "HTTP %ld (%s): %.400s", status,
                     curl_easy_strerror(rc), b.data);
        }
    }
    curl_easy_cleanup(h);
    return NULL;
}

static long long heals_of(const server_proc *s)
{
    long long v = app_metric(s, "coupon_fence_heals_total");
    cr_assert_geq(v, 0, "no coupon_fence_heals_total in /metrics");
    return v;
}

Test(app_selfheal, flushall_mid_sale_heals_without_oversell)
{
    APP_SETUP_OK();
    /* A lock (and a fence) per claim, and a business step that keeps the
     * sale going long enough to be caught mid-way. */
    app_env_up(&g_app, 3, 0, 2, "--lock-batch", "1", "--work-us", "2000", NULL);
    long long id = app_create_coupon(&g_app.srv[0], "heal", STOCK, 0);
    sale_thread t[THREADS];
    pthread_t th[THREADS];
    char out[64];

    atomic_store(&g_sold_out, 0);
    memset(t, 0, sizeof t);
    for (int i = 0; i < THREADS; i++) {
        t[i].idx = i;
        t[i].coupon_id = id;
        cr_assert_eq(pthread_create(&th[i], NULL, sale_worker, &t[i]), 0);
    }
    /* Mid-sale: wait (bounded) for FLUSH_AT records, then wipe every node. */
    long long sold = 0;
    for (int i = 0; i < 600 && sold < FLUSH_AT; i++) {
        sold = app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE coupon_id=%lld", id);
        if (sold < FLUSH_AT)
            test_sleep_ms(10);
    }
    long long fence_before = app_db_int(g_app.db, "SELECT last_fence FROM coupon WHERE id=%lld", id);
    /* Every node at once, as a restart of all of them without AOF would.
     * Flushed one by one under load, the nodes not yet flushed would carry
     * the counters over (each acquisition's fence sync lifts the lagging
     * nodes of its quorum), and nothing would need healing. The servers are
     * stopped for the few milliseconds of the three FLUSHALLs, well inside
     * the lease, so no acquisition falls between them. */
    const char *flush[] = {"FLUSHALL"};
    cr_assert_eq(server_pause(&g_app.srv[0]), 0);
    cr_assert_eq(server_pause(&g_app.srv[1]), 0);
    for (size_t n = 0; n < g_app.nredis; n++) {
        app_redis(&g_app.redis[n], out, sizeof out, 1, flush);
        cr_assert_str_eq(out, "OK");
    }
    cr_assert_eq(server_resume(&g_app.srv[0]), 0);
    cr_assert_eq(server_resume(&g_app.srv[1]), 0);
    long long after_flush = app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record WHERE coupon_id=%lld", id);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);

    int ok = 0, stale = 0, busy = 0;
    for (int i = 0; i < THREADS; i++) {
        ok += t[i].ok;
        stale += t[i].stale;
        busy += t[i].busy;
        cr_assert_eq(t[i].other, 0, "thread %d: %s", i, t[i].first_other);
    }
    long long heals = heals_of(&g_app.srv[0]) + heals_of(&g_app.srv[1]);
    cr_log_info("flushed at %lld records (last fence %lld): %d ok, %d refused 1010, %d busy 1005, %lld heals",
                sold, fence_before, ok, stale, busy, heals);
    cr_assert_geq(sold, FLUSH_AT, "the sale never reached %d records", FLUSH_AT);
    cr_assert_lt(after_flush, STOCK, "the sale ended before the flush: nothing was tested");
    cr_assert(atomic_load(&g_sold_out), "the sale never sold out (%d ok, %d refused)", ok, stale);
    /* Each server heals once; a claim another holder's flush caught mid-way
     * may be refused once per server. Without the heal every claim would be
     * refused until the counters climbed back to the row's fence. */
    cr_assert_geq(heals, 1, "no heal after the counters were wiped");
    cr_assert_leq(heals, 2, "%lld heals for 2 servers", heals);
    cr_assert_leq(stale, 2, "%d claims refused as stale after the flush", stale);
    /* No oversell: every unit sold once, every 200 is one record. */
    app_coupon_state st;
    app_expect_db(g_app.db, id, 0, STOCK, &st);
    cr_assert_eq(ok, STOCK, "%d successful claims for a stock of %d", ok, STOCK);
    cr_assert_gt(app_db_int(g_app.db, "SELECT last_fence FROM coupon WHERE id=%lld", id), fence_before);
}
