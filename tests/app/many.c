/* many.c - a sale of 100 coupons of small stocks under concurrent claims
 * from two redlock servers over 3 Redis masters. The commit group is on
 * (--commit-group 64: sections of different coupons share one SQLite
 * transaction, a savepoint each) and off (0). Every coupon sells exactly
 * its stock, no user holds more than the per-user limit, every success is
 * one record, and the audit of each coupon is clean. With the group on,
 * the servers' metrics show that its path ran (commit passes, one per
 * transaction, no more than the sections). Lost fence counters are healed
 * through the group as on the ordinary path. The refusal of one stale
 * section inside a group while the others commit is db_group's
 * (tests/db/group.c). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>
#include <curl/curl.h>

#include "app_util.h"

#define MANY_COUPONS 100
#define MANY_STOCK 3
#define MANY_THREADS 32
#define MANY_REQS 60
/* 12 users: a coupon's first few draws often repeat a user before its 3
 * units are gone, so the per-user limit (1) answers 1004 dozens of times. */
#define MANY_USERS 12

const app_suite_plan app_plan = {.db_name = "many.db", .flags = APP_ENV_CURL};
TestSuite(app_many, .init = app_suite_init, .fini = app_suite_fini, .timeout = 180);

typedef struct many_ctx {
    int idx;
    long long first_id;
    int n_ok, n_sold_out, n_limit, n_busy, n_other;
    int ok_of[MANY_COUPONS]; /* 200s per coupon */
    char first_other[512];
} many_ctx;

static void *many_worker(void *arg)
{
    many_ctx *w = arg;
    CURL *h = curl_easy_init();
    unsigned seed = 0x9e3779b9u * (unsigned)(w->idx + 1);
    app_body b;

    if (h == NULL) {
        w->n_other++;
        snprintf(w->first_other, sizeof w->first_other, "curl_easy_init failed");
        return NULL;
    }
    for (int i = 0; i < MANY_REQS; i++) {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        int c = (int)(seed % MANY_COUPONS);
        char url[256];
        long status = 0;
        snprintf(url, sizeof url, "%s/api/v1/coupon/add?coupon_id=%lld&user_id=u%u", g_app.srv[(w->idx + i) % 2].url,
                 w->first_id + c, (seed >> 8) % MANY_USERS);
        CURLcode rc = app_curl_post(h, url, &b, 5000L, &status);
        json_t *root = NULL;
        long long code = rc == CURLE_OK ? app_body_code(&b, &root) : -1;
        if (status == 200 && code == 0) {
            w->n_ok++;
            w->ok_of[c]++;
        } else if (status == 409 && code == 1003) {
            w->n_sold_out++;
        } else if (status == 409 && code == 1004) {
            w->n_limit++;
        } else if (status == 503 && code == 1005) {
            w->n_busy++; /* the lock's wait ran out: allowed, the sweep below sells the rest */
        } else if (w->n_other++ == 0) {
            snprintf(w->first_other, sizeof w->first_other, "HTTP %ld (%s): %.400s", status,
                     curl_easy_strerror(rc), b.data);
        }
        json_decref(root);
    }
    curl_easy_cleanup(h);
    return NULL;
}

static void sale(const char *group, const char *claim_workers)
{
    static many_ctx w[MANY_THREADS];
    pthread_t th[MANY_THREADS];
    int ok_of[MANY_COUPONS] = {0}, ok = 0, sold_out = 0, limit = 0, busy = 0, other = 0;
    long long first = 0;

    app_env_up(&g_app, 3, 0, 2, "--strategy", "redlock", "--commit-group", group, "--lock-wait", "10000",
               "--claim-workers", claim_workers, NULL);
    for (int c = 0; c < MANY_COUPONS; c++) {
        long long id = app_create_coupon(&g_app.srv[c % 2], "many", MANY_STOCK, 1);
        if (c == 0)
            first = id;
        cr_assert_eq(id, first + c, "coupon ids are consecutive");
    }
    memset(w, 0, sizeof w);
    for (int i = 0; i < MANY_THREADS; i++) {
        w[i].idx = i;
        w[i].first_id = first;
        cr_assert_eq(pthread_create(&th[i], NULL, many_worker, &w[i]), 0);
    }
    for (int i = 0; i < MANY_THREADS; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < MANY_THREADS; i++) {
        ok += w[i].n_ok;
        sold_out += w[i].n_sold_out;
        limit += w[i].n_limit;
        busy += w[i].n_busy;
        other += w[i].n_other;
        for (int c = 0; c < MANY_COUPONS; c++)
            ok_of[c] += w[i].ok_of[c];
        cr_expect_eq(w[i].n_other, 0, "thread %d: %d unexpected answers, first: %s", i, w[i].n_other,
                     w[i].first_other);
    }
    cr_log_info("--commit-group %s: %d ok, %d sold out, %d user limit, %d lock busy, %d other", group, ok, sold_out,
                limit, busy, other);
    cr_expect_gt(limit, 0, "the per-user limit was never reached: the test does not exercise it");

    /* Whatever the crowd left unsold (a 1005), fresh users buy now, until
     * each coupon answers sold out: then exactly its stock was sold. */
    for (int c = 0; c < MANY_COUPONS; c++) {
        for (int k = 0; ok_of[c] < MANY_STOCK && k < 2 * MANY_STOCK; k++) {
            char user[32];
            snprintf(user, sizeof user, "sweep%d_%d", c, k);
            app_claim_expect(&g_app.srv[k % 2], "POST", first + c, user, 200, 0, 0);
            ok_of[c]++;
            ok++;
        }
        cr_expect_eq(ok_of[c], MANY_STOCK, "coupon %lld: %d successes for stock %d", first + c, ok_of[c],
                     MANY_STOCK);
        app_claim_expect(&g_app.srv[c % 2], "POST", first + c, "one_more", 409, 1003, 0);
        app_coupon_state st;
        app_expect_db(g_app.db, first + c, 0, MANY_STOCK, &st);
        cr_expect_eq(st.users_over, 0, "coupon %lld: %lld users over the limit", first + c, st.users_over);
    }
    cr_expect_eq(ok, MANY_COUPONS * MANY_STOCK);
    cr_expect_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM coupon_record"), MANY_COUPONS * MANY_STOCK);
    /* No user anywhere holds two units of one coupon. */
    cr_expect_eq(app_db_int(g_app.db, "SELECT COUNT(*) FROM (SELECT coupon_id, user_id FROM coupon_record "
                                      "GROUP BY coupon_id, user_id HAVING COUNT(*) > 1)"),
                 0);
}

/* The commit stage's passes: one per group transaction (commit_group.c). */
static long long commit_passes(void)
{
    long long n = 0;
    for (int s = 0; s < 2; s++) {
        long long v = app_metric(&g_app.srv[s], "coupon_claim_stage_observations_total{stage=\"commit\"}");
        n += v > 0 ? v : 0;
    }
    return n;
}

static long long read_passes(void)
{
    long long n = 0;
    for (int s = 0; s < 2; s++) {
        long long v = app_metric(&g_app.srv[s], "coupon_claim_stage_observations_total{stage=\"read\"}");
        n += v > 0 ? v : 0;
    }
    return n;
}

/* Summed over both servers. */
static long long both(const char *metric)
{
    long long n = 0;
    for (int s = 0; s < 2; s++) {
        long long v = app_metric(&g_app.srv[s], metric);
        n += v > 0 ? v : 0;
    }
    return n;
}

Test(app_many, hundred_coupons_group_on)
{
    APP_SETUP_OK();
    sale("64", "8");
    long long commits = commit_passes(), sections = read_passes();
    cr_log_info("group on: %lld sections in %lld transactions", sections, commits);
    cr_expect_gt(commits, 0, "the commit group never ran");
    cr_expect_leq(commits, sections);
}

Test(app_many, hundred_coupons_group_off)
{
    APP_SETUP_OK();
    sale("0", "8");
    cr_expect_eq(commit_passes(), 0, "--commit-group 0 still ran the group");
}

/* The claims of many coupons with two claim workers per server: each
 * worker leads the lanes of the coupons that hash to it, a batch at a
 * time, each batch one coupon's. Still exactly every stock sold, no user
 * over the limit, one record per success (sale()); and one section per
 * batch, each under a lock taken for it or kept from the coupon's last. */
Test(app_many, hundred_coupons_two_workers_lanes)
{
    APP_SETUP_OK();
    sale("64", "2");
    long long taken = both("coupon_lock_acquisitions_total");
    long long kept = both("coupon_lock_held_batches_total");
    long long combined = both("coupon_lock_combined_claims_total");
    cr_log_info("lanes: %lld sections, %lld acquisitions, %lld batches under a kept lock, %lld claims combined",
                read_passes(), taken, kept, combined);
    cr_expect_eq(read_passes(), taken + kept, "a section ran without a lock of its own batch");
}

/* The self-healing of lost fence counters (strategy_redlock.c, heal_fence)
 * through the group. Every master loses its keys (FLUSHALL, nothing in
 * flight). The next section of each coupon is then refused inside its
 * group as stale (the row's fence is above the new counter), healed, and
 * committed through the group again: every claim succeeds, no unit twice. */
Test(app_many, group_heals_lost_fence_counters)
{
    APP_SETUP_OK();
    const char *flush[] = {"FLUSHALL"};
    char out[64], user[32];
    long long ids[3];

    app_env_up(&g_app, 3, 0, 1, "--strategy", "redlock", "--commit-group", "64", NULL);
    for (int c = 0; c < 3; c++) {
        ids[c] = app_create_coupon(&g_app.srv[0], "heal", 10, 1);
        for (int k = 0; k < 3; k++) {
            snprintf(user, sizeof user, "before%d", k);
            app_claim_expect(&g_app.srv[0], "POST", ids[c], user, 200, 0, 0);
        }
    }
    for (size_t n = 0; n < g_app.nredis; n++) {
        app_redis(&g_app.redis[n], out, sizeof out, 1, flush);
        cr_assert_str_eq(out, "OK");
    }
    for (int c = 0; c < 3; c++) {
        for (int k = 0; k < 2; k++) {
            snprintf(user, sizeof user, "after%d", k);
            app_claim_expect(&g_app.srv[0], "POST", ids[c], user, 200, 0, 0);
        }
        app_coupon_state st;
        app_expect_db(g_app.db, ids[c], 5, 5, &st);
        cr_expect_eq(st.users_over, 0);
    }
    long long heals = app_metric(&g_app.srv[0], "coupon_fence_heals_total");
    long long commits = app_metric(&g_app.srv[0], "coupon_claim_stage_observations_total{stage=\"commit\"}");
    cr_log_info("heals %lld, group transactions %lld", heals, commits);
    cr_expect_eq(heals, 3, "one heal per coupon (each coupon's row kept its own last fence)");
    cr_expect_geq(commits, 15, "the claims did not go through the group");
}
